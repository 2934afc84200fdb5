#include "fvi/net/server_transport.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "fvi/net/protocol.h"

namespace fvi::net {

namespace {

using Clock = std::chrono::steady_clock;

// How long NextTask holds a request open waiting for work before answering WAIT.
constexpr std::chrono::seconds kLongPoll{5};

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string where(uint32_t round, uint32_t phase) {
  // A peer's phase number may be any uint32: named only when it is one.
  return "round " + std::to_string(round) + " (" +
         (program::known_phase(phase) ? program::phase_name(program::Phase(phase)) : "phase " + std::to_string(phase)) +
         ")";
}

}  // namespace

ServerTransport::ServerTransport(ServerPolicy policy) : policy_(std::move(policy)) {
  if (policy_.quorum <= 0 || policy_.quorum > policy_.silos) policy_.quorum = policy_.silos;
  silo_.resize(policy_.silos);
  traffic_.resize(policy_.silos);
  std::random_device device;
  sequence_ = (uint64_t(device()) << 32) ^ device();
  timer_ = std::thread([this] { timer_loop(); });
}

ServerTransport::~ServerTransport() {
  Due due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& [id, poll] : polls_) due.emplace_back(std::move(poll.answer), fvi::v1::Task());
    polls_.clear();
  }
  timer_wake_.notify_all();
  timer_.join();
  for (auto& [answer, task] : due) answer(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping"), task);
}

void ServerTransport::log(const std::string& line) {
  std::fprintf(stderr, "server: %s\n", line.c_str());
  std::fflush(stderr);
  if (log_sink_) log_sink_(line);
}

void ServerTransport::log_refusal(const std::string& line) {
  std::unique_lock<std::mutex> lock(log_mutex_);
  const auto now = Clock::now();
  const std::string summary = now - window_start_ >= kRefusalWindow ? unlogged_summary() : "";
  if (now - window_start_ >= kRefusalWindow) window_start_ = now, logged_in_window_ = 0;
  const bool shown = logged_in_window_ < kRefusalLines;
  if (shown)
    ++logged_in_window_;
  else
    ++unlogged_;
  lock.unlock();
  if (!summary.empty()) log(summary);
  if (shown) log(line);
}

std::string ServerTransport::unlogged_summary() {
  if (unlogged_ == 0) return "";
  const std::string line = std::to_string(unlogged_) + " more refusals were not logged (at most " +
                           std::to_string(kRefusalLines) + " lines every " +
                           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kRefusalWindow).count()) +
                           " s)";
  unlogged_ = 0;
  return line;
}

long ServerTransport::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

std::vector<std::string> ServerTransport::silo_descriptions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const Silo& s : silo_) out.push_back(s.joined ? s.description : std::string());
  return out;
}

