// A silo's locals weighed by the closing exchange's importance weights (Phase::kSfviLocalWeights,
// fvi/program/sfvi_run.h): the silo reports mean sum_s w_s E[Z_L | Z_G^s] and the variance from the
// mean squares. On the compiled hier_intercepts, alpha given the globals is Gaussian in closed form
// (a normal prior times a normal likelihood), so the weighed mean and sd are checked against the
// mixture of those Gaussians at the same draws and weights; the silo's own E[Z_L | Z_G^s] is a
// self-normalised importance-sampling estimate, so the tolerance is its Monte Carlo error.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi_data.h"
#include "test_models.h"
#include "runtime/data/data_test_util.h"
#include "fvi/engine/sfvi.h"
#include "fvi/program/federation.h"
#include "fvi/program/roles.h"
#include "fvi/program/sfvi_run.h"

extern "C" const fvi_model* fvi_model_hier_intercepts(void);

namespace local_weights_test {

using fvi::program::Message;
using fvi::program::Phase;

constexpr int D = 2;       // hier_intercepts: globals (mu, beta[D], tau, sigma), a silo's alpha
constexpr int N = 8;       // the silo's rows
constexpr int kDraws = 3;  // draws of the globals in the exchange
constexpr long kImportanceDraws = 1 << 16;

struct Silo {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
  fvi::data::DataSet data;
};

Silo make_silo() {
  std::mt19937_64 rng(31);
  std::normal_distribution<double> normal;
  Silo s{Eigen::MatrixXd(N, D), Eigen::VectorXd(N), {}};
  for (int i = 0; i < N; ++i) {
    for (int d = 0; d < D; ++d) s.x(i, d) = normal(rng);
    s.y[i] = 0.3 + 2 * s.x(i, 0) - s.x(i, 1) + normal(rng);
  }
  s.data.add(fvic::test::data_variable("D", {}, {double(D)}));
  s.data.add(fvic::test::data_variable("N", {}, {double(N)}));
  s.data.add(fvic::test::data_variable("x", {N, D}, std::vector<double>(s.x.data(), s.x.data() + s.x.size())));
  s.data.add(fvic::test::data_variable("y", {N}, std::vector<double>(s.y.data(), s.y.data() + s.y.size())));
  return s;
}

// alpha | (mu, beta, log tau, log sigma), y: N(mean, sd^2), precision 1 / tau^2 + N / sigma^2.
struct Conditional {
  double mean, sd;
};
Conditional conditional(const Silo& s, const Eigen::VectorXd& z) {
  const double mu = z[0], tau = std::exp(z[1 + D]), sigma = std::exp(z[2 + D]);
  const Eigen::VectorXd r = s.y - s.x * z.segment(1, D);
  const double precision = 1 / (tau * tau) + N / (sigma * sigma);
  return {(mu / (tau * tau) + r.sum() / (sigma * sigma)) / precision, 1 / std::sqrt(precision)};
}

std::unique_ptr<fvi::program::SiloHost> host(const Silo& s, std::vector<std::string> keys) {
  keys.push_back("method=sfvi");
  return fvi::program::sfvi_silo_host(*fvi_model_hier_intercepts(), fvi::engine::Settings({}, keys), "sfvi", s.data, 1, 1);
}

// The final q, as the server's kSfviFinish sends it; its local proposal N(0, 1) given any globals
// (init_sd = 1) covers every conditional below.
Message final_q(const std::vector<std::string>& keys) {
  fvic::test::Data public_data;
  public_data.add("D", fvic::test::scalar(D));
  const auto options = fvi::engine::SfviOptions::from(fvi::engine::Settings({}, keys), 3 + D);
  fvi::engine::SfviServer server(*fvi_model_hier_intercepts(), public_data.abi(), options);
  return fvi::engine::pack(server.broadcast(0));
}

Eigen::MatrixXd global_draws() {
  Eigen::MatrixXd z(3 + D, kDraws);
  z.col(0) << 0.2, 2.0, -1.0, 0.0, 0.0;                // tau 1, sigma 1
  z.col(1) << -0.5, 1.8, -0.9, std::log(0.5), 0.2;     // a tighter prior, a wider likelihood
  z.col(2) << 1.0, 2.2, -1.1, std::log(2.0), -0.3;
  return z;
}

TEST_CASE("a silo's locals weighed by the closing's importance weights are the mixture of alpha's conditional "
          "posteriors at the weighted draws of the globals",
          "[local_weights]") {
  const Silo s = make_silo();
  const std::vector<std::string> keys{"init_sd=1", "local_samples=" + std::to_string(kImportanceDraws),
                                      "output_draws=400"};
  auto h = host(s, keys);
  h->endpoint().handle(1, Phase::kSfviFinish, final_q(keys));
  const Eigen::MatrixXd z = global_draws();
  const Message reply = h->endpoint().handle(2, Phase::kSfviLogJoint, Message(z.data(), z.data() + z.size()));
  REQUIRE(reply.size() >= size_t(2 * kDraws));
  const std::vector<double> w{0.25, 0.6, 0.15};
  Message log_w;
  for (double v : w) log_w.push_back(std::log(v) + 7.0);  // normalised by the silo: any constant
  h->endpoint().handle(3, Phase::kSfviLocalWeights, log_w);

  double mean = 0, square = 0;
  std::vector<Conditional> c;
  for (int k = 0; k < kDraws; ++k) {
    c.push_back(conditional(s, z.col(k)));
    mean += w[size_t(k)] * c.back().mean;
    square += w[size_t(k)] * (c.back().sd * c.back().sd + c.back().mean * c.back().mean);
  }
  const double sd = std::sqrt(square - mean * mean);
  // Each draw's E[a] and E[a^2] are self-normalised estimates from K draws of N(0, 1): variance
  // E_p[(p / q) (g - E_p g)^2] / K (by quadrature), weighed by w_s^2 across the draws.
  double var_mean = 0, var_square = 0;
  for (int k = 0; k < kDraws; ++k) {
    const double m = c[size_t(k)].mean, v = c[size_t(k)].sd * c[size_t(k)].sd, second = v + m * m;
    double e_mean = 0, e_square = 0;
    const int points = 200000;
    const double lo = m - 12 * c[size_t(k)].sd, h = 24 * c[size_t(k)].sd / points;
    for (int i = 0; i <= points; ++i) {
      const double a = lo + i * h;
      const double log_p = -0.5 * (a - m) * (a - m) / v - 0.5 * std::log(2 * M_PI * v);
      const double log_q = -0.5 * a * a - 0.5 * std::log(2 * M_PI);
      const double f = std::exp(2 * log_p - log_q) * h * (i == 0 || i == points ? 0.5 : 1.0);  // p^2 / q
      e_mean += f * (a - m) * (a - m);
      e_square += f * (a * a - second) * (a * a - second);
    }
    var_mean += w[size_t(k)] * w[size_t(k)] * e_mean / kImportanceDraws;
    var_square += w[size_t(k)] * w[size_t(k)] * e_square / kImportanceDraws;
  }
  const double se_mean = std::sqrt(var_mean);
  const double se_sd = (std::sqrt(var_square) + 2 * std::abs(mean) * se_mean) / (2 * sd);

  fvi_test::TempDir dir;
  h->finish(dir.str());
  std::ifstream in(dir / "posterior.json");
  REQUIRE(in);
  const nlohmann::json posterior = nlohmann::json::parse(in);
  const double reported_mean = posterior["variables"]["alpha"]["mean"][0];
  const double reported_sd = posterior["variables"]["alpha"]["sd"][0];
  INFO("mixture mean " << mean << " (se " << se_mean << "), sd " << sd << " (se " << se_sd << ")");
  CHECK(std::abs(reported_mean - mean) < 5 * se_mean);
  CHECK(std::abs(reported_sd - sd) < 5 * se_sd);
  // The check can tell the weights from equal ones: their mixture's mean lies far outside the tolerance.
  double equal = 0;
  for (const Conditional& e : c) equal += e.mean / kDraws;
  CHECK(std::abs(equal - mean) > 20 * se_mean);
}

TEST_CASE("a silo refuses the closing's local weights where its settings say weigh_locals = off, of the wrong "
          "count, not finite, or before a log-joint exchange",
          "[local_weights]") {
  const Silo s = make_silo();
  const std::vector<std::string> keys{"init_sd=1"};
  const Eigen::MatrixXd z = global_draws();
  const Message draws(z.data(), z.data() + z.size());
  const Message log_w(size_t(kDraws), 0.0);

  auto off = host(s, {"init_sd=1", "weigh_locals=off"});
  off->endpoint().handle(1, Phase::kSfviFinish, final_q(keys));
  off->endpoint().handle(2, Phase::kSfviLogJoint, draws);
  CHECK_THROWS_WITH(off->endpoint().handle(3, Phase::kSfviLocalWeights, log_w),
                    Catch::Contains("does not take local weights (weigh_locals = off)"));

  auto on = host(s, keys);
  on->endpoint().handle(1, Phase::kSfviFinish, final_q(keys));
  CHECK_THROWS_WITH(on->endpoint().handle(2, Phase::kSfviLocalWeights, log_w),
                    Catch::Contains("without a log-joint exchange"));
  on->endpoint().handle(3, Phase::kSfviLogJoint, draws);
  CHECK_THROWS_WITH(on->endpoint().handle(4, Phase::kSfviLocalWeights, Message(size_t(kDraws + 1), 0.0)),
                    Catch::Contains("4 for 3 draws"));
  Message bad = log_w;
  bad[1] = NAN;
  CHECK_THROWS_WITH(on->endpoint().handle(5, Phase::kSfviLocalWeights, bad), Catch::Contains("not finite"));
}

}  // namespace local_weights_test
