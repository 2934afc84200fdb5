#pragma once
// Exceptions thrown by libfvi.
//
// Every message starts with the function that rejected the input and names the offending value,
// e.g. "kl_divergence: q.mean[2] is NaN" or "to_full_rank: precision (-2 eta2) is not positive
// definite". Callers (engines, network handlers) catch these, log the message and carry on.
#include <stdexcept>
#include <string>

namespace fvi {

// An input violates a documented precondition: NaN/inf, a non-positive scale, a precision that
// is not positive definite, mismatched sizes, a hyperparameter outside its domain.
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An iterative method (e.g. the Wasserstein barycenter fixed point) did not reach its tolerance.
class ConvergenceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fvi
