// Names of the unary functions of the kernels (fvi/kernel/ops.h UnaryFn), from the same list.
#include <iterator>
#include <stdexcept>

#include "fvi/kernel/ops.h"

namespace fvi::kernel {

namespace {

#define FVI_UNARY_NAME(name) #name,
constexpr const char* kNames[] = {FVI_UNARY_FUNCTIONS(FVI_UNARY_NAME)};
#undef FVI_UNARY_NAME

}  // namespace

UnaryFn unary_fn(const std::string& name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (name == kNames[i]) return UnaryFn(i);
  throw std::invalid_argument("no kernel for the function '" + name + "'");
}

const char* unary_name(UnaryFn f) {
  const size_t i = size_t(f);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace fvi::kernel
