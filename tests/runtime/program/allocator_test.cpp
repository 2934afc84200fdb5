// The program's `new` (program/allocator.cpp): every block on a 32-byte boundary, so that a
// vector's values summed through an Eigen Map give the same bits wherever the heap put them.
#include "fvi/program/allocator.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <catch2/catch.hpp>

// Under AddressSanitizer the runtime leaves new and delete to the sanitizer (allocator.cpp), whose
// blocks are 8- or 16-byte aligned: there is nothing of ours to check.
#ifndef __SANITIZE_ADDRESS__
namespace allocator_test {

bool on_32_bytes(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 32 == 0; }

}  // namespace allocator_test

TEST_CASE("every block from new starts on 32 bytes, whatever was allocated before", "[program][allocator]") {
  using allocator_test::on_32_bytes;
  fvi::program::keep_freed_memory();
  // Odd sizes between them, some freed: glibc's blocks alone start on 16 bytes, half of them not
  // on 32.
  std::vector<std::unique_ptr<std::vector<double>>> kept;
  std::vector<std::unique_ptr<std::string>> between;
  int misaligned = 0;
  for (int i = 1; i <= 400; ++i) {
    between.push_back(std::make_unique<std::string>(size_t(i % 37 + 16), 'x'));
    kept.push_back(std::make_unique<std::vector<double>>(size_t(i)));
    misaligned += !on_32_bytes(kept.back()->data()) + !on_32_bytes(between.back()->data());
    if (i % 3 == 0) between.pop_back();
  }
  CHECK(misaligned == 0);
  auto* array = new double[7];
  CHECK(on_32_bytes(array));
  delete[] array;
  auto* quiet = new (std::nothrow) char[5];
  REQUIRE(quiet != nullptr);
  CHECK(on_32_bytes(quiet));
  delete[] quiet;
  // A size the header cannot be added to fails as any failed allocation does.
  volatile std::size_t huge = std::numeric_limits<std::size_t>::max() - 8;  // volatile: not a constant GCC warns of
  CHECK_THROWS_AS(::operator new(huge), std::bad_alloc);
  CHECK(::operator new(huge, std::nothrow) == nullptr);
}

TEST_CASE("a std::vector summed through a Map gives the bits of the same values in an Eigen vector",
          "[program][allocator]") {
  // Eigen sums a Map's unaligned head apart from its packets: the same values at another address
  // mod 32 round differently. An Eigen vector's storage is always on Eigen's boundary.
  fvi::program::keep_freed_memory();
  int differ = 0;
  for (int n = 5; n <= 64; ++n) {
    Eigen::VectorXd owned(n);
    for (int i = 0; i < n; ++i) owned[i] = 1.0 / (i + 3) + 1e-3 * i * i;
    for (int shift = 1; shift <= 3; ++shift) {  // three earlier blocks of other sizes
      std::vector<std::unique_ptr<char[]>> before;
      for (int b = 0; b < shift; ++b) before.push_back(std::make_unique<char[]>(size_t(16 * (n + b))));
      std::vector<double> values(owned.data(), owned.data() + n);
      const double mapped = Eigen::Map<const Eigen::VectorXd>(values.data(), n).sum();
      differ += mapped != owned.sum();
    }
  }
  CHECK(differ == 0);
}
#endif
