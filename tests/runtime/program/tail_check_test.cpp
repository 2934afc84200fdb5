// The pieces of the tail check's proposal that parties holding parts of q assemble (a vertical
// model's, fvi/program/vfl_tail_check.h), against independent computations: the balance mixture
// 1/2 N(0, 1) + 1/2 t_3(0, 1) in one dimension integrates to 1 and has variance 1/2 + 3/2 = 2,
// and in k dimensions its density is the mixture of the two densities written out here; the
// shared scales are 1 at even draws and sqrt(3 / chi2_3) at odd ones, whose median is
// sqrt(3 / 2.36597), chi2_3's median.
#include "fvi/program/tail_check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

using namespace fvi::program;

namespace tail_check_test {

TEST_CASE("The tail check's proposal density is the balance mixture of a Gaussian and a Student-t_3", "[tail]") {
  // One dimension, unit scale: its integral and variance by the trapezoid rule over [-L, L],
  // with t_3's tails beyond L added in closed form (the density ~ 6 sqrt(3) / (pi x^4) there).
  const double L = 2000, h = 0.001;
  double mass = 0, second = 0;
  for (double x = -L; x <= L; x += h) {
    const double p = std::exp(log_tail_proposal(x * x, 1, 0)) * (std::abs(x) >= L - h / 2 ? 0.5 : 1);
    mass += p * h, second += p * x * x * h;
  }
  const double tail_mass = 0.5 * 2 * 6 * std::sqrt(3.0) / (M_PI * 3 * L * L * L);  // 1/2 of t_3's two tails
  const double tail_second = 0.5 * 2 * 6 * std::sqrt(3.0) / (M_PI * L);
  CHECK(mass + tail_mass == Approx(1).epsilon(1e-6));
  CHECK(second + tail_second == Approx(2).epsilon(1e-4));

  // k dimensions, scale L L' with log det L = 0.7 at whitened distance d2: the two densities.
  for (double k : {1.0, 4.0, 10.0})
    for (double d2 : {0.0, 3.0, 40.0, 900.0}) {
      const double normal = std::pow(2 * M_PI, -k / 2) * std::exp(-0.7) * std::exp(-d2 / 2);
      const double t = std::tgamma((3 + k) / 2) / (std::tgamma(1.5) * std::pow(3 * M_PI, k / 2)) * std::exp(-0.7) *
                       std::pow(1 + d2 / 3, -(3 + k) / 2);
      CHECK(log_tail_proposal(d2, k, 0.7) == Approx(std::log(0.5 * normal + 0.5 * t)).epsilon(1e-12));
    }
}

TEST_CASE("The tail check's shared scales: 1 at even draws, sqrt(3 / chi2_3) at odd ones, alike for every party",
          "[tail]") {
  const Eigen::Index S = 20000;
  const Eigen::VectorXd a = tail_scales(5, S);
  REQUIRE(a.size() == S);
  CHECK(a == tail_scales(5, S));  // every party computes the same from the key
  CHECK(a != tail_scales(6, S));
  std::vector<double> odd;
  for (Eigen::Index s = 0; s < S; ++s) {
    if (s % 2 == 0) REQUIRE(a[s] == 1.0);
    else odd.push_back(a[s] * a[s]);
  }
  std::nth_element(odd.begin(), odd.begin() + long(odd.size() / 2), odd.end());
  // The sample median of 10,000 draws: its sd is 1 / (2 f(m) sqrt(n)), f the density of 3 / chi2_3
  // at its median (0.35), so 0.014; five times that.
  CHECK(std::abs(odd[odd.size() / 2] - 3 / 2.365974) < 0.07);
}

}  // namespace tail_check_test