namespace {

// A peer's string as it may appear in the log: at most `limit` bytes, every byte outside printable
// ASCII as \xNN, so that a name cannot forge a log line, reach the terminal as an escape
// sequence, or write megabytes per call (issue 27 item 4).
std::string loggable(const std::string& peer_text, size_t limit = 64) {
  std::string out;
  for (size_t i = 0; i < peer_text.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(peer_text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (peer_text.size() > limit) out += "... (" + std::to_string(peer_text.size()) + " bytes)";
  return out;
}

}  // namespace

grpc::Status ServerTransport::authenticate(const Peer& who_called, const fvi::v1::Credentials& who, int& k) {
  const std::string peer = loggable(who_called.address, 128);
  auto refuse = [&](grpc::StatusCode code, const std::string& reason) {
    log_refusal("refused " + peer + " (silo " + std::to_string(who.silo()) + "): " + reason);
    std::lock_guard<std::mutex> lock(mutex_);
    ++refused_;
    return grpc::Status(code, reason);
  };
  if (who.protocol() != kProtocolVersion)
    return refuse(grpc::StatusCode::FAILED_PRECONDITION, "protocol version " + std::to_string(who.protocol()) +
                                                             "; this server speaks version " +
                                                             std::to_string(kProtocolVersion));
  // The silo number is compared as the uint32 it is: converted to int first, 2^32 - 1 was -1 and
  // passed, and the server wrote outside its silo table (issue 27 item 1).
  if (who.silo() < 1 || who.silo() > uint32_t(policy_.silos))
    return refuse(grpc::StatusCode::PERMISSION_DENIED, "there is no silo " + std::to_string(who.silo()) +
                                                           " in this run (silos 1.." + std::to_string(policy_.silos) +
                                                           ")");
  // Credentials before anything the peer wrote is read further (its model name).
  if (!policy_.tokens.empty()) {
    const auto it = policy_.tokens.find(int(who.silo()));
    if (it == policy_.tokens.end() || !same_secret(it->second, who.token()))
      return refuse(grpc::StatusCode::UNAUTHENTICATED, "wrong token for silo " + std::to_string(who.silo()));
  }
  if (policy_.client_certificates) {
    const std::string expected = "silo-" + std::to_string(who.silo());
    if (std::find(who_called.common_names.begin(), who_called.common_names.end(), expected) ==
        who_called.common_names.end())
      return refuse(grpc::StatusCode::UNAUTHENTICATED, "the client certificate is not the one of " + expected);
  }
  if (who.model() != policy_.model || who.fingerprint() != policy_.fingerprint)
    return refuse(grpc::StatusCode::FAILED_PRECONDITION,
                  "this server runs model " + policy_.model + " built from other kernels than the client's " +
                      loggable(who.model()) + "; build both programs from the same .fvi file");
  k = int(who.silo()) - 1;
  return grpc::Status::OK;
}

grpc::Status ServerTransport::join(const Peer& peer, const fvi::v1::JoinRequest& request, fvi::v1::JoinReply& reply) {
  int k = 0;
  const grpc::Status status = authenticate(peer, request.who(), k);
  if (!status.ok()) return status;
  if (request.ready()) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool again = silo_[k].joined;
    silo_[k].joined = true;
    silo_[k].description = loggable(request.description(), 200);
    if (!policy_.quiet) log(std::string(again ? "silo rejoined: " : "silo joined: ") + silo_[k].description);
  }
  changed_.notify_all();
  reply.set_silos(uint32_t(policy_.silos));
  reply.set_method(policy_.method);
  reply.set_model_source(policy_.model_source);
  reply.set_model_sha256(policy_.model_sha256);
  for (const auto& [key, value] : policy_.settings) {
    auto* s = reply.add_settings();
    s->set_key(key);
    s->set_value(value);
  }
  return grpc::Status::OK;
}

bool ServerTransport::task_for(int k, fvi::v1::Task& task) {
  if (done_) {
    task.set_status(fvi::v1::Task::DONE);
    silo_[k].heard_done = true;
    return true;
  }
  Silo& s = silo_[k];
  if (!current_ || !s.asked || s.answered) return false;
  if (!s.has_request) {  // built once per exchange: a silo that asks again gets the same request
    s.request = current_->request(k);
    s.has_request = true;
    traffic_[k].sent += 8LL * (long long)s.request.size();
  }
  task.set_status(fvi::v1::Task::WORK);
  task.set_exchange(sequence_);
  task.set_round(current_->round);
  task.set_phase(uint32_t(current_->phase));
  *task.mutable_values() = {s.request.begin(), s.request.end()};
  return true;
}

uint64_t ServerTransport::next_task(const Peer& peer, const fvi::v1::TaskRequest& request, Clock::time_point deadline,
                                    PollAnswer answer) {
  fvi::v1::Task task;
  int k = 0;
  const grpc::Status status = authenticate(peer, request.who(), k);
  if (!status.ok()) {
    answer(status, task);
    return 0;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!silo_[k].joined) {
    // A silo that polls without joining again (its server was restarted with --resume) counts as
    // joined: wake whoever waits for the silos to arrive.
    silo_[k].joined = true;
    silo_[k].description = "silo " + std::to_string(k + 1) + " (reconnected)";
    if (!policy_.quiet) log("silo reconnected: " + silo_[k].description);
    changed_.notify_all();
  }
  if (task_for(k, task) || stopping_) {
    const bool heard_done = task.status() == fvi::v1::Task::DONE, stopping = stopping_;
    lock.unlock();
    if (heard_done) changed_.notify_all();
    answer(stopping ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping") : grpc::Status::OK, task);
    return 0;
  }
  if (silo_[k].polls >= kPollsPerSilo) {
    ++refused_;
    lock.unlock();
    answer(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "silo " + std::to_string(k + 1) + " has " + std::to_string(kPollsPerSilo) +
                            " calls waiting for work already"),
           task);
    return 0;
  }
  // Hold the call until there is work (or the run is over), at most kLongPoll and never past the
  // client's own deadline.
  const uint64_t id = next_poll_id_++;
  ++silo_[k].polls;
  polls_[id] = Poll{k, std::min(Clock::now() + kLongPoll, deadline - std::chrono::milliseconds(200)),
                    std::move(answer)};
  lock.unlock();
  timer_wake_.notify_all();
  return id;
}

bool ServerTransport::cancel_poll(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = polls_.find(id);
  if (it == polls_.end()) return false;
  --silo_[it->second.silo].polls;
  polls_.erase(it);
  return true;
}

ServerTransport::Due ServerTransport::take_due(Clock::time_point now) {
  Due due;
  for (auto it = polls_.begin(); it != polls_.end();) {
    fvi::v1::Task task;
    const bool ready = task_for(it->second.silo, task);
    if (!ready && now < it->second.until) {
      ++it;
      continue;
    }
    if (!ready) task.set_status(fvi::v1::Task::WAIT);
    --silo_[it->second.silo].polls;
    due.emplace_back(std::move(it->second.answer), std::move(task));
    it = polls_.erase(it);
  }
  return due;
}

void ServerTransport::deliver(Due& due) {
  for (auto& [answer, task] : due) answer(grpc::Status::OK, task);
  due.clear();
}

void ServerTransport::timer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    auto wake = Clock::now() + kLongPoll;
    for (const auto& [id, poll] : polls_) wake = std::min(wake, poll.until);
    timer_wake_.wait_until(lock, wake);
    if (stopping_) break;
    Due due = take_due(Clock::now());
    if (due.empty()) continue;
    lock.unlock();
    deliver(due);
    changed_.notify_all();  // a DONE delivered: finish() counts who heard it
    lock.lock();
  }
}

