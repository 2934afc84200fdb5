#include "fvi/program/allocator.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace fvi::program {

void keep_freed_memory() {
#ifdef M_MMAP_THRESHOLD
  // 32 MB is glibc's largest allowed threshold on 64-bit systems; setting it also stops glibc's
  // dynamic threshold. The trim threshold keeps up to 1 GB of freed heap for the next step.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
#endif
}

}  // namespace fvi::program

// Every block from `new` (a std::vector's buffer among them) starts on a 32-byte boundary, as
// Eigen's own allocations do. Eigen's reductions over a Map (sum(), mean()) add the unaligned head
// apart from the vector packets, so with glibc's 16-byte blocks the same values summed to a
// different last bit depending on where the heap had put them; the heap's layout differs run to
// run once LLVM's JIT has used it (its hash tables are keyed by addresses), and the same seed gave
// two trajectories. The block is malloc's, 32 bytes longer: the byte before the result says how
// far in it starts (16 or 32). (posix_memalign(32) instead cost 1.8 times the CPU time of a run.)
#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer's own new and delete check what this would hide
namespace {
constexpr std::size_t kAlignment = 32;
void* aligned_new(std::size_t size) noexcept {
  if (size > std::size_t(-1) - kAlignment) return nullptr;
  unsigned char* raw = static_cast<unsigned char*>(std::malloc(size + kAlignment));
  if (!raw) return nullptr;
  const std::size_t offset = kAlignment - reinterpret_cast<std::uintptr_t>(raw) % kAlignment;  // 16 or 32
  unsigned char* p = raw + offset;
  p[-1] = static_cast<unsigned char>(offset);
  return p;
}
void aligned_delete(void* p) noexcept {
  if (!p) return;
  unsigned char* block = static_cast<unsigned char*>(p);
  std::free(block - block[-1]);
}
}  // namespace

void* operator new(std::size_t size) {
  if (void* p = aligned_new(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return aligned_new(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return aligned_new(size); }
void operator delete(void* p) noexcept { aligned_delete(p); }
void operator delete[](void* p) noexcept { aligned_delete(p); }
void operator delete(void* p, std::size_t) noexcept { aligned_delete(p); }
void operator delete[](void* p, std::size_t) noexcept { aligned_delete(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { aligned_delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { aligned_delete(p); }
#endif
