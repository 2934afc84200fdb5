#include "fvi/program/server_loop.h"
#include "fvi/program/moment_correction.h"
#include "fvi/program/tail_check.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "fvi/diagnostics/psis.h"
#include "fvi/optim/convergence.h"
#include "fvi/engine/bound_factor.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/quantities.h"
#include "fvi/program/summary.h"
#include "fvi/report/report_data.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;

// The loop's own bookkeeping at the end of a checkpoint's state: reports so far, the steps and
// the sum of their objectives since the last report, and the seconds so far.
constexpr size_t kLoopState = 4;

ConvergenceOptions convergence_options(const engine::Settings& settings, ConvergenceOptions o) {
  o.window = settings.integer("window", o.window);
  o.tol = settings.number("tol", o.tol);
  o.tol_param = settings.number("tol_param", o.tol_param);
  if (settings.has("mc_samples")) o.max_mc_factor = 1;  // the user's draws per gradient stand
  return o;
}

// How R writes a number it reads back with as.numeric: NaN, Inf and -Inf by name.
std::string r_number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x < 0 ? "-Inf" : "Inf";
  return std::to_string(x);
}

// The measured cost of the approximation (a surrogate model or family, issue 26): the written
// model's posterior means and sds by PSIS reweighting of q's draws, against q's own; the largest
// shift of a mean (in q's sds) and of an sd (relative), each named. Empty when the weights are
// not usable (k-hat NaN or Inf).
struct Reweighted {
  std::string line;
  double mean_shift = 0, sd_change = 0;  // the largest |shift| / sd and |sd_w / sd - 1|
  std::string mean_name, sd_name;
};

Reweighted reweighted_moments(const ServerDraws& d, const diagnostics::PsisResult& smoothed) {
  Reweighted r;
  if (!std::isfinite(smoothed.khat) && smoothed.khat != -std::numeric_limits<double>::infinity()) return r;
  if (d.constrained.rows() == 0 || d.constrained.cols() < 2) return r;
  const std::vector<double> mean_w = diagnostics::weighted_means(d.constrained, smoothed.log_weights);
  const std::vector<double> sd_w = diagnostics::weighted_sds(d.constrained, smoothed.log_weights);
  const Eigen::VectorXd mean = d.constrained.rowwise().mean();
  const Eigen::VectorXd sd = row_sds(d.constrained);
  const auto name_of = [&](Eigen::Index at) {
    for (const VariableLayout& v : d.layout)
      if (at >= v.offset && at < v.offset + v.elements()) return element_names(v)[size_t(at - v.offset)];
    return std::string();
  };
  Eigen::Index worst_mean = -1, worst_sd = -1;
  for (Eigen::Index i = 0; i < mean.size(); ++i) {
    // A point estimate (SFVI's hyperparameters) has constant draws: nothing to reweigh, and its
    // computed sd is rounding error, not a scale.
    if (d.constrained.row(i).maxCoeff() == d.constrained.row(i).minCoeff() || !(sd[i] > 0)) continue;
    // A structured matrix's unconstrained values are not an output (its matrix is a quantity).
    if (name_of(i).empty()) continue;
    const double shift = std::abs(mean_w[size_t(i)] - mean[i]) / sd[i], change = std::abs(sd_w[size_t(i)] / sd[i] - 1);
    if (worst_mean < 0 || shift > r.mean_shift) r.mean_shift = shift, worst_mean = i;
    if (worst_sd < 0 || change > r.sd_change) r.sd_change = change, worst_sd = i;
  }
  if (worst_mean < 0) return r;
  r.mean_name = name_of(worst_mean), r.sd_name = name_of(worst_sd);
  char text[320];
  std::snprintf(text, sizeof text,
                "PSIS-reweighted means (the written model's, from q's draws) move at most %.2f q sds (%s); sds "
                "change at most %.0f%% (%s)%s",
                r.mean_shift, r.mean_name.c_str(), 100 * r.sd_change, r.sd_name.c_str(),
                smoothed.khat > 0.7 ? "; unreliable with this k-hat" : "");
  r.line = text;
  return r;
}