grpc::Status ServerTransport::open_reply(const Peer& peer, const fvi::v1::Result& first, int& k) {
  grpc::Status status = authenticate(peer, first.who(), k);
  if (!status.ok()) return status;
  std::lock_guard<std::mutex> lock(mutex_);
  auto refuse = [&](grpc::StatusCode code, const std::string& reason) {
    ++refused_;
    ++traffic_[size_t(k)].refused;
    log_refusal("refused a reply from silo " + std::to_string(k + 1) + " (" + loggable(peer.address, 128) + "): " +
                reason);
    return grpc::Status(code, reason);
  };
  if (first.count() > policy_.max_reply_values)
    return refuse(grpc::StatusCode::RESOURCE_EXHAUSTED,
                  "a reply of " + std::to_string(first.count()) + " values is larger than this server takes (" +
                      std::to_string(policy_.max_reply_values) + ", --max-message)");
  if (uint64_t(first.values_size()) > first.count())
    return refuse(grpc::StatusCode::INVALID_ARGUMENT, "the first part holds more values than the reply declares");
  if (silo_[k].replies >= kRepliesPerSilo)
    return refuse(grpc::StatusCode::RESOURCE_EXHAUSTED,
                  "silo " + std::to_string(k + 1) + " is sending " + std::to_string(kRepliesPerSilo) +
                      " replies already");
  ++silo_[k].replies;
  return grpc::Status::OK;
}

void ServerTransport::close_reply(int k) {
  std::lock_guard<std::mutex> lock(mutex_);
  --silo_[k].replies;
}

