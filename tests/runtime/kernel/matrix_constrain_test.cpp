// cholesky_factor_corr's transform (fvi/kernel/ops_matrix_constrain.h) against Stan's
// cholesky_corr_constrain written out as Stan's sequential loop, its log-Jacobian against the log
// determinant of the transform's Jacobian by central differences, both adjoints by finite
// differences; lkj_corr_cholesky against its closed form at K = 2, and transform, Jacobian and
// density together integrating to one over the unconstrained space at K = 3.
#include "fvi/kernel/distributions.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "support/gradient_check.h"

using fvi::kernel::Tensor;
using T = Tensor<double>;

namespace {

T column(const Eigen::VectorXd& v) {
  T t(v.size(), 1, 1);
  t.m.col(0) = v;
  return t;
}

// Stan's cholesky_corr_constrain: z = tanh(u), row by row, L_ij = z sqrt(1 - sum of squares so far).
Eigen::MatrixXd stan_cholesky_corr(const Eigen::VectorXd& u, Eigen::Index K) {
  Eigen::MatrixXd L = Eigen::MatrixXd::Zero(K, K);
  L(0, 0) = 1;
  Eigen::Index k = 0;
  for (Eigen::Index i = 1; i < K; ++i) {
    L(i, 0) = std::tanh(u(k++));
    double sum_sqs = L(i, 0) * L(i, 0);
    for (Eigen::Index j = 1; j < i; ++j) {
      L(i, j) = std::tanh(u(k++)) * std::sqrt(1 - sum_sqs);
      sum_sqs += L(i, j) * L(i, j);
    }
    L(i, i) = std::sqrt(1 - sum_sqs);
  }
  return L;
}

// The strict lower triangle, row by row (the order of u).
Eigen::VectorXd strict_lower(const Eigen::MatrixXd& L) {
  const Eigen::Index K = L.rows();
  Eigen::VectorXd v(K * (K - 1) / 2);
  Eigen::Index k = 0;
  for (Eigen::Index i = 1; i < K; ++i)
    for (Eigen::Index j = 0; j < i; ++j) v(k++) = L(i, j);
  return v;
}

// log |det| of f's Jacobian at u, by central differences (O(h^2) truncation, below 1e-9 of each
// entry at these points).
double log_abs_det_jacobian(const std::function<Eigen::VectorXd(const Eigen::VectorXd&)>& f, const Eigen::VectorXd& u) {
  const Eigen::Index m = u.size();
  Eigen::MatrixXd J(m, m);
  const double h = 1e-6;
  for (Eigen::Index c = 0; c < m; ++c) {
    Eigen::VectorXd up = u, down = u;
    up(c) += h;
    down(c) -= h;
    J.col(c) = (f(up) - f(down)) / (2 * h);
  }
  return std::log(std::abs(J.determinant()));
}

Eigen::VectorXd random_u(Eigen::Index m, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, 1.2);
  Eigen::VectorXd u(m);
  for (Eigen::Index i = 0; i < m; ++i) u(i) = normal(rng);
  return u;
}

}  // namespace

TEST_CASE("cholesky_factor_corr: Stan's transform, a unit diagonal in L L', and K = 1", "[kernel][matrix_constrain]") {
  for (Eigen::Index K : {2, 3, 5}) {
    const Eigen::VectorXd u = random_u(K * (K - 1) / 2, unsigned(K));
    const Eigen::MatrixXd L = fvi::kernel::matrix_constrain("cholesky_corr", column(u)).draw(0);
    INFO("K = " << K);
    CHECK(L.isApprox(stan_cholesky_corr(u, K), 1e-14));
    CHECK((L * L.transpose()).diagonal().isApprox(Eigen::VectorXd::Ones(K), 1e-14));
    CHECK(L.triangularView<Eigen::StrictlyUpper>().toDenseMatrix().isZero());
  }
  // Far in the tails the product of sechs keeps the diagonal positive where 1 - sum rounds to 0.
  Eigen::VectorXd far(3);
  far << 30, -25, 40;
  const Eigen::MatrixXd L = fvi::kernel::matrix_constrain("cholesky_corr", column(far)).draw(0);
  CHECK(L(2, 2) > 0);
  CHECK(std::isfinite(fvi::kernel::matrix_log_jacobian("cholesky_corr", column(far)).m(0, 0)));
  const T one = fvi::kernel::matrix_constrain("cholesky_corr", T(0, 1, 1));
  REQUIRE(one.rows == 1);
  CHECK(one.m(0, 0) == 1);
}

