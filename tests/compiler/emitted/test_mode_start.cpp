// SFVI's start for a model with locals (fvi/engine/sfvi.h, SfviServer::start_at_locations): each
// silo answers the profile of its term over its locals, max_a log p(y_j, a | Z_G), with the
// joint's gradient in Z_G at the maximiser (the envelope theorem) and Laplace's determinant
// correction apart, and the server finds the mode
// of the globals declared without bounds, the scales held. On the compiled hier_intercepts, whose
// joint is Gaussian in (mu, beta, alpha) at fixed scales, both are checked against computations
// of their own: the silo's profile in closed form and its gradient by central differences of it;
// the server's mode as the penalised least squares solution over (mu, beta, every silo's alpha).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "abi_data.h"
#include "test_models.h"
#include "fvi/engine/sfvi.h"
#include "fvi/program/federation.h"
#include "fvi/program/roles.h"
#include "fvi/program/sfvi_run.h"

extern "C" const fvi_model* fvi_model_hier_intercepts(void);

namespace mode_start_test {

using fvi::engine::SfviOptions;
using fvi::engine::SfviServer;
using fvi::engine::SfviSilo;
using fvic::test::Data;
using fvic::test::scalar;

constexpr int D = 2;  // hier_intercepts: globals (mu, beta[D], tau, sigma), a silo's alpha

struct SiloData {
  Eigen::MatrixXd x, y;
};

SiloData make_silo(std::mt19937_64& rng, int rows, double location) {
  std::normal_distribution<double> normal;
  SiloData s{Eigen::MatrixXd(rows, D), Eigen::MatrixXd(rows, 1)};
  for (int i = 0; i < rows; ++i) {
    for (int d = 0; d < D; ++d) s.x(i, d) = normal(rng);
    s.y(i, 0) = location + 3 * s.x(i, 0) - s.x(i, 1) + 2 * normal(rng);
  }
  return s;
}

Data abi_data(const SiloData& s) {
  Data d;
  d.add("D", scalar(D));
  d.add("N", scalar(double(s.x.rows())));
  d.add("x", s.x);
  d.add("y", s.y);
  return d;
}

// log N(v | m, s) less its constant; `~` drops it, and only differences of log p are compared.
double log_normal(double v, double m, double s) { return -0.5 * (v - m) * (v - m) / (s * s) - std::log(s); }

// The silo's profile at z = (mu, beta, log tau, log sigma): alpha* in closed form (a Gaussian
// prior times a Gaussian likelihood), and the joint there; `half_log_det`: half the log of the
// joint's curvature in alpha, 1 / tau^2 + n / sigma^2.
double profile(const SiloData& s, const Eigen::VectorXd& z, double* alpha_at = nullptr, double* half_log_det = nullptr) {
  const double mu = z[0], tau = std::exp(z[1 + D]), sigma = std::exp(z[2 + D]);
  const Eigen::VectorXd r = s.y.col(0) - s.x * z.segment(1, D);
  const double n = double(s.x.rows());
  const double alpha = (mu / (tau * tau) + r.sum() / (sigma * sigma)) / (1 / (tau * tau) + n / (sigma * sigma));
  if (alpha_at) *alpha_at = alpha;
  if (half_log_det) *half_log_det = 0.5 * std::log(1 / (tau * tau) + n / (sigma * sigma));
  double lp = log_normal(alpha, mu, tau);
  for (Eigen::Index i = 0; i < r.size(); ++i) lp += log_normal(r[i], alpha, sigma);
  return lp;
}

TEST_CASE("mode start with locals: a silo's answer is the profile over its locals less half its curvature's log "
          "determinant, and the profile's gradient",
          "[mode]") {
  const fvi_model& model = *fvi_model_hier_intercepts();
  const int n = 3 + D;
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal;
  const SiloData s = make_silo(rng, 12, 40);
  Data data = abi_data(s);
  // Default options: a scalar local is scored by element (local_samples 16), so the silo binds a
  // joint of its own for the points.
  const SfviOptions options = SfviOptions::from(fvi::engine::Settings({}, {}), n);
  SfviSilo silo(model, data.abi(), 1, options, false);
  const int P = 4;
  Eigen::MatrixXd z(n, P);
  for (int p = 0; p < P; ++p) {
    z(0, p) = 30 + 5 * normal(rng);
    for (int d = 0; d < D; ++d) z(1 + d, p) = normal(rng);
    z(1 + D, p) = 0.5 * normal(rng);
    z(2 + D, p) = 1 + 0.3 * normal(rng);
  }
  const SfviSilo::PointValues v = silo.log_likelihood_at(z);
  REQUIRE(v.log_p.size() == P);
  for (int p = 0; p < P; ++p) {
    INFO("point " << p);
    REQUIRE(std::isfinite(v.log_p[p]));
    double half_log_det = 0, half_log_det_0 = 0;
    const double at_p = profile(s, z.col(p), nullptr, &half_log_det), at_0 = profile(s, z.col(0), nullptr, &half_log_det_0);
    CHECK(v.half_log_det[p] == Approx(half_log_det).epsilon(1e-7));
    // Differences of the profile: the dropped constants cancel.
    CHECK((v.log_p[p] + v.half_log_det[p]) - (v.log_p[0] + v.half_log_det[0]) ==
          Approx(at_p - at_0).epsilon(1e-9).margin(1e-8));
    for (int i = 0; i < n; ++i) {
      Eigen::VectorXd up = z.col(p), down = z.col(p);
      const double h = 1e-5 * (1 + std::abs(z(i, p)));
      up[i] += h;
      down[i] -= h;
      const double fd = (profile(s, up) - profile(s, down)) / (2 * h);
      INFO("coordinate " << i);
      CHECK(v.gradient(i, p) == Approx(fd).epsilon(1e-6).margin(1e-6));
    }
  }
  // The locals start at the conditional mode at a point, before any step.
  double alpha = 0;
  profile(s, z.col(2), &alpha);
  REQUIRE(silo.start_locals_at_mode(z.col(2)));
  CHECK(silo.q().mean()[0] == Approx(alpha).epsilon(1e-9));
}

TEST_CASE("mode start with locals: the server's start is the mode over the unbounded globals, the scales held, "
          "and only where it lies far",
          "[mode]") {
  const fvi_model& model = *fvi_model_hier_intercepts();
  const int n = 3 + D, K = 3;
  std::mt19937_64 rng(22);
  for (double location : {150.0, 0.5}) {
    INFO("the outcome's location " << location);
    std::vector<SiloData> silos;
    // Far: mu near 160, 16,000 of Adam's steps of 0.01; near: every location within 3 (300 steps).
    const double spacing = location > 100 ? 10 : 0.5;
    for (int k = 0; k < K; ++k) silos.push_back(make_silo(rng, 6 + 4 * k, location + spacing * k));
    std::vector<Data> data;
    data.reserve(K);  // the silos keep views of their data's names and values
    for (const SiloData& s : silos) data.push_back(abi_data(s));
    Data public_data;
    public_data.add("D", scalar(D));
    const SfviOptions options = SfviOptions::from(fvi::engine::Settings({}, {}), n);
    SfviServer server(model, public_data.abi(), options);
    std::vector<std::unique_ptr<SfviSilo>> hosts;
    for (int k = 0; k < K; ++k) hosts.push_back(std::make_unique<SfviSilo>(model, data[size_t(k)].abi(), k + 1, options, false));
    const fvi::engine::LogDensityBatchFn profiles = [&](const Eigen::MatrixXd& z, Eigen::VectorXd& lp,
                                                        Eigen::MatrixXd& gradient) {
      lp = Eigen::VectorXd::Zero(z.cols());
      gradient = Eigen::MatrixXd::Zero(z.rows(), z.cols());
      for (auto& h : hosts) {  // held tau and sigma: the determinant is constant where the search goes
        const SfviSilo::PointValues v = h->log_likelihood_at(z);
        lp += v.log_p;
        gradient += v.gradient;
      }
    };
    const Eigen::VectorXd before = server.q().params();
    const SfviServer::LocationStart start = server.start_at_locations(profiles);
    REQUIRE(start.mode.found);

    // Penalised least squares over (mu, beta, alpha_1..K) at tau = sigma = 1 (q's start, held):
    // minimise mu^2/100 + |beta|^2/100 + sum_k (alpha_k - mu)^2 + sum_ki (y_ki - alpha_k - x_ki beta)^2.
    const int m = 1 + D + K;
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(m, m);
    Eigen::VectorXd b = Eigen::VectorXd::Zero(m);
    auto add_row = [&](const Eigen::VectorXd& row, double target, double weight) {
      a += weight * row * row.transpose();
      b += weight * target * row;
    };
    for (int i = 0; i < 1 + D; ++i) add_row(Eigen::VectorXd::Unit(m, i), 0, 1.0 / 100);
    for (int k = 0; k < K; ++k) {
      Eigen::VectorXd row = Eigen::VectorXd::Zero(m);
      row[1 + D + k] = 1;
      row[0] = -1;
      add_row(row, 0, 1);
      for (Eigen::Index i = 0; i < silos[size_t(k)].x.rows(); ++i) {
        Eigen::VectorXd r = Eigen::VectorXd::Zero(m);
        r.segment(1, D) = silos[size_t(k)].x.row(i).transpose();
        r[1 + D + k] = 1;
        add_row(r, silos[size_t(k)].y(i, 0), 1);
      }
    }
    const Eigen::VectorXd solution = a.ldlt().solve(b);
    for (int i = 0; i < 1 + D; ++i) CHECK(start.mode.at[i] == Approx(solution[i]).epsilon(1e-7).margin(1e-7));
    CHECK(start.travel == Approx(solution.head(1 + D).cwiseAbs().maxCoeff()).epsilon(1e-7));

    const Eigen::VectorXd after = server.q().params();
    const bool far = start.travel > SfviServer::kLongTravelSteps * options.lr;
    CHECK(start.moved == far);
    CHECK(far == (location > 100));
    if (far) {
      for (int i = 0; i < 1 + D; ++i) CHECK(after[i] == Approx(solution[i]).epsilon(1e-7).margin(1e-7));
      for (int k = 0; k < K; ++k) {
        REQUIRE(hosts[size_t(k)]->start_locals_at_mode(server.q().mean()));
        CHECK(hosts[size_t(k)]->q().mean()[0] == Approx(solution[1 + D + k]).epsilon(1e-7));
      }
    }
    // The scales, every sd, and (when near) every mean as they were.
    CHECK(after.segment(1 + D, 2) == before.segment(1 + D, 2));
    CHECK(after.tail(after.size() - n) == before.tail(before.size() - n));
    if (!far) CHECK(after == before);
  }
}

TEST_CASE("mode start with locals: the silo's host takes the start's point and says whether its locals took it, "
          "and refuses one of the wrong size, a non-finite one, or one its settings do not allow",
          "[mode]") {
  using fvi::program::Message;
  using fvi::program::Phase;
  const fvi_model& model = *fvi_model_hier_intercepts();
  const int n = 3 + D, N = 8;
  std::mt19937_64 rng(23);
  const SiloData s = make_silo(rng, N, 120);
  fvi::data::DataSet data;
  data.add(fvic::test::data_variable("D", {}, {double(D)}));
  data.add(fvic::test::data_variable("N", {}, {double(N)}));
  std::vector<double> x(s.x.data(), s.x.data() + s.x.size()), y(s.y.data(), s.y.data() + s.y.size());
  data.add(fvic::test::data_variable("x", {N, D}, x));
  data.add(fvic::test::data_variable("y", {N}, y));
  auto host = [&](std::vector<std::string> keys) {
    keys.push_back("method=sfvi");
    return fvi::program::sfvi_silo_host(model, fvi::engine::Settings({}, keys), "sfvi", data, 1, 2);
  };
  const Message point{118.0, 3.0, -1.0, 0.0, 1.0};
  // 1: its locals start at their conditional mode there; 0: none found (sigma = exp(-1000) is 0).
  CHECK(host({})->endpoint().handle(0, Phase::kSfviModeLocals, point) == Message{1.0});
  CHECK(host({})->endpoint().handle(0, Phase::kSfviModeLocals, Message{118.0, 3.0, -1.0, 0.0, -1000.0}) ==
        Message{0.0});
  CHECK_THROWS_WITH(host({})->endpoint().handle(0, Phase::kSfviModeLocals, Message(size_t(n + 1), 0.0)),
                    Catch::Contains("6 values of the globals (this model has 5)"));
  Message bad = point;
  bad[2] = INFINITY;
  CHECK_THROWS_WITH(host({})->endpoint().handle(0, Phase::kSfviModeLocals, bad), Catch::Contains("non-finite"));
  CHECK_THROWS_WITH(host({"mode_start=off"})->endpoint().handle(0, Phase::kSfviModeLocals, point),
                    Catch::Contains("does not start its locals at a mode"));
}

}  // namespace mode_start_test
