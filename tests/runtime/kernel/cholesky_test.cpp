// Dense covariance operations (fvi/kernel/ops_cholesky.h): the Cholesky factor against a worked
// example and L L' = A, its adjoint against finite differences along symmetric perturbations,
// multi_normal_cholesky against the density written with Sigma's inverse and determinant, and the
// squared distances and diagonal matrices against their definitions.
#include "fvi/kernel/distributions.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "support/gradient_check.h"

using fvi::kernel::Tensor;
using T = Tensor<double>;

namespace {

// A symmetric positive-definite n x n matrix, B B' + n I with B's entries from `seed`.
Eigen::MatrixXd spd(Eigen::Index n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd b(n, n);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = normal(rng);
  return b * b.transpose() + double(n) * Eigen::MatrixXd::Identity(n, n);
}

T tensor(const Eigen::MatrixXd& m) {
  T t(m.rows(), m.cols(), 1);
  t.m = m;
  return t;
}

}  // namespace

TEST_CASE("cholesky: a worked example, L L' = A, and a matrix that is not positive definite", "[kernel][cholesky]") {
  Eigen::MatrixXd a(2, 2);
  a << 4, 2, 2, 3;
  const T l = fvi::kernel::cholesky(tensor(a));
  CHECK(l.m(0, 0) == Approx(2).epsilon(1e-15));
  CHECK(l.m(1, 0) == Approx(1).epsilon(1e-15));
  CHECK(l.m(1, 1) == Approx(std::sqrt(2.0)).epsilon(1e-15));
  CHECK(l.m(0, 1) == 0);

  // Two draws side by side.
  T two(5, 5, 2);
  two.draw(0) = spd(5, 1);
  two.draw(1) = spd(5, 2);
  const T l2 = fvi::kernel::cholesky(two);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const Eigen::MatrixXd L = l2.draw(s);
    CHECK((L * L.transpose() - Eigen::MatrixXd(two.draw(s))).cwiseAbs().maxCoeff() < 1e-12);
    CHECK(Eigen::MatrixXd(L.triangularView<Eigen::StrictlyUpper>()).cwiseAbs().maxCoeff() == 0);
  }

  Eigen::MatrixXd indefinite(2, 2);
  indefinite << 1, 2, 2, 1;
  CHECK_THROWS_WITH(fvi::kernel::cholesky(tensor(indefinite)), Catch::Contains("not positive definite (draw 1"));
  indefinite(0, 1) = NAN;
  CHECK_THROWS_WITH(fvi::kernel::cholesky(tensor(indefinite)), Catch::Contains("NaN"));
}

TEST_CASE("cholesky_grad: the adjoint of A along symmetric perturbations, by finite differences", "[kernel][cholesky]") {
  // f(theta) = sum(W .* chol(A0 + sum_k theta_k E_k)), E_k the symmetric unit matrices (E_ii, and
  // E_ij + E_ji), so df/dtheta_k = <A's adjoint, E_k> for the adjoint of W.
  const Eigen::Index n = 4;
  const Eigen::MatrixXd a0 = spd(n, 3);
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd w(n, n);
  for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = normal(rng);  // upper part too: it must not count
  std::vector<std::pair<Eigen::Index, Eigen::Index>> basis;
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = j; i < n; ++i) basis.push_back({i, j});
  auto at = [&](const Eigen::VectorXd& theta) {
    Eigen::MatrixXd a = a0;
    for (size_t k = 0; k < basis.size(); ++k) {
      a(basis[k].first, basis[k].second) += theta[Eigen::Index(k)];
      if (basis[k].first != basis[k].second) a(basis[k].second, basis[k].first) += theta[Eigen::Index(k)];
    }
    return a;
  };
  auto f = [&](const Eigen::VectorXd& theta) {
    return (fvi::kernel::cholesky(tensor(at(theta))).m.array() * w.array()).sum();
  };
  const Eigen::VectorXd theta = Eigen::VectorXd::Zero(Eigen::Index(basis.size()));
  const T l = fvi::kernel::cholesky(tensor(a0));
  const T grad = fvi::kernel::cholesky_grad(l, tensor(w));
  CHECK((grad.m - grad.m.transpose()).cwiseAbs().maxCoeff() < 1e-14);  // symmetric
  Eigen::VectorXd analytic(theta.size());
  for (size_t k = 0; k < basis.size(); ++k) {
    const auto [i, j] = basis[k];
    analytic[Eigen::Index(k)] = i == j ? grad.m(i, i) : grad.m(i, j) + grad.m(j, i);
  }
  const auto result = fvi::test::check_gradient(f, theta, analytic);
  INFO(result.report());
  CHECK(result.ok());
}

