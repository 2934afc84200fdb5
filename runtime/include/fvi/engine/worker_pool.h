#pragma once
// A fixed set of threads that run one task side by side and wait for each other (fork/join): how
// a silo uses its machine's cores inside one optimiser step (fvi/engine/row_parallel.h). The
// calling thread is worker 0, so a pool of one runs everything inline and starts no thread. The
// workers live as long as the pool: their thread-local scratch (fvi/kernel/fused.h) is allocated
// once, not once per step.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fvi::engine {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return int(threads_.size()) + 1; }
  // Runs task(i) for i = 0 .. size() - 1, task(0) on the calling thread, and returns when every
  // one has finished; then rethrows the exception of the lowest-numbered task that threw. One
  // caller at a time.
  void run(const std::function<void(int)>& task);

 private:
  void work(int index);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;  // one per run(): a worker runs each generation once
  int pending_ = 0;          // workers still running this generation
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace fvi::engine
