#pragma once
// The server's side and the silos' side of a federated run, apart from how messages travel.
// A coordinator (the server's algorithm: PviCoordinator, SfviCoordinator and VflCoordinator in
// pvi_run.cpp, sfvi_run.cpp and vfl_run.cpp, run by the one loop of server_loop.h) asks silos for
// work through a Transport; a SiloEndpoint (a silo's algorithm) answers. Every
// message is a flat vector of doubles, written and read by fvi/message/codec.h with the sizes of
// fvi/message/sizes.h (which `fvic plan` prints). NAME-sim joins the two sides in one
// process (InProcessTransport below); NAME-server and NAME-client join them over gRPC
// (runtime/net/), so both run the same engines and the same rounds: only the transport differs.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fvi::program {

using Message = std::vector<double>;

// What a request asks of a silo. The values are part of the wire protocol: never renumber.
enum class Phase : uint32_t {
  kPviUpdate = 1,        // [first update?, q_s, the silo's factor t_k] -> the damped change of t_k
  kPviEvaluate = 2,      // q_s -> E_q[silo loss]
  kPviLogJoint = 3,      // draws of the globals (d x S) -> the silo's log likelihood at each (S)
  kPviFinish = 4,        // the final q -> nothing (the silo writes its draws of it)
  kPviSettled = 5,       // [tol_param] -> [status, drift, standard error] of q's function at the silo's fixed
                         // context points (function-space methods; silo_settling.h)
  kSfviContribute = 10,  // [the rule's schedule (3), broadcast] -> the silo's gradients (seed 002 Alg. 1)
  kSfviFitLocally = 11,  // [steps, scale, broadcast] -> local fit (seed 002 Alg. 2)
  kSfviEvaluate = 12,    // broadcast -> the silo's ELBO term at fixed noise
  kSfviFinish = 13,      // the final broadcast -> nothing (the silo writes its local posterior)
  kSfviSizes = 14,       // nothing -> [n_j] (SFVI-Avg's n / n_j scaling)
  // 15: retired (the rule's schedule on its own; it now opens every kSfviContribute request).
  kSfviLogJoint = 16,    // after finish: draws of Z_G (n x S) -> [log p(y_j, Z_Lj | Z_G) (S), log q(Z_Lj | Z_G) (S)]
  kSfviSettled = 17,     // [tol_param] -> [status, drift, standard error] of the silo's locals (fvi/program/silo_settling.h)
  kSfviCentring = 18,    // round 0: nothing -> [x's column sums, rows] per block; round 1: [xbar per block] -> [(x - xbar)'s column sums of squares per block]
                         // (once, before iteration 1: fvi/engine/centring.h)
  kSfviMode = 19,        // points of Z_G (n x P) -> [defined (P), log p(y_j | Z_G) (P), its gradient (n x P)]
                         // (the mode search before iteration 1: fvi/engine/mode.h); with locals, the profile
                         // max over them, log p(y_j, Z_Lj* | Z_G), and its envelope gradient
  kVflPropose = 20,      // the rule's schedule (3) -> z_k (seed 004 Alg. 1 step 14 / Alg. 2 step 21)
  kVflPower = 21,        // [globals, sum of the other silos' z] -> [H_k, d globals, term]
  kVflUpdate = 22,       // the adjoint of z_k [, the globals' draws] -> [the silo's ELBO term [, its split priors' gradient in them]]
                         // (the bracketed parts where a split prior reads a global: engine::split_priors_read_globals)
  kVflFinish = 23,       // nothing -> nothing (the silo writes its split posterior)
  kVflPredict = 24,      // [key, draws] -> z_k* of the held-out rows (rows x draws)
  kVflLogJoint = 25,     // [key, draws [, the globals' draws]] -> [eta_k (rows x draws), log p(theta_k), log q(theta_k) (draws each)]
  // 26: retired (the rule's schedule on its own; it is now every kVflPropose request).
  kVflLayout = 27,       // round 0: nothing -> [p_k]; round 1: [joint?, offset_k, total] -> nothing (once, before iteration 1)
  kVflSettled = 28,      // [tol_param] -> [status, drift, standard error] of the silo's split block (silo_settling.h)
  kVflScale = 29,        // [the linear predictor's scale at the server's start] -> nothing (once, before iteration 1)
  kSgpUpdate = 30,       // [q, t_k, the silo's factor over u, the others', Z] -> [t_k, factor over u, Z, objective] (seed 003 Alg. 2)
  kSgpEvaluate = 31,     // [q, every factor over u, Z] -> [expected log-likelihood, predictive log density]
  kSfviModeLocals = 32,  // a point of Z_G (n) -> nothing: the silo's locals start at their conditional mode there
                         // (once, after the mode search of a model with locals: SfviServer::start_at_locations)
  kVflTailDraws = 33,    // [key, draws, width [, the globals' draws]] -> [eta_k (rows x draws), log p(theta_k), |its noise|^2 (draws each), its log det, p_k]
                         // at a heavier-tailed proposal's draws (the tail check, at the end: fvi/program/vfl_tail_check.h)
  kVflTailMoments = 34,  // [key, draws, width, log weights (draws)] -> its block's largest mean move and sd change, whose,
                         // and that sd's two values (10 numbers)
  kSfviLocalWeights = 35,  // the normalised log weights of the last kSfviLogJoint's draws (S) -> nothing: the silo
                           // reports its locals weighed by them (at the end, where k-hat <= 0.7)
};
const char* phase_name(Phase phase);
bool known_phase(uint32_t phase);

