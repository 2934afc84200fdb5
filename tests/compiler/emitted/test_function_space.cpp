// Seed 001's linearised function-space KL through generated kernels: for a model linear in its
// weights (multinomial_eb's categorical_logit(x * W + b)) the linearisation is exact, so f(x; m)
// and J_m(x) read from the kernel (fvi/engine/function_space.h) must equal the design written
// out, and the KL must equal the closed-form Gaussian KL in function space between
// N(X_r m, X_r Sigma X_r') and N(X_r m0, X_r Sigma0 X_r').
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "abi_data.h"
#include "fvi/engine/function_space.h"

extern "C" const fvi_model* fvi_model_multinomial_eb(void);

using fvi::engine::BoundFactor;
using fvic::test::Data;
using fvic::test::factor_named;
using fvic::test::scalar;

TEST_CASE("function-space KL of a linear model equals the closed-form Gaussian KL in function space",
          "[function_space]") {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal;
  const int n = 5, D = 3, K = 4, P = D * K + K;
  Data data;
  Eigen::MatrixXd x(n, D), y(n, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (int i = 0; i < n; ++i) y(i, 0) = 1 + i % K;
  data.add("D", scalar(D));
  data.add("K", scalar(K));
  data.add("N", scalar(n));
  data.add("x", x);
  data.add("y", y);
  const fvi_model& model = *fvi_model_multinomial_eb();
  BoundFactor likelihood(model, factor_named(model, "likelihood_y"), data.abi());

  // The weights [W (D x K, column-major); b (K)] of q and of the prior.
  Eigen::VectorXd m(P), v(P), m0 = Eigen::VectorXd::Zero(P), v0(P);
  for (int i = 0; i < P; ++i) m[i] = normal(rng), v[i] = std::exp(normal(rng)), v0[i] = std::exp(normal(rng));

  for (int row = 0; row < n; ++row) {
    // The design of row r: f_c = sum_d x_rd W_dc + b_c, so J[c, d + c D] = x_rd and J[c, D K + c] = 1.
    Eigen::MatrixXd X = Eigen::MatrixXd::Zero(K, P);
    for (int c = 0; c < K; ++c) {
      for (int d = 0; d < D; ++d) X(c, d + c * D) = x(row, d);
      X(c, D * K + c) = 1;
    }
    const fvi::engine::LinearisedGaussian q = fvi::engine::linearise(likelihood, row, m, v);
    const fvi::engine::LinearisedGaussian p = fvi::engine::linearise(likelihood, row, m0, v0);
    CHECK((q.mean - X * m).cwiseAbs().maxCoeff() < 1e-12);
    CHECK((q.jacobian - X).cwiseAbs().maxCoeff() < 1e-12);
    CHECK((p.jacobian - X).cwiseAbs().maxCoeff() < 1e-12);

    // KL(N(X m, X V X') || N(X m0, X V0 X')), each matrix formed from the design alone.
    const Eigen::MatrixXd S1 = X * v.asDiagonal() * X.transpose(), S2 = X * v0.asDiagonal() * X.transpose();
    const Eigen::MatrixXd S2_inv = S2.inverse();
    const Eigen::VectorXd diff = X * m0 - X * m;
    const double want = 0.5 * ((S2_inv * S1).trace() + diff.dot(S2_inv * diff) - K + std::log(S2.determinant()) -
                               std::log(S1.determinant()));
    CHECK_THAT(fvi::engine::linearised_kl(q, p, 0).value, Catch::Matchers::WithinRel(want, 1e-9));
  }
}