TEST_CASE("cholesky_factor_corr: the log-Jacobian is log |det| of d(strict lower L)/du", "[kernel][matrix_constrain]") {
  for (Eigen::Index K : {2, 3, 4}) {
    const Eigen::Index m = K * (K - 1) / 2;
    const Eigen::VectorXd u = random_u(m, unsigned(10 + K));
    const double expected =
        log_abs_det_jacobian([&](const Eigen::VectorXd& x) { return strict_lower(stan_cholesky_corr(x, K)); }, u);
    INFO("K = " << K);
    CHECK(fvi::kernel::matrix_log_jacobian("cholesky_corr", column(u)).m(0, 0) == Approx(expected).epsilon(1e-8));
  }
}

TEST_CASE("cholesky_factor_corr: the adjoints of the transform and of its log-Jacobian", "[kernel][matrix_constrain]") {
  const Eigen::Index K = 4, m = 6;
  const Eigen::VectorXd u = random_u(m, 3);
  std::mt19937 rng(4);
  std::normal_distribution<double> normal;
  T g(K, K, 1);
  for (Eigen::Index i = 0; i < g.m.size(); ++i) g.m.data()[i] = normal(rng);
  auto value = [&](const Eigen::VectorXd& x) {
    return (fvi::kernel::matrix_constrain("cholesky_corr", column(x)).m.array() * g.m.array()).sum();
  };
  const T d = fvi::kernel::matrix_constrain_grad("cholesky_corr", column(u), g);
  auto result = fvi::test::check_gradient(value, u, d.m.col(0));
  INFO(result.report());
  CHECK(result.ok());
  auto log_jacobian = [&](const Eigen::VectorXd& x) {
    return 0.7 * fvi::kernel::matrix_log_jacobian("cholesky_corr", column(x)).m(0, 0);
  };
  const T dj = fvi::kernel::matrix_log_jacobian_grad("cholesky_corr", column(u), T::constant(0.7));
  auto jacobian_result = fvi::test::check_gradient(log_jacobian, u, dj.m.col(0));
  INFO(jacobian_result.report());
  CHECK(jacobian_result.ok());
}

TEST_CASE("lkj_corr_cholesky: the closed form at K = 2, and its VJPs", "[kernel][matrix_constrain]") {
  // K = 2: L = [1 0; r sqrt(1 - r^2)], and the LKJ density of r is (1 - r^2)^(eta - 1) / (2^(2 eta
  // - 1) B(eta, eta)); the Jacobian from the correlation to L's factor is L_22^0 = 1.
  for (double eta : {0.5, 1.0, 2.5}) {
    const double r = 0.35;
    T L(2, 2, 1);
    L.m << 1, 0, r, std::sqrt(1 - r * r);
    const T e = T::constant(eta);
    const double lbeta = 2 * std::lgamma(eta) - std::lgamma(2 * eta);
    const double expected = (eta - 1) * std::log(1 - r * r) - (2 * eta - 1) * std::log(2.0) - lbeta;
    INFO("eta = " << eta);
    CHECK(fvi::kernel::lpdf<double>("lkj_corr_cholesky", {&L, &e}).m(0, 0) == Approx(expected).epsilon(1e-13));
  }
  // VJPs: of L (its diagonal) and of eta, at a K = 4 factor over two draws.
  const Eigen::Index K = 4;
  T L(K, K, 2);
  for (Eigen::Index s = 0; s < 2; ++s)
    L.draw(s) = fvi::kernel::matrix_constrain("cholesky_corr", column(random_u(6, unsigned(20 + s)))).draw(0);
  T eta = T::constant(1.7);
  T g(1, 1, 2);
  g.m << 0.6, -1.3;
  for (size_t k : {0, 1}) {
    T& operand = k == 0 ? L : eta;
    const Eigen::VectorXd x0 = Eigen::Map<const Eigen::VectorXd>(operand.m.data(), operand.m.size());
    auto value = [&](const Eigen::VectorXd& x) {
      T moved = operand;
      moved.m = Eigen::Map<const Eigen::MatrixXd>(x.data(), operand.m.rows(), operand.m.cols());
      const T& l = k == 0 ? moved : L;
      const T& e = k == 1 ? moved : eta;
      return (fvi::kernel::lpdf<double>("lkj_corr_cholesky", {&l, &e}).m.array() * g.m.array()).sum();
    };
    const T d = fvi::kernel::lpdf_vjp<double>("lkj_corr_cholesky", k, g, {&L, &eta});
    auto result = fvi::test::check_gradient(value, x0, Eigen::Map<const Eigen::VectorXd>(d.m.data(), d.m.size()));
    INFO("operand " << k << "\n" << result.report());
    CHECK(result.ok());
  }
}

