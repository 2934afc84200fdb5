#pragma once
// The server's end of the wire: a Transport whose silos are remote NAME-client processes. An
// exchange is published; each silo fetches its request with NextTask and answers with Submit;
// the exchange ends when every silo asked has answered, or at the deadline once a quorum has
// (docs/deployment.md, "Dropouts"). Every reply is checked (credentials, exchange, round, phase,
// size, finiteness, then the coordinator's own check) before it is used; a refused one is logged
// with the sender and the reason, and the silo may still send a good one before the deadline.
//
// This class is the protocol's state, with no gRPC plumbing: server_service.h adapts gRPC's
// callback API to it, and the server-message fuzz target calls it directly. No call blocks a
// thread: a NextTask with nothing to do is parked and answered later, by whichever thread
// publishes work or by the one timer thread, so the server's threads do not grow with the silos
// or with their calls (issue 27 item 6).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/support/status.h>

#include "fvi/program/federation.h"
#include "fvi/v1/federation.pb.h"

namespace fvi::net {

struct ServerPolicy {
  int silos = 1;
  int quorum = 0;              // replies an exchange needs after its deadline (0: every silo)
  double deadline = 60;        // seconds an exchange waits for every silo
  double give_up = 600;        // seconds after which an exchange without its quorum stops the run
  std::map<int, std::string> tokens;  // silo -> token (empty: no tokens)
  bool client_certificates = false;   // mutual TLS: silo K presents a certificate for "silo-K"
  std::string model;
  uint64_t fingerprint = 0;
  std::string model_source, model_sha256;  // sent to every silo at Join ("" when the program has no text)
  std::string method;
  std::vector<std::pair<std::string, std::string>> settings;  // sent to every silo at Join
  size_t max_reply_values = size_t(256) << 17;  // the largest reply a silo may send (--max-message)
  bool quiet = false;
};

// The run cannot go on: an exchange lost its quorum past the give-up time, or no silo gave a
// valid reply to a round (the state of the last complete round is in the checkpoint).
class QuorumLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Who called, as the transport knows it: the address (for the log) and the common names of a
// verified client certificate.
struct Peer {
  std::string address;
  std::vector<std::string> common_names;
};

// How many NextTask calls of one silo may wait at once, how many replies of one silo may be
// arriving at once, and how many refused replies of one silo an exchange takes before it goes
// on without that silo. An honest client uses one of each.
constexpr int kPollsPerSilo = 4;
constexpr int kRepliesPerSilo = 2;
constexpr int kRefusalsPerExchange = 5;

class ServerTransport final : public program::Transport {
 public:
  using Clock = std::chrono::steady_clock;
  // Answers a parked NextTask (called once, with no lock held).
  using PollAnswer = std::function<void(const grpc::Status&, const fvi::v1::Task&)>;

  explicit ServerTransport(ServerPolicy policy);
  ~ServerTransport() override;  // answers every parked call (UNAVAILABLE) and stops the timer

  int silos() const override { return policy_.silos; }

  // Waits until every silo has joined, or until `timeout` seconds have passed with a quorum
  // joined (throws QuorumLost otherwise). Returns each silo's description line.
  std::vector<std::string> wait_for_silos(double timeout);
  // The run is over: NextTask answers DONE from now on. Waits at most `grace` seconds for every
  // silo that joined to hear it.
  void finish(double grace);
  long refused() const;
  // Each silo's description once it has joined, "" before (for the status page; thread-safe).
  std::vector<std::string> silo_descriptions() const;
  // Also hands every line the server logs (joins, rejoins, refusals, exchanges gone on without a
  // silo) to `sink`, from whichever thread logs it. Set before the silos can call.
  void set_log_sink(std::function<void(const std::string&)> sink) { log_sink_ = std::move(sink); }

