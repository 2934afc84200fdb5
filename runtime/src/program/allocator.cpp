#include "fvi/program/allocator.h"

#include <malloc.h>

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
