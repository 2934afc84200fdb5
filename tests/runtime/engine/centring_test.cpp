// The map between the fit's coordinates and the written model's (fvi/engine/centring.h), against
// the definition written out element by element: b_k = b_c,k - sum_d xbar_d W_dk.
#include "fvi/engine/centring.h"

#include <random>

#include <catch2/catch.hpp>

using namespace fvi::engine;

namespace {

// Globals laid out as [c, W (D x K column-major), b (K)]: one unrelated value first, so that the
// offsets are not 0.
CentringBlock block(Eigen::Index D, Eigen::Index K, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 3);
  CentringBlock c;
  c.data = "x";
  c.coefficient = 1;
  c.intercept = 1 + D * K;
  c.columns = D;
  c.classes = K;
  c.means.resize(D);
  for (Eigen::Index d = 0; d < D; ++d) c.means[d] = 40 + normal(rng);
  return c;
}

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// The map's matrix T (written = T fit), element by element from the definition.
Eigen::MatrixXd map_matrix(const CentringBlock& c, Eigen::Index n) {
  Eigen::MatrixXd t = Eigen::MatrixXd::Identity(n, n);
  for (Eigen::Index k = 0; k < c.classes; ++k)
    for (Eigen::Index d = 0; d < c.columns; ++d) t(c.intercept + k, c.coefficient + k * c.columns + d) = -c.means[d];
  return t;
}

}  // namespace

TEST_CASE("centring: the written intercepts, the way back, and the gradient's map", "[centring]") {
  std::mt19937_64 rng(3);
  for (auto [D, K] : {std::pair<Eigen::Index, Eigen::Index>{3, 1}, {1, 1}, {4, 5}}) {
    const CentringBlock c = block(D, K, rng);
    const Eigen::Index n = 1 + D * K + K, S = 6;
    const Eigen::MatrixXd fit = random_matrix(n, S, rng);
    Eigen::MatrixXd written = fit;
    to_written({c}, written);
    for (Eigen::Index s = 0; s < S; ++s) {
      CHECK(written(0, s) == fit(0, s));
      for (Eigen::Index k = 0; k < c.classes; ++k) {
        double b = fit(c.intercept + k, s);
        for (Eigen::Index d = 0; d < D; ++d) b -= c.means[d] * fit(c.coefficient + k * D + d, s);
        CHECK(written(c.intercept + k, s) == Approx(b).epsilon(1e-13).margin(1e-12));
        for (Eigen::Index d = 0; d < D; ++d) CHECK(written(c.coefficient + k * D + d, s) == fit(c.coefficient + k * D + d, s));
      }
    }
    Eigen::MatrixXd back = written;
    to_fit({c}, back);
    CHECK((back - fit).cwiseAbs().maxCoeff() < 1e-12);
    // pull_back is T^T: <g, T v> = <T^T g, v> for every g, v.
    const Eigen::MatrixXd g = random_matrix(n, S, rng);
    Eigen::MatrixXd pulled = g;
    pull_back({c}, pulled);
    CHECK((pulled - map_matrix(c, n).transpose() * g).cwiseAbs().maxCoeff() < 1e-12);
    // A block whose means are not yet in leaves everything alone.
    CentringBlock unset = c;
    unset.means.resize(0);
    Eigen::MatrixXd same = fit;
    to_written({unset}, same);
    pull_back({unset}, same);
    CHECK(same == fit);
  }
}

TEST_CASE("centring: the written globals' sds under q, mean-field and correlated", "[centring]") {
  std::mt19937_64 rng(4);
  const CentringBlock c = block(3, 2, rng);
  const Eigen::Index n = 1 + 3 * 2 + 2;
  const Eigen::MatrixXd t = map_matrix(c, n);
  const Eigen::VectorXd mean = random_matrix(n, 1, rng), log_sd = 0.3 * random_matrix(n, 1, rng);
  Eigen::MatrixXd lower = Eigen::MatrixXd::Identity(n, n);
  lower.triangularView<Eigen::StrictlyLower>() = 0.4 * random_matrix(n, n, rng);
  for (bool correlated : {false, true}) {
    const fvi::StructuredGlobalGaussian<double> q =
        correlated ? fvi::StructuredGlobalGaussian<double>(mean, log_sd, lower)
                   : fvi::StructuredGlobalGaussian<double>(mean, log_sd);
    // T Sigma T^T's diagonal, Sigma formed densely.
    const Eigen::VectorXd expected = (t * q.covariance() * t.transpose()).diagonal().cwiseSqrt();
    CHECK((written_sd({c}, q) - expected).cwiseAbs().maxCoeff() < 1e-12 * expected.maxCoeff());
  }
}

