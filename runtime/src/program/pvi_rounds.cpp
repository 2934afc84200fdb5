#include "fvi/program/pvi_rounds.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "fvi/message/codec.h"
#include "fvi/message/sizes.h"
#include "fvi/program/quantities.h"

namespace fvi::program {

namespace {

// Values in natural parameters of dimension d (message/sizes.h, as `fvic plan` counts them).
template <class Natural>
size_t natural_size(Eigen::Index d) {
  return size_t(message::gaussian_natural_size<int64_t>(d, std::is_same_v<Natural, GaussianNatural<double>>));
}

template <class Natural>
Natural read_natural(message::Reader& in, Eigen::Index d, const char* field) {
  Natural eta;
  in.natural(d, eta, field);
  return eta;
}

// A whole message of natural parameters (its size checked by the caller).
template <class Natural>
Natural natural_message(const Message& m, Eigen::Index d, const char* what) {
  message::Reader in(m, what);
  Natural eta = read_natural<Natural>(in, d, "natural parameters");
  in.finish();
  return eta;
}

template <class Natural>
Message natural_message(const Natural& eta) {
  return message::Writer().natural(eta).done();
}

// The silos' reply to an update: FedAvg's also carries the silo's rows.
size_t update_reply_size(const std::string& method, size_t P) {
  return method == "fedavg" ? message::fedavg_update_reply_size(P) : message::pvi_update_reply_size(P);
}

}  // namespace

template <class Q>
PviRounds<Q>::PviRounds(Server& server, Transport& transport, const engine::PviOptions& options)
    : server_(server),
      transport_(transport),
      schedule_(options.schedule),
      server_damping_(options.server_damping),
      previous_objective_(std::numeric_limits<double>::quiet_NaN()),
      method_(options.aggregation),
      function_space_(options.function_space),
      clients_per_round_(options.clients_per_round),
      seed_(options.seed) {
  if (schedule_ != "synchronous" && schedule_ != "sequential" && schedule_ != "asynchronous")
    throw std::invalid_argument("schedule = " + schedule_ + " is not a PVI schedule");
  if (server_damping_ && schedule_ != "synchronous")
    throw std::invalid_argument("the server scales the silos' changes in the synchronous schedule only");
  if (clients_per_round_ < 0) throw std::invalid_argument("clients_per_round must not be negative");
  if (clients_per_round_ > 0 && schedule_ != "synchronous")
    throw std::invalid_argument("clients_per_round samples silos in the synchronous schedule only");
  updated_.assign(transport_.silos(), 0);
  if (method_ == "pvi") {
    factors_.assign(transport_.silos(), engine::GaussianFamily<Q>::zero(server_.posterior().dim()));
    return;
  }
  if (method_ != "fedavg" && method_ != "fedvem") throw std::invalid_argument("method = " + method_ + " is not a PVI aggregation");
  if constexpr (!std::is_same_v<Q, MeanFieldGaussian<double>>) {
    throw std::invalid_argument("method = " + method_ + " fits a mean-field q (seed 001); use family = meanfield");
  } else {
    if (schedule_ != "synchronous" || server_damping_)
      throw std::invalid_argument("method = " + method_ + " runs synchronous rounds, undamped but by its server optimiser");
    const Q prior = server_.distribution();
    Eigen::VectorXd mean = prior.mean(), sd = prior.sd();
    if (options.init_mean_sd > 0) {
      CounterRng rng(RngKey{seed_, 0, 0, rng_stream::kInitialisation});
      mean += options.init_mean_sd * rng.normal(mean.size(), 1);
    }
    if (options.init_sd > 0) sd.setConstant(options.init_sd);
    server_.set_posterior(to_natural(Q::from_mean_sd(mean, sd)));
    optimiser_.emplace(2 * mean.size(), options.server_optimiser);
  }
}

template <class Q>
std::vector<int> PviRounds<Q>::sampled(uint32_t round) const {
  const int S = transport_.silos();
  std::vector<int> silos(S);
  std::iota(silos.begin(), silos.end(), 0);
  const long m = clients_per_round_;
  if (m <= 0 || m >= S) return silos;
  // A partial Fisher-Yates shuffle from (seed, round): the same silos on a resumed run.
  CounterRng rng(RngKey{seed_, 0, round, rng_stream::kClientSampling});
  for (long i = 0; i < m; ++i) {
    const long j = i + long(rng() % uint32_t(S - i));
    std::swap(silos[size_t(i)], silos[size_t(j)]);
  }
  silos.resize(size_t(m));
  std::sort(silos.begin(), silos.end());
  return silos;
}

template <class Q>
std::string PviRounds<Q>::accept(int k, Message& reply, uint32_t round) {
  const Eigen::Index d = server_.posterior().dim();
  std::string reason = check_reply(reply, update_reply_size(method_, natural_size<Natural>(d)));
  if (reason.empty() && method_ == "fedavg") {
    // The silo's rows, its weight (seed 001 Alg. 1 line 9): a count, at most 2^53.
    const double n = reply.back();
    if (!(n >= 1 && n <= 9007199254740992.0 && n == std::floor(n))) reason = "its number of rows is not a positive count";
    else reply.pop_back();
  }
  // A change that would make q_s improper or unusable (engine::PviServer::unusable) is refused at
  // once; in the synchronous schedule q_s has not moved since it was sent, and the changes that
  // pass are checked again together as they are applied (run_round).
  if (reason.empty())
    reason = Server::unusable(natural_product(server_.posterior(), natural_message<Natural>(reply, d, "the PVI change")));
  if (!reason.empty()) {
    // And what follows, so that a reader knows the run goes on.
    std::fprintf(stderr, "round %u: refused the change from silo %d: %s; the round goes on without it (the silo "
                         "keeps its previous factor)\n", round, k + 1, reason.c_str());
    ++rejected_;
  }
  return reason;
}

template <class Q>
void PviRounds<Q>::aggregate_round(uint32_t round) {
  const int S = transport_.silos();
  const Eigen::Index d = server_.posterior().dim();
  const Natural zero = engine::GaussianFamily<Q>::zero(d);
  // fedavg: t_k = q_s / prior, so that the silo's cavity q_s / t_k is the prior; fedvem: t_k = 0,
  // so that its cavity is q_s itself (engine::PviOptions::aggregation).
  const Natural prior_factor = natural_quotient(server_.posterior(), server_.prior());
  const bool fedavg = method_ == "fedavg";
  std::vector<Eigen::VectorXd> nus(static_cast<size_t>(S));
  std::vector<double> rows(size_t(S), 0.0);
  Exchange x;
  x.round = round;
  x.phase = Phase::kPviUpdate;
  x.silos = sampled(round);
  x.request = [&](int) {
    return message::Writer().value(0.0).natural(server_.posterior()).natural(fedavg ? prior_factor : zero).done();
  };
  x.reply = [&](int k, Message& up) {
    const double n = up.empty() ? 0 : up.back();
    std::string reason = accept(k, up, round);
    if (!reason.empty()) return reason;
    const Q q_k = engine::GaussianFamily<Q>::distribution(
        natural_product(server_.posterior(), natural_message<Natural>(up, d, "the change of q")));
    nus[size_t(k)] = engine::log_variance_params(q_k.mean(), engine::GaussianFamily<Q>::sd(q_k));
    rows[size_t(k)] = n;
    return reason;
  };
  const std::vector<bool> arrived = transport_.exchange(x);
  std::vector<Eigen::VectorXd> clients;
  std::vector<double> sizes;
  for (int k = 0; k < S; ++k)
    if (arrived[size_t(k)]) clients.push_back(nus[size_t(k)]), sizes.push_back(rows[size_t(k)]), updated_[size_t(k)] = 1;
  if (clients.empty()) {
    std::fprintf(stderr, "round %u: warning: no silo's result arrived; q stays\n", round);
    return;
  }
  const Q q_s = server_.distribution();
  Eigen::VectorXd nu = engine::log_variance_params(q_s.mean(), engine::GaussianFamily<Q>::sd(q_s));
  // seed 001 Alg. 1 lines 8-10, Alg. 2 lines 6-8: a pseudo-gradient and the server's optimiser.
  const Eigen::VectorXd g =
      fedavg ? engine::fedavg_pseudo_gradient(nu, clients, sizes) : Eigen::VectorXd(nu - engine::fedvem_moment_match(clients));
  optimiser_->step(nu, g);
  Eigen::VectorXd mean, sd;
  engine::mean_sd_of(nu, mean, sd);
  if constexpr (std::is_same_v<Q, MeanFieldGaussian<double>>) {
    const Natural next = to_natural(Q::from_mean_sd(mean, sd));
    const std::string reason = Server::unusable(next);
    if (!reason.empty()) {
      std::fprintf(stderr, "round %u: warning: the server's step was not taken: %s\n", round, reason.c_str());
      ++rejected_;
      return;
    }
    server_.set_posterior(next);
  }
}

template <class Q>
void PviRounds<Q>::run_round(uint32_t round) {
  if (optimiser_) return aggregate_round(round);
  const int S = transport_.silos();
  const Eigen::Index d = server_.posterior().dim();
  // Applies silo k's change; one the server refuses (it would make q_s improper) is dropped with
  // a warning, and the silo keeps its previous factor.
  auto apply = [&](int k, const Message& up) {
    const Natural delta = natural_message<Natural>(up, d, "the PVI change");
    try {
      server_.apply(delta, k + 1);
      factors_[k] = natural_product(factors_[k], delta);
    } catch (const engine::ModelError& e) {
      std::fprintf(stderr, "round %u: warning: %s; silo %d keeps its previous factor\n", round, e.what(), k + 1);
      ++rejected_;
    }
  };
  // q_s and silo k's factor, as the silo needs them: [first update?, q_s, t_k].
  auto request = [&](int k) {
    return message::Writer().value(updated_[k] ? 0.0 : 1.0).natural(server_.posterior()).natural(factors_[k]).done();
  };
  Exchange x;
  x.round = round;
  x.phase = Phase::kPviUpdate;
  x.request = request;
  if (schedule_ == "sequential") {
    for (int k = 0; k < S; ++k) {
      x.silos = {k};
      x.reply = [&](int j, Message& up) {
        std::string reason = accept(j, up, round);
        if (reason.empty()) updated_[j] = 1, apply(j, up);
        return reason;
      };
      transport_.exchange(x);
    }
  } else if (schedule_ == "asynchronous") {
    x.reply = [&](int k, Message& up) {
      std::string reason = accept(k, up, round);
      if (reason.empty()) updated_[k] = 1, apply(k, up);
      return reason;
    };
    transport_.exchange(x);
  } else {
    x.silos = sampled(round);
    std::vector<Message> ups(S);
    x.reply = [&](int k, Message& up) {
      // seed 000 Eq. 5 with the server's damping: the change is linear in it.
      if (server_damping_)
        for (double& v : up) v *= damping_;
      std::string reason = accept(k, up, round);
      if (reason.empty()) ups[k] = std::move(up);
      return reason;
    };
    const std::vector<bool> arrived = transport_.exchange(x);
    for (int k = 0; k < S; ++k)  // in silo order: deterministic
      if (arrived[k]) updated_[k] = 1, apply(k, ups[k]);
  }
}

template <class Q>
double PviRounds<Q>::elbo(uint32_t round) {
  const int S = transport_.silos();
  std::vector<double> losses(S, 0.0);
  Exchange x;
  x.round = round;
  x.phase = Phase::kPviEvaluate;
  // With clients_per_round, the round's silos only: (S / m) times their sum estimates the whole
  // (and every silo's pass over its rows would cost S / m rounds' worth of work).
  const std::vector<int> asked = sampled(round);
  const bool sampling = int(asked.size()) < S;
  if (sampling) x.silos = asked;
  const Message q = natural_message(server_.posterior());
  x.request = [&](int) { return q; };
  x.reply = [&](int k, Message& reply) {
    std::string reason = check_reply(reply, 1);
    if (reason.empty()) losses[k] = reply[0];
    return reason;
  };
  const std::vector<bool> arrived = transport_.exchange(x);
  missing_terms_ = 0;
  // The weight-space KL to the written prior belongs to PVI's and FedAvg WSVI's objectives only:
  // FedAvg FSVI's silos carry their function-space KLs in its place (seed 001 Eq. 27), and FedVEM
  // has no prior on (mu, sigma^2) (Eq. 33), each silo's KL to N(mu, sigma^2) vanishing there.
  double objective = function_space_ || method_ == "fedvem" ? 0.0 : server_.kl_to_prior();
  silo_terms_.assign(S, std::numeric_limits<double>::quiet_NaN());
  const double scale = double(S) / double(asked.size());
  for (int k : asked) {
    if (arrived[k]) objective += scale * losses[k], silo_terms_[k] = -losses[k];
    else ++missing_terms_;
  }
  // The objective is evaluated at the same draws every round, so a fall is q's doing, not noise's
  // (or noise in the silos' updates, which damping also tames). A round with a silo missing is
  // not compared.
  // Rounds of different silos are not compared: their estimates differ by which silos they hold.
  if (server_damping_ && missing_terms_ == 0 && !sampling) {
    const double floor = 1.0 / double(S);
    if (std::isfinite(previous_objective_) && -objective < previous_objective_ && damping_ > floor) {
      damping_ = std::max(floor, damping_ / 2);
      std::printf("round %u: the objective fell; the server scales the silos' changes by %g from now on\n", round,
                  damping_);
    }
    previous_objective_ = -objective;
  }
  return -objective;
}

template <class Q>
Message PviRounds<Q>::state() const {
  message::Writer m;
  m.natural(server_.posterior());
  for (size_t k = 0; k < updated_.size(); ++k) {
    if (!factors_.empty()) m.natural(factors_[k]);
    m.value(updated_[k]);
  }
  if (optimiser_)
    for (double v : optimiser_->state()) m.value(v);
  return m.value(damping_).value(previous_objective_).done();
}

template <class Q>
void PviRounds<Q>::restore(const Message& m) {
  const Eigen::Index d = server_.posterior().dim();
  const size_t P = natural_size<Natural>(d);
  const size_t optimiser = optimiser_ ? optimiser_->state_size() : 0;
  const size_t per_silo = (factors_.empty() ? 0 : P) + 1;
  if (m.size() != P + updated_.size() * per_silo + optimiser + 2 || !(m[m.size() - 2] > 0 && m[m.size() - 2] <= 1))
    throw std::invalid_argument("the checkpoint does not match this model, method and number of silos");
  // The previous objective is NaN before the second round: not read through the finite check.
  previous_objective_ = m.back();
  const Message head(m.begin(), m.end() - 1);
  message::Reader in(head, "the checkpoint");
  server_.set_posterior(read_natural<Natural>(in, d, "q_s"));
  for (size_t k = 0; k < updated_.size(); ++k) {
    if (!factors_.empty()) factors_[k] = read_natural<Natural>(in, d, "a silo's factor");
    updated_[k] = in.value("updated") != 0;
  }
  if (optimiser_) {
    std::vector<double> state(optimiser);
    for (double& v : state) v = in.value("the server optimiser's state");
    optimiser_->restore(state);
  }
  damping_ = in.value("damping");
  in.finish();
}

template <class Q>
Message PviSiloEndpoint<Q>::handle(uint32_t round, Phase phase, const Message& request) {
  using Natural = typename Client::Natural;
  const Eigen::Index d = dim_;
  const size_t P = natural_size<Natural>(d);
  if (phase == Phase::kPviFinish) {  // no client needed
    const std::string bad = check_reply(request, P);
    if (!bad.empty()) throw std::invalid_argument("the server's final q has " + bad);
    final_ = natural_message<Natural>(request, d, "the server's final q");
    if (!engine::GaussianFamily<Q>::proper(*final_)) throw std::invalid_argument("the server's final q is not a proper Gaussian");
    return {};
  }
  if (phase == Phase::kPviSettled)  // no client needed
    return settled_.answer(request, [&](double tol_param) { return function_watch_.judge(tol_param); });
  if (phase != Phase::kPviEvaluate && phase != Phase::kPviLogJoint && phase != Phase::kPviUpdate)
    throw std::invalid_argument(std::string("a PVI silo cannot do ") + phase_name(phase));
  struct Release {  // after the answer, or when it throws
    const std::function<void(Phase)>& release;
    Phase phase;
    ~Release() {
      if (release) release(phase);
    }
  } release{release_, phase};
  return answer(acquire_(), round, phase, request);
}

template <class Q>
Message PviSiloEndpoint<Q>::answer(Client& client, uint32_t round, Phase phase, const Message& request) {
  using Natural = typename Client::Natural;
  const Eigen::Index d = dim_;
  const size_t P = natural_size<Natural>(d);
  if (phase == Phase::kPviEvaluate) {
    const std::string bad = check_reply(request, P);
    if (!bad.empty()) throw std::invalid_argument("the server's q_s has " + bad);
    const Natural q = natural_message<Natural>(request, d, "the server's q_s");
    const double loss = client.evaluate(q, round);
    Eigen::VectorXd mean, sd;
    if (client.function_moments(q, mean, sd)) function_watch_.observe(mean, sd);
    return {loss};
  }
  if (phase == Phase::kPviLogJoint) {
    const DrawsRequest r = check_draws_request(request, long(d));
    const Eigen::Map<const Eigen::MatrixXd> u(request.data(), r.rows, r.draws);
    const Eigen::VectorXd lp = client.log_likelihood(u);
    Message reply(lp.data(), lp.data() + lp.size());
    // Then its parts of the silo_sum quantities, row by row (closing messages of the plan).
    if (parts_) append_parts(parts_(u), reply);
    return reply;
  }
  const std::string bad = check_reply(request, message::pvi_update_request_size(P));
  if (!bad.empty()) throw std::invalid_argument("the server's request has " + bad);
  message::Reader in(request, "the server's request");
  client.set_first_update(in.value("first update?") != 0);
  const Natural q = read_natural<Natural>(in, d, "q_s");
  client.set_factor(read_natural<Natural>(in, d, "t_k"));
  in.finish();
  Message reply = natural_message(client.update(q, round).delta);
  // FedAvg weights each silo's result by its rows (seed 001 Alg. 1 line 9).
  if (client.options().aggregation == "fedavg") reply.push_back(double(client.observations()));
  return reply;
}

template <class Q>
void PviSiloEndpoint<Q>::report_settling(int silo) const {
  // The judged vector: each evaluation point's outputs in turn.
  VariableLayout f;
  f.name = "f";
  f.dims = {function_watch_.size()};
  settled_.report(silo, "function at its context points", {f});
}

template class PviRounds<MeanFieldGaussian<double>>;
template class PviRounds<FullRankGaussian<double>>;
template class PviSiloEndpoint<MeanFieldGaussian<double>>;
template class PviSiloEndpoint<FullRankGaussian<double>>;

}  // namespace fvi::program
