#include "fvi/program/vfl_tail_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "fvi/diagnostics/psis.h"
#include "fvi/engine/bound_factor.h"
#include "fvi/message/codec.h"
#include "fvi/message/sizes.h"
#include "fvi/program/declared_moments.h"
#include "fvi/program/output.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

// The proposal's noise: every party's own rows of it, as q's output draws are drawn.
constexpr uint32_t kTailStream = rng_stream::kUserStream + 32;
constexpr double kMaxWidth = 16;  // the proposal's scale over q's, at most

// [key, S, width] at the head of a request: the draws' key and count, and the proposal's scale
// over q's (1, or 2 for the check made again wider).
struct TailRequest {
  uint64_t key = 0;
  long draws = 0;
  double width = 1;
};
TailRequest read_tail_request(const Message& request, const char* what) {
  const KeyedDraws head = read_keyed_draws(request, what);
  if (request.size() < 3 || !(request[2] >= 1 && request[2] <= kMaxWidth))
    throw std::invalid_argument(std::string(what) + "'s proposal width is not from 1 to 16");
  return {head.key, head.draws, request[2]};
}

// The proposal's whitened draws a_s eps_s, the silo's rows of them (its draws of its block are
// theta_draws(width * these)).
Eigen::MatrixXd proposal_noise(const engine::VflSilo& silo, uint64_t key, long draws) {
  return silo.theta_noise(key, kTailStream, draws) * tail_scales(key, draws).asDiagonal();
}

// Where an element of a variable of `dims` sits, 1-based as element_names writes it: (0, 0) for
// a scalar, (i, 0) in a vector, (i, j) in a matrix (column-major).
std::pair<int64_t, int64_t> element_position(const std::vector<int64_t>& dims, int64_t j) {
  if (dims.empty()) return {0, 0};
  if (dims.size() == 1 || dims[0] <= 0) return {j + 1, 0};
  return {j % dims[0] + 1, j / dims[0] + 1};
}

// Row `row` of the block `layout` lays out, as [its variable's index in the model, i, j].
void write_element(const fvi_model& model, const std::vector<VariableLayout>& layout, Eigen::Index row,
                   message::Writer& out) {
  for (const VariableLayout& v : layout) {
    if (row < v.offset || row >= v.offset + v.elements()) continue;
    for (int i = 0; i < model.variable_count; ++i)
      if (v.name == model.variables[i].name) {
        const auto at = element_position(v.dims, row - v.offset);
        out.value(double(i)).value(double(at.first)).value(double(at.second));
        return;
      }
  }
  out.value(-1).value(0).value(0);
}

// The name of the element a silo's reply gives as [variable, i, j] ("" where it is none).
std::string element_name(const fvi_model& model, double variable, double i, double j) {
  const auto count = [](double x) { return x >= 0 && x <= 1e9 && x == std::floor(x); };
  if (!(variable >= 0 && variable < double(model.variable_count) && variable == std::floor(variable)) || !count(i) ||
      !count(j))
    return "";
  const fvi_variable_info& info = model.variables[int(variable)];
  if (engine::group_kind(model, info.group) != FVI_GROUP_SPLIT) return "";
  std::string name = info.name;
  if (i > 0) name += "." + std::to_string(int64_t(i));
  if (j > 0) name += "." + std::to_string(int64_t(j));
  return name;
}

}  // namespace

Message vfl_tail_draws(engine::VflSilo& silo, const Message& request) {
  const TailRequest head = read_tail_request(request, "a tail-draws request");
  const long draws = head.draws;
  // Where its split priors read globals, the globals' draws of the proposal follow.
  const Eigen::Index G = silo.prior_reads_globals() ? silo.global_dim() : 0;
  if (request.size() != size_t(3 + G * draws))
    throw std::invalid_argument("a tail-draws request has " + std::to_string(request.size()) + " values, not " +
                                std::to_string(3 + G * draws));
  const Eigen::MatrixXd globals = Eigen::Map<const Eigen::MatrixXd>(request.data() + 3, G, G > 0 ? draws : 0);
  if (!globals.allFinite()) throw std::invalid_argument("a tail-draws request's globals are not finite");
  const Eigen::MatrixXd white = proposal_noise(silo, head.key, draws);
  const engine::VflSilo::LogJointPart part = silo.log_joint_at(silo.theta_draws(head.width * white), globals);
  // Whitened by the proposal's own scale, width L: the same distance, a log det larger by p_k log width.
  return message::Writer()
      .values(part.eta)
      .values(part.log_prior)
      .values(silo.own_noise_norm2(white))
      .value(silo.own_log_det() + double(silo.split_dim()) * std::log(head.width))
      .value(double(silo.split_dim()))
      .done();
}

