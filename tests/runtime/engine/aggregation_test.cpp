#include "fvi/engine/aggregation.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/rng.h"

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using namespace fvi::engine;

namespace {

// nu = [mean; log variance] from means and variances written out.
Eigen::VectorXd nu_of(std::vector<double> mean, std::vector<double> variance) {
  Eigen::VectorXd nu(2 * mean.size());
  for (size_t i = 0; i < mean.size(); ++i) nu[i] = mean[i], nu[mean.size() + i] = std::log(variance[i]);
  return nu;
}

// sum_s KL(N(mu_s, s2_s) : N(mu, exp(alpha))), coordinate by coordinate, from the textbook formula:
// the objective FedVEM's server minimises (seed 001 Eq. 33's nu-dependent part).
double kl_sum(const std::vector<Eigen::VectorXd>& clients, const Eigen::VectorXd& nu) {
  const Eigen::Index d = nu.size() / 2;
  double total = 0;
  for (const Eigen::VectorXd& c : clients)
    for (Eigen::Index i = 0; i < d; ++i) {
      const double s2 = std::exp(c[d + i]), v = std::exp(nu[d + i]), dm = c[i] - nu[i];
      total += 0.5 * (std::log(v / s2) + (s2 + dm * dm) / v - 1);
    }
  return total;
}

}  // namespace

TEST_CASE("FedVEM's moment matching: a worked example", "[aggregation]") {
  // mu_s = 0, 2 and sigma_s^2 = 1, 3: mu* = 1, sigma^2* = ((1 + 1) + (1 + 3)) / 2 = 3.
  const Eigen::VectorXd nu = fedvem_moment_match({nu_of({0}, {1}), nu_of({2}, {3})});
  CHECK_THAT(nu[0], WithinAbs(1.0, 1e-15));
  CHECK_THAT(nu[1], WithinRel(std::log(3.0), 1e-15));
}

TEST_CASE("FedVEM's moment matching minimises the sum of the clients' KLs to N(mu, sigma^2)", "[aggregation]") {
  fvi::CounterRng rng(fvi::RngKey{7, 0, 0, 0});
  const int S = 5, d = 3;
  std::vector<Eigen::VectorXd> clients;
  for (int s = 0; s < S; ++s) clients.push_back(rng.normal(2 * d, 1).col(0));
  const Eigen::VectorXd best = fedvem_moment_match(clients);
  // Stationary: central differences of the objective vanish to their truncation error (h^2).
  const double h = 1e-5;
  for (Eigen::Index i = 0; i < best.size(); ++i) {
    Eigen::VectorXd up = best, down = best;
    up[i] += h, down[i] -= h;
    CHECK_THAT((kl_sum(clients, up) - kl_sum(clients, down)) / (2 * h), WithinAbs(0.0, 1e-8));
  }
  // And a minimum: every perturbation raises it.
  const double at_best = kl_sum(clients, best);
  for (int trial = 0; trial < 50; ++trial) {
    const Eigen::VectorXd away = best + 0.1 * rng.normal(2 * d, 1).col(0);
    CHECK(kl_sum(clients, away) > at_best);
  }
}

TEST_CASE("FedAvg's pseudo-gradient weights each client by its share of the rows", "[aggregation]") {
  // Server 0, clients at 1 and 4 with 3 rows and 1 row: Delta = -(3/4 * 1 + 1/4 * 4) = -1.75.
  Eigen::VectorXd server(2), a(2), b(2);
  server << 0, 0;
  a << 1, 1;
  b << 4, 4;
  const Eigen::VectorXd delta = fedavg_pseudo_gradient(server, {a, b}, {3, 1});
  CHECK_THAT(delta[0], WithinAbs(-1.75, 1e-15));
  CHECK_THAT(delta[1], WithinAbs(-1.75, 1e-15));
  CHECK_THROWS(fedavg_pseudo_gradient(server, {a, b}, {3, 0}));
  CHECK_THROWS(fedavg_pseudo_gradient(server, {a}, {1, 1}));
}

