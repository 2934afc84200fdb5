#include "fvi/engine/aggregation.h"

#include <cmath>
#include <stdexcept>

namespace fvi::engine {

Eigen::VectorXd log_variance_params(const Eigen::VectorXd& mean, const Eigen::VectorXd& sd) {
  if (mean.size() != sd.size()) throw std::invalid_argument("log_variance_params: mean and sd differ in size");
  Eigen::VectorXd nu(2 * mean.size());
  nu << mean, (2 * sd.array().log()).matrix();
  return nu;
}

void mean_sd_of(const Eigen::VectorXd& nu, Eigen::VectorXd& mean, Eigen::VectorXd& sd) {
  if (nu.size() % 2) throw std::invalid_argument("mean_sd_of: nu has an odd size");
  const Eigen::Index d = nu.size() / 2;
  mean = nu.head(d);
  sd = (0.5 * nu.tail(d).array()).exp().matrix();
}

namespace {

void require_clients(const std::vector<Eigen::VectorXd>& clients, Eigen::Index size, const char* what) {
  if (clients.empty()) throw std::invalid_argument(std::string(what) + ": no client's parameters");
  for (const Eigen::VectorXd& c : clients)
    if (c.size() != size || c.size() % 2) throw std::invalid_argument(std::string(what) + ": a client's parameters differ in size");
}

}  // namespace

Eigen::VectorXd fedavg_pseudo_gradient(const Eigen::VectorXd& server, const std::vector<Eigen::VectorXd>& clients,
                                       const std::vector<double>& sizes) {
  require_clients(clients, server.size(), "fedavg_pseudo_gradient");
  if (sizes.size() != clients.size()) throw std::invalid_argument("fedavg_pseudo_gradient: one size per client");
  double n = 0;
  for (double s : sizes) {
    if (!(s > 0) || !std::isfinite(s)) throw std::invalid_argument("fedavg_pseudo_gradient: a client's size is not positive");
    n += s;
  }
  Eigen::VectorXd delta = Eigen::VectorXd::Zero(server.size());
  for (size_t s = 0; s < clients.size(); ++s) delta += (sizes[s] / n) * (server - clients[s]);  // seed 001 Alg. 1 line 9
  return delta;
}

Eigen::VectorXd fedvem_moment_match(const std::vector<Eigen::VectorXd>& clients) {
  require_clients(clients, clients.front().size(), "fedvem_moment_match");
  const Eigen::Index d = clients.front().size() / 2;
  const double S = double(clients.size());
  Eigen::ArrayXd mu = Eigen::ArrayXd::Zero(d);
  for (const Eigen::VectorXd& c : clients) mu += c.head(d).array() / S;  // seed 001 Eq. 36
  Eigen::ArrayXd second = Eigen::ArrayXd::Zero(d);
  for (const Eigen::VectorXd& c : clients)  // seed 001 Eq. 41, with mu* of Eq. 36
    second += ((mu - c.head(d).array()).square() + c.tail(d).array().exp()) / S;
  Eigen::VectorXd nu(2 * d);
  nu << mu.matrix(), second.log().matrix();  // seed 001 Eq. 42
  return nu;
}

ServerOptimiser::ServerOptimiser(Eigen::Index size, ServerOptimiserOptions options) : options_(std::move(options)) {
  if (!(options_.lr > 0) || !std::isfinite(options_.lr)) throw std::invalid_argument("server_lr must be positive");
  if (options_.kind == "adam") {
    AdamOptions a;
    a.learning_rate = StepSizeSchedule(options_.lr);
    a.epsilon = options_.tau;
    adam_.emplace(size, a);
  } else if (options_.kind != "sgd") {
    throw std::invalid_argument("server_optimiser = " + options_.kind + " is not sgd or adam");
  }
}

void ServerOptimiser::step(Eigen::VectorXd& nu, const Eigen::VectorXd& g) {
  if (g.size() != nu.size()) throw std::invalid_argument("ServerOptimiser::step: the pseudo-gradient differs in size");
  if (adam_) adam_->step(nu, g);
  else nu -= scale_ * options_.lr * g;
}

void ServerOptimiser::set_scale(double scale) {
  if (!(scale > 0 && scale <= 1)) throw std::invalid_argument("the server optimiser's step scale must be in (0, 1]");
  scale_ = scale;
  if (adam_) adam_->set_scale(scale);
}

size_t ServerOptimiser::state_size() const { return adam_ ? 1 + 2 * size_t(adam_->first_moment().size()) : 0; }

std::vector<double> ServerOptimiser::state() const {
  if (!adam_) return {};
  std::vector<double> s{double(adam_->iteration())};
  const Eigen::VectorXd& m = adam_->first_moment();
  const Eigen::VectorXd& v = adam_->second_moment();
  s.insert(s.end(), m.data(), m.data() + m.size());
  s.insert(s.end(), v.data(), v.data() + v.size());
  return s;
}

void ServerOptimiser::restore(const std::vector<double>& s) {
  if (s.size() != state_size()) throw std::invalid_argument("the server optimiser's checkpoint does not fit");
  if (!adam_) return;
  const Eigen::Index n = adam_->first_moment().size();
  if (!(s[0] >= 0 && s[0] <= 1e15 && s[0] == std::floor(s[0])))
    throw std::invalid_argument("the server optimiser's checkpointed step count is not a count");
  adam_->restore(long(s[0]), Eigen::Map<const Eigen::VectorXd>(s.data() + 1, n),
                 Eigen::Map<const Eigen::VectorXd>(s.data() + 1 + n, n));
}

}  // namespace fvi::engine
