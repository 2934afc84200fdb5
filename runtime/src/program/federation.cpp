#include "fvi/program/federation.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "fvi/data/dataset.h"
#include "fvi/engine/bound_factor.h"
#include "fvi/program/parallel.h"

namespace fvi::program {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kPviUpdate: return "pvi update";
    case Phase::kPviEvaluate: return "pvi evaluate";
    case Phase::kPviLogJoint: return "pvi log joint";
    case Phase::kPviFinish: return "pvi finish";
    case Phase::kPviSettled: return "pvi settled";
    case Phase::kSfviContribute: return "sfvi contribute";
    case Phase::kSfviFitLocally: return "sfvi local fit";
    case Phase::kSfviEvaluate: return "sfvi evaluate";
    case Phase::kSfviFinish: return "sfvi finish";
    case Phase::kSfviSizes: return "sfvi sizes";
    case Phase::kSfviLogJoint: return "sfvi log joint";
    case Phase::kSfviSettled: return "sfvi settled";
    case Phase::kSfviCentring: return "sfvi centring";
    case Phase::kSfviMode: return "sfvi mode";
    case Phase::kSfviModeLocals: return "sfvi mode locals";
    case Phase::kVflPropose: return "vfl propose";
    case Phase::kVflPower: return "vfl power";
    case Phase::kVflUpdate: return "vfl update";
    case Phase::kVflFinish: return "vfl finish";
    case Phase::kVflPredict: return "vfl predict";
    case Phase::kVflLogJoint: return "vfl log joint";
    case Phase::kVflLayout: return "vfl layout";
    case Phase::kVflSettled: return "vfl settled";
    case Phase::kVflScale: return "vfl scale";
    case Phase::kVflTailDraws: return "vfl tail draws";
    case Phase::kVflTailMoments: return "vfl tail moments";
    case Phase::kSfviLocalWeights: return "sfvi local weights";
    case Phase::kSgpUpdate: return "sparse gp update";
    case Phase::kSgpEvaluate: return "sparse gp evaluate";
  }
  return "unknown";
}

DrawsRequest check_draws_request(const Message& request, long rows) {
  if (rows <= 0 || request.empty() || request.size() % size_t(rows) != 0 ||
      long(request.size() / size_t(rows)) > kMaxRequestDraws)
    throw std::invalid_argument("a request of draws of " + std::to_string(rows) + " parameters with " +
                                std::to_string(request.size()) + " values");
  for (double v : request)
    if (!std::isfinite(v)) throw std::invalid_argument("a request of draws with a non-finite value");
  return {rows, long(request.size() / size_t(rows))};
}

KeyedDraws read_keyed_draws(const Message& request, const char* what) {
  constexpr double kExactInDouble = 9007199254740992.0;  // 2^53
  const auto count = [](double x, double top) { return x >= 0 && x < top && x == std::floor(x); };
  if (request.size() < 2 || !count(request[0], kExactInDouble) || !count(request[1], double(kMaxRequestDraws) + 1) ||
      request[1] < 1)
    throw std::invalid_argument(std::string(what) + "'s key and draws are not two counts (draws from 1 to " +
                                std::to_string(kMaxRequestDraws) + ")");
  return {uint64_t(request[0]), long(request[1])};
}

bool ask_every_silo(Transport& transport, uint32_t round, Phase phase, const Message& request, size_t reply_size,
                    std::vector<Message>& replies) {
  replies.assign(size_t(transport.silos()), Message{});
  Exchange x;
  x.round = round;
  x.phase = phase;
  x.request = [&](int) { return request; };
  x.reply = [&](int k, Message& m) {
    std::string reason = check_reply(m, reply_size);
    if (reason.empty()) replies[size_t(k)] = std::move(m);
    return reason;
  };
  const std::vector<bool> arrived = transport.exchange(x);
  return std::all_of(arrived.begin(), arrived.end(), [](bool a) { return a; });
}

bool known_phase(uint32_t phase) { return std::string(phase_name(Phase(phase))) != "unknown"; }

