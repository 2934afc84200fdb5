// Names of the unary functions of the kernels (fvi/kernel/ops.h UnaryFn), in enum order.
#include <iterator>
#include <stdexcept>

#include "fvi/kernel/ops.h"

namespace fvi::kernel {

namespace {

constexpr const char* kNames[] = {"exp",   "log",       "log1p",  "expm1", "log1m",    "inv_logit",     "logit",
                                  "log_inv_logit", "log1m_inv_logit", "log1p_exp", "tanh", "sin", "cos",  "sqrt",
                                  "safe_sqrt",     "square",          "inv",       "inv_sqrt", "relu", "lgamma",
                                  "digamma",       "erf",             "Phi",       "fabs", "abs", "neg"};
static_assert(std::size(kNames) == size_t(UnaryFn::neg) + 1, "one name per UnaryFn");

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