// The density of u, exp(lkj_corr_cholesky(L(u) | eta) + log|J(u)|), integrates to one over R^3:
// the transform, its Jacobian and LKJ's normalising constant checked together. With u = atanh(sin
// theta), du = d theta / cos theta, the integrand is smooth on (-pi/2, pi/2)^3, and a product of
// 15-point Kronrod rules on 4 panels per axis is exact far below the tolerance.
TEST_CASE("lkj_corr_cholesky with cholesky_factor_corr's transform integrates to one at K = 3", "[kernel][matrix_constrain]") {
  static const double x[15] = {-0.991455371120812639, -0.949107912342758525, -0.864864423359769073, -0.741531185599394440,
                               -0.586087235467691130, -0.405845151377397167, -0.207784955007898468, 0.0,
                               0.207784955007898468,  0.405845151377397167,  0.586087235467691130,  0.741531185599394440,
                               0.864864423359769073,  0.949107912342758525,  0.991455371120812639};
  static const double w[15] = {0.022935322010529225, 0.063092092629978553, 0.104790010322250184, 0.140653259715525919,
                               0.169004726639267903, 0.190350578064785410, 0.204432940075298892, 0.209482141084727828,
                               0.204432940075298892, 0.190350578064785410, 0.169004726639267903, 0.140653259715525919,
                               0.104790010322250184, 0.063092092629978553, 0.022935322010529225};
  std::vector<double> theta, weight;
  const int panels = 4;
  const double a = -M_PI / 2, width = M_PI / panels;
  for (int p = 0; p < panels; ++p)
    for (int i = 0; i < 15; ++i) {
      theta.push_back(a + width * (p + 0.5 + 0.5 * x[i]));
      weight.push_back(0.5 * width * w[i]);
    }
  const Eigen::Index n = Eigen::Index(theta.size()), draws = n * n * n;
  for (double eta : {1.0, 2.0, 3.5}) {
    T u(3, 1, draws);
    Eigen::VectorXd log_scale(draws), quad(draws);
    Eigen::Index s = 0;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index k = 0; k < n; ++k, ++s) {
          const double t[3] = {theta[size_t(i)], theta[size_t(j)], theta[size_t(k)]};
          double log_du = 0;
          for (int c = 0; c < 3; ++c) {
            u.m(c, s) = std::atanh(std::sin(t[c]));
            log_du -= std::log(std::cos(t[c]));
          }
          log_scale(s) = log_du;
          quad(s) = weight[size_t(i)] * weight[size_t(j)] * weight[size_t(k)];
        }
    const T L = fvi::kernel::matrix_constrain("cholesky_corr", u);
    const T e = T::constant(eta);
    const T log_p = fvi::kernel::lpdf<double>("lkj_corr_cholesky", {&L, &e});
    const T log_j = fvi::kernel::matrix_log_jacobian("cholesky_corr", u);
    double total = 0;
    for (s = 0; s < draws; ++s) total += quad(s) * std::exp(log_p.m(0, s) + log_j.m(0, s) + log_scale(s));
    INFO("eta = " << eta);
    CHECK(total == Approx(1.0).epsilon(1e-7));
  }
}

namespace {

// Stan's cholesky_factor_constrain for a square factor, written out as its loop: row by row, the
// row's strict lower part then exp of its diagonal.
Eigen::MatrixXd stan_cholesky_factor(const Eigen::VectorXd& u, Eigen::Index K) {
  Eigen::MatrixXd L = Eigen::MatrixXd::Zero(K, K);
  Eigen::Index pos = 0;
  for (Eigen::Index m = 0; m < K; ++m) {
    for (Eigen::Index n = 0; n < m; ++n) L(m, n) = u(pos++);
    L(m, m) = std::exp(u(pos++));
  }
  return L;
}

// Stan's cov_matrix_constrain: the same L, and Sigma = L L'.
Eigen::MatrixXd stan_cov_matrix(const Eigen::VectorXd& u, Eigen::Index K) {
  const Eigen::MatrixXd L = stan_cholesky_factor(u, K);
  return L * L.transpose();
}

// The free elements of a symmetric matrix: its lower triangle, with (cov) or without (corr) the diagonal.
Eigen::VectorXd lower_of(const Eigen::MatrixXd& m, bool diagonal) {
  std::vector<double> v;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < (diagonal ? i + 1 : i); ++j) v.push_back(m(i, j));
  return Eigen::Map<Eigen::VectorXd>(v.data(), Eigen::Index(v.size()));
}



