#pragma once
// Runs the silos of a simulation side by side: f(k) for k = 0..silos-1 on at most `threads`
// worker threads (0: one per core, never more than the silos), rethrowing the first failure
// after every silo has finished. Each silo runs on one thread at a time, so its own state needs
// no lock.
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace fvi::program {

template <class F>
void for_each_silo_in_parallel(int silos, F f, int threads = 0) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, silos);
  std::vector<std::exception_ptr> errors(silos);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int k = next++; k < silos; k = next++) {
      try {
        f(k);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace fvi::program
