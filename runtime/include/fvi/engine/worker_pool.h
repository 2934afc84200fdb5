#pragma once
// A fixed set of threads that run one task side by side and wait for each other (fork/join): how
// a silo uses its machine's cores inside one optimiser step (fvi/engine/row_parallel.h). The
// calling thread is worker 0, so a pool of one runs everything inline and starts no thread. The
// workers live as long as the pool: their thread-local scratch (fvi/kernel/fused.h) is allocated
// once, not once per step.
//
// A step forks several times (the kernels' parts, their gradients' sum, the optimiser's shards),
// a few milliseconds of work each. Waking a thread blocked on a condition variable took 100-190 us
// a fork on the 2-core machine of bench/ (several percent of a client epoch), so a worker that has
// finished waits for the next fork by spinning (yielding the core to any other runnable thread)
// for up to kSpin before it blocks, and so does the caller waiting for the workers: within a step
// nobody sleeps, and an idle pool blocks after kSpin.
#include <atomic>
#include <chrono>
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
  // Spins (then yields) until done() or kSpin has passed; returns done().
  template <class Done>
  static bool spin_until(Done done);

  static constexpr std::chrono::microseconds kSpin{500};

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  // Written under mutex_, read without it by spinning threads.
  std::atomic<uint64_t> generation_{0};  // one per run(): a worker runs each generation once
  std::atomic<int> pending_{0};          // workers still running this generation
  std::atomic<bool> stopping_{false};
  std::vector<std::exception_ptr> errors_;
};

}  // namespace fvi::engine