TEST_CASE("FedAvg with one client and one local SGD step is centralised SGD and Adam", "[aggregation]") {
  // A deterministic objective f(nu) = 1/2 sum_i h_i (nu_i - a_i)^2, so the client's step is exact.
  Eigen::VectorXd h(4), a(4);
  h << 0.5, 3, 10, 0.1;
  a << 1, -2, 0.5, 3;
  const auto gradient = [&](const Eigen::VectorXd& nu) { return Eigen::VectorXd((h.array() * (nu - a).array()).matrix()); };
  const double client_lr = 0.05;
  const auto client_step = [&](const Eigen::VectorXd& nu) { return Eigen::VectorXd(nu - client_lr * gradient(nu)); };
  const Eigen::VectorXd start = Eigen::VectorXd::Zero(4);

  SECTION("server SGD with lr eta is centralised SGD with lr eta * client lr") {
    ServerOptimiser server(4, {"sgd", 0.7, 0});
    Eigen::VectorXd federated = start, central = start;
    for (int t = 0; t < 40; ++t) {
      server.step(federated, fedavg_pseudo_gradient(federated, {client_step(federated)}, {123}));
      central -= 0.7 * client_lr * gradient(central);
      for (Eigen::Index i = 0; i < 4; ++i) CHECK_THAT(federated[i], WithinAbs(central[i], 1e-12));
    }
  }
  SECTION("server Adam with lr eta and tau is centralised Adam with lr eta and epsilon tau / client lr") {
    // The pseudo-gradient is client_lr times the gradient, and Adam's step is invariant to that
    // scale but for epsilon. Adam (Kingma & Ba 2015, Algorithm 1) written out here.
    const double eta = 0.01, tau = 1e-4, b1 = 0.9, b2 = 0.999, eps = tau / client_lr;
    ServerOptimiser server(4, {"adam", eta, tau});
    Eigen::VectorXd federated = start, central = start;
    Eigen::ArrayXd m = Eigen::ArrayXd::Zero(4), v = Eigen::ArrayXd::Zero(4);
    for (int t = 1; t <= 200; ++t) {
      server.step(federated, fedavg_pseudo_gradient(federated, {client_step(federated)}, {1}));
      const Eigen::ArrayXd g = gradient(central).array();
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g.square();
      const Eigen::ArrayXd m_hat = m / (1 - std::pow(b1, t)), v_hat = v / (1 - std::pow(b2, t));
      central -= (eta * m_hat / (v_hat.sqrt() + eps)).matrix();
      for (Eigen::Index i = 0; i < 4; ++i) CHECK_THAT(federated[i], WithinAbs(central[i], 1e-12));
    }
    // It got somewhere: the minimum is a.
    CHECK((central - a).norm() < (start - a).norm() / 2);
  }
}

TEST_CASE("the server optimiser's checkpoint restores Adam's state", "[aggregation]") {
  ServerOptimiser a(3, {"adam", 0.1, 1e-4}), b(3, {"adam", 0.1, 1e-4});
  Eigen::VectorXd x = Eigen::VectorXd::Ones(3), y;
  Eigen::VectorXd g(3);
  g << 1, -2, 0.5;
  a.step(x, g);
  a.step(x, 0.5 * g);
  b.restore(a.state());
  y = x;
  a.step(x, g);
  b.step(y, g);
  CHECK(x == y);
  CHECK_THROWS(b.restore({1, 2}));
  CHECK(ServerOptimiser(3, {"sgd", 1, 0}).state().empty());
  CHECK_THROWS(ServerOptimiser(3, {"newton", 1, 0}));
}

TEST_CASE("the server optimiser's step scale multiplies SGD's step and Adam's", "[aggregation]") {
  // The stopping rule's decay (pvi_run.cpp, function-space methods): scale s takes s times the step.
  const Eigen::VectorXd g = Eigen::Vector2d(0.4, -1.0);
  ServerOptimiser sgd(2, {"sgd", 1.0, 1e-4});
  Eigen::VectorXd nu = Eigen::Vector2d(1.0, 2.0);
  sgd.set_scale(0.25);
  sgd.step(nu, g);
  CHECK_THAT(nu[0], WithinRel(1.0 - 0.25 * 0.4, 1e-15));
  CHECK_THAT(nu[1], WithinRel(2.0 + 0.25 * 1.0, 1e-15));
  ServerOptimiser full(2, {"adam", 0.1, 1e-4}), scaled(2, {"adam", 0.1, 1e-4});
  scaled.set_scale(0.5);
  Eigen::VectorXd a = Eigen::Vector2d::Zero(), b = Eigen::Vector2d::Zero();
  full.step(a, g), scaled.step(b, g);
  CHECK(((b - 0.5 * a).cwiseAbs().maxCoeff()) < 1e-15);
  CHECK_THROWS(sgd.set_scale(0));
  CHECK_THROWS(sgd.set_scale(1.5));
}
