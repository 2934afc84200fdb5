#include "fvi/program/silo_settling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "fvi/optim/convergence.h"

namespace fvi::program {

namespace {
constexpr double kSettled = 1, kMoving = 0, kNotJudged = 2;
}  // namespace

bool judged_settled(const WindowJudgement& judged, double tol_param) {
  return judged.standard_error < tol_param && !judged.drifting;
}

std::string still_moving_line(int silo, const char* what, const std::optional<WindowJudgement>& last,
                              double tol_param, const std::vector<VariableLayout>& layout) {
  if (!last || judged_settled(*last, tol_param) || last->drift_at < 0) return "";
  const std::string name = coordinate_name(layout, last->drift_at, last->drift_of_sd);
  if (name.empty()) return "";
  char figure[64];
  std::snprintf(figure, sizeof figure, " (%.3g %s)", last->drift, last->drift_of_sd ? "relative" : "q sds");
  return "silo " + std::to_string(silo) + ": its " + what + " still moved when the run ended: most " + name + figure;
}

void SettledAnswers::report(int silo, const char* what, const std::vector<VariableLayout>& layout) const {
  const std::string line = still_moving_line(silo, what, last_, tol_param_, layout);
  if (!line.empty()) std::printf("%s\n", line.c_str());
}

double settled_request_tol(const Message& request) {
  if (request.size() != 1 || !(request[0] > 0 && request[0] < 1))
    throw std::invalid_argument("a settled request needs [tol_param], in (0, 1)");
  return request[0];
}

Message settled_reply(const Message& request, const std::optional<WindowJudgement>& judged) {
  const double tol_param = settled_request_tol(request);
  if (!judged) return {kNotJudged, 0.0, 0.0};
  // Precise, and no coordinate trends significantly. Not step 3's bound on every coordinate: a
  // silo's block has many, the bound's max over them grows with their number, and at the decayed
  // step over the rule's 64 windows it held a settled block of 10 values (drifts 0.04-0.09 against
  // 0.035 of noise per coordinate) for 18,000 iterations. The server's q has passed that bound.
  const bool settled = judged_settled(*judged, tol_param);
  return {settled ? kSettled : kMoving, std::min(judged->drift, 1e300), std::min(judged->standard_error, 1e300)};
}

Settling ask_silos_settled(Transport& transport, uint32_t round, Phase phase, double tol_param, const char* what) {
  const int silos = transport.silos();
  std::vector<Message> replies(static_cast<size_t>(silos));
  Exchange x;
  x.round = round;
  x.phase = phase;
  x.request = [&](int) { return Message{tol_param}; };
  x.reply = [&](int k, Message& m) {
    std::string reason = check_reply(m, 3);
    if (reason.empty() && !(m[0] == kSettled || m[0] == kMoving || m[0] == kNotJudged))
      reason = "a settled status that is not 0, 1 or 2";
    if (reason.empty() && !(m[1] >= 0 && m[2] >= 0)) reason = "a negative drift or standard error";
    if (reason.empty()) replies[size_t(k)] = std::move(m);
    return reason;
  };
  const std::vector<bool> arrived = transport.exchange(x);
  Settling out;
  double drift = 0, se = 0;
  int answered = 0, judged = 0;
  for (int k = 0; k < silos; ++k) {
    if (!arrived[size_t(k)] || replies[size_t(k)].size() != 3) continue;
    const Message& m = replies[size_t(k)];
    ++answered;
    if (m[0] == kNotJudged) continue;
    ++judged;
    if (m[0] == kSettled) {
      drift = std::max(drift, m[1]), se = std::max(se, m[2]);
      continue;
    }
    char text[200];
    if (m[1] >= 1e300)
      std::snprintf(text, sizeof text, "silo %d's %s: not averaged long enough to judge", k + 1, what);
    else
      std::snprintf(text, sizeof text, "silo %d's %s still moving: drift %.3f (standard error %.3f)", k + 1, what, m[1],
                    m[2]);
    out.unsettled += (out.unsettled.empty() ? "" : "; ") + std::string(text);
  }
  char note[240];
  if (answered > 0 && judged == 0)
    std::snprintf(note, sizeof note,
                  "; the silos' %s not judged (q of them is the importance-weighted bound's proposal, local_samples > 1)",
                  what);
  else
    // Settled is a precise average and no significant trend: a drift over tol_param can pass where
    // the windows' noise explains it, so the criterion is named beside the figures.
    std::snprintf(note, sizeof note,
                  "; every silo's %s settled too (standard error %.3f < %g, drift %.3f with no significant trend%s)",
                  what, se, tol_param, drift, answered < silos ? ", of the silos that answered" : "");
  out.note = note;
  return out;
}

SiloSchedule read_silo_schedule(const Message& request, long mc_samples) {
  if (request.size() < kSiloScheduleSize)
    throw std::invalid_argument("a request without the stopping rule's [step scale, averaging epoch, draws]");
  const double scale = request[0], epoch = request[1], draws = request[2];
  if (!(scale > 0 && scale <= 1 && epoch >= 0 && epoch <= 1e9 && epoch == std::floor(epoch) && draws >= 1 &&
        draws <= double(kMaxMcFactor * mc_samples) && draws == std::floor(draws)))
    throw std::invalid_argument("a schedule with step scale " + std::to_string(scale) + ", averaging epoch " +
                                std::to_string(epoch) + " and " + std::to_string(draws) + " draws per gradient");
  return {scale, long(epoch), long(draws)};
}

Message silo_schedule_message(double scale, long epoch, long draws) {
  return {scale, double(epoch), double(draws)};
}

}  // namespace fvi::program
