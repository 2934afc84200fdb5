#pragma once
// The server's end of the wire: a Transport whose silos are remote NAME-client processes, and the
// gRPC service they call (fvi/v1/federation.proto). An exchange is published; each silo fetches
// its request with NextTask and answers with Submit; the exchange ends when every silo asked has
// answered, or at the deadline once a quorum has (docs/deployment.md, "Dropouts"). Every reply is
// checked (credentials, exchange, round, phase, size, finiteness, then the coordinator's own
// check) before it is used; a refused one is logged with the sender and the reason, and the silo
// may still send a good one before the deadline.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fvi/program/federation.h"
#include "fvi/v1/federation.grpc.pb.h"

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
  std::string method;
  std::vector<std::pair<std::string, std::string>> settings;  // sent to every silo at Join
  bool quiet = false;
};

// The run cannot go on: an exchange lost its quorum past the give-up time.
class QuorumLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ServerTransport final : public program::Transport, public fvi::v1::Federation::Service {
 public:
  explicit ServerTransport(ServerPolicy policy);

  int silos() const override { return policy_.silos; }

  // Waits until every silo has joined, or until `timeout` seconds have passed with a quorum
  // joined (throws QuorumLost otherwise). Returns each silo's description line.
  std::vector<std::string> wait_for_silos(double timeout);
  // The run is over: NextTask answers DONE from now on. Waits at most `grace` seconds for every
  // silo that joined to hear it.
  void finish(double grace);
  long refused() const;

  grpc::Status Join(grpc::ServerContext* context, const fvi::v1::JoinRequest* request,
                    fvi::v1::JoinReply* reply) override;
  grpc::Status NextTask(grpc::ServerContext* context, const fvi::v1::TaskRequest* request,
                        fvi::v1::Task* task) override;
  grpc::Status Submit(grpc::ServerContext* context, const fvi::v1::Result* result, fvi::v1::Ack* ack) override;

 protected:
  std::vector<bool> run_exchange(const program::Exchange& exchange) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Silo {
    bool joined = false, heard_done = false;
    std::string description;
    bool asked = false;       // part of the current exchange
    bool answered = false;    // accepted, or reported that it could not
    bool accepted = false;
    bool has_request = false;
    program::Message request;
  };
  // The silo (0-based) a request's credentials prove, or an error status (logged).
  grpc::Status authenticate(grpc::ServerContext* context, const fvi::v1::Credentials& who, int& silo);
  void log(const std::string& line);

  ServerPolicy policy_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  const program::Exchange* current_ = nullptr;
  uint64_t sequence_;  // starts at a random value: a restarted server's exchanges never match the old one's
  std::vector<Silo> silo_;
  bool done_ = false;
  long refused_ = 0;
};

}  // namespace fvi::net