  // The protocol's calls (federation.proto). Each authenticates first: the silo number in its
  // own type, the token or certificate, then the model.
  grpc::Status join(const Peer& peer, const fvi::v1::JoinRequest& request, fvi::v1::JoinReply& reply);
  // NextTask: answers at once (calls `answer` before it returns) when there is work, when the run
  // is over, or when the call is refused; otherwise parks the call until there is work for this
  // silo, or until the long-poll time (never past `deadline`) passes, and then answers WAIT.
  // Returns an id for cancel_poll.
  uint64_t next_task(const Peer& peer, const fvi::v1::TaskRequest& request, Clock::time_point deadline,
                     PollAnswer answer);
  // The caller went away: true if its call was still parked (it is forgotten, and `answer` is
  // never called); false if it has been answered or is being answered.
  bool cancel_poll(uint64_t id);
  // Submit, in two steps: the first part of a reply is checked (credentials, its declared
  // size) before any more of it is read; on success `silo` is set and the silo holds one of its
  // kRepliesPerSilo slots until close_reply. Then the whole reply is judged.
  grpc::Status open_reply(const Peer& peer, const fvi::v1::Result& first, int& silo);
  grpc::Status take_reply(const Peer& peer, int silo, const fvi::v1::Result& whole, fvi::v1::Ack& ack);
  void close_reply(int silo);

  // run_exchange's two ends, without the wait between them (the server-message fuzz target
  // drives an exchange with them): publish makes `exchange` current and hands the waiting silos
  // their work; collect ends it and says whose replies were accepted (QuorumLost when none was).
  void publish(const program::Exchange& exchange);
  std::vector<bool> collect(const program::Exchange& exchange);

 protected:
  std::vector<bool> run_exchange(const program::Exchange& exchange) override;

 private:
  struct Silo {
    bool joined = false, heard_done = false;
    std::string description;
    bool asked = false;       // part of the current exchange
    bool answered = false;    // accepted, or reported that it could not
    bool accepted = false;
    bool has_request = false;
    int refusals = 0;         // replies refused in the current exchange
    int polls = 0;            // NextTask calls parked
    int replies = 0;          // Submit calls past their first part
    program::Message request;
  };
  struct Poll {
    int silo = 0;
    Clock::time_point until;
    PollAnswer answer;
  };
  using Due = std::vector<std::pair<PollAnswer, fvi::v1::Task>>;

  // The silo (0-based) a request's credentials prove, or an error status (logged).
  grpc::Status authenticate(const Peer& peer, const fvi::v1::Credentials& who, int& silo);
  // Fills `task` for silo k if it has work or the run is over (under the lock); false: WAIT.
  bool task_for(int k, fvi::v1::Task& task);
  // Parked polls that can be answered now (work, the run over, or their time up), removed from
  // the table; the caller delivers them after unlocking.
  Due take_due(Clock::time_point now);
  static void deliver(Due& due);
  void timer_loop();
  void log(const std::string& line);
  // Refusals are logged at most kRefusalLines every kRefusalWindow; the rest are counted and
  // summed up in one line, so that a flood of bad calls cannot fill the log (issue 27 item 4).
  void log_refusal(const std::string& line);
  std::string unlogged_summary();  // under log_mutex_; "" when nothing was left out
  static constexpr int kRefusalLines = 20;
  static constexpr std::chrono::seconds kRefusalWindow{10};

  ServerPolicy policy_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // the server's own threads: silos joined or answered
  std::condition_variable timer_wake_;
  const program::Exchange* current_ = nullptr;
  uint64_t sequence_;  // starts at a random value: a restarted server's exchanges never match the old one's
  std::vector<Silo> silo_;
  std::map<uint64_t, Poll> polls_;
  uint64_t next_poll_id_ = 1;
  int empty_exchanges_ = 0;  // silos asked since the last accepted reply
  bool done_ = false, stopping_ = false;
  long refused_ = 0;
  std::function<void(const std::string&)> log_sink_;
  std::thread timer_;  // answers parked polls whose time is up
  std::mutex log_mutex_;  // the refusal log's window (taken after mutex_ where both are held)
  Clock::time_point window_start_{};
  int logged_in_window_ = 0;
  long unlogged_ = 0;
};

}  // namespace fvi::net