Message vfl_tail_moments(const engine::VflSilo& silo, const fvi_model& model, const fvi_data& data,
                         const Message& request, uint64_t q_key, long q_draws) {
  const TailRequest head = read_tail_request(request, "a tail-moments request");
  const long draws = head.draws;
  if (request.size() != size_t(3 + draws))
    throw std::invalid_argument("a tail-moments request has " + std::to_string(request.size()) + " values, not " +
                                std::to_string(3 + draws));
  const std::vector<double> log_weights(request.begin() + 3, request.end());
  for (double w : log_weights)
    if (!std::isfinite(w)) throw std::invalid_argument("a tail-moments request's weight is not finite");
  const std::vector<VariableLayout> layout = variable_layout(model, FVI_GROUP_SPLIT, data);
  // q's own moments (declared_moments), from its output draws where a transform needs them.
  ServerDraws q;
  q.layout = layout;
  q.unconstrained = silo.theta_draws(silo.theta_noise(q_key, rng_stream::kUserStream + 3, std::max(2L, q_draws)));
  q.constrained = constrain(layout, q.unconstrained);
  q.mean = silo.theta_mean();
  q.sd = silo.theta_sd();
  const DeclaredMoments moments = declared_moments(q);
  const Eigen::MatrixXd g = constrain(layout, silo.theta_draws(head.width * proposal_noise(silo, head.key, draws)));
  TailFigures f;
  add_tail_figures(layout, q.constrained, moments.mean, moments.sd, diagnostics::weighted_means(g, log_weights),
                   diagnostics::weighted_sds(g, log_weights), f);
  message::Writer out;
  out.value(f.worst_mean);
  write_element(model, layout, f.mean_row, out);
  out.value(f.worst_sd);
  write_element(model, layout, f.sd_row, out);
  out.value(f.sd_from).value(f.sd_to);
  return out.done();
}

