#pragma once
// The one server loop every method runs: the settings echo, resume from a checkpoint,
// metrics.csv, a checkpoint after every step, progress lines, the stopping rule and its final
// estimate, the outputs and the verdict. A method is a Coordinator (its rounds or iterations, its
// state, its outputs); everything a run does around the method is written here once.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/optim/convergence.h"
#include "fvi/program/output.h"
#include "fvi/program/roles.h"

namespace fvi::program {

using Extra = std::vector<std::pair<std::string, double>>;

// What the server writes at the end: its variables' draws from q.
struct ServerDraws {
  std::vector<VariableLayout> layout;
  Eigen::MatrixXd unconstrained;  // size x S
  Eigen::MatrixXd constrained;    // size x S, the declared supports
  Eigen::VectorXd mean, sd;       // of q, unconstrained (exact where the transform is the identity)
  Eigen::VectorXd log_q;          // log q at each draw, unconstrained scale
  std::string what;               // "the global parameters", ...
  std::string family;             // q's family when the settings do not name it ("" : theirs)
};

struct TailCheck;  // fvi/program/tail_check.h

// The server's side of one method.
class Coordinator {
 public:
  virtual ~Coordinator() = default;

  virtual const char* checkpoint_kind() const = 0;  // "pvi-server", ...
  virtual void print_header() const = 0;            // the method's first lines of the echo
  // The most steps the run takes, and whether step t reports (a progress line and a metrics row;
  // the last step always does).
  virtual long steps() const = 0;
  virtual bool reports(long t) const = 0;
  virtual long rounds_setting() const { return steps(); }  // posterior.json's "rounds"

  // Runs step t (1-based) and returns its estimate of the objective, NaN when it has none.
  virtual double step(long t) = 0;
  // Each silo's term of the last step's objective (NaN for a silo whose reply is missing), for
  // silos.csv and the report; empty where the method's objective has no per-silo terms.
  virtual std::vector<double> silo_terms() const { return {}; }
  // The objective a report at step t shows, given the mean of the steps' estimates since the last
  // report (NaN if none): that mean, or a fresh evaluation.
  virtual double report_objective(long t, double window_mean) { (void)t; return window_mean; }
  // The progress line's label and position: "round  3/10", "iteration 200/1000".
  virtual std::string position(long t) const = 0;
  // Figures beside the objective in metrics.csv and the progress line (held-out metrics, bytes).
  virtual std::string metrics(long t, Extra& extra) { (void)t; (void)extra; return ""; }
  // The note a progress line gets when silos' parts are missing ("" if none), given the replies
  // the transport went on without since the last report.
  virtual std::string missing_note(long missing_replies) { return program::missing_note(missing_replies, "silo replies"); }

  // Parameters the server's q does not hold but the rule must also find settled (an SFVI silo's
  // locals, a vertical silo's split block, judged by the silo itself: fvi/program/silo_settling.h).
  // Asked at step t once the server's q has converged: "" when they have, else what still moves
  // (for the verdict).
  virtual std::string unsettled(long t, double tol_param) { (void)t; (void)tol_param; return ""; }
  // What the last such check found, for a converged verdict ("" if there was none).
  virtual std::string settled_note() const { return ""; }

  // The stopping rule's view of the server's q: its mean and sd on the unconstrained scale, the
  // parameters it averages over the last phase (none: the last iterate is the estimate), and the
  // step size's multiplier it sets.
  virtual void moments(Eigen::VectorXd& mean, Eigen::VectorXd& sd) const = 0;
  // Where coordinate i of those moments is not the written parameter's: how the fit holds it
  // (SFVI's intercept at the centred data, fvi/engine/centring.h), for the verdict's naming.
  virtual std::string fit_coordinate(Eigen::Index i) const {
    (void)i;
    return "";
  }
  virtual Eigen::VectorXd params() const { return {}; }
  virtual void set_params(const Eigen::VectorXd& params) { (void)params; }
  // epoch: the rule's averaging_epoch(), for parties that average parameters of their own;
  // mc_factor: the multiplier of mc_samples it asks for (ConvergenceOptions::max_mc_factor).
  virtual void set_schedule(double step_scale, long epoch, long mc_factor) {
    (void)step_scale, (void)epoch, (void)mc_factor;
  }
  // The rule's defaults for this method (`window`, `tol`, `tol_param` override them).
  virtual ConvergenceOptions convergence() const = 0;
  virtual const char* unit() const = 0;  // "rounds", "iterations"

