#include "fvi/error.h"

#include <catch2/catch.hpp>

TEST_CASE("runtime exceptions derive from the standard hierarchy and keep their message", "[error]") {
  try {
    throw fvi::InvalidArgument("kl_divergence: q.mean[2] is NaN");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "kl_divergence: q.mean[2] is NaN");
  }
  try {
    throw fvi::ConvergenceError("wasserstein_barycenter: no convergence");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "wasserstein_barycenter: no convergence");
  }
}
