#include "fvi/program/pvi_rounds.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "fvi/program/quantities.h"

namespace fvi::program {

namespace {

// Values in a packed natural parameter of dimension d (engine::pack).
size_t packed_size(const DiagGaussianNatural<double>&, Eigen::Index d) { return size_t(2 * d); }
size_t packed_size(const GaussianNatural<double>&, Eigen::Index d) { return size_t(d + d * (d + 1) / 2); }

template <class Natural>
Natural unpacked(const double* begin, size_t count) {
  Natural eta;
  engine::unpack(std::vector<double>(begin, begin + count), eta);
  return eta;
}

}  // namespace

template <class Q>
PviRounds<Q>::PviRounds(Server& server, Transport& transport, std::string schedule, bool server_damping)
    : server_(server),
      transport_(transport),
      schedule_(std::move(schedule)),
      server_damping_(server_damping),
      previous_objective_(std::numeric_limits<double>::quiet_NaN()) {
  if (schedule_ != "synchronous" && schedule_ != "sequential" && schedule_ != "asynchronous")
    throw std::invalid_argument("schedule = " + schedule_ + " is not a PVI schedule");
  if (server_damping_ && schedule_ != "synchronous")
    throw std::invalid_argument("the server scales the silos' changes in the synchronous schedule only");
  factors_.assign(transport_.silos(), engine::GaussianFamily<Q>::zero(server_.posterior().dim()));
  updated_.assign(transport_.silos(), 0);
}

template <class Q>
std::string PviRounds<Q>::accept(int k, Message& reply, uint32_t round) {
  const Eigen::Index d = server_.posterior().dim();
  const size_t P = packed_size(Natural{}, d);
  std::string reason = check_reply(reply, P);
  // A change that would make q_s improper or unusable (engine::PviServer::unusable) is refused at
  // once; in the synchronous schedule q_s has not moved since it was sent, and the changes that
  // pass are checked again together as they are applied (run_round).
  if (reason.empty())
    reason = Server::unusable(natural_product(server_.posterior(), unpacked<Natural>(reply.data(), P)));
  if (!reason.empty()) {
    std::fprintf(stderr, "round %u: refused the change from silo %d: %s\n", round, k + 1, reason.c_str());
    ++rejected_;
  }
  return reason;
}

template <class Q>
void PviRounds<Q>::run_round(uint32_t round) {
  const int S = transport_.silos();
  const Eigen::Index d = server_.posterior().dim();
  const size_t P = packed_size(Natural{}, d);
  // Applies silo k's change; one the server refuses (it would make q_s improper) is dropped with
  // a warning, and the silo keeps its previous factor.
  auto apply = [&](int k, const Message& up) {
    const Natural delta = unpacked<Natural>(up.data(), P);
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
    Message m{updated_[k] ? 0.0 : 1.0};
    const Message q = engine::pack(server_.posterior()), t = engine::pack(factors_[k]);
    m.insert(m.end(), q.begin(), q.end());
    m.insert(m.end(), t.begin(), t.end());
    return m;
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
  const Message q = engine::pack(server_.posterior());
  x.request = [&](int) { return q; };
  x.reply = [&](int k, Message& reply) {
    std::string reason = check_reply(reply, 1);
    if (reason.empty()) losses[k] = reply[0];
    return reason;
  };
  const std::vector<bool> arrived = transport_.exchange(x);
  missing_terms_ = 0;
  double objective = server_.kl_to_prior();
  for (int k = 0; k < S; ++k) {
    if (arrived[k]) objective += losses[k];
    else ++missing_terms_;
  }
  // The objective is evaluated at the same draws every round, so a fall is q's doing, not noise's
  // (or noise in the silos' updates, which damping also tames). A round with a silo missing is
  // not compared.
  if (server_damping_ && missing_terms_ == 0) {
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
  Message m = engine::pack(server_.posterior());
  for (size_t k = 0; k < factors_.size(); ++k) {
    const Message t = engine::pack(factors_[k]);
    m.insert(m.end(), t.begin(), t.end());
    m.push_back(updated_[k]);
  }
  m.push_back(damping_);
  m.push_back(previous_objective_);
  return m;
}

template <class Q>
void PviRounds<Q>::restore(const Message& m) {
  const size_t P = packed_size(Natural{}, server_.posterior().dim());
  if (m.size() != P + factors_.size() * (P + 1) + 2 || !(m[m.size() - 2] > 0 && m[m.size() - 2] <= 1))
    throw std::invalid_argument("the checkpoint does not match this model and number of silos");
  damping_ = m[m.size() - 2];
  previous_objective_ = m.back();
  server_.set_posterior(unpacked<Natural>(m.data(), P));
  for (size_t k = 0; k < factors_.size(); ++k) {
    const double* at = m.data() + P + k * (P + 1);
    factors_[k] = unpacked<Natural>(at, P);
    updated_[k] = at[P] != 0;
  }
}

template <class Q>
Message PviSiloEndpoint<Q>::handle(uint32_t round, Phase phase, const Message& request) {
  using Natural = typename Client::Natural;
  const Eigen::Index d = client_.dim();
  const size_t P = packed_size(Natural{}, d);
  if (phase == Phase::kPviEvaluate) {
    const std::string bad = check_reply(request, P);
    if (!bad.empty()) throw std::invalid_argument("the server's q_s has " + bad);
    return {client_.evaluate(unpacked<Natural>(request.data(), P), round)};
  }
  if (phase == Phase::kPviFinish) {
    const std::string bad = check_reply(request, P);
    if (!bad.empty()) throw std::invalid_argument("the server's final q has " + bad);
    final_ = unpacked<Natural>(request.data(), P);
    if (!engine::GaussianFamily<Q>::proper(*final_)) throw std::invalid_argument("the server's final q is not a proper Gaussian");
    return {};
  }
  if (phase == Phase::kPviLogJoint) {
    const DrawsRequest r = check_draws_request(request, long(d));
    const Eigen::Map<const Eigen::MatrixXd> u(request.data(), r.rows, r.draws);
    const Eigen::VectorXd lp = client_.log_likelihood(u);
    Message reply(lp.data(), lp.data() + lp.size());
    // Then its parts of the silo_sum quantities, row by row (closing messages of the plan).
    if (parts_) append_parts(parts_(u), reply);
    return reply;
  }
  if (phase != Phase::kPviUpdate) throw std::invalid_argument(std::string("a PVI silo cannot do ") + phase_name(phase));
  const std::string bad = check_reply(request, 1 + 2 * P);
  if (!bad.empty()) throw std::invalid_argument("the server's request has " + bad);
  client_.set_first_update(request[0] != 0);
  client_.set_factor(unpacked<Natural>(request.data() + 1 + P, P));
  return engine::pack(client_.update(unpacked<Natural>(request.data() + 1, P), round).delta);
}

template class PviRounds<MeanFieldGaussian<double>>;
template class PviRounds<FullRankGaussian<double>>;
template class PviSiloEndpoint<MeanFieldGaussian<double>>;
template class PviSiloEndpoint<FullRankGaussian<double>>;

}  // namespace fvi::program
