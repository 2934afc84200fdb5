// JointGaussianRows: parties' rows of one lower-triangular factor give one joint Gaussian. Checked
// against the joint written out whole: the parties' rows stacked into L, draws m + L eps, the
// covariance L L^T, and the Gaussian density from its definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fvi/family/joint_gaussian_rows.h"

namespace {

using fvi::JointGaussianRows;

Eigen::VectorXd random_vector(Eigen::Index n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::VectorXd v(n);
  for (Eigen::Index i = 0; i < n; ++i) v[i] = 0.5 * normal(rng);
  return v;
}

}  // namespace

TEST_CASE("JointGaussianRows: the parties' rows are one joint Gaussian", "[family]") {
  std::mt19937_64 rng(3);
  // Three parties of 2, 3 and 1 parameters.
  const std::vector<Eigen::Index> dims{2, 3, 1};
  std::vector<JointGaussianRows> parts;
  Eigen::Index offset = 0;
  for (Eigen::Index d : dims) {
    JointGaussianRows q(offset, d, 0.3);
    REQUIRE(q.params().size() == JointGaussianRows::num_params(offset, d));
    REQUIRE(q.params().size() == d + d * offset + d * (d + 1) / 2);
    q.set_params(random_vector(q.params().size(), rng));
    parts.push_back(q);
    offset += d;
  }
  const Eigen::Index total = offset;
  // The joint, stacked from the parties' rows: L lower-triangular with a positive diagonal.
  Eigen::MatrixXd L = Eigen::MatrixXd::Zero(total, total);
  Eigen::VectorXd m(total);
  for (const JointGaussianRows& q : parts) {
    L.block(q.offset(), 0, q.dim(), q.width()) = q.factor();
    m.segment(q.offset(), q.dim()) = q.mean();
  }
  for (Eigen::Index r = 0; r < total; ++r) {
    CHECK(L(r, r) > 0);
    for (Eigen::Index c = r + 1; c < total; ++c) CHECK(L(r, c) == 0);
  }
  const Eigen::MatrixXd cov = L * L.transpose();

  SECTION("draws: each party's block of m + L eps from the shared noise") {
    std::normal_distribution<double> normal;
    Eigen::MatrixXd eps(total, 4);
    for (Eigen::Index i = 0; i < eps.size(); ++i) eps.data()[i] = normal(rng);
    const Eigen::MatrixXd joint = (L * eps).colwise() + m;
    for (const JointGaussianRows& q : parts)
      CHECK((q.sample(eps) - joint.middleRows(q.offset(), q.dim())).cwiseAbs().maxCoeff() < 1e-14);
  }
  SECTION("sds, log det and the marginal density") {
    double log_det = 0;
    for (const JointGaussianRows& q : parts) {
      const Eigen::MatrixXd c = cov.block(q.offset(), q.offset(), q.dim(), q.dim());
      CHECK((q.sd() - c.diagonal().cwiseSqrt()).cwiseAbs().maxCoeff() < 1e-14);
      log_det += q.log_det();
      // log N(x; m_k, C_k) from its definition, at a point away from the mean.
      const Eigen::VectorXd x = q.mean() + random_vector(q.dim(), rng);
      const Eigen::VectorXd r = x - q.mean();
      const double expected = -0.5 * r.dot(c.inverse() * r) - 0.5 * double(q.dim()) * std::log(2 * M_PI) -
                              0.5 * std::log(c.determinant());
      CHECK(q.marginal_log_density(x)[0] == Approx(expected).epsilon(1e-12));
    }
    CHECK(log_det == Approx(std::log(L.determinant())).epsilon(1e-12));
  }
  SECTION("the path gradient by finite differences of sum_s g_s . x_s") {
    const JointGaussianRows& q = parts[1];
    std::normal_distribution<double> normal;
    Eigen::MatrixXd eps(total, 3), g(q.dim(), 3);
    for (Eigen::Index i = 0; i < eps.size(); ++i) eps.data()[i] = normal(rng);
    for (Eigen::Index i = 0; i < g.size(); ++i) g.data()[i] = normal(rng);
    const Eigen::VectorXd analytic = q.path_gradient(g, eps);
    const double h = 1e-6;
    for (Eigen::Index i = 0; i < q.params().size(); ++i) {
      JointGaussianRows up = q, down = q;
      Eigen::VectorXd p = q.params();
      p[i] += h;
      up.set_params(p);
      p[i] -= 2 * h;
      down.set_params(p);
      const double numeric = ((g.array() * up.sample(eps).array()).sum() - (g.array() * down.sample(eps).array()).sum()) / (2 * h);
      INFO("parameter " << i);
      CHECK(analytic[i] == Approx(numeric).epsilon(1e-6).margin(1e-8));
    }
    // log det's gradient: 1 on each log-diagonal parameter, 0 elsewhere.
    const Eigen::VectorXd d = q.log_det_gradient();
    for (Eigen::Index i = 0; i < q.params().size(); ++i) {
      JointGaussianRows up = q;
      Eigen::VectorXd p = q.params();
      p[i] += h;
      up.set_params(p);
      CHECK(d[i] == Approx((up.log_det() - q.log_det()) / h).margin(1e-6));
    }
  }
  SECTION("bad parameters are refused") {
    JointGaussianRows q(1, 2, 0.5);
    CHECK_THROWS(q.set_params(Eigen::VectorXd::Zero(3)));
    Eigen::VectorXd p = q.params();
    p[0] = std::nan("");
    CHECK_THROWS(q.set_params(p));
    CHECK_THROWS(JointGaussianRows(-1, 2, 0.5));
  }
}