// The adjoint of the transform (against a random rows x cols adjoint) and of its log-Jacobian at
// u, each against finite differences.
void check_transform_adjoints(const char* kind, const Eigen::VectorXd& u, Eigen::Index rows, Eigen::Index cols,
                              unsigned seed, bool log_jacobian = true) {
  INFO(kind);
  std::mt19937 rng{seed};
  std::normal_distribution<double> normal;
  T g(rows, cols, 1);
  for (Eigen::Index i = 0; i < g.m.size(); ++i) g.m.data()[i] = normal(rng);
  auto value = [&](const Eigen::VectorXd& x) {
    return (fvi::kernel::matrix_constrain(kind, column(x), cols).m.array() * g.m.array()).sum();
  };
  auto result = fvi::test::check_gradient(value, u, fvi::kernel::matrix_constrain_grad(kind, column(u), g).m.col(0));
  INFO(result.report());
  CHECK(result.ok());
  if (!log_jacobian) return;
  auto log_j = [&](const Eigen::VectorXd& x) { return fvi::kernel::matrix_log_jacobian(kind, column(x)).m(0, 0); };
  auto jacobian_result = fvi::test::check_gradient(
      log_j, u, fvi::kernel::matrix_log_jacobian_grad(kind, column(u), T::constant(1.0)).m.col(0));
  INFO(jacobian_result.report());
  CHECK(jacobian_result.ok());
}

}  // namespace

TEST_CASE("corr_matrix and cov_matrix: Stan's transforms, log|det J| by finite differences, and the adjoints",
          "[kernel][matrix_constrain]") {
  for (Eigen::Index K : {2, 3, 4}) {
    INFO("K = " << K);
    const Eigen::VectorXd uc = random_u(K * (K - 1) / 2, unsigned(30 + K));
    const Eigen::MatrixXd omega = fvi::kernel::matrix_constrain("corr", column(uc)).draw(0);
    const Eigen::MatrixXd l = stan_cholesky_corr(uc, K);
    CHECK(omega.isApprox(l * l.transpose(), 1e-14));
    const double corr_expected = log_abs_det_jacobian(
        [&](const Eigen::VectorXd& x) { auto f = stan_cholesky_corr(x, K); return lower_of(f * f.transpose(), false); }, uc);
    CHECK(fvi::kernel::matrix_log_jacobian("corr", column(uc)).m(0, 0) == Approx(corr_expected).epsilon(1e-8));

    const Eigen::VectorXd uv = random_u(K * (K + 1) / 2, unsigned(40 + K));
    const Eigen::MatrixXd sigma = fvi::kernel::matrix_constrain("cov", column(uv)).draw(0);
    CHECK(sigma.isApprox(stan_cov_matrix(uv, K), 1e-14));
    const double cov_expected =
        log_abs_det_jacobian([&](const Eigen::VectorXd& x) { return lower_of(stan_cov_matrix(x, K), true); }, uv);
    CHECK(fvi::kernel::matrix_log_jacobian("cov", column(uv)).m(0, 0) == Approx(cov_expected).epsilon(1e-8));

    check_transform_adjoints("corr", uc, K, K, unsigned(K));
    check_transform_adjoints("cov", uv, K, K, unsigned(K));
  }
}

