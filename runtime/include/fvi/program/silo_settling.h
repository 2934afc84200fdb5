#pragma once
// The stopping rule's check of parameters only the silos hold (an SFVI silo's locals, a vertical
// silo's split block): once the server's q has converged, the server asks every silo whether its
// own have too (Phase::kSfviSettled, kVflSettled; fvi/optim/stationarity_watch.h judges them in
// the silo). Request [tol_param]; reply [status, drift, standard error], status 1 settled, 0 not,
// 2 not judged (q there is an importance sampler's proposal). Settled: the average is precise
// (standard error under tol_param) and no coordinate trends significantly (window_judgement.h's
// `drifting`). Only these three numbers leave a silo.
#include <optional>
#include <string>
#include <vector>

#include "fvi/optim/window_judgement.h"
#include "fvi/program/federation.h"
#include "fvi/program/output.h"

namespace fvi::program {

// The tol_param of a settled request; throws on a request that is not [tol_param] in (0, 1).
double settled_request_tol(const Message& request);

// A silo's reply to the request (throws on a request that is not [tol_param] in (0, 1));
// nullopt: its parameters are not judged.
Message settled_reply(const Message& request, const std::optional<WindowJudgement>& judged);

struct Settling {
  std::string unsettled;  // "" when every silo that answered is settled, else who still moves
  std::string note;       // for a converged verdict: "; every silo's split block settled too (...)"
};

// Whether a silo's judgement counts as settled at tol_param (what settled_reply sends).
bool judged_settled(const WindowJudgement& judged, double tol_param);

// The line a silo prints when its run ends and the last judgement it sent found its parameters
// moving: the coordinate that drifted most, by name, which the server's verdict cannot give (only
// three numbers leave the silo). `layout` lays out the judged vector; "" where nothing moved.
// "silo 2: its split block still moved when the run ended: most beta.3.2's mean (2.74 q sds)"
std::string still_moving_line(int silo, const char* what, const std::optional<WindowJudgement>& last,
                              double tol_param, const std::vector<VariableLayout>& layout);

// A silo host's side of the settled exchange: answers the request (settled_reply) and keeps the
// judgement it sent, so that the run's end can name what still moved (still_moving_line).
class SettledAnswers {
 public:
  // `judge(tol_param)` gives the judgement; it is asked only once the request is well formed.
  template <class Judge>
  Message answer(const Message& request, Judge judge) {
    tol_param_ = settled_request_tol(request);  // throws on a malformed request
    last_ = judge(tol_param_);
    return settled_reply(request, last_);
  }
  // Prints the still-moving line, if any.
  void report(int silo, const char* what, const std::vector<VariableLayout>& layout) const;

 private:
  std::optional<WindowJudgement> last_;
  double tol_param_ = 0;
};

// Asks every silo; `what` names their parameters in the verdict ("locals", "split block").
Settling ask_silos_settled(Transport& transport, uint32_t round, Phase phase, double tol_param, const char* what);

// The rule's schedule for a silo's own parameters, the first three values of every iteration's
// request (Phase::kSfviContribute, kVflPropose): [step scale in (0, 1], the averaging epoch (a
// whole number from 0; a new one restarts the silo's average), draws per gradient (a whole number
// from 1 to kMaxMcFactor times the silo's own mc_samples)]. Stated every time, not when it
// changes: a silo that misses one request is on the server's schedule again at its next.
// Throws on a request shorter than three values or a schedule outside these ranges.
struct SiloSchedule {
  double scale = 1;
  long epoch = 0;
  long draws = 1;
};
inline constexpr size_t kSiloScheduleSize = 3;
SiloSchedule read_silo_schedule(const Message& request, long mc_samples);
Message silo_schedule_message(double scale, long epoch, long draws);

}  // namespace fvi::program
