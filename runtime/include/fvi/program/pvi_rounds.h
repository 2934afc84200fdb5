#pragma once
// The server rounds of PVI / FedGVI (spec 000 Algorithm 1) over any Transport, and the silo's
// endpoint that answers them. Every silo updates its factor once per round under the schedule and
// the server applies each damped change. NAME-sim, NAME-server and the benchmarks run this.
//
// The server keeps every silo's factor t_k (it is the sum of the changes it applied, so the
// server knows it anyway) and sends it with q_s: a silo then holds no state between rounds, a
// restarted silo needs nothing to rejoin, and a change the server refused or never received
// cannot leave the silo and the server disagreeing about t_k.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fvi/engine/aggregation.h"
#include "fvi/engine/pvi.h"
#include "fvi/optim/convergence.h"
#include "fvi/optim/stationarity_watch.h"
#include "fvi/program/federation.h"
#include "fvi/program/silo_settling.h"

namespace fvi::program {

template <class Q>
class PviRounds {
 public:
  using Server = engine::PviServer<Q>;
  using Natural = typename Server::Natural;

  // From the run's options (engine::PviOptions::from): the schedule, synchronous (silos in
  // parallel on the same q_s, changes applied in silo order), sequential (one silo after another,
  // each on the latest q_s), or asynchronous (in parallel, each change applied as it arrives: the
  // order depends on timing, seed 000 §2.1); the server's damping (synchronous only: the server
  // applies every silo's (already damped) change times one scale, 1 at first and halved (down to
  // 1/silos, the paper's default damping) after every round whose objective fell: full steps
  // where they help, smaller ones where simultaneous updates overshoot); the aggregation (pvi,
  // or fedavg and fedvem with the server's optimiser, whose first q is the prior's means plus
  // N(0, init_mean_sd^2) noise from `seed` and sd init_sd, 0: the prior's); clients_per_round.
  PviRounds(Server& server, Transport& transport, const engine::PviOptions& options);

  // One server round. A silo whose change is missing (dropped out, refused) keeps its factor
  // (fedavg, fedvem: the round aggregates the silos that answered; none: q stays).
  void run_round(uint32_t round);
  // The silos asked in `round` (0-based, ascending): all, or clients_per_round of them.
  std::vector<int> sampled(uint32_t round) const;

  // Minus the objective of the current global posterior: each silo's expected loss (one number
  // sent by each) plus the server's KL to the prior. With the NLL and KL this is the ELBO. A silo
  // that does not answer is left out (and counted in missing_terms()). With clients_per_round,
  // the round's silos are asked and their sum scaled by S / m: an unbiased, noisier estimate.
  double elbo(uint32_t round);
  // fedavg's and fedvem's server step from now on, times `scale` in (0, 1] (the stopping rule's
  // decay); nothing for pvi, whose silos' changes are their own.
  void set_step_scale(double scale) {
    if (optimiser_) optimiser_->set_scale(scale);
  }
  int missing_terms() const { return missing_terms_; }
  // Each silo's term of the last elbo(): its expected log likelihood under q (NaN: no reply).
  const std::vector<double>& silo_terms() const { return silo_terms_; }

  // Silo changes refused or missing so far (each refusal is reported on stderr as it happens).
  long rejected() const { return rejected_; }

  // The server's state for a checkpoint (q_s, every t_k, which silos have updated; fedavg and
  // fedvem: q_s, which silos have updated, the server optimiser's state) and back.
  Message state() const;
  void restore(const Message& state);

 private:
  std::string accept(int k, Message& reply, uint32_t round);
  // fedavg and fedvem: every asked silo's q_k from q_s, then one step of the server's optimiser
  // on the pseudo-gradient (fvi/engine/aggregation.h).
  void aggregate_round(uint32_t round);

  Server& server_;
  Transport& transport_;
  std::string schedule_;
  std::vector<Natural> factors_;  // pvi only: fedavg's and fedvem's silos hold no factor
  std::vector<char> updated_;
  long rejected_ = 0;
  int missing_terms_ = 0;
  std::vector<double> silo_terms_;
  bool server_damping_ = false;
  double damping_ = 1;
  double previous_objective_;  // NaN: none to compare with
  std::string method_;
  // seed 001 Eq. 27: FedAvg FSVI's objective has the silos' function-space KL terms in place of
  // the weight-space KL to the prior (elbo).
  bool function_space_ = false;
  long clients_per_round_ = 0;
  uint64_t seed_ = 1;
  std::optional<engine::ServerOptimiser> optimiser_;  // fedavg and fedvem
};

// A silo of PVI / FedGVI: answers kPviUpdate, kPviEvaluate, kPviLogJoint and kPviFinish with its
// PviClient. The client keeps nothing between requests that the server does not send (its
// factor t_k and whether the update is its first come with each update) but, from its update to
// the round's evaluation, which follows, a function-space prior's linearisation point; so a silo
// asked in some rounds only (clients_per_round) may make its client for its update and drop it
// after the evaluation: the kernels' states, which hold the silo's rows, then live for the asked
// silos alone. With a function-space prior it also answers kPviSettled: whether q's function at
// its fixed context points, one window per evaluation, has settled (silo_settling.h).
template <class Q>
class PviSiloEndpoint : public SiloEndpoint {
 public:
  using Client = engine::PviClient<Q>;
  // The silo's parts of the model's silo_sum quantities at draws of the globals (rows: one per
  // quantity), sent with its log likelihood at the closing draws (none when not given).
  using SiloSumParts = std::function<Eigen::MatrixXd(const Eigen::MatrixXd& globals)>;
  // A client kept for the run.
  explicit PviSiloEndpoint(Client& client, SiloSumParts parts = {})
      : dim_(client.dim()), acquire_([&client]() -> Client& { return client; }), parts_(std::move(parts)) {}
  // A client from `acquire` for each request, `release` called with the request's phase after it
  // (also when it throws); `dim`: the global group's size, as the client's.
  PviSiloEndpoint(Eigen::Index dim, std::function<Client&()> acquire, std::function<void(Phase)> release,
                  SiloSumParts parts = {})
      : dim_(dim), acquire_(std::move(acquire)), release_(std::move(release)), parts_(std::move(parts)) {}
  Message handle(uint32_t round, Phase phase, const Message& request) override;
  // The final global posterior the server sent at the end (kPviFinish), if it did.
  const std::optional<typename Client::Natural>& final_posterior() const { return final_; }
  // Prints, at the end, where q's function at the context points still moved when last judged.
  void report_settling(int silo) const;

 private:
  Message answer(Client& client, uint32_t round, Phase phase, const Message& request);

  Eigen::Index dim_;
  std::function<Client&()> acquire_;
  std::function<void(Phase)> release_;
  SiloSumParts parts_;
  std::optional<typename Client::Natural> final_;
  // Windows of one evaluation each, as the server's rule has one round per window; the rule's
  // span of windows at most.
  StationarityWatch function_watch_{1, ConvergenceOptions{}.max_average_windows};
  SettledAnswers settled_;
};

}  // namespace fvi::program