// The coordinate of q that the rule last saw drift most, by name: "b[6]'s mean", "sigma's sd"
// ("" where it has not judged, or the coordinate is no output's; q's n coordinates unconstrained).
std::string moving_most(const ConvergenceMonitor& monitor, const std::vector<VariableLayout>& layout, Eigen::Index n,
                        const Coordinator& coordinator) {
  const long i = monitor.drift_at();
  if (i < 0 || i >= n) return "";
  const std::string name = coordinate_name(layout, i, monitor.drift_of_sd());
  return name.empty() ? name : name + coordinator.fit_coordinate(i);
}

// For a verdict that is not "converged" (SFVI's and VFL's iterations): where a mean of q lies so
// far from 0, q's default start, that Adam's steps of lr would take over a quarter of the run to
// walk there, the likely cause (data on a scale far from 1: an outcome in the hundreds) and the
// cure. A hierarchical regression with y 100 times larger: its centred location at 250, 25,000
// steps of 0.01, in a run of 20,000 iterations, NOT converged with the ridge's advice otherwise.
std::string far_from_start(const Eigen::VectorXd& mean, double lr, long iterations,
                           const std::vector<VariableLayout>& layout, const Coordinator& coordinator) {
  if (mean.size() == 0 || !(lr > 0) || iterations <= 0 || std::string(coordinator.unit()) != "iterations") return "";
  Eigen::Index i = 0;
  const double farthest = mean.cwiseAbs().maxCoeff(&i);
  const double steps = farthest / lr;
  // A mean within 5 of 0 is no sign of data far from the unit scale, however short the run.
  if (!(steps > 0.25 * double(iterations)) || farthest < 5) return "";
  std::string name = coordinate_name(layout, int64_t(i), false);
  if (name.empty()) return "";
  name += coordinator.fit_coordinate(i);
  char text[640];
  std::snprintf(text, sizeof text,
                " q's means lie far from 0, where its default start puts them, for Adam's steps: %s at %.4g is "
                "%.3g steps of lr %g, against this run's %ld iterations. Data on a scale far from 1 do this (an "
                "outcome in the hundreds): rescale them (y / sd(y), and the priors with it); a larger lr walks there "
                "sooner, less precisely.",
                name.c_str(), mean[i], steps, lr, iterations);
  return text;
}

// The lines a run ends with, in order: the stopping rule's verdict, k-hat and the reweighted
// moments on stdout; a warning (a verdict that is not "converged", a k-hat or a shift a user must
// not miss) to stderr as well. posterior.json keeps them all for `fvic report`.
struct ClosingLine {
  bool on_stdout = true, warning = false;
  std::string text;
};