TEST_CASE("multi_normal_cholesky equals the density written with Sigma's inverse and determinant", "[kernel][cholesky]") {
  const Eigen::Index n = 4;
  constexpr double kPi = 3.14159265358979323846;
  T sigma(n, n, 2), mu(n, 1, 2);
  sigma.draw(0) = spd(n, 5);
  sigma.draw(1) = spd(n, 6);
  mu.m << 0.1, -0.4, 0.3, 0.0, 1.0, 0.2, -0.7, 0.5;
  T y(n, 1, 1);
  y.m << 0.5, -1.2, 2.0, 0.3;
  const T l = fvi::kernel::cholesky(sigma);
  const T lp = fvi::kernel::lpdf<double>("multi_normal_cholesky", {&y, &mu, &l});
  REQUIRE(lp.rows == 1);
  REQUIRE(lp.draws == 2);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const Eigen::MatrixXd S = sigma.draw(s);
    const Eigen::VectorXd d = y.m.col(0) - mu.draw(s).col(0);
    const double expected = -0.5 * d.dot(S.inverse() * d) - 0.5 * std::log(S.determinant()) - 0.5 * double(n) * std::log(2 * kPi);
    CHECK(lp.m(0, s) == Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("squared distances, diag_matrix and diagonal", "[kernel][cholesky]") {
  T x(3, 2, 1);
  x.m << 0, 0, 3, 4, -1, 1;  // rows are the points (0, 0), (3, 4), (-1, 1)
  const T d2 = fvi::kernel::squared_distances(x);
  Eigen::MatrixXd expected(3, 3);
  expected << 0, 25, 2, 25, 0, 25, 2, 25, 0;
  CHECK((d2.m - expected).cwiseAbs().maxCoeff() == 0);

  T v(3, 1, 2);
  v.m << 1, 4, 2, 5, 3, 6;
  const T m = fvi::kernel::diag_matrix(v);
  REQUIRE(m.rows == 3);
  REQUIRE(m.draws == 2);
  CHECK(Eigen::MatrixXd(m.draw(1)) == Eigen::MatrixXd(Eigen::Vector3d(4, 5, 6).asDiagonal()));
  const T back = fvi::kernel::diagonal(m);
  CHECK(back.m == v.m);
}

TEST_CASE("inverse: A inverse(A) = I, its adjoint by finite differences, and a singular matrix", "[kernel][cholesky]") {
  T a(3, 3, 2);
  a.draw(0) = spd(3, 8);
  a.draw(1) << 2.0, -1.0, 0.5, 0.3, 1.5, -0.2, 0.7, 0.1, 3.0;  // not symmetric
  const T y = fvi::kernel::inverse(a);
  for (Eigen::Index s = 0; s < 2; ++s)
    CHECK((Eigen::MatrixXd(a.draw(s)) * Eigen::MatrixXd(y.draw(s))).isApprox(Eigen::MatrixXd::Identity(3, 3), 1e-13));
  T g(3, 3, 2);
  std::mt19937 rng(9);
  std::normal_distribution<double> normal;
  for (Eigen::Index i = 0; i < g.m.size(); ++i) g.m.data()[i] = normal(rng);
  const Eigen::VectorXd x0 = Eigen::Map<const Eigen::VectorXd>(a.m.data(), a.m.size());
  auto value = [&](const Eigen::VectorXd& x) {
    T moved = a;
    moved.m = Eigen::Map<const Eigen::MatrixXd>(x.data(), a.m.rows(), a.m.cols());
    return (fvi::kernel::inverse(moved).m.array() * g.m.array()).sum();
  };
  const T d = fvi::kernel::inverse_grad(y, g);
  auto result = fvi::test::check_gradient(value, x0, Eigen::Map<const Eigen::VectorXd>(d.m.data(), d.m.size()));
  INFO(result.report());
  CHECK(result.ok());
  T singular(2, 2, 1);
  singular.m << 1, 2, 2, 4;
  CHECK_THROWS_WITH(fvi::kernel::inverse(singular), Catch::Contains("singular"));
}