// A hierarchy's local intercepts (a_c = a + xbar W, locals_to_written / written_local_coupling):
// locals laid out as [v, a (K)], globals as block() has them.
TEST_CASE("centring: a silo's local intercepts, written per draw, and their sds under q", "[centring]") {
  std::mt19937_64 rng(5);
  const Eigen::Index D = 3, K = 2, n = 1 + D * K + K, m = 1 + K, S = 4, R = 3;  // R local draws per global
  CentringBlock c = block(D, K, rng);
  c.intercept = 1;  // among the locals
  const Eigen::MatrixXd z_global = random_matrix(n, S, rng), fit = random_matrix(m, S * R, rng);
  Eigen::MatrixXd written = fit;
  locals_to_written({c}, z_global, written);
  for (Eigen::Index j = 0; j < S * R; ++j) {
    CHECK(written(0, j) == fit(0, j));
    for (Eigen::Index k = 0; k < K; ++k) {
      double a = fit(1 + k, j);
      for (Eigen::Index d = 0; d < D; ++d) a -= c.means[d] * z_global(c.coefficient + k * D + d, j / R);
      CHECK(written(1 + k, j) == Approx(a).epsilon(1e-13).margin(1e-12));
    }
  }
  Eigen::MatrixXd five(m, 5);
  CHECK_THROWS_WITH(locals_to_written({c}, z_global.leftCols(2), five), Catch::Contains("5 local draws for 2"));

  // q(Z_G) correlated, q(a_c | Z_G) = N(mu_L + C u, diag(s^2)): the written a = a_c - xbar W has
  // variance diag(A Sigma A^T), Sigma the dense covariance of (u, a_c) and A = [-E, I], E holding
  // xbar at each a's coefficient.
  Eigen::MatrixXd lower = Eigen::MatrixXd::Identity(n, n);
  lower.triangularView<Eigen::StrictlyLower>() = 0.4 * random_matrix(n, n, rng);
  const fvi::StructuredGlobalGaussian<double> q(random_matrix(n, 1, rng), 0.3 * random_matrix(n, 1, rng), lower);
  const Eigen::MatrixXd coupling = random_matrix(m, n, rng);
  const Eigen::VectorXd s = (0.2 * random_matrix(m, 1, rng)).array().exp();
  Eigen::MatrixXd joint(n + m, n + m);
  const Eigen::MatrixXd sigma_g = q.covariance();
  joint << sigma_g, sigma_g * coupling.transpose(), coupling * sigma_g,
      coupling * sigma_g * coupling.transpose() + Eigen::MatrixXd(s.cwiseAbs2().asDiagonal());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(m, n + m);
  a.rightCols(m).setIdentity();
  for (Eigen::Index k = 0; k < K; ++k)
    for (Eigen::Index d = 0; d < D; ++d) a(1 + k, c.coefficient + k * D + d) = -c.means[d];
  const Eigen::VectorXd expected = (a * joint * a.transpose()).diagonal();
  for (bool coupled : {true, false}) {
    const Eigen::MatrixXd t = written_local_coupling({c}, coupled ? coupling : Eigen::MatrixXd(), m, n);
    const Eigen::MatrixXd k_global = q.sd().asDiagonal() * q.unit_lower();
    const Eigen::VectorXd var = (t * k_global).rowwise().squaredNorm() + s.cwiseAbs2();
    if (coupled) {
      CHECK((var - expected).cwiseAbs().maxCoeff() < 1e-12 * expected.maxCoeff());
    } else {  // C = 0: v's variance is its own alone; a's gains xbar' Sigma_WW xbar
      CHECK(var[0] == Approx(s[0] * s[0]).epsilon(1e-13));
      for (Eigen::Index k = 0; k < K; ++k) {
        const Eigen::MatrixXd w = sigma_g.block(c.coefficient + k * D, c.coefficient + k * D, D, D);
        CHECK(var[1 + k] == Approx(s[1 + k] * s[1 + k] + c.means.dot(w * c.means)).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("centring: a silo's column sums, and its data centred", "[centring]") {
  CentringBlock c;
  c.data = "x";
  c.columns = 2;
  c.classes = 1;
  std::vector<double> x = {1, 2, 3, 10, 20, 40};  // 3 rows x 2 columns, column-major
  const char* names[] = {"N", "x"};
  double n_value = 3;
  const fvi_tensor values[] = {{&n_value, 1, 1, 1}, {x.data(), 3, 2, 1}};
  const fvi_data data{2, names, values};
  int64_t rows = 0;
  const Eigen::VectorXd sums = column_sums(c, data, rows);
  CHECK(rows == 3);
  CHECK(sums[0] == 6);
  CHECK(sums[1] == 70);
  c.means = Eigen::Vector2d(2, 20);
  centre_columns(c, x.data(), 3);
  CHECK(x == std::vector<double>{-1, 0, 1, -10, 0, 20});
  // x of the wrong width, or absent, is named.
  c.columns = 3;
  CHECK_THROWS_WITH(column_sums(c, data, rows), Catch::Contains("'x' has 2 columns"));
  c.data = "z";
  CHECK_THROWS_WITH(column_sums(c, data, rows), Catch::Contains("no 'z'"));
}

// Groups' intercepts about a location (compiler/analysis/centring.h: `a ~ normal(mu, tau)`,
// `a[g] + x * W`, a a global vector[G]): two blocks of one x and one W, a's with G groups, mu's
// with one. Globals laid out as [c, W (D), a (G), mu].
TEST_CASE("centring: groups' intercepts and their location, one W: the map, its gradient, sds and steps",
          "[centring]") {
  std::mt19937_64 rng(6);
  const Eigen::Index D = 2, G = 3, n = 1 + D + G + 1, S = 5;
  CentringBlock a = block(D, 1, rng);
  a.intercept = 1 + D;
  a.groups = G;
  CentringBlock mu = a;
  mu.intercept = 1 + D + G;
  mu.groups = 1;
  const std::vector<CentringBlock> blocks = {a, mu};
  // T from the definition: every a_g and mu less xbar . W.
  Eigen::MatrixXd t = Eigen::MatrixXd::Identity(n, n);
  for (Eigen::Index row = 1 + D; row < n; ++row)
    for (Eigen::Index d = 0; d < D; ++d) t(row, 1 + d) = -a.means[d];
  const Eigen::MatrixXd fit = random_matrix(n, S, rng);
  Eigen::MatrixXd written = fit;
  to_written(blocks, written);
  CHECK((written - t * fit).cwiseAbs().maxCoeff() < 1e-12 * fit.cwiseAbs().maxCoeff() * 50);
  Eigen::MatrixXd back = written;
  to_fit(blocks, back);
  CHECK((back - fit).cwiseAbs().maxCoeff() < 1e-12);
  const Eigen::MatrixXd g = random_matrix(n, S, rng);
  Eigen::MatrixXd pulled = g;
  pull_back(blocks, pulled);
  CHECK((pulled - t.transpose() * g).cwiseAbs().maxCoeff() < 1e-12 * 50);
  // Sds: diag(T Sigma T^T), mean-field and correlated.
  Eigen::MatrixXd lower = Eigen::MatrixXd::Identity(n, n);
  lower.triangularView<Eigen::StrictlyLower>() = 0.4 * random_matrix(n, n, rng);
  const Eigen::VectorXd mean = random_matrix(n, 1, rng), log_sd = 0.3 * random_matrix(n, 1, rng);
  for (bool correlated : {false, true}) {
    const fvi::StructuredGlobalGaussian<double> q =
        correlated ? fvi::StructuredGlobalGaussian<double>(mean, log_sd, lower)
                   : fvi::StructuredGlobalGaussian<double>(mean, log_sd);
    const Eigen::VectorXd expected = (t * q.covariance() * t.transpose()).diagonal().cwiseSqrt();
    CHECK((written_sd(blocks, q) - expected).cwiseAbs().maxCoeff() < 1e-12 * expected.maxCoeff());
  }
  // Adam's step coordinates scale the one W once, though two blocks name it.
  std::vector<CentringBlock> scaled = blocks;
  for (CentringBlock& b : scaled) b.scales = Eigen::Vector2d(4.0, 1.0);
  Eigen::VectorXd params = random_matrix(2 * n, 1, rng), gradient = random_matrix(2 * n, 1, rng), limit;
  const Eigen::VectorXd params0 = params, gradient0 = gradient;
  to_step_coordinates(scaled, params, gradient, limit);
  CHECK(params[1] == Approx(4 * params0[1]));
  CHECK(gradient[1] == Approx(gradient0[1] / 4));
  CHECK(params[2] == params0[2]);
  from_step_coordinates(scaled, params);
  CHECK((params - params0).cwiseAbs().maxCoeff() < 1e-15);
  Eigen::VectorXd log_sd_start = Eigen::VectorXd::Zero(n);
  set_starting_sds(scaled, 0.1, log_sd_start);
  CHECK(log_sd_start[1] == Approx(std::log(0.1 / 4)));
}