  // Everything the steps depend on, for a checkpoint, and back (throws if it does not fit).
  virtual std::vector<double> state() const = 0;
  virtual void restore(const std::vector<double>& state) = 0;

  // After the last step: the silos write their own outputs; the server's draws (none for a
  // method whose server holds no posterior, as the independent baseline).
  virtual void finish(long last_step) = 0;
  virtual std::optional<ServerDraws> draws() = 0;  // output_draws(settings) of them
  virtual std::string outputs_note() const = 0;  // what the silos wrote, for the last line
  // The closing exchange at the server's output draws (the plan's closing messages), every party
  // adding its own part: the quality diagnostic's log p of the written model and log q of the
  // approximation (the server's q, and each silo's conditional q of its locals at the same
  // draws), and the sums of the silos' parts of the silo_sum quantities. False, with why, when
  // the method cannot.
  struct Closing {
    Eigen::VectorXd log_p, log_g;
    Eigen::MatrixXd silo_sums;  // one row per silo_sum quantity (fvi/program/quantities.h), S columns
  };
  virtual bool closing(const ServerDraws& draws, Closing& out, std::string& why) {
    (void)draws, (void)out;
    why = "not computed for this method";
    return false;
  }
  // After the last closing(): the normalised Pareto-smoothed log weights of its draws, where its
  // k-hat says they hold (<= 0.7), for the silos to report their locals as these weights give
  // them (the written model's posterior) rather than as q(Z_G) mixes them. False where the method
  // has no silo-held locals.
  virtual bool weigh_locals(const std::vector<double>& log_weights) {
    (void)log_weights;
    return false;
  }
  // Whether closing() scores the draws it is given, wherever they come from (PVI, SFVI): the tail
  // check (fvi/program/tail_check.h) then scores a heavier-tailed proposal's draws there too.
  virtual bool closing_takes_draws() const { return false; }
  // The tail check of a method whose q other parties hold parts of (a vertical model's split
  // blocks), which the server cannot draw alone: made by the parties together at the end, from
  // q's output draws `draws` and the key `seed`, into `out` (left empty where it is not made).
  virtual void check_tails(const ServerDraws& draws, uint64_t seed, TailCheck& out) { (void)draws, (void)seed, (void)out; }
  // What the diagnostic measures against, when it is not the written model's posterior ("" if it is).
  virtual std::string target_note() const { return ""; }
  // What to try where k-hat against the written model is over 0.7 (a surrogate target).
  virtual std::string surrogate_advice() const {
    return "Use the written model's own likelihood (loss = nll, divergence = kl, or a vertical method that fits "
           "it) to fit it.";
  }
  // The final q replaced by N(mean, covariance) in the draws' unconstrained rows `varying`
  // (fvi/program/moment_correction.h), and every silo sent it as the final q it writes its outputs
  // from; draws() then draws it. `draws` are the draws the moments were taken against (their
  // layout, their constant rows). False where the method cannot: its q is then unchanged.
  virtual bool adopt_moments(const ServerDraws& draws, const std::vector<Eigen::Index>& varying,
                             const Eigen::VectorXd& mean, const Eigen::MatrixXd& covariance) {
    (void)draws, (void)varying, (void)mean, (void)covariance;
    return false;
  }
  // Warnings the method found on the way (several modes), for the run's closing lines.
  virtual std::vector<std::string> closing_warnings() const { return {}; }
};

// The steps a run may take: `rounds` (`max_rounds` when it is not given; default `default_max`).
// The stopping rule may end the run sooner unless the command line gave `rounds` (fixed_steps):
// a model's inference block states a budget, a user's --set rounds=N asks for exactly N.
long max_steps(const engine::Settings& settings, long default_max);
bool fixed_steps(const engine::Settings& settings);

// The quality diagnostic asks the silos for their part at the output draws only while the
// request stays under this many values (a network's draws would be hundreds of megabytes).
constexpr long kMaxLogJointRequest = 1000000;
// ... and only from this many draws of q or more (fewer give no k-hat: server_loop.cpp).
constexpr long kMinKhatDraws = 100;

// Runs `coordinator` to the end and writes the outputs; returns the program's exit status.
int run_server(ServerRun& run, Coordinator& coordinator, const std::string& method);

}  // namespace fvi::program