long long Transport::total_sent() const {
  long long total = 0;
  for (const auto& t : traffic_) total += t.sent;
  return total;
}

long long Transport::total_received() const {
  long long total = 0;
  for (const auto& t : traffic_) total += t.received;
  return total;
}

std::vector<bool> Transport::exchange(const Exchange& x) {
  std::vector<bool> accepted = run_exchange(x);
  if (x.counted)
    for (int k = 0; k < silos(); ++k) {
      if (!x.silos.empty() && std::find(x.silos.begin(), x.silos.end(), k) == x.silos.end()) continue;
      if (!accepted[k]) ++missing_;
      if (size_t(k) >= traffic_.size()) continue;
      SiloTraffic& t = traffic_[size_t(k)];
      ++(accepted[k] ? t.accepted : t.missing);
    }
  return accepted;
}

std::vector<double> Transport::traffic_counts() const {
  std::vector<double> counts;
  for (const auto& t : traffic_) counts.insert(counts.end(), {double(t.sent), double(t.received)});
  return counts;
}

void Transport::restore_traffic(const std::vector<double>& counts) {
  if (counts.empty()) return;  // a checkpoint without counters: start from zero
  if (counts.size() != 2 * traffic_.size())
    throw std::runtime_error("the checkpoint's byte counters are for " + std::to_string(counts.size() / 2) +
                             " silos, not " + std::to_string(traffic_.size()));
  for (size_t k = 0; k < traffic_.size(); ++k)
    traffic_[k] = {(long long)counts[2 * k], (long long)counts[2 * k + 1], 0, 0};
}

std::string check_reply(const Message& reply, size_t expected_size) {
  if (reply.size() != expected_size)
    return std::to_string(reply.size()) + " values where " + std::to_string(expected_size) + " were expected";
  for (size_t i = 0; i < reply.size(); ++i)
    if (!std::isfinite(reply[i])) return "value " + std::to_string(i) + " is not finite";
  return "";
}

void rethrow_naming_silo(int silo) {
  const std::string where = "silo " + std::to_string(silo) + ": ";
  try {
    throw;
  } catch (const std::exception& e) {
    if (std::string(e.what()).rfind(where, 0) == 0) throw;  // named already
    if (dynamic_cast<const engine::ModelError*>(&e)) throw engine::ModelError(where + e.what());
    if (dynamic_cast<const data::DataError*>(&e)) throw data::DataError(where + e.what());
    if (dynamic_cast<const std::invalid_argument*>(&e)) throw std::invalid_argument(where + e.what());
    throw std::runtime_error(where + e.what());
  }
}

InProcessTransport::InProcessTransport(std::vector<SiloEndpoint*> endpoints) : endpoints_(std::move(endpoints)) {
  traffic_.resize(endpoints_.size());
}

std::vector<bool> InProcessTransport::run_exchange(const Exchange& x) {
  std::vector<int> silos = x.silos;
  if (silos.empty())
    for (int k = 0; k < int(endpoints_.size()); ++k) silos.push_back(k);
  std::vector<bool> accepted(endpoints_.size(), false);
  std::mutex lock;
  auto one = [&](int i) {
    const int k = silos[i];
    Message request;
    {
      std::lock_guard<std::mutex> guard(lock);
      request = x.request(k);
      if (x.counted) traffic_[k].sent += 8LL * (long long)request.size();
    }
    Message reply;
    try {
      reply = endpoints_[k]->handle(x.round, x.phase, request);
    } catch (const std::exception&) {
      rethrow_naming_silo(k + 1);
    }
    std::lock_guard<std::mutex> guard(lock);
    if (x.counted) traffic_[k].received += 8LL * (long long)reply.size();
    accepted[k] = x.reply(k, reply).empty();
    if (!accepted[k]) ++traffic_[k].refused;
  };
  if (parallel_) {
    for_each_silo_in_parallel(int(silos.size()), one);
  } else {
    for (int i = 0; i < int(silos.size()); ++i) one(i);
  }
  return accepted;
}

}  // namespace fvi::program