namespace {

// One check with the proposal `width` times q's scale (see vfl_tail_check).
void check_with(engine::VflServer& server, Transport& transport, const fvi_model& model, bool prior_globals,
                const ServerDraws& d, uint64_t key, uint32_t round, double width, TailCheck& out) {
  const Eigen::Index N = server.rows(), n_global = server.global_dim();
  // As many draws as the other checks take, within the rows' limit on a request (eta_k is N x S).
  const long S = std::min<long>(std::max<long>(long(d.unconstrained.cols()), kTailCheckMinDraws),
                                std::max(100L, long(kMaxLogJointRequest / N)));
  // Before asking: the joint family's size is known; under mean-field it comes with the replies.
  if (server.joint() && (server.joint_total() > kTailCheckMaxParameters || S < 20 * server.joint_total())) return;
  const Eigen::VectorXd scales = tail_scales(key, S);
  const Eigen::MatrixXd eps = server.output_noise(key, kTailStream, S) * scales.asDiagonal();
  const Eigen::MatrixXd fit = server.globals(width * eps);
  Message draws_request{double(key), double(S), width};
  if (prior_globals) draws_request.insert(draws_request.end(), fit.data(), fit.data() + fit.size());
  std::vector<Message> replies;
  const size_t reply_size = size_t(message::vfl_rows_size<int64_t>(N, S) + 2 * S + 2);
  if (!ask_every_silo(transport, round, Phase::kVflTailDraws, draws_request, reply_size, replies)) {
    out.line = "tail check: not made (a silo did not send its part)";
    return;
  }
  Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(N, S);
  Eigen::VectorXd silo_prior = Eigen::VectorXd::Zero(S), d2 = server.own_noise_norm2(eps);
  double log_det = server.own_log_det() + double(n_global) * std::log(width);
  Eigen::Index total = n_global;
  for (const Message& m : replies) {
    message::Reader in(m, "a silo's tail-check draws");
    eta += in.matrix(N, S, "eta_k");
    silo_prior += in.vector(S, "log p(theta_k)");
    d2 += in.vector(S, "its noise's squared norm");
    log_det += in.value("its log det");
    const double p = in.value("its block's size");
    in.finish();
    if (!(p >= 0 && p <= 1e7 && p == std::floor(p))) throw std::invalid_argument("a silo's block size is not a count");
    total += Eigen::Index(p);
  }
  if (server.joint() && total != server.joint_total())
    throw std::invalid_argument("the silos' blocks add up to " + std::to_string(total) + " parameters, not the layout's " +
                                std::to_string(server.joint_total()));
  if (total > kTailCheckMaxParameters || S < 20 * total) return;
  const Eigen::MatrixXd b = server.written(fit, eta);
  Eigen::VectorXd log_p;
  if (!server.log_joint(b, eta, log_p)) return;
  log_p += silo_prior;
  std::vector<double> ratio(static_cast<size_t>(S));
  for (Eigen::Index s = 0; s < S; ++s) ratio[size_t(s)] = log_p[s] - log_tail_proposal(d2[s], double(total), log_det);
  const diagnostics::PsisResult smoothed = diagnostics::psis(ratio);
  TailFigures f;
  f.khat = smoothed.khat;
  if (!(smoothed.khat <= 0.7)) {
    out = tail_verdict(f);
    return;
  }
  // The server's globals, written scale: the proposal's weighted moments against q's own.
  const DeclaredMoments q = declared_moments(d);
  const Eigen::MatrixXd g = constrain(d.layout, b);
  add_tail_figures(d.layout, d.constrained, q.mean, q.sd, diagnostics::weighted_means(g, smoothed.log_weights),
                   diagnostics::weighted_sds(g, smoothed.log_weights), f);
  // Each silo's block, by the silo, at the same weights.
  Message request{double(key), double(S), width};
  request.insert(request.end(), smoothed.log_weights.begin(), smoothed.log_weights.end());
  std::vector<Message> moments;
  if (!ask_every_silo(transport, round, Phase::kVflTailMoments, request, kVflTailMomentsSize, moments)) {
    out.line = "tail check: not made (a silo did not weigh its block)";
    return;
  }
  for (size_t k = 0; k < moments.size(); ++k) {
    const Message& m = moments[k];
    const double shift = m[0], change = m[4];
    if (!(shift >= 0) || !(change >= -1)) throw std::invalid_argument("a silo's tail figures are not a shift and a change");
    // Named by the silo's variable and position; an element it cannot name, by the silo.
    const auto name = [&](double variable, double i, double j) {
      const std::string n = element_name(model, variable, i, j);
      return n.empty() ? "silo " + std::to_string(k + 1) + "'s block" : n + " (silo " + std::to_string(k + 1) + ")";
    };
    if (shift > f.worst_mean) f.worst_mean = shift, f.mean_name = name(m[1], m[2], m[3]);
    if (std::abs(change) > std::abs(f.worst_sd))
      f.worst_sd = change, f.sd_name = name(m[5], m[6], m[7]), f.sd_from = m[8], f.sd_to = m[9];
  }
  for (double lw : smoothed.log_weights) f.ess += std::exp(2 * lw);
  f.ess = f.ess > 0 ? 1 / f.ess : 0;
  out = tail_verdict(f);
  // The posterior's moments stay the parties' (no Gaussian over every block is adopted).
  out.reliable = false;
}

}  // namespace

void vfl_tail_check(engine::VflServer& server, Transport& transport, const fvi_model& model, bool prior_globals,
                    const ServerDraws& d, uint64_t key, uint32_t round, TailCheck& out) {
  if (server.rows() <= 0) return;
  check_with(server, transport, model, prior_globals, d, key, round, 1, out);
  if (out.khat <= 0.7 || !std::isfinite(out.khat)) return;
  // Posterior mass beyond even the t's reach around q (a split block's scale from few columns): once
  // more with the proposal twice as wide, as tail_check does. Its verdict stands where its own
  // sampling holds; else the first's.
  // In a round of its own: a deployed silo answers a (round, phase) it has answered again from its
  // cache (a resumed server's repeat).
  TailCheck wide;
  check_with(server, transport, model, prior_globals, d, key, round + 1, 2, wide);
  char around[96];
  if (!(wide.khat <= 0.7)) {
    std::snprintf(around, sizeof around, ", and twice as wide %.2f", wide.khat);
    if (wide.khat > 0.7 && !out.line.empty()) out.line += around;
    return;
  }
  std::snprintf(around, sizeof around, " (its proposal twice q's width: around q itself, k-hat %.2f)", out.khat);
  if (!wide.line.empty()) wide.line += around;
  wide.width = 2;
  out = wide;
}

}  // namespace fvi::program
