#include "fvi/engine/worker_pool.h"

#include <algorithm>

#ifdef __SSE2__
#include <immintrin.h>
#endif

namespace fvi::engine {

WorkerPool::WorkerPool(int threads) : errors_(size_t(std::max(1, threads))) {
  for (int i = 1; i < threads; ++i) threads_.emplace_back([this, i] { work(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

template <class Done>
bool WorkerPool::spin_until(Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (i % 64 == 63 && std::chrono::steady_clock::now() - start > kSpin) return done();
    if (i < 1024) {
#ifdef __SSE2__
      _mm_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

void WorkerPool::work(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* task = nullptr;
    spin_until([&] { return stopping_ || generation_ != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(index);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    errors_[size_t(index)] = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

void WorkerPool::run(const std::function<void(int)>& task) {
  if (threads_.empty()) {
    task(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    pending_ = int(threads_.size());
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr own;
  try {
    task(0);
  } catch (...) {
    own = std::current_exception();
  }
  spin_until([&] { return pending_ == 0; });
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
  errors_[0] = own;
  for (std::exception_ptr& e : errors_)
    if (e) {
      std::exception_ptr first = e;
      std::fill(errors_.begin(), errors_.end(), nullptr);
      lock.unlock();
      std::rethrow_exception(first);
    }
}

}  // namespace fvi::engine