std::vector<ClosingLine> closing_lines(const std::string& verdict, bool converged, const std::string& khat_line,
                                       const Reweighted& reweighted, double khat, const std::string& target_note,
                                       const std::string& surrogate_advice, const std::string& family,
                                       bool moments_corrected, const TailCheck& tail) {
  std::vector<ClosingLine> lines{{true, !converged, verdict}};
  // After a moment correction q is the corrected Gaussian, and k-hat and the check are its.
  const std::string q_name = family + (moments_corrected ? ", its moments corrected" : "");
  if (khat_line.empty()) return lines;
  lines.push_back({true, false, khat_line});
  if (!reweighted.line.empty()) lines.push_back({true, false, reweighted.line});
  char text[1024];
  if (khat > 0.7 && !target_note.empty()) {
    // A surrogate target (a robust loss, a tempered likelihood, an augmentation) departs from the
    // written model on purpose: k-hat then measures that departure, and the family is not the
    // first thing to change.
    std::snprintf(text, sizeof text,
                  "k-hat %.2f > 0.7 against the written model: the fitted target (the loss, divergence or "
                  "augmentation chosen) differs from it by more than importance sampling can bridge; the shift of "
                  "the means above is its cost. %s",
                  khat, surrogate_advice.c_str());
  } else if (khat > 0.7 && tail.moments_hold) {
    // q's own draws cannot weigh the posterior's tails, but a heavier-tailed proposal around q
    // can, and it finds q's moments right: the tails are what is wrong, not the fit.
    std::snprintf(text, sizeof text,
                  "k-hat %.2f > 0.7: q (%s) has lighter tails than this posterior (a skewed direction, a scale "
                  "fitted from few groups), so its tails and extreme quantiles are not to be trusted. Its means "
                  "and sds are close: importance sampling from a heavier-tailed proposal around q (%sk-hat %.2f, "
                  "ESS %.0f) moves no mean by more than %.2f q sds and changes no sd by more than %.0f%% (%s: "
                  "read its intervals with that margin). A tail beyond even that proposal's reach (a Student-t's "
                  "with 3 degrees of freedom around q) would leave an sd short unseen: docs/user-guide.md, \"The "
                  "tail check\".",
                  khat, q_name.c_str(), tail.width > 1 ? "twice q's width, " : "", tail.khat, tail.ess,
                  tail.worst_mean, 100 * std::abs(tail.worst_sd), tail.sd_name.c_str());
  } else if (khat > 0.7) {
    // What to try first: a richer family where there is one, then the model itself.
    const char* richer = family == "meanfield" ? "family = fullrank or structured, " : "";
    std::snprintf(text, sizeof text,
                  "k-hat %.2f > 0.7: q (%s) is a poor approximation of this posterior (strong "
                  "correlations, a funnel, heavy tails). Try %sthe other parameterisation of a hierarchy (a funnel "
                  "wants it non-centred, a = mu + tau * z; groups' intercepts and slopes at a predictor far from 0 "
                  "want it centred, a ~ normal(mu, tau), which each silo then fits at its own means), or "
                  "standardised predictors.",
                  khat, q_name.c_str(), richer);
  } else if (!reweighted.line.empty() && target_note.empty() &&
             (reweighted.mean_shift > 0.25 || reweighted.sd_change > 0.2)) {
    // k-hat usable, so the reweighted moments are to be trusted, and they say q is off by more
    // than a user would accept (issue 26: 0.25 sd, 20%). A mean off with every sd close is q short
    // of the optimum along a ridge, not a shape q lacks.
    const bool mean_only = reweighted.sd_change <= 0.2;
    std::snprintf(text, sizeof text,
                  "reweighting q's draws toward the written model's posterior (k-hat %.2f, %s: the reweighted "
                  "moments hold) moves a mean by %.2f q sds (%s) %s %.0f%% (%s): %s",
                  khat, diagnostics::khat_reading(khat), reweighted.mean_shift, reweighted.mean_name.c_str(),
                  mean_only ? "while no sd changes by more than" : "and changes an sd by", 100 * reweighted.sd_change,
                  reweighted.sd_name.c_str(),
                  mean_only ? kMeanOffCause
                            : "q's Gaussian shape misses the posterior's skew or tails (few rows per parameter, a scale "
                              "parameter). Read the uncertainty with that margin, or try a richer family or more data "
                              "per parameter.");
  } else {
    return lines;
  }
  lines.push_back({false, true, text});
  return lines;
}

// The silos that answered fewer than half of the exchanges they were asked in (at least 10
// missing or refused), named with their counts ("silo 2 answered 106 of its 1506 requests (1400
// replies refused)"); "" when none. A fit then holds little of their data, whatever the rule says of the rest.
std::string silent_silos(const std::vector<SiloTraffic>& traffic) {
  std::string out;
  for (size_t k = 0; k < traffic.size(); ++k) {
    const SiloTraffic& t = traffic[k];
    if (t.missing < 10 || 2 * t.missing < t.missing + t.accepted) continue;
    out += (out.empty() ? "" : "; ") + std::string("silo ") + std::to_string(k + 1) + " answered " +
           std::to_string(t.accepted) + " of its " + std::to_string(t.accepted + t.missing) + " requests (" +
           std::to_string(t.refused) + " replies refused)";
  }
  return out;
}

}  // namespace

bool fixed_steps(const engine::Settings& settings) { return settings.overridden("rounds"); }

long max_steps(const engine::Settings& settings, long default_max) {
  // --set rounds=N, then max_rounds wherever it is set, then the inference block's rounds.
  if (fixed_steps(settings) || !settings.has("max_rounds")) return settings.integer("rounds", default_max);
  return settings.integer("max_rounds", default_max);
}