grpc::Status ServerTransport::take_reply(const Peer& peer, int k, const fvi::v1::Result& result, fvi::v1::Ack& ack) {
  std::unique_lock<std::mutex> lock(mutex_);
  Silo& s = silo_[k];
  auto refuse = [&](const std::string& reason) {
    ++refused_;
    ++traffic_[size_t(k)].refused;
    ack.set_accepted(false);
    ack.set_reason(reason);
    // A silo that keeps sending replies the server refuses (a bug, or a hostile peer) does not
    // hold the exchange up, nor fill the log: past kRefusalsPerExchange it is gone for this one.
    const bool counted = current_ && s.asked && !s.answered && ++s.refusals >= kRefusalsPerExchange;
    if (counted) s.answered = true;
    lock.unlock();
    if (counted) changed_.notify_all();
    log_refusal("refused a reply from silo " + std::to_string(k + 1) + " (" + loggable(peer.address, 128) + ") for " +
                where(result.round(), result.phase()) + ": " + reason +
        (counted ? "; " + std::to_string(kRefusalsPerExchange) + " refused: going on without this silo" : ""));
    return grpc::Status::OK;
  };
  if (!current_ || result.exchange() != sequence_ || result.round() != current_->round ||
      result.phase() != uint32_t(current_->phase))
    return refuse(current_ ? "stale: the server is at " + where(current_->round, uint32_t(current_->phase))
                           : "stale: the server is not waiting for any reply");
  if (!s.asked) return refuse("silo " + std::to_string(k + 1) + " was not asked in this exchange");
  if (s.answered) return refuse("silo " + std::to_string(k + 1) + " has answered this exchange already");
  if (!result.error().empty()) {
    s.answered = true;
    ack.set_accepted(false);
    ack.set_reason("recorded: the round goes on without this silo");
    lock.unlock();
    changed_.notify_all();
    log("silo " + std::to_string(k + 1) + " could not do " + where(result.round(), result.phase()) + ": " +
        loggable(result.error(), 500));
    return grpc::Status::OK;
  }
  program::Message reply(result.values().begin(), result.values().end());
  traffic_[k].received += 8LL * (long long)reply.size();
  std::string reason;
  try {
    reason = current_->reply(k, reply);
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (!reason.empty()) return refuse(reason);
  s.answered = s.accepted = true;
  ack.set_accepted(true);
  lock.unlock();
  changed_.notify_all();
  return grpc::Status::OK;
}

std::vector<bool> ServerTransport::run_exchange(const program::Exchange& x) {
  publish(x);
  std::unique_lock<std::mutex> lock(mutex_);
  // After the deadline an exchange of every silo proceeds with a quorum; one that asked only
  // some silos (PVI's sequential schedule) proceeds without the missing ones.
  const int needed = x.silos.empty() ? policy_.quorum : 0;
  const auto deadline = after(policy_.deadline), give_up = after(std::max(policy_.deadline, policy_.give_up));
  for (;;) {
    int pending = 0, accepted = 0, asked = 0;
    for (const Silo& s : silo_) pending += s.asked && !s.answered, accepted += s.accepted, asked += s.asked;
    if (pending == 0) break;
    const auto now = Clock::now();
    if (now >= deadline && accepted >= needed) break;
    if (now >= give_up) {
      current_ = nullptr;
      throw QuorumLost(where(x.round, uint32_t(x.phase)) + ": " + std::to_string(accepted) + " of " +
                       std::to_string(asked) + " silos answered within " + std::to_string(int(policy_.give_up)) +
                       " s, and the quorum is " + std::to_string(needed));
    }
    changed_.wait_until(lock, now < deadline ? deadline : give_up);
  }
  lock.unlock();
  return collect(x);
}

void ServerTransport::publish(const program::Exchange& x) {
  std::unique_lock<std::mutex> lock(mutex_);
  current_ = &x;
  ++sequence_;
  for (int k = 0; k < policy_.silos; ++k) {
    Silo& s = silo_[k];
    s.asked = x.silos.empty() || std::find(x.silos.begin(), x.silos.end(), k) != x.silos.end();
    s.answered = s.accepted = s.has_request = false;
    s.refusals = 0;
    s.request.clear();
  }
  // The silos waiting for work get it now.
  Due due = take_due(Clock::now());
  lock.unlock();
  deliver(due);
}

std::vector<bool> ServerTransport::collect(const program::Exchange& x) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<bool> accepted(policy_.silos, false);
  std::string missing;
  int valid = 0, asked = 0;
  for (int k = 0; k < policy_.silos; ++k) {
    accepted[k] = silo_[k].accepted;
    valid += accepted[k];
    asked += silo_[k].asked;
    if (silo_[k].asked && !silo_[k].accepted) missing += " " + std::to_string(k + 1);
  }
  current_ = nullptr;
  // Not one valid reply (each silo failed, or sent what was refused) in an exchange of every
  // silo, or in as many one-silo exchanges in a row: the run would go on with nothing and end as
  // if it had worked (issue 27 item 7).
  empty_exchanges_ = valid > 0 ? 0 : empty_exchanges_ + asked;
  const bool hopeless = empty_exchanges_ >= policy_.silos;
  lock.unlock();
  if (hopeless)
    throw QuorumLost(where(x.round, uint32_t(x.phase)) + ": no silo gave a valid reply (see the refusals above)");
  if (!missing.empty()) log(where(x.round, uint32_t(x.phase)) + ": going on without silo(s)" + missing);
  return accepted;
}

std::vector<std::string> ServerTransport::wait_for_silos(double timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto until = after(timeout);
  auto joined = [&] {
    int n = 0;
    for (const Silo& s : silo_) n += s.joined;
    return n;
  };
  changed_.wait_until(lock, until, [&] { return joined() == policy_.silos; });
  if (joined() < policy_.quorum)
    throw QuorumLost(std::to_string(joined()) + " of " + std::to_string(policy_.silos) + " silos joined within " +
                     std::to_string(int(timeout)) + " s; the quorum is " + std::to_string(policy_.quorum));
  std::vector<std::string> lines;
  for (int k = 0; k < policy_.silos; ++k)
    lines.push_back(silo_[k].joined ? silo_[k].description : "silo " + std::to_string(k + 1) + ": not joined yet");
  return lines;
}

void ServerTransport::finish(double grace) {
  {
    std::lock_guard<std::mutex> lock(log_mutex_);
    const std::string summary = unlogged_summary();
    if (!summary.empty()) log(summary);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_ = true;
  Due due = take_due(Clock::now());
  lock.unlock();
  deliver(due);
  lock.lock();
  changed_.wait_until(lock, after(grace), [&] {
    for (const Silo& s : silo_)
      if (s.joined && !s.heard_done) return false;
    return true;
  });
}

}  // namespace fvi::net