TEST_CASE("lkj_corr, wishart and inv_wishart against closed forms, and their VJPs", "[kernel][matrix_constrain]") {
  // lkj_corr at K = 2: (1 - r^2)^(eta - 1) / (2^(2 eta - 1) B(eta, eta)).
  const double r = -0.4, eta = 1.8;
  T omega(2, 2, 1);
  omega.m << 1, r, r, 1;
  const T e = T::constant(eta);
  const double lbeta = 2 * std::lgamma(eta) - std::lgamma(2 * eta);
  CHECK(fvi::kernel::lpdf<double>("lkj_corr", {&omega, &e}).m(0, 0) ==
        Approx((eta - 1) * std::log(1 - r * r) - (2 * eta - 1) * std::log(2.0) - lbeta).epsilon(1e-13));
  // K = 1: wishart(w | nu, s) is gamma(nu / 2, rate 1 / (2 s)); inv_wishart(w | nu, s) is
  // inv_gamma(nu / 2, scale s / 2).
  const double w = 1.7, nu = 3.5, s = 0.8;
  const T W = T::constant(w), N = T::constant(nu), Sc = T::constant(s);
  const double a = nu / 2, rate = 1 / (2 * s), scale = s / 2;
  CHECK(fvi::kernel::lpdf<double>("wishart", {&W, &N, &Sc}).m(0, 0) ==
        Approx(a * std::log(rate) - std::lgamma(a) + (a - 1) * std::log(w) - rate * w).epsilon(1e-13));
  CHECK(fvi::kernel::lpdf<double>("inv_wishart", {&W, &N, &Sc}).m(0, 0) ==
        Approx(a * std::log(scale) - std::lgamma(a) - (a + 1) * std::log(w) - scale / w).epsilon(1e-13));
  // K = 2 with the determinant and inverse written out: Wishart's density
  // |W|^((nu-3)/2) exp(-tr(S^-1 W)/2) / (2^nu |S|^(nu/2) Gamma_2(nu/2)), Gamma_2(x) = sqrt(pi) G(x) G(x - 1/2).
  T w2(2, 2, 1), s2(2, 2, 1);
  w2.m << 2.0, 0.3, 0.3, 1.1;
  s2.m << 1.5, -0.2, -0.2, 0.9;
  const double det_w = 2.0 * 1.1 - 0.09, det_s = 1.5 * 0.9 - 0.04;
  const double trace = (0.9 * 2.0 + 0.2 * 0.3 + 0.2 * 0.3 + 1.5 * 1.1) / det_s;  // tr(S^-1 W), S^-1 = adj(S) / det
  const double nu2 = 4.5;
  const T n2 = T::constant(nu2);
  const double log_gamma2 = 0.5 * std::log(M_PI) + std::lgamma(nu2 / 2) + std::lgamma(nu2 / 2 - 0.5);
  CHECK(fvi::kernel::lpdf<double>("wishart", {&w2, &n2, &s2}).m(0, 0) ==
        Approx((nu2 - 3) / 2 * std::log(det_w) - trace / 2 - nu2 * std::log(2.0) - nu2 / 2 * std::log(det_s) - log_gamma2)
            .epsilon(1e-13));
  // VJPs of each operand, over two draws of the matrix.
  T w3(2, 2, 2);
  w3.m << 2.0, 0.3, 0.3, 1.1, 1.2, -0.5, -0.5, 0.9;
  for (const char* dist : {"wishart", "inv_wishart", "lkj_corr"}) {
    const bool lkj = std::string(dist) == "lkj_corr";
    T first = lkj ? omega : w3;
    T scalar_arg = lkj ? e : n2;
    T matrix_arg = s2;
    T g(1, 1, first.draws);
    g.m.setConstant(0.7);
    for (size_t k = 0; k < (lkj ? 2u : 3u); ++k) {
      T& operand = k == 0 ? first : k == 1 ? scalar_arg : matrix_arg;
      const Eigen::VectorXd x0 = Eigen::Map<const Eigen::VectorXd>(operand.m.data(), operand.m.size());
      auto value = [&](const Eigen::VectorXd& x) {
        T moved = operand;
        moved.m = Eigen::Map<const Eigen::MatrixXd>(x.data(), operand.m.rows(), operand.m.cols());
        fvi::kernel::Operands<double> ops{k == 0 ? &moved : &first, k == 1 ? &moved : &scalar_arg};
        if (!lkj) ops.push_back(k == 2 ? &moved : &matrix_arg);
        return (fvi::kernel::lpdf<double>(dist, ops).m.array() * g.m.array()).sum();
      };
      fvi::kernel::Operands<double> ops{&first, &scalar_arg};
      if (!lkj) ops.push_back(&matrix_arg);
      const T d = fvi::kernel::lpdf_vjp<double>(dist, k, g, ops);
      auto result = fvi::test::check_gradient(value, x0, Eigen::Map<const Eigen::VectorXd>(d.m.data(), d.m.size()));
      INFO(dist << " operand " << k << "\n" << result.report());
      CHECK(result.ok());
    }
  }
}