int run_server(ServerRun& run, Coordinator& coordinator, const std::string& method) {
  const engine::Settings& settings = run.settings;
  const SimArguments& args = run.args;
  const long steps = coordinator.steps();
  const bool fixed = fixed_steps(settings);
  ConvergenceMonitor monitor(convergence_options(settings, coordinator.convergence()));

  if (!args.quiet) {
    coordinator.print_header();
    for (const std::string& line : run.silo_lines) std::printf("  %s\n", line.c_str());
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  PosteriorSummary summary{run.description.name, method, run.transport.silos(), int(coordinator.rounds_setting()), {}};
  long first = 1, reports = 0, in_window = 0;
  double window = 0, seconds_before = 0;
  CheckpointRecord record;
  if (run.resume && !run.checkpoint.empty() && load_checkpoint(run.checkpoint, coordinator.checkpoint_kind(), record)) {
    if (record.state.size() < kLoopState + 1)
      throw std::runtime_error(run.checkpoint + ": the checkpoint does not match this model, method and silos");
    const double* loop = record.state.data() + record.state.size() - kLoopState;
    reports = long(loop[0]), in_window = long(loop[1]), window = loop[2], seconds_before = loop[3];
    const double rule_size = loop[-1];
    try {
      if (!(rule_size >= 0 && rule_size <= double(record.state.size()) - double(kLoopState) - 1))
        throw std::invalid_argument("the stopping rule's state does not fit");
      const auto rule_end = record.state.end() - long(kLoopState) - 1, rule_begin = rule_end - long(rule_size);
      monitor.restore(std::vector<double>(rule_begin, rule_end));
      coordinator.restore(std::vector<double>(record.state.begin(), rule_begin));
      coordinator.set_schedule(monitor.step_scale(), monitor.averaging_epoch(), monitor.mc_factor());
    } catch (const std::exception& e) {
      throw std::runtime_error(run.checkpoint + ": the checkpoint does not match this model, method and silos (" +
                               e.what() + ")");
    }
    summary.elbo = record.extra;
    run.transport.restore_traffic(record.traffic);
    first = long(record.round) + 1;
    if (!args.quiet) std::printf("resumed from %s after step %u\n", run.checkpoint.c_str(), record.round);
  }

  MetricsWriter metrics(args.output + "/metrics.csv", first > 1);
  SiloMetricsWriter silo_metrics(args.output + "/silos.csv", first > 1);
  write_model_files(args.output, run.description.source, run.description.plan_json);
  const auto start = Clock::now();
  auto seconds_now = [&] { return seconds_before + std::chrono::duration<double>(Clock::now() - start).count(); };
  long last = first - 1, missing_before = run.transport.missing_replies(), held_reports = 0;
  // Each silo's term of the objective, summed since the last report (NaN: a missing reply).
  std::vector<double> term_window;
  std::vector<long> terms_in_window;
  bool stop = fixed ? false : monitor.converged();
  Eigen::VectorXd q_mean, q_sd;
  for (long t = first; t <= steps && !stop; ++t) {
    last = t;
    const double objective = coordinator.step(t);
    if (std::isfinite(objective)) window += objective, ++in_window;
    const std::vector<double> terms = coordinator.silo_terms();
    term_window.resize(terms.size(), 0.0), terms_in_window.resize(terms.size(), 0);
    for (size_t k = 0; k < terms.size(); ++k)
      if (std::isfinite(terms[k])) term_window[k] += terms[k], ++terms_in_window[k];
    coordinator.moments(q_mean, q_sd);
    // The rule watches q's means in its sds and its log sds in their own units (tol_param 0.05:
    // 5% of an sd), so that a fit whose spread is still moving is not called converged.
    monitor.observe(objective, q_mean, q_sd, coordinator.params());
    coordinator.set_schedule(monitor.step_scale(), monitor.averaging_epoch(), monitor.mc_factor());
    stop = !fixed && monitor.converged();
    if (stop) {
      // The server's q has settled; parameters it does not see (silos' locals) must have too.
      std::string why = coordinator.unsettled(t, monitor.tol_param());
      if (!why.empty()) {
        if (!args.quiet && held_reports++ % 10 == 0)  // the first and every tenth, not one a window
          std::printf("%s: the server's q has settled, but %s; averaging goes on\n", coordinator.position(t).c_str(),
                      why.c_str());
        monitor.hold(std::move(why)), stop = false;
      }
    }
    if (coordinator.reports(t) || t == steps || stop) {
      const double mean = in_window > 0 ? window / double(in_window) : std::numeric_limits<double>::quiet_NaN();
      const double elbo = coordinator.report_objective(t, mean);
      summary.elbo.push_back(elbo);
      Extra extra;
      const std::string figures = coordinator.metrics(t, extra);
      // The stopping rule's figures as they stand (NaN until it has computed each), for the
      // report's convergence chart beside its tolerances.
      const auto figure = [](double x) { return x >= 0 ? x : std::numeric_limits<double>::quiet_NaN(); };
      extra.push_back({"rule_relative_change", figure(monitor.relative_change())});
      extra.push_back({"rule_drift_sd", figure(monitor.drift())});
      extra.push_back({"rule_standard_error_sd", figure(monitor.precision())});
      extra.push_back({"iteration", double(t)});  // `round` counts the reports (one every `refresh` steps)
      const double seconds = seconds_now();
      const long long sent = run.transport.total_sent(), received = run.transport.total_received();
      metrics.row(int(++reports), elbo, seconds, sent, received, extra);
      std::vector<double> term_means(term_window.size());
      for (size_t k = 0; k < term_window.size(); ++k)
        term_means[k] = terms_in_window[k] > 0 ? term_window[k] / double(terms_in_window[k])
                                               : std::numeric_limits<double>::quiet_NaN();
      silo_metrics.rows(int(reports), run.transport.traffic(), term_means);
      std::fill(term_window.begin(), term_window.end(), 0.0);
      std::fill(terms_in_window.begin(), terms_in_window.end(), 0);
      if (run.observer)
        run.observer->report({t, steps, coordinator.position(t), coordinator.unit(), elbo, seconds, run.transport.traffic()});
      const std::string missing = coordinator.missing_note(run.transport.missing_replies() - missing_before);
      missing_before = run.transport.missing_replies();
      if (!args.quiet) {
        std::printf("%s  elbo %.6g%s  %.2f s  sent %s  received %s%s\n", coordinator.position(t).c_str(), elbo,
                    missing.c_str(), seconds, human_bytes(sent).c_str(), human_bytes(received).c_str(),
                    figures.c_str());
        std::fflush(stdout);
      }
      window = 0, in_window = 0;
    }
    if (!run.checkpoint.empty()) {
      record.kind = coordinator.checkpoint_kind();
      record.round = uint32_t(t);
      record.state = coordinator.state();
      const std::vector<double> rule = monitor.state();
      record.state.insert(record.state.end(), rule.begin(), rule.end());
      record.state.insert(record.state.end(),
                          {double(rule.size()), double(reports), double(in_window), window, seconds_now()});
      record.extra = summary.elbo;
      record.traffic = run.transport.traffic_counts();
      save_checkpoint(run.checkpoint, record);
    }
  }

  // The estimate: the parameters averaged over the rule's last phase, where there is one.
  const Eigen::VectorXd average = monitor.average();
  if (average.size() > 0) coordinator.set_params(average);
  summary.iterations = last;
  summary.converged = monitor.converged();
  summary.relative_change = monitor.relative_change();
  summary.drift = monitor.drift();
  summary.precision = monitor.precision();
  summary.tol = monitor.tol();
  summary.tol_param = monitor.tol_param();
  coordinator.finish(last);
  std::optional<ServerDraws> d = coordinator.draws();
  // A verdict that is not "converged" names the coordinate that moved most (by the draws' layout).
  std::string verdict =
      monitor.converged() ? monitor.verdict(last, coordinator.unit()) + coordinator.settled_note()
                          : monitor.verdict(last, coordinator.unit(),
                                            d ? moving_most(monitor, d->layout, q_mean.size(), coordinator) : "",
                                            // `--set rounds=N` ran exactly N: a larger max_rounds would not help.
                                            fixed ? "a larger --set rounds (it ran exactly that many)"
                                                  : "a larger max_rounds");
  if (!monitor.converged() && d && q_mean.size() > 0)
    verdict += far_from_start(q_mean, settings.number("lr", 0.01), last, d->layout, coordinator);
  // A silo that answered fewer than half of its requests (silent_silos): loud, whatever the rule
  // says of the rest.
  const std::string silent = silent_silos(run.transport.traffic());
  if (!silent.empty()) {
    long refused = 0;
    for (const SiloTraffic& t : run.transport.traffic()) refused += t.refused;
    summary.converged = false;
    verdict = "NOT converged after " + std::to_string(last) + " " + coordinator.unit() + ": " + silent +
              ", so the fit lacks their terms (" +
              (refused > 0 ? "a refused reply was malformed or held a value that is not finite: check the model and "
                             "the data at q's starting point"
                           : "their replies never came: a silo down or past the deadline") +
              "; silos.csv counts each silo's missing and refused replies)";
  }
  // The block's `rounds` written for one method caps another's iterations (`--set method=sfvi` on
  // a PVI model's 10 rounds): say where the cap came from.
  if (!monitor.converged() && !fixed && !settings.has("max_rounds") && settings.has("rounds"))
    verdict += " (The maximum is the inference block's rounds = " + std::to_string(settings.integer("rounds", 0)) +
               "; --set max_rounds=N raises it.)";
  std::string khat_line;
  Reweighted reweighted;
  TailCheck tail;
  MomentCorrection correction;
  std::vector<std::string> violations;  // declared bounds of quantities broken at some draw
  DrawsFile file;
  std::vector<VariableLayout> layout;
  Eigen::MatrixXd constrained;
  // PSIS fits the largest M = min(0.2 S, 3 sqrt S) ratios and needs M >= 5, and below 100 draws
  // k-hat is itself unreliable (its threshold 1 - 1/log10 S is 0.5 at S = 100: Vehtari et al.
  // 2024): from fewer draws no k-hat, and no exchange for it, only for silo_sum quantities.
  const bool too_few = d && d->unconstrained.cols() < kMinKhatDraws;
  // The tail check first (a surrogate target is measured by k-hat already; the check is about
  // q's shape), then, where it finds q's moments off, q moved to the posterior's: the outputs and
  // k-hat below are the corrected q's.
  if (d && !too_few && coordinator.target_note().empty()) {
    const long long sent = run.transport.total_sent(), received = run.transport.total_received();
    try {
      correction = correct_moments(*d, coordinator, uint64_t(settings.integer("seed", 1)),
                                   settings.name("correct_moments", "on") != "off");
    } catch (const std::exception& e) {
      // A check on top of the fit: the run's outputs stand without it (q is then the ELBO's).
      correction = MomentCorrection{};
      correction.check.line = std::string("tail check: not made (") + e.what() + ")";
    }
    tail = correction.check;
    // A corrected q whose passes never found the moments they were built around (their estimates
    // scatter: a funnel between a slope and its scale, raw_hier's) is the closest Gaussian
    // checked, not one whose moments are known close: no line may say they are (the silos' locals,
    // which follow the globals' spread, were 0.76-0.82 of the reference's sds there).
    if (correction.adopted && !correction.settled) tail.moments_hold = false;
    if (!args.quiet && run.transport.total_sent() > sent)
      std::printf("tail check exchange%s: sent %lld bytes, received %lld bytes\n",
                  correction.passes > 0 ? "s" : "", run.transport.total_sent() - sent,
                  run.transport.total_received() - received);
    if (correction.adopted) d = coordinator.draws();
    summary.moments_corrected = correction.adopted;
  }
  if (d) {
    file.model = run.description.name;
    file.layout = d->layout;
    file.mean = constrain(d->layout, d->mean).col(0);
    file.draws = d->constrained;
    file.log_g = d->log_q;
    file.config = settings.entries();
    std::string why;
    Coordinator::Closing closing;
    const long long sent_before = run.transport.total_sent(), received_before = run.transport.total_received();
    const Eigen::Index draws = d->unconstrained.cols();
    const bool closed = too_few && silo_sum_count(run.model) == 0 ? false : coordinator.closing(*d, closing, why);
    if (too_few)
      why = "not computed (" + std::to_string(draws) + " draws of q; k-hat needs " + std::to_string(kMinKhatDraws) +
            " or more: set output_draws)";
    // What the closing exchange cost on the wire, beside the per-round bytes in metrics.csv.
    if (!args.quiet && run.transport.total_sent() > sent_before)
      std::printf("closing exchange: sent %lld bytes, received %lld bytes\n", run.transport.total_sent() - sent_before,
                  run.transport.total_received() - received_before);
    if (closed && too_few) {  // the silo_sum parts only
      file.log_p = closing.log_p;
      file.log_g = closing.log_g;
    }
    if (closed && !too_few) {
      const Eigen::VectorXd& log_p = closing.log_p;
      const Eigen::VectorXd& log_g = closing.log_g;
      // Yao et al. 2018: k-hat of the importance ratios p / q at draws of q.
      const Eigen::VectorXd ratio = log_p - log_g;
      const diagnostics::PsisResult smoothed = diagnostics::psis(std::vector<double>(ratio.data(), ratio.data() + ratio.size()));
      summary.khat = smoothed.khat;
      reweighted = reweighted_moments(*d, smoothed);
      // The silos' locals at the written model's posterior where the weights hold (a surrogate
      // target's locals stay the surrogate's, as its globals do).
      if (smoothed.khat <= 0.7 && coordinator.target_note().empty() &&
          std::all_of(smoothed.log_weights.begin(), smoothed.log_weights.end(), [](double v) { return std::isfinite(v); }))
        coordinator.weigh_locals(smoothed.log_weights);
      file.log_p = log_p;
      file.log_g = log_g;
      char text[256];
      if (std::isinf(summary.khat) && summary.khat < 0)  // psis(): ratios equal to a millionth
        std::snprintf(text, sizeof text, "Pareto k-hat -inf (good: the importance ratios are constant, so q is this "
                                         "posterior up to float error)");
      else
        std::snprintf(text, sizeof text, "Pareto k-hat %.2f (%s: < 0.5 good, 0.5-0.7 usable, > 0.7 %s)", summary.khat,
                      diagnostics::khat_reading(summary.khat), "the approximation is poor for this posterior");
      khat_line = text + coordinator.target_note();
    } else {
      khat_line = "Pareto k-hat: " + why;
      // A surrogate target is still named where its cost cannot be measured.
      if (!coordinator.target_note().empty())
        khat_line += "; this run fitted a surrogate of the written model (`fvic plan` names it), whose cost is "
                     "therefore not measured";
    }
    file.fvic = {{"method", method},
                 {"iterations", std::to_string(last)},
                 {"converged", summary.converged ? "1" : "0"},
                 {"khat", r_number(summary.khat)}};
    if (correction.adopted) file.fvic.push_back({"moments_corrected", "1"});
    if (!d->family.empty()) file.fvic.push_back({"family", d->family});
    // The server's transformed parameters and generated quantities, beside the parameters.
    layout = d->layout;
    constrained = d->constrained;
    // The draws hold the globals, then (SFVI) the hyperparameters' point estimates as constant rows.
    const Eigen::Index n_global = engine::group_dim(run.model, FVI_GROUP_GLOBAL, run.server_data.view());
    const Eigen::Index n_hyper = d->unconstrained.rows() - n_global;
    const bool has_hyper = n_hyper > 0 && n_hyper == engine::group_dim(run.model, FVI_GROUP_HYPER, run.server_data.view());
    if (n_hyper != 0 && !has_hyper) {
      std::fprintf(stderr, "note: the server's transformed parameters and generated quantities are not computed: "
                           "its draws of %s are not laid out as the model's groups\n", d->what.c_str());
    } else {
      GroupDraws groups{{FVI_GROUP_GLOBAL, d->unconstrained.topRows(n_global)}};
      if (has_hyper) groups[FVI_GROUP_HYPER] = d->unconstrained.bottomRows(n_hyper).col(0);
      std::vector<std::string> skipped;
      const QuantityDraws q = evaluate_quantities(run.model, FVI_SERVER, run.server_data.view(), groups, d->layout,
                                                  d->constrained, d->constrained.rows(),
                                                  uint64_t(settings.integer("seed", 1)), skipped);
      append_quantities(q, layout, constrained);
      violations = q.violations;
      // Then the sums over the silos of their parts, which they sent with the closing exchange.
      if (silo_sum_count(run.model) > 0) {
        if (closed) {
          const QuantityDraws sums = silo_sums(run.model, run.server_data.view(), closing.silo_sums, d->layout,
                                               d->constrained, constrained.rows());
          append_quantities(sums, layout, constrained);
          violations.insert(violations.end(), sums.violations.begin(), sums.violations.end());
        } else {
          std::fprintf(stderr, "note: the silo_sum quantities are not computed: the silos' parts come with the "
                               "closing exchange, which was %s\n", why.c_str());
        }
      }
      file.layout = layout;
      file.draws = constrained;
      file.mean.conservativeResize(constrained.rows());
      file.mean.tail(constrained.rows() - d->constrained.rows()) =
          constrained.bottomRows(constrained.rows() - d->constrained.rows()).rowwise().mean();
      for (const std::string& name : skipped) std::fprintf(stderr, "note: %s is not computed yet\n", name.c_str());
    }
  }
  const std::string family = settings.name("family", d && !d->family.empty() ? d->family : "meanfield");
  if (summary.khat > 0.7 && tail.moments_hold)  // the tail check runs only against the written model
    summary.khat_reading = "poor tails: q's tails are lighter than the posterior's; its means and sds are close (the tail check)";
  // k-hat reads q's own draws, which rarely reach the mass q misses: where the tail check finds it
  // (a hierarchy's location and scale from few groups: k-hat 0.34 with sds 24-43% short), the
  // report must not call the fit good.
  if (summary.khat <= 0.7 && !tail.warning.empty())
    summary.khat_reading = std::string(diagnostics::khat_reading(summary.khat)) +
                           " by q's own draws, but q's tails are lighter than the posterior's (the tail check)";
  std::vector<ClosingLine> lines = closing_lines(verdict, summary.converged, khat_line, reweighted, summary.khat,
                                                 coordinator.target_note(), coordinator.surrogate_advice(), family,
                                                 correction.adopted, tail);
  if (!correction.line.empty()) lines.push_back({true, false, correction.line});
  if (!tail.line.empty()) lines.push_back({true, false, tail.line});
  if (!tail.warning.empty()) lines.push_back({false, true, tail.warning});
  for (const std::string& w : coordinator.closing_warnings()) lines.push_back({true, true, w});
  for (const ClosingLine& line : lines) summary.notes.push_back({line.warning ? "warning" : "info", line.text});
  if (run.observer) run.observer->finished(summary.notes);
  if (d) {
    write_posterior_json(args.output + "/posterior.json", summary, layout, constrained, d->mean, d->sd);
    write_draws_csv(args.output + "/draws.csv", file);
    if (!args.quiet) print_summary("posterior of " + d->what, layout, constrained);
  }
  // The run's page (fvic report OUT makes it again): a run whose report cannot be made (the
  // charting library missing from this build) has still written everything else.
  std::string report = ", report.html";
  try {
    if (!run.report_after_silos) report::write_report(args.output);
  } catch (const std::exception& e) {
    report.clear();
    std::fprintf(stderr, "note: no report.html: %s\n", e.what());
  }
  if (!args.quiet)
    std::printf("wrote %s/%smetrics.csv, silos.csv%s%s\n", args.output.c_str(), d ? "posterior.json, draws.csv, " : "",
                report.c_str(), coordinator.outputs_note().c_str());
  // The verdict goes last, where a user looks; a warning goes to stderr too (after stdout is
  // flushed, so that a terminal shows the two in order).
  for (const ClosingLine& line : lines) {
    if (line.on_stdout) std::printf("%s\n", line.text.c_str());
    std::fflush(stdout);
    if (line.warning) std::fprintf(stderr, "warning: %s\n", line.text.c_str());
  }
  std::fflush(stdout);
  // A quantity outside its declared bounds: the outputs are written, and the run fails loudly.
  for (const std::string& v : violations) std::fprintf(stderr, "error: %s\n", v.c_str());
  return violations.empty() ? 0 : 1;
}

}  // namespace fvi::program