// A silo's side: answers the server's requests, one at a time. Throws ModelError (or any
// std::exception) when it cannot; the transport reports it and the silo's reply is missing.
class SiloEndpoint {
 public:
  virtual ~SiloEndpoint() = default;
  virtual Message handle(uint32_t round, Phase phase, const Message& request) = 0;
  // Everything handle() depends on beyond the model and data, for a checkpoint, and back.
  virtual Message state() const { return {}; }
  virtual void restore(const Message& state) { (void)state; }
};

// Bytes that crossed, as the server counts them (payload doubles, 8 bytes each).
struct SiloTraffic {
  long long sent = 0, received = 0;  // server -> silo, silo -> server
  long missing = 0;                  // its replies the coordinator went on without (counted exchanges)
  long refused = 0;                  // its replies the server refused (malformed, stale, too large)
  long accepted = 0;                 // its replies the coordinator used (counted exchanges)
};

// One exchange with (some of) the silos: each is sent request(k) and its reply goes to
// reply(k, ...), which accepts it (returns "") or refuses it with the reason. Both callbacks are
// called under one lock (never two at once), request(k) just before silo k gets its request.
struct Exchange {
  uint32_t round = 0;
  Phase phase = Phase::kPviUpdate;
  std::vector<int> silos;  // 0-based; empty: every silo
  std::function<Message(int k)> request;
  std::function<std::string(int k, Message& reply)> reply;
  // False for the simulation's bookkeeping that is not part of the algorithm (the independent
  // baseline's fits, read for its progress lines): its bytes are not counted.
  bool counted = true;
};

// The server's side of the wire.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int silos() const = 0;
  // Runs the exchange; returns, per silo, whether its reply was accepted. A silo that failed,
  // was refused, or missed the deadline has `false`: the coordinator proceeds without it by its
  // documented rule (docs/deployment.md, "Dropouts and stragglers").
  std::vector<bool> exchange(const Exchange& exchange);
  // Replies the coordinator went on without, so far (counted exchanges only): progress lines
  // say when a figure lacks some silos' part.
  long missing_replies() const { return missing_; }
  const std::vector<SiloTraffic>& traffic() const { return traffic_; }
  long long total_sent() const;
  long long total_received() const;
  // The counters as doubles (sent, received per silo) for a checkpoint, and back: a resumed run
  // goes on counting from where the killed one stopped.
  std::vector<double> traffic_counts() const;
  void restore_traffic(const std::vector<double>& counts);

 protected:
  virtual std::vector<bool> run_exchange(const Exchange& exchange) = 0;
  std::vector<SiloTraffic> traffic_;

 private:
  long missing_ = 0;
};

// Inside a catch block, for what failed in a silo of this process (its data, its model calls):
// the exception again with its message led by "silo K: " (unless it is already), its type kept
// where the server's catches read it (engine::ModelError, data::DataError, std::invalid_argument;
// any other std::exception becomes a std::runtime_error). A deployed client's own error names its
// program instead.
[[noreturn]] void rethrow_naming_silo(int silo);

// Every silo in this process, on threads of its own (NAME-sim).
class InProcessTransport : public Transport {
 public:
  explicit InProcessTransport(std::vector<SiloEndpoint*> endpoints);
  int silos() const override { return int(endpoints_.size()); }
  // Silos run one after another (PVI's sequential schedule asks one silo at a time anyway).
  void set_parallel(bool parallel) { parallel_ = parallel; }

 protected:
  std::vector<bool> run_exchange(const Exchange& exchange) override;

 private:
  std::vector<SiloEndpoint*> endpoints_;
  bool parallel_ = true;
};

// What one request may ask a silo to draw: a bound that keeps a hostile request from asking for
// unbounded work.
constexpr long kMaxRequestDraws = 100000;

// Columns of `draws` rows x (size / rows), or an exception naming what is wrong: a request of
// draws of the global parameters (the quality diagnostic's phases).
struct DrawsRequest {
  long rows = 0, draws = 0;
};
DrawsRequest check_draws_request(const Message& request, long rows);

// [key, draws] at the head of a request whose draws each party makes from a shared key (the
// vertical phases): a key a double holds exactly and a count of draws in [1, kMaxRequestDraws],
// or an exception naming `what`.
struct KeyedDraws {
  uint64_t key = 0;
  long draws = 0;
};
KeyedDraws read_keyed_draws(const Message& request, const char* what);

// Sends every silo the same request and keeps each reply of `reply_size` values; true when every
// silo's reply arrived and was accepted.
bool ask_every_silo(Transport& transport, uint32_t round, Phase phase, const Message& request, size_t reply_size,
                    std::vector<Message>& replies);

// The reason a reply of the wrong length or with a non-finite value is refused ("" if neither).
std::string check_reply(const Message& reply, size_t expected_size);

}  // namespace fvi::program