TEST_CASE("cholesky_factor_cov and unit_vector: Stan's transforms, their log-Jacobians, and the adjoints",
          "[kernel][matrix_constrain]") {
  for (Eigen::Index K : {1, 2, 3, 4}) {
    INFO("K = " << K);
    const Eigen::VectorXd uv = random_u(K * (K + 1) / 2, unsigned(50 + K));
    const Eigen::MatrixXd l = fvi::kernel::matrix_constrain("cholesky_cov", column(uv)).draw(0);
    CHECK(l.isApprox(stan_cholesky_factor(uv, K), 1e-14));
    // The free elements are the lower triangle: log|det J| of u -> lower(L), measured here by
    // central differences, is sum(log(diagonal(L))), which the IR adds (ir/lower.cpp).
    const double expected =
        log_abs_det_jacobian([&](const Eigen::VectorXd& x) { return lower_of(stan_cholesky_factor(x, K), true); }, uv);
    CHECK(l.diagonal().array().log().sum() == Approx(expected).epsilon(1e-8));

    const Eigen::VectorXd uu = random_u(K, unsigned(60 + K));
    const Eigen::VectorXd x = fvi::kernel::matrix_constrain("unit", column(uu)).draw(0);
    CHECK(x.isApprox(uu / std::sqrt(uu.dot(uu)), 1e-14));
    CHECK(x.norm() == Approx(1).epsilon(1e-15));
    // Stan's unit_vector_constrain adds -|u|^2 / 2 (the chi density of the auxiliary length).
    CHECK(fvi::kernel::matrix_log_jacobian("unit", column(uu)).m(0, 0) == Approx(-0.5 * uu.dot(uu)).epsilon(1e-15));

    check_transform_adjoints("cholesky_cov", uv, K, K, unsigned(K + 7), /*log_jacobian=*/false);
    check_transform_adjoints("unit", uu, K, 1, unsigned(K + 7));
  }
  // Two draws of u against one adjoint: each draw's gradient from its own factor.
  T two(3, 1, 2);
  two.m << 0.3, -0.2, 0.5, 1.1, 0.7, -0.4;
  T adjoint(2, 2, 1);
  adjoint.m << 1, 0, 0.5, 2;
  const T both = fvi::kernel::matrix_constrain_grad("cholesky_cov", two, adjoint);
  REQUIRE(both.draws == 2);
  for (Eigen::Index s = 0; s < 2; ++s) {
    CHECK(both.m(0, s) == Approx(std::exp(two.m(0, s))));      // d L_00 / du_0
    CHECK(both.m(1, s) == Approx(0.5));                         // L_10 = u_1
    CHECK(both.m(2, s) == Approx(2 * std::exp(two.m(2, s))));   // d L_11 / du_2
  }
}

// Stan's cholesky_factor_constrain for an M x N factor, M > N: the first N rows as the square
// one's, then each further row's N values.
TEST_CASE("cholesky_factor_cov[M, N]: Stan's rectangular transform and its adjoint", "[kernel][matrix_constrain]") {
  const Eigen::Index M = 4, N = 2;
  const Eigen::VectorXd u = random_u(N * (N + 1) / 2 + (M - N) * N, 71);
  Eigen::MatrixXd want = Eigen::MatrixXd::Zero(M, N);
  Eigen::Index pos = 0;
  for (Eigen::Index m = 0; m < N; ++m) {
    for (Eigen::Index n = 0; n < m; ++n) want(m, n) = u(pos++);
    want(m, m) = std::exp(u(pos++));
  }
  for (Eigen::Index m = N; m < M; ++m)
    for (Eigen::Index n = 0; n < N; ++n) want(m, n) = u(pos++);
  const T l = fvi::kernel::matrix_constrain("cholesky_cov", column(u), N);
  REQUIRE(l.rows == M);
  REQUIRE(l.cols == N);
  CHECK(Eigen::MatrixXd(l.draw(0)).isApprox(want, 1e-14));
  check_transform_adjoints("cholesky_cov", u, M, N, 72, /*log_jacobian=*/false);
  // u of a size no M >= N gives is refused.
  CHECK_THROWS_AS(fvi::kernel::matrix_constrain("cholesky_cov", column(random_u(4, 73)), N), fvi::kernel::ShapeError);
}
