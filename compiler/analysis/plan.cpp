#include "analysis/plan.h"
#include "analysis/centring.h"
#include "analysis/class_shift.h"
#include "analysis/stated_priors.h"
#include "inference_keys.h"

#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fvi/message/sizes.h"

namespace fvic {

// What fvi/message/sizes.h needs of a size type, for the model's symbolic sizes (found by
// argument-dependent lookup).
SymSize size_constant(const SymSize&, long long v) { return SymSize::constant(v); }
SymSize half(const SymSize& x) { return x.divided_by(2); }

const char* method_key(Method m) {
  switch (m) {
    case Method::PVI: return "pvi";
    case Method::FedAvg: return "fedavg";
    case Method::FedVEM: return "fedvem";
    case Method::FedAvgFSVI: return "fedavg_fsvi";
    case Method::FedVEMHSVI: return "fedvem_hsvi";
    case Method::SFVI: return "sfvi";
    case Method::SFVIAvg: return "sfvi_avg";
    case Method::Independent: return "independent";
    case Method::VFLExact: return "vfl_exact";
    case Method::VFLAugmented: return "vfl_augmented";
    case Method::VFLPower: return "vfl_power";
  }
  return "?";
}

const char* method_title(Method m) {
  switch (m) {
    case Method::PVI: return "PVI (partitioned variational inference; FedGVI)";
    case Method::FedAvg: return "FedAvg WSVI (federated averaging of a mean-field q; seed 001 Algorithm 1)";
    case Method::FedVEM: return "FedVEM WSVI (variational EM of a hierarchical surrogate; seed 001 Algorithm 2)";
    case Method::FedAvgFSVI: return "FedAvg FSVI (federated averaging, a function-space prior at context points; seed 001 Algorithm 3)";
    case Method::FedVEMHSVI: return "FedVEM HSVI (variational EM, function-space local and weight-space server KL; seed 001 Algorithm 5)";
    case Method::SFVI: return "SFVI (structured federated VI)";
    case Method::SFVIAvg: return "SFVI-Avg (structured federated VI with local steps and averaging)";
    case Method::Independent: return "independent (each silo fits its own data, no communication)";
    case Method::VFLExact: return "exact split-predictor VI (the written model)";
    case Method::VFLAugmented: return "VFL augmented-variable model (AXDA, an approximation)";
    case Method::VFLPower: return "VFL power-likelihood model (AXDA, an approximation)";
  }
  return "?";
}

namespace {

std::string at_line(const Symbol& s) { return "`" + s.name + "` (line " + std::to_string(s.loc.line) + ")"; }

std::string join(const std::vector<std::string>& items, const std::string& last_sep = " and ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += i + 1 == items.size() ? last_sep : ", ";
    out += items[i];
  }
  return out;
}

// A parameter's size in the unconstrained space: a simplex of K has K-1 free values.
SymSize free_size(const Symbol& s) {
  SymSize n = s.shape.elements();
  if (s.decl && s.decl->type.simplex && !s.shape.dims.empty()) {
    SymSize per = s.shape.dims.back();
    SymSize arrays = SymSize::constant(1);
    for (size_t i = 0; i + 1 < s.shape.dims.size(); ++i) arrays = arrays * s.shape.dims[i];
    n = arrays * (per - SymSize::constant(1));
  }
  return n;
}

struct Groups {
  std::vector<const Symbol*> globals, locals, splits, global_hypers, local_hypers, split_hypers;
  std::vector<const Symbol*> silo_data, split_data, server_data;
};

// Why PVI cannot hold the density of `globals` ("" when it can): PVI's server holds their prior as
// one Gaussian factor, so each must be `normal(a, b)` with a and b free of parameters, on an
// unconstrained parameter, and nothing else may add to it; a silo's likelihood a PVI client takes
// only as a `~` statement of its data.
std::string why_pvi_cannot_hold(const SemanticModel& m, const std::vector<const Symbol*>& globals) {
  const auto prior = [](const std::string& why) { return why + "; PVI needs a Gaussian prior on every global parameter"; };
  for (const Term& t : m.terms)
    if (t.in_program && t.owner == TermOwner::Silo)
      return "the model block runs as statement programs (a statement the vectorised forms refuse), so the "
             "silos' term on line " + std::to_string(t.loc.line) + " is no factor of its own, and a PVI client "
             "takes a likelihood only as a vectorised `~` statement of its data";
  for (const Symbol* s : globals) {
    const TypeDecl& type = s->decl->type;
    if (type.lower || type.upper || type.simplex || type.ordering != Ordering::None || type.structure != MatrixStructure::None || type.affine()) return prior(at_line(*s) + " is constrained, so its prior on the unconstrained scale is not Gaussian");
    bool has_prior = false;
    for (const Term& t : m.terms) {
      if (t.kind == TermKind::Likelihood) continue;
      if (t.kind == TermKind::Target && !t.taint.has(TaintKind::GlobalParam)) continue;
      if (t.kind == TermKind::Target) {
        const std::string what =
            (t.conditional ? "`" + to_source(*t.stmt->lhs) + " ~ " + t.stmt->name + "` inside an `if`"
             : t.stmt->kind == StmtKind::Tilde
                 ? "the density of a computed value, `" + to_source(*t.stmt->lhs) + " ~ " + t.stmt->name + "`"
                 : std::string("a `target +=` statement")) +
            " (line " + std::to_string(t.loc.line) + ")";
        if (t.owner == TermOwner::Silo)
          return what + " scores silo data: a PVI client takes a likelihood only as a `~` statement of its data";
        return prior(what + " adds to the globals' density");
      }
      if (t.subject != s->name) continue;
      has_prior = true;
      if (t.distribution != "normal")
        return prior("the prior of " + at_line(*s) + " is " + t.distribution + "(), not normal()");
      const bool via_target = t.stmt->kind == StmtKind::Target;
      const std::vector<ExprPtr>& args = via_target ? t.stmt->args[0]->args : t.stmt->args;
      for (size_t i = via_target ? 1 : 0; i < args.size(); ++i)
        for (TaintKind k : {TaintKind::GlobalParam, TaintKind::GlobalHyper})
          if (args[i]->taint.has(k)) return prior("the prior of " + at_line(*s) + " depends on parameters");
    }
    if (!has_prior) return prior(at_line(*s) + " has no prior (a flat prior is not a Gaussian factor)");
  }
  return "";
}

Groups group(const SemanticModel& m) {
  Groups g;
  for (const Symbol& s : m.symbols) {
    bool param = s.kind == SymbolKind::Parameter, hyper = s.kind == SymbolKind::Hyperparameter;
    if (s.kind == SymbolKind::Data) {
      if (s.owner == Owner::Silo) g.silo_data.push_back(&s);
      if (s.owner == Owner::Split) g.split_data.push_back(&s);
      if (s.owner == Owner::Server) g.server_data.push_back(&s);
      continue;
    }
    if (!param && !hyper) continue;
    auto& bucket = s.owner == Owner::Silo    ? (param ? g.locals : g.local_hypers)
                   : s.owner == Owner::Split ? (param ? g.splits : g.split_hypers)
                                             : (param ? g.globals : g.global_hypers);
    bucket.push_back(&s);
  }
  return g;
}

std::vector<std::string> names(const std::vector<const Symbol*>& symbols) {
  std::vector<std::string> out;
  for (const Symbol* s : symbols) out.push_back(s->name);
  return out;
}

SymSize total(const std::vector<const Symbol*>& symbols) {
  SymSize n = SymSize::constant(0);
  for (const Symbol* s : symbols) n = n + free_size(*s);
  return n;
}


std::string family_words(const std::string& family) {
  if (family == "fullrank") return "means and Cholesky factor";
  if (family == "structured") return "means, log-scales and unit-lower-triangular L_G";
  return "means and log-scales";
}

const Term* coupling_term(const SemanticModel& m) {
  for (const Term& t : m.terms)
    if (t.owner == TermOwner::Coupling) return &t;
  return nullptr;
}

// The coupled outcome of a vertical model (the subject of its silo_sum likelihood) and its number
// of rows: the size of every per-row message.
const Symbol* coupled_outcome(const SemanticModel& m) {
  const Term* t = coupling_term(m);
  return t ? m.find(t->subject) : nullptr;
}
SymSize coupled_rows(const SemanticModel& m) {
  const Symbol* y = coupled_outcome(m);
  return y ? y->shape.elements() : SymSize::atom("N");
}

SymSize draws(const SemanticModel& m) {
  auto it = m.settings.values.find("mc_samples");
  if (it != m.settings.values.end()) return SymSize::constant(static_cast<long long>(it->second.number));
  return SymSize::constant(1);
}

// SFVI's silos take the local reparameterisation where q is mean-field and there are no locals
// (SfviSilo::local_reparam; `local_reparam = off` keeps seed 002's shared draws).
bool local_reparam(const SemanticModel& m, const Plan& plan, const Groups& g) {
  return plan.family == "meanfield" && g.locals.empty() && m.settings.name("local_reparam", "on") == "on";
}

// The first split prior that reads a global parameter, or nullptr.
const Term* split_prior_reading_globals(const SemanticModel& m) {
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Prior && t.owner == TermOwner::SplitSilo && t.taint.has(TaintKind::GlobalParam)) return &t;
  return nullptr;
}

void add_messages(Plan& plan, const SemanticModel& m, const Groups& g) {
  SymSize G = total(g.globals), H = total(g.global_hypers), S = draws(m);
  std::string qg = "q(" + join(names(g.globals), ", ") + ")";
  // The sizes the runtime packs and checks (fvi/message/sizes.h), here in the model's symbols.
  using namespace fvi::message;
  SymSize Q = pvi_engine(plan.method) ? gaussian_natural_size(G, plan.family == "fullrank")
                                      : gaussian_params_size(plan.family, G);
  std::string hyper_names = join(names(g.global_hypers), ", ");
  // Every vertical iteration opens with it (runtime/src/program/vfl_run.cpp, silo_settling.h).
  const std::string schedule_words =
      "the stopping rule's step scale, averaging epoch and draws per gradient, the same for every silo";
  switch (plan.method) {
    case Method::PVI:
      plan.messages.push_back({"server", "silo k",
                               "the global posterior " + qg + " and silo k's factor t_k in natural parameters, "
                               "and whether it is silo k's first update",
                               pvi_update_request_size(Q)});
      plan.messages.push_back({"silo k", "server", "the damped change of silo k's factor, in natural parameters",
                               pvi_update_reply_size(Q)});
      break;
    case Method::FedAvg:
    case Method::FedAvgFSVI:
      plan.messages.push_back({"server", "silo k",
                               "the global " + qg + " in natural parameters, and q over the prior (silo k's "
                               "cavity is then the prior" +
                                   std::string(plan.method == Method::FedAvg
                                                   ? ", its KL weighted 1/S: seed 001 Eq. 30)"
                                                   : ", linearised at silo k's context points: seed 001 Eq. 27)"),
                               pvi_update_request_size(Q)});
      plan.messages.push_back({"silo k", "server",
                               "the change of q after silo k's local optimisation, in natural parameters, and silo "
                               "k's number of rows (its weight)",
                               fedavg_update_reply_size(Q)});
      break;
    case Method::FedVEM:
    case Method::FedVEMHSVI:
      plan.messages.push_back({"server", "silo k",
                               "N(mu, sigma^2), the hierarchical prior of every silo's own copy of the globals, in "
                               "natural parameters (and an empty factor)",
                               pvi_update_request_size(Q)});
      plan.messages.push_back({"silo k", "server", "silo k's fitted q_k, as its change from N(mu, sigma^2), in natural parameters",
                               pvi_update_reply_size(Q)});
      break;
    case Method::SFVI: {
      std::string down = qg + ": " + family_words(plan.family);
      if (!g.global_hypers.empty()) down += "; hyperparameters " + hyper_names;
      if (local_reparam(m, plan, g))
        down += "; the round, from which each silo draws its own noise (local reparameterisation: the products of "
                "its data and the globals sampled as their Gaussians, row by row)";
      else
        down += "; the round, from which each silo makes the shared draws eps_G";
      if (!m.settings.has("mc_samples"))  // fvi/optim/convergence.h: max_mc_factor 16 for SFVI
        down += " (one draw; the stopping rule may double the draws, up to 16, late in the run)";
      down += "; the stopping rule's step scale, averaging epoch and draws per gradient";
      plan.messages.push_back({"server", "silo k", down, sfvi_contribute_request_size(Q, H)});
      std::string up = "gradient w.r.t. the parameters of " + qg;
      if (!g.global_hypers.empty()) up += " and " + hyper_names;
      plan.messages.push_back({"silo k", "server", up + "; silo k's ELBO term", sfvi_message_size(Q, H)});
      break;
    }
    case Method::SFVIAvg: {
      std::string what = qg + ": " + family_words(plan.family);
      if (!g.global_hypers.empty()) what += "; hyperparameters " + hyper_names;
      plan.messages.push_back({"server", "silo k", what + "; the round, the steps to take and their scale",
                               sfvi_fit_locally_request_size(Q, H)});
      plan.messages.push_back({"silo k", "server", "the same after silo k's local steps; its objective",
                               sfvi_message_size(Q, H)});
      break;
    }
    case Method::Independent: break;
    case Method::VFLExact: {
      const Symbol* y = coupled_outcome(m);
      const SymSize N = coupled_rows(m);
      const std::string yn = y ? y->name : std::string("y");
      plan.messages.push_back({"server", "silo k", schedule_words, silo_schedule_size(N)});
      plan.messages.push_back({"silo k", "server",
                               "eta_k: silo k's partial predictor per row and draw (reveals silo k's contribution to "
                               "each row's predictor, the standard vertical-FL exchange)",
                               vfl_rows_size(N, S)});
      // Split priors that read globals: their draws go down with the adjoint, the gradient up.
      const Term* reads = split_prior_reading_globals(m);
      plan.messages.push_back({"server", "silo k",
                               "d log p(" + yn + " | ...)/d eta: one gradient per row and draw, the same for every silo" +
                                   (reads ? "; S draws of " + qg + " (" + reads->subject + "'s prior reads them)" : ""),
                               vfl_rows_size(N, S) + (reads ? G * S : SymSize::constant(0))});
      plan.messages.push_back({"silo k", "server",
                               "silo k's ELBO term (its priors and entropy), for the progress lines" +
                                   std::string(reads ? "; its split priors' gradient w.r.t. those draws" : ""),
                               vfl_update_reply_size(N) + (reads ? G * S : SymSize::constant(0))});
      break;
    }
    case Method::VFLAugmented:
    case Method::VFLPower: {
      const Symbol* y = coupled_outcome(m);
      const SymSize N = coupled_rows(m);
      const SymSize z = vfl_rows_size(N, S);
      const std::string term = "silo k's ELBO term (its priors, entropy and coupling), for the progress lines";
      plan.messages.push_back({"server", "silo k", schedule_words, silo_schedule_size(N)});
      if (plan.method == Method::VFLAugmented) {
        plan.messages.push_back({"silo k", "server", "z_k: draws of silo k's auxiliary variables, one per row", z});
        plan.messages.push_back({"server", "silo k",
                                 "d log p(" + (y ? y->name : std::string("y")) +
                                     " | ...)/dz_k: one gradient vector, the same for every silo",
                                 z});
        plan.messages.push_back({"silo k", "server", term, vfl_update_reply_size(N)});
      } else {
        std::string what = "the sum of the other silos' z (never one silo's own z)";
        if (!g.globals.empty()) what += "; S draws of " + qg;
        plan.messages.push_back({"silo k", "server", "z_k: draws of silo k's auxiliary variables, one per row", z, 1});
        plan.messages.push_back({"server", "silo k", what, vfl_power_size(N, G, S), 1});
        std::string grad = "d(silo k's likelihood term)/d(other silos' z): one vector";
        if (!g.globals.empty()) grad += "; its gradient w.r.t. the draws of " + qg;
        plan.messages.push_back({"silo k", "server", grad, vfl_power_size(N, G, S), 2});
        plan.messages.push_back({"server", "silo k", "H_k: the other silos' likelihood gradients w.r.t. z_k, summed", z, 2});
        plan.messages.push_back({"silo k", "server", term, vfl_update_reply_size(N), 2});
      }
      break;
    }
  }
  // Every round of the PVI engine ends with the objective's evaluation (runtime/src/program/
  // pvi_rounds.cpp PviRounds::elbo), at the same draws (and context points) every round.
  if (pvi_engine(plan.method)) {
    plan.messages.push_back({"server", "silo k", "the round's new " + qg + " in natural parameters, for the objective", Q});
    plan.messages.push_back({"silo k", "server",
                             plan.method == Method::FedAvgFSVI
                                 ? "silo k's term of the objective: its expected loss plus beta times the function-space "
                                   "KL at its own context points (seed 001 Eq. 27)"
                                 : "silo k's term of the objective: its expected loss",
                             SymSize::constant(1)});
  }
}

// The output draws k-hat is computed at (program/output.cpp output_draws): the setting, else
// 1000 (fewer for models of over 10,000 parameters).
SymSize output_draws(const SemanticModel& m) {
  auto it = m.settings.values.find("output_draws");
  return SymSize::constant(it != m.settings.values.end() ? static_cast<long long>(it->second.number) : 1000);
}

// The stopping rule's exchanges with silos that hold parameters of their own, sent only by a run
// the rule stops (not with `--set rounds=N`): runtime/src/program/sfvi_run.cpp, vfl_run.cpp; and
// with a function-space objective, which leaves the weights free in its Jacobians' null space,
// the function at each silo's context points (runtime/src/program/pvi_run.cpp).
void add_rule_messages(Plan& plan, const Groups& g) {
  if (plan.method == Method::FedAvgFSVI || plan.method == Method::FedVEMHSVI) {
    plan.rule.push_back({"server", "silo k", "tol_param, each round once the server's objective has levelled off",
                         SymSize::constant(1)});
    plan.rule.push_back({"silo k", "server",
                         "whether q's function at silo k's fixed context points has settled over the rounds judged, "
                         "its largest drift and standard error (the points and the function's values stay)",
                         SymSize::constant(3)});
    return;
  }
  const bool sfvi = plan.method == Method::SFVI;
  if (!sfvi && !is_vertical(plan.method)) return;
  const std::string own = sfvi ? "its locals" : "its split block";
  if (sfvi && g.locals.empty()) return;
  // Once a window (kSfviRuleWindow; VFL's is the rule's default, also 100).
  plan.rule.push_back({"server", "silo k", "tol_param, once a window (window, 100 iterations by default) after the server's q has settled",
                       SymSize::constant(1)});
  plan.rule.push_back({"silo k", "server",
                       "whether q of " + own + " has settled over the averaged iterations, its largest drift and "
                       "standard error (the values themselves stay)",
                       SymSize::constant(3)});
}

// SFVI without hyperparameters starts at the log joint's mode (runtime/src/program/sfvi_run.cpp
// SfviCoordinator::silo_likelihoods; fvi/engine/mode.h): Newton's method, each step's curvature
// from the gradients at 2n points around it asked of every silo at once, and each trial point one
// more exchange. Up to 50 globals (kFederatedModeStartLimit); after the centring, whose
// coordinates the points are in. With locals, each silo's answer is its term's maximum over its
// locals, and where the start moves (SfviServer::start_at_locations) the point is sent once more.
void add_mode_search_messages(Plan& plan, const SemanticModel& m, const Groups& g) {
  if (!g.global_hypers.empty() || m.settings.name("mode_start", "on") == "off") return;
  const SymSize G = total(g.globals);
  if (const std::optional<long long> n = G.constant_value(); n && *n > 50) return;
  const SymSize points = G * SymSize::constant(2);
  const std::string where = G.constant_value() ? "" : " where the globals number at most 50";
  const bool locals = !g.locals.empty();
  plan.opening.push_back({"server", "silo k",
                          std::string("points of the global parameters, up to 2n per exchange, for the mode search") +
                              (locals ? " of the globals declared without bounds, the others at q's start," : "") +
                              where + " (about two exchanges per Newton step; the run's header counts them)",
                          G * points});
  plan.opening.push_back({"silo k", "server",
                          locals ? "its log joint maximised over its locals (which stay) less half the log determinant "
                                   "of their curvature there, the maximum's gradient in the globals, at each point, and "
                                   "whether it is defined there"
                                 : "its log likelihood and its gradient at each point, and whether it is defined there",
                          (G + SymSize::constant(2)) * points});
  if (locals) {
    plan.opening.push_back({"server", "silo k",
                            "the mode found, once, where it lies over 500 of Adam's steps from q's start: the silo's "
                            "locals start at their conditional mode there",
                            G});
    plan.opening.push_back({"silo k", "server", "whether its locals took that start (1) or found no mode there (0)",
                            SymSize::constant(1)});
  }
}

// SFVI fits each intercept of `x * W + b` at the silos' centred x (analysis/centring.h;
// runtime/src/program/sfvi_run.cpp SfviCoordinator::centre): x's column sums and rows up, the
// pooled means down, the sums of squares about them up, once.
void add_centring_messages(Plan& plan, const SemanticModel& m) {
  std::vector<std::string> centred;
  // One exchange per x (an x and its companions pooled: one): a global vector of groups' intercepts
  // and its location share theirs.
  struct Exchange {
    CentredCoefficient product;
    std::vector<std::string> sums;  // the sums it centres
  };
  std::vector<Exchange> exchanges;
  for (const Symbol& s : m.symbols) {
    const std::optional<Centring> c = s.kind == SymbolKind::Parameter && s.owner == Owner::Global ? centring_of(m, s) : std::nullopt;
    if (!c || c->products.empty() || c->products[0].data == kSiloSumCentring) continue;
    std::string sum = s.name;
    for (const CentredCoefficient& p : by_coefficient(*c)) sum += " + " + p.product_text();
    for (const CentredCoefficient& p : by_coefficient(*c)) {
      auto at = std::find_if(exchanges.begin(), exchanges.end(),
                             [&](const Exchange& e) { return e.product.data[0] == p.data[0]; });
      if (at == exchanges.end()) exchanges.push_back({p, {}}), at = exchanges.end() - 1;
      at->sums.push_back(sum);
    }
    centred.push_back(s.name);
    for (const Symbol& a : m.symbols)  // a silo's local intercept whose prior's location is s
      if (const std::optional<Centring> lc = local_centring_of(m, a); lc && *lc == *c)
        centred.push_back("each silo's " + a.name);
  }
  for (const Exchange& e : exchanges) {
    const std::string data = e.product.data_text();
    const std::string its = e.product.data.size() > 1 ? "their" : "its";
    const Symbol* x = m.find(e.product.data[0]);
    const SymSize columns = x && x->shape.dims.size() == 2 ? x->shape.dims[1] : SymSize::constant(1);
    plan.opening.push_back({"silo k", "server", "the column sums of " + data + " and " + its + " rows (to centre " +
                                                    join(e.sums) + ")",
                            columns + SymSize::constant(1)});
    plan.opening.push_back({"server", "silo k", "the pooled column means of " + data, columns});
    plan.opening.push_back({"silo k", "server", "the column sums of squares of " + data + " less those means (to scale " +
                                                    e.product.coefficient + "'s steps by " + data + "'s pooled sds)",
                            columns});
    // The silo's rows are sent: their count is no longer private.
    for (const std::string& name : e.product.data)
      if (const Symbol* xi = m.find(name); xi && !xi->shape.dims.empty()) {
        const std::string rows = xi->shape.dims[0].str();
        plan.never_leaves.erase(std::remove(plan.never_leaves.begin(), plan.never_leaves.end(), rows),
                                plan.never_leaves.end());
      }
  }
  if (!centred.empty())
    plan.notes.push_back("the intercept" + std::string(centred.size() > 1 ? "s " : " ") + join(centred) +
                         (centred.size() > 1 ? " are" : " is") +
                         " fitted at the silos' data centred at its pooled column means (as brms centres: the "
                         "written model's posterior exactly, reported at the written intercept; center = off "
                         "fits at the raw data; analysis/centring.h)");
}

// vfl_exact starts the server's globals at the mode of its own terms with the silos' predictors
// at 0 and, where the linear predictor's scale there exceeds 10, sends it to every silo, whose
// coefficients step at it (runtime/src/program/vfl_run.cpp VflCoordinator::start).
void add_vertical_scale_message(Plan& plan, const SemanticModel& m) {
  if (plan.method != Method::VFLExact || m.settings.name("mode_start", "on") == "off") return;
  plan.opening.push_back({"server", "silo k",
                          "the linear predictor's scale at the server's start (1 / sqrt of its likelihood's mean "
                          "curvature there), once, where it exceeds 10: the silo's coefficients step at it",
                          SymSize::constant(1)});
}

// Each silo fits its local intercept of its own slopes at its own means (analysis/centring.h
// local_slope_centring_of; runtime/include/fvi/engine/centring.h local_slope_blocks): no message.
void add_local_slope_note(Plan& plan, const SemanticModel& m) {
  const bool sfvi = plan.method == Method::SFVI || plan.method == Method::SFVIAvg || plan.method == Method::Independent;
  if (!sfvi || m.settings.name("center", "on") == "off")
    return;
  for (const Symbol& a : m.symbols) {
    const std::optional<Centring> c = local_slope_centring_of(m, a);
    if (!c) continue;
    // `a[g] + x * b[g]`: each group at its own mean of x.
    const std::string by = c->group.empty() ? "" : "[" + c->group + "]";
    std::string sum = a.name + by, data;
    for (const CentredCoefficient& p : by_coefficient(*c)) {
      const Symbol* b = m.find(p.coefficient);
      sum += " + " + p.product_text() + (b && b->decl && b->decl->type.base == Base::Vector ? by : "");
      for (const std::string& x : p.data) data += (data.empty() ? "" : ", ") + x;
    }
    const std::string where = by.empty() ? " at its own column means of " + data
                                         : " with each group (" + c->group + ") at its own mean of " + data;
    plan.notes.push_back("each silo fits " + sum + where + " (" + a.name +
                         " shifted by the means times the slopes; nothing is sent; the written model's posterior "
                         "exactly, reported at the written " + a.name + "; center = off fits it as written; "
                         "analysis/centring.h)");
  }
}

// What SFVI's server and silos exchange before the first iteration.
void add_opening_messages(Plan& plan, const SemanticModel& m, const Groups& g) {
  add_vertical_scale_message(plan, m);
  add_local_slope_note(plan, m);
  if (plan.method != Method::SFVI || plan.pooled) return;
  if (auto w = m.settings.values.find("warm_start"); w != m.settings.values.end() && w->second.number > 0) return;
  if (m.settings.name("center", "on") != "off") add_centring_messages(plan, m);
  add_mode_search_messages(plan, m, g);  // after the centring, whose coordinates its points are in
}

// vfl_exact fits a vertical model's intercept of `b + silo_sum(...)` at the centred sum
// (analysis/centring.h; runtime/include/fvi/engine/vfl.h): no message, the server already has the
// silos' partial predictors.
void add_vertical_centring_note(Plan& plan, const SemanticModel& m) {
  if (plan.method != Method::VFLExact || m.settings.name("center", "on") == "off") return;
  for (const Symbol& s : m.symbols) {
    const std::optional<Centring> c = s.kind == SymbolKind::Parameter && s.owner == Owner::Global ? centring_of(m, s) : std::nullopt;
    if (c && !c->products.empty() && c->products[0].data == kSiloSumCentring)
      plan.notes.push_back("the intercept " + s.name + " is fitted at the silos' summed partial predictors centred at "
                           "their mean over the rows (the written model's posterior exactly, reported at the written "
                           "intercept; center = off fits it as written; analysis/centring.h)");
  }
}

void add_closing_messages(Plan& plan, const SemanticModel& m, const Groups& g) {
  const SymSize T = output_draws(m), G = total(g.globals);
  // Fewer than 100 draws give no k-hat, and no exchange unless silo_sum quantities need one
  // (runtime/src/program/server_loop.cpp, kMinKhatDraws).
  const bool sums = std::any_of(m.symbols.begin(), m.symbols.end(), [](const Symbol& s) { return s.aggregate; });
  if (const auto t = T.constant_value(); t && *t < 100 && !sums) return;
  const std::string qg = "q(" + join(names(g.globals), ", ") + ")";
  switch (plan.method) {
    case Method::PVI:
    case Method::FedAvg:
    case Method::FedVEM:
    case Method::FedAvgFSVI:
    case Method::FedVEMHSVI:
      plan.closing.push_back({"server", "silo k", "T draws of " + qg + " (not sent beyond 10^6 values)", G * T});
      plan.closing.push_back({"silo k", "server", "silo k's log likelihood at each draw", T});
      break;
    case Method::SFVI:
    case Method::SFVIAvg:
      plan.closing.push_back({"server", "silo k", "T draws of " + qg + " (not sent beyond 10^6 values)", G * T});
      plan.closing.push_back({"silo k", "server",
                              g.locals.empty() ? "at each draw, the log density of silo k's data (and a 0 in place of "
                                                 "the log q of locals it does not have)"
                                               : "at each draw, the log density of silo k's data and locals and log q "
                                                 "of its locals",
                              T * SymSize::constant(2)});
      if (!g.locals.empty() && m.settings.name("weigh_locals", "on") == "on")
        plan.closing.push_back({"server", "silo k",
                                "the importance weights of the last such exchange's draws, where its k-hat is 0.7 "
                                "or less: silo k reports its locals weighed by them (the written model's posterior); "
                                "they carry the other silos' log densities at those draws, summed",
                                T});
      break;
    case Method::Independent: return;  // the server holds no posterior
    case Method::VFLExact:
    case Method::VFLAugmented:
    case Method::VFLPower: {
      const SymSize N = coupled_rows(m);
      const Term* reads = split_prior_reading_globals(m);
      plan.closing.push_back({"server", "silo k",
                              "the draws' seed and count" + (reads ? "; the T draws of " + qg + " (" + reads->subject +
                                                                          "'s prior reads them)"
                                                                    : std::string()),
                              SymSize::constant(2) + (reads ? G * T : SymSize::constant(0))});
      plan.closing.push_back({"silo k", "server",
                              "eta_k: silo k's partial predictor per row at each draw of its block (T at most "
                              "max(100, 10^6 / rows)); its split priors and log q at each draw",
                              N * T + T * SymSize::constant(2)});
      break;
    }
  }
  if (is_vertical(plan.method)) return;
  // Each silo's parts of the silo_sum quantities ride on the same reply.
  for (const Symbol& s : m.symbols)
    if (s.aggregate)
      plan.closing.push_back({"silo k", "server", "its part of " + s.name + " (silo_sum) at each draw", T});
}

bool choose_method(const SemanticModel& m, const Groups& g, Diagnostics& diags, Plan& plan) {
  std::string requested = m.settings.name("method", "auto");
  Loc at = m.settings.loc("method");
  bool vertical = !g.split_data.empty() || !g.splits.empty() || !g.split_hypers.empty();
  const Term* coupling = coupling_term(m);
  const Symbol* coupled = coupling ? m.find(coupling->subject) : nullptr;

  if (vertical) {
    if (!coupling || !coupled) {
      diags.error(m.program->find(BlockKind::SplitData) ? m.program->find(BlockKind::SplitData)->loc : Loc{},
                  "the model has split data but no likelihood combines the silos with silo_sum",
                  "write the likelihood over the silos' summed contributions, e.g. "
                  "`y ~ bernoulli_logit(b + silo_sum(x * beta))`");
      return false;
    }
    bool labels_public = coupled->owner == Owner::Public;
    // Name the split data that holds columns (a matrix), not a size such as `P`.
    const Symbol* columns = g.split_data.empty() ? nullptr : g.split_data.front();
    for (const Symbol* s : g.split_data)
      if (s->type.rank() > columns->type.rank()) columns = s;
    std::string why_vertical =
        columns ? at_line(*columns) + " is split data: each silo holds its own columns of the same rows"
                : at_line(*(g.splits.empty() ? g.split_hypers.front() : g.splits.front())) +
                      " is split: each silo holds its own block";
    // The written model by default; `rho` (or a q_z) asks for the AXDA approximation, which buys
    // the privacy of never showing a silo's partial predictor.
    const bool axda = m.settings.has("rho") || (m.settings.has("q_z") && m.settings.name("q_z", "") != "none");
    if (requested == "auto") {
      plan.method = !axda ? Method::VFLExact : labels_public ? Method::VFLPower : Method::VFLAugmented;
    } else if (requested == "vfl_exact") {
      plan.method = Method::VFLExact;
    } else if (requested == "vfl_augmented") {
      plan.method = Method::VFLAugmented;
    } else if (requested == "vfl_power") {
      if (!labels_public) {
        diags.error(at, "method vfl_power needs the likelihood's data to be public, but " + at_line(*coupled) +
                            " is server data",
                    "in the power-likelihood model every silo evaluates the likelihood, so the labels must "
                    "be in `data`; with server-held labels use method = vfl_augmented");
        return false;
      }
      plan.method = Method::VFLPower;
    } else {
      diags.error(at, "method " + requested + " cannot fit a vertically split model",
                  why_vertical + "; use method = vfl_exact (or auto), or the approximations vfl_augmented / "
                      "vfl_power");
      return false;
    }
    // A split prior that reads a global (`beta ~ normal(0, tau)`): only vfl_exact sends the silos
    // the globals' draws with its adjoint and takes back the prior's gradient in them.
    if (const Term* t = split_prior_reading_globals(m); t && plan.method != Method::VFLExact) {
      diags.error(t->loc,
                  "the prior of split parameter '" + t->subject + "' reads global parameter '" +
                      t->taint.witness[static_cast<size_t>(TaintKind::GlobalParam)] + "', which method " +
                      method_key(plan.method) + " cannot send to the silos",
                  "method = vfl_exact (the default without rho or q_z) sends each silo the globals' draws with its "
                  "adjoint; or give the prior fixed or split hyperparameters");
      return false;
    }
    plan.reasons.push_back(why_vertical);
    if (plan.method == Method::VFLExact)
      plan.reasons.push_back("the likelihood sees the silos only through silo_sum of their partial predictors: each silo "
                             "sends its partial predictor eta_k, the server returns d log p/d eta, and the fit is of "
                             "the written model (set rho, or method = vfl_augmented / vfl_power, for AXDA, which never "
                             "shows eta_k but fits an approximation)");
    else if (labels_public)
      plan.reasons.push_back("the likelihood's data " + at_line(*coupled) +
                             " is public, so every silo can evaluate its own likelihood term" +
                             (plan.method == Method::VFLPower ? ": power-likelihood model"
                                                              : "; the augmented model was requested"));
    else
      plan.reasons.push_back("the likelihood's data " + at_line(*coupled) +
                             " is held by the server: augmented-variable model, labels never leave the server");
    return true;
  }

  bool has_silo_data = !g.silo_data.empty();
  if (!has_silo_data) {
    // Pooled: the model a Stan user brings, before marking who holds what. SFVI's engine fits any
    // proper prior and a likelihood of public data on the server's side.
    if (requested != "auto" && requested != "sfvi") {
      diags.error(at, "method " + requested + " needs data held by silos, and this model has none",
                  "a model without `silo data` is fitted pooled, on one party (method = auto or sfvi); declare "
                  "the silos' rows in a `silo data` block to federate it");
      return false;
    }
    if (!g.locals.empty() || !g.local_hypers.empty()) {
      const Symbol& s = g.locals.empty() ? *g.local_hypers.front() : *g.locals.front();
      diags.error(s.loc, "'" + s.name + "' is local to each silo, but no data is held by silos",
                  "mark it `global`, or declare the silos' rows in a `silo data` block");
      return false;
    }
    plan.pooled = true;
    plan.method = Method::SFVI;
    plan.reasons.push_back("pooled: no data is held by silos, so one party fits the model (SFVI's engine, one "
                           "process, nothing sent); declare the silos' rows in a `silo data` block to federate it");
    return true;
  }
  bool needs_sfvi = !g.locals.empty() || !g.global_hypers.empty() || !g.local_hypers.empty();
  std::string why_not_pvi;
  // A likelihood of public or server data is the server's own term: SFVI's server adds it to its
  // gradient; PVI's server holds only a Gaussian prior, and SFVI-Avg's silos cannot see it.
  const Term* server_likelihood = nullptr;
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Likelihood && t.owner == TermOwner::Server && !server_likelihood) server_likelihood = &t;
  if (server_likelihood) {
    needs_sfvi = true;
    why_not_pvi = "the likelihood of `" + server_likelihood->subject + "` (line " +
                  std::to_string(server_likelihood->stmt->loc.line) +
                  ") reads no silo data, so the server evaluates it; PVI's server holds only a Gaussian prior";
    if (requested == "sfvi_avg" || requested == "independent") {
      diags.error(at, "method " + requested + " cannot fit this model: " + why_not_pvi.substr(0, why_not_pvi.find(';')),
                  "each silo fits alone there and none can see it; use method = sfvi (or auto)");
      return false;
    }
  }
  // PVI's server holds the prior as a Gaussian factor; any other prior is SFVI's (it fits any
  // proper prior by its gradient). The runtime would refuse it otherwise: refuse here instead.
  const std::string not_gaussian = needs_sfvi ? "" : why_pvi_cannot_hold(m, g.globals);
  if (!not_gaussian.empty()) {
    needs_sfvi = true;
    why_not_pvi = not_gaussian;
  }
  if (!g.locals.empty())
    why_not_pvi = at_line(*g.locals.front()) + " is local to each silo, so PVI does not apply";
  else if (!g.global_hypers.empty() || !g.local_hypers.empty())
    why_not_pvi = at_line(g.global_hypers.empty() ? *g.local_hypers.front() : *g.global_hypers.front()) +
                  " is a hyperparameter estimated by maximising the ELBO; its gradient is summed over "
                  "silos, so PVI does not apply";

  if (requested == "auto") {
    plan.method = needs_sfvi ? Method::SFVI : Method::PVI;
  } else if (requested == "pvi" || requested == "fedavg" || requested == "fedvem" || requested == "fedavg_fsvi" ||
             requested == "fedvem_hsvi") {
    if (needs_sfvi) {
      diags.error(at, "method " + requested + " cannot fit this model: " + why_not_pvi,
                  "use method = sfvi (or sfvi_avg), which handles local parameters, hyperparameters and any "
                  "proper prior");
      return false;
    }
    plan.method = requested == "pvi"           ? Method::PVI
                  : requested == "fedavg"      ? Method::FedAvg
                  : requested == "fedvem"      ? Method::FedVEM
                  : requested == "fedavg_fsvi" ? Method::FedAvgFSVI
                                               : Method::FedVEMHSVI;
  } else if (requested == "sfvi") {
    plan.method = Method::SFVI;
  } else if (requested == "sfvi_avg") {
    plan.method = Method::SFVIAvg;
  } else if (requested == "independent") {
    plan.method = Method::Independent;
  } else {
    diags.error(at, "method " + requested + " is for vertically split data, but this model's silos hold rows",
                std::string("use method = ") + (needs_sfvi ? "sfvi" : "pvi") + " (or auto)");
    return false;
  }
  if (pvi_engine(plan.method)) {
    plan.reasons.push_back("only global parameters (" + join(names(g.globals), ", ") +
                           "); each silo holds its own rows (silo data)");
    if (plan.method == Method::PVI) {
      // FedGVI (seed 000): a loss, divergence or weight other than Bayes's fits a generalised
      // posterior by design; say so, as for every surrogate.
      auto written = [&](const char* key) { return m.settings.values.at(key).str(); };
      std::vector<std::string> chosen;
      if (m.settings.has("loss") && m.settings.name("loss", "nll") != "nll") chosen.push_back("loss " + written("loss"));
      if (m.settings.has("divergence") && m.settings.name("divergence", "kl") != "kl")
        chosen.push_back("divergence " + written("divergence"));
      if (m.settings.has("loss_weight") && m.settings.values.at("loss_weight").number != 1)
        chosen.push_back("loss_weight " + written("loss_weight"));
      if (!chosen.empty())
        plan.reasons.push_back("requested: a generalised posterior (FedGVI, seed 000) with " + join(chosen) +
                               " (Bayes's: loss nll, divergence kl, loss_weight 1): by design not the written model's "
                               "posterior (k-hat at the end measures the difference where the draws are few enough to "
                               "send)");
    }
    if (plan.method == Method::FedAvg)
      plan.reasons.push_back(
          "requested: each silo fits E_q[its log likelihood] - KL(q : prior) / S from the server's q, and the server "
          "steps along the rows-weighted mean change of q's means and log variances; silos whose data differ pull "
          "their local optima apart, so with more than one local step its fixed point drifts from the written "
          "model's posterior (k-hat at the end measures the cost)");
    if (function_space(plan.method))
      plan.reasons.push_back(
          std::string("requested: ") +
          (plan.method == Method::FedAvgFSVI
               ? "FedAvg's rounds with a function-space prior: "
               : "FedVEM's rounds (the server matches N(mu, sigma^2) in weight space) with a function-space prior: ") +
          "each silo's local objective is E_q[its log likelihood] + beta KL(q(f) : p(f)) at context points drawn "
          "from its own rows each step (seed 001 Eqs. 25-27; beta = function_kl_weight), the two measures "
          "linearised about their weight means (Rudner et al. 2021), the Jacobian held fixed in the gradient of the "
          "covariance; the context points never leave the silo. A surrogate objective, not the written model's "
          "posterior (k-hat at the end measures the difference)");
    if (plan.method == Method::FedVEM || plan.method == Method::FedVEMHSVI)
      plan.reasons.push_back(
          "requested: a surrogate, not the written model: each silo fits its own copy of the globals under the prior "
          "N(mu, sigma^2), and the server estimates (mu, sigma^2) by variational EM (seed 001 Eq. 33); the written "
          "prior only starts (mu, sigma^2), and the output N(mu, sigma^2) is not the written model's posterior "
          "(k-hat at the end measures the difference)");
  } else {
    plan.reasons.push_back((why_not_pvi.empty() ? std::string("requested") : why_not_pvi) + "; no split data");
  }
  return true;
}

bool check_family(const SemanticModel& m, const Groups& g, Diagnostics& diags, Plan& plan) {
  // vfl_exact's default is a joint Gaussian across the parties up to 200 parameters in all
  // (fvi/engine/vfl.h kJointAutoLimit), mean-field above: "auto". SFVI's is structured up to 50
  // global parameters (fvi/engine/sfvi.h kStructuredAutoLimit), mean-field above; a size that
  // depends on the data is taken to be small (the program decides on the real one).
  std::string fallback = "meanfield";
  if (plan.method == Method::VFLExact) fallback = "auto";
  if (averaged(plan.method)) {
    if (function_space(plan.method) && m.settings.name("loss", "nll") == "score_matching") {
      diags.error(m.settings.loc("loss"), std::string("method ") + method_key(plan.method) + " cannot use loss = score_matching",
                  "score matching's silo update is in closed form and has no function-space KL at context points, so "
                  "the prior would be left out; use loss = nll (or leave it out), or method = fedavg for score matching");
      return false;
    }
    if (m.settings.name("family", "meanfield") != "meanfield") {
      diags.error(m.settings.loc("family"), std::string("method ") + method_key(plan.method) + " fits a mean-field q",
                  "seed 001's server averages (or matches) each coordinate's mean and log variance; use family = "
                  "meanfield (or leave it out), or method = pvi for a full-rank q");
      return false;
    }
    plan.family = "meanfield";
    return true;
  }
  if (plan.method == Method::SFVI || plan.method == Method::SFVIAvg || plan.method == Method::Independent) {
    const std::optional<long long> G = total(g.globals).constant_value();
    fallback = !G || *G <= 50 ? "structured" : "meanfield";
    if (!m.settings.has("family"))
      plan.reasons.push_back(std::string("q: ") +
                             (fallback == "structured"
                                  ? "structured (the globals correlated, each silo's locals coupled to them), the "
                                    "default up to 50 global parameters"
                                  : "mean-field, the default above 50 global parameters") +
                             "; set family to choose");
  }
  if (plan.method == Method::PVI) {
    const std::optional<long long> G = total(g.globals).constant_value();
    fallback = fvic::stdlib::default_pvi_family(G, m.settings.name("divergence", "kl"));
    if (!m.settings.has("family"))
      plan.reasons.push_back(std::string("q: ") +
                             (fallback == std::string("fullrank")
                                  ? std::string("full-rank (the globals' correlations kept), the default up to 50 "
                                                "global parameters") +
                                        (G ? "" : " (their number depends on the data: the programs decide, "
                                                  "mean-field above 50)")
                                  : "mean-field, the default above 50 global parameters and with divergence = "
                                    "fisher_rao") +
                             "; set family to choose");
  }
  std::string family = m.settings.name("family", fallback);
  plan.family = family;
  if (family == "fullrank" && (plan.method == Method::VFLAugmented || plan.method == Method::VFLPower)) {
    diags.error(m.settings.loc("family"),
                std::string("a full-rank q across the silos needs method = vfl_exact, not ") + method_key(plan.method),
                "the AXDA methods fit a mean-field q of each silo's block; use family = meanfield, or "
                "method = vfl_exact");
    return false;
  }
  if (plan.method == Method::VFLExact)
    plan.reasons.push_back(
        family == "meanfield"
            ? "q: mean-field across the silos (family = meanfield): it ignores the posterior's correlations across "
              "silos, and k-hat says what that costs"
            : std::string("q: one full-rank Gaussian over the globals and every silo's block") +
                  (family == "auto" ? " (up to 200 parameters in all; mean-field above)" : "") +
                  ": silo k holds its rows of the Cholesky factor and every party draws the same noise from the "
                  "iteration's key, so no party's parameters leave it; once, before the first iteration, each "
                  "silo sends the size of its block (1 number) and gets its place in the joint order (3 numbers)");
  if (family == "structured" && plan.method != Method::SFVI && plan.method != Method::SFVIAvg &&
      plan.method != Method::Independent) {
    diags.error(m.settings.loc("family"),
                std::string("the structured family is for SFVI, not ") + method_key(plan.method),
                "use family = meanfield or fullrank");
    return false;
  }
  return true;
}

void add_notes(const SemanticModel& m, Plan& plan) {
  // `with`: what the key has no effect with, if not the method.
  auto unused = [&](const char* key, bool applies, const std::string& with = "") {
    if (m.settings.has(key) && !applies) {
      plan.notes.push_back(std::string("'") + key + "' has no effect with " + (with.empty() ? method_key(plan.method) : with));
      plan.ignored_settings.push_back(plan.notes.back());
    }
  };
  bool pvi = plan.method == Method::PVI;
  const bool averaged_method = averaged(plan.method);
  bool vfl = plan.method == Method::VFLAugmented || plan.method == Method::VFLPower;
  unused("rho", vfl);
  unused("divergence", pvi);
  unused("damping", pvi);
  unused("schedule", pvi);
  unused("server_damping", pvi);
  unused("init_mean_sd", pvi_engine(plan.method));
  // Only the PVI engines keep a float q and call the float kernels; the others compute in double.
  unused("precision", pvi_engine(plan.method));
  if (plan.method == Method::SFVI) {
    std::string shifted;
    for (const Symbol& s : m.symbols) {
      const int shift = s.kind == SymbolKind::Parameter && s.owner == Owner::Global ? class_shift_of(m, s) : 0;
      if (shift) shifted += (shifted.empty() ? "" : ", ") + s.name + (shift == 1 ? "'s rows" : "");
    }
    if (!shifted.empty())
      plan.notes.push_back("the likelihood sees " + shifted +
                           " only up to a shift along the softmax's classes: after each step the server sets "
                           "q's means there to zero mean across the classes, the prior's optimum (exact; "
                           "analysis/class_shift.h)");
  }
  unused("server_optimiser", averaged_method);
  unused("server_lr", averaged_method);
  for (const char* key : {"context_points", "context_noise", "function_kl_weight"}) unused(key, function_space(plan.method));
  unused("server_tau", averaged_method && m.settings.name("server_optimiser", "sgd") == "adam");
  unused("clients_per_round", pvi_engine(plan.method) && !plan.sparse_gp);
  unused("local_optimiser", pvi_engine(plan.method) && !plan.sparse_gp);
  unused("q_z", vfl);
  unused("q_z_width", vfl);
  unused("q_z_depth", vfl);
  const std::string q_z = m.settings.name("q_z", "meanfield");
  unused("q_z_offset", vfl && q_z == "amortized",
         vfl ? "q_z = " + q_z + " (it shapes the amortised network's offsets)" : std::string());
  unused("avg_steps", plan.method == Method::SFVIAvg || plan.method == Method::SFVI);
  unused("warm_start", plan.method == Method::SFVI);
  unused("center", plan.method == Method::SFVI || plan.method == Method::VFLExact);
  unused("mode_start", plan.method == Method::SFVI || plan.method == Method::VFLExact);
  const bool sfvi_engine = plan.method == Method::SFVI || plan.method == Method::SFVIAvg;
  unused("weigh_locals", sfvi_engine && !group(m).locals.empty(),
         sfvi_engine ? "a model without local parameters" : std::string());
  unused("correct_moments", !plan.closing.empty() && (plan.method == Method::SFVI || plan.method == Method::SFVIAvg ||
                                                      pvi_engine(plan.method)) && !plan.sparse_gp);
  unused("local_reparam", (plan.method == Method::SFVI || plan.method == Method::SFVIAvg ||
                           plan.method == Method::Independent) && plan.family == "meanfield");
  unused("local_samples", plan.method == Method::SFVI || plan.method == Method::SFVIAvg || plan.method == Method::Independent);
  for (const char* key : {"factors", "pseudo_cap", "auxiliary_weight", "jitter"}) unused(key, plan.sparse_gp.has_value());
  if (plan.sparse_gp)
    for (const char* key : {"loss", "divergence", "server_damping", "local_samples", "precision", "epochs", "patience",
                            "init_sd", "loss_weight", "lr_schedule", "refresh"})
      if (m.settings.has(key)) {
        plan.notes.push_back(std::string("'") + key + "' has no effect with a sparse GP");
        plan.ignored_settings.push_back(plan.notes.back());
      }
}

// Who computes a derived value and where it is written (plan text and json).
std::string derived_where(const Symbol& s, const Plan& plan) {
  if (s.aggregate)
    return pvi_engine(plan.method) || plan.method == Method::SFVI || plan.method == Method::SFVIAvg
               ? "each silo its part, summed by the server: posterior.json, draws.csv"
               : "not computed by " + std::string(method_key(plan.method)) + " (no closing exchange with the server)";
  if (s.block == BlockKind::TransformedData)
    return s.owner == Owner::Public ? "every party" : s.owner == Owner::Server ? "server" : "each silo";
  if (s.owner == Owner::Silo && (plan.method == Method::SFVI || plan.method == Method::SFVIAvg ||
                                 plan.method == Method::Independent || pvi_engine(plan.method)))
    return "each silo: its own silo-K/posterior.json, never sent";
  if (s.owner == Owner::Split && is_vertical(plan.method))
    return "silo k: its own silo-K/posterior.json and draws.csv, never sent";
  if (s.owner == Owner::Silo || s.owner == Owner::Split)
    return "each silo, inside the model; not written to its outputs by " + std::string(method_key(plan.method)) + " yet";
  return "server: posterior.json, draws.csv";
}

void add_privacy(const Groups& g, Plan& plan) {
  std::vector<std::string> stays;
  bool vertical = is_vertical(plan.method);
  for (const Symbol* s : vertical ? g.split_data : g.silo_data) stays.push_back(s->name);
  for (const auto* list : {&g.locals, &g.local_hypers, &g.splits, &g.split_hypers})
    for (const Symbol* s : *list) stays.push_back(s->name);
  for (const auto* list : {&g.locals, &g.splits})
    for (const Symbol* s : *list) stays.push_back("q(" + s->name + ")");
  if (vertical && plan.method != Method::VFLExact) stays.push_back("the noise behind each z_k");
  if (plan.method == Method::VFLExact) stays.push_back("the draws of silo k's parameters (only eta_k = its predictor's value per row leaves)");
  plan.never_leaves = stays;
  for (const Symbol* s : g.server_data) plan.server_keeps.push_back(s->name);
  if (plan.method == Method::VFLAugmented || plan.method == Method::VFLExact)
    for (const Symbol* s : g.globals) plan.server_keeps.push_back("q(" + s->name + ")");
}

std::string human_bytes(long long bytes) {
  std::ostringstream s;
  if (bytes < 10 * 1024) s << bytes << " B";
  else if (bytes < 10LL * 1024 * 1024) s << std::fixed << std::setprecision(1) << bytes / 1024.0 << " KiB";
  else s << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

// The message's size for each silo; several values when silos differ.
std::vector<long long> evaluate(const SymSize& n, const DataSizes& sizes) {
  std::vector<long long> out;
  int silos = std::max(1, sizes.silo_count());
  for (int k = 0; k < silos; ++k) {
    auto v = n.eval([&](const std::string& name) { return sizes.lookup(name, k); });
    if (!v) return {};
    out.push_back(*v);
  }
  return out;
}

std::string describe_count(const SymSize& n, const DataSizes* sizes) {
  const bool one = n.constant_value() == 1;
  std::string symbolic = n.str() + (one ? " double" : " doubles");
  if (!sizes) return symbolic;
  std::vector<long long> v = evaluate(n, *sizes);
  if (v.empty()) return symbolic + " (sizes not in the data)";
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  if (*lo == *hi) return std::to_string(*lo) + (*lo == 1 ? " double, " : " doubles, ") + human_bytes(*lo * 8);
  return std::to_string(*lo) + " to " + std::to_string(*hi) + " doubles, " + human_bytes(*lo * 8) + " to " +
         human_bytes(*hi * 8);
}

std::string term_line(const Term& t) {
  // A computed value on the left of `~` is a target term written as `~`: shown as written.
  std::string what = t.kind != TermKind::Target        ? t.subject + " ~ " + t.distribution
                     : t.stmt->kind == StmtKind::Tilde ? to_source(*t.stmt->lhs) + " ~ " + t.stmt->name
                                                       : "target += ...";
  std::string owner;
  switch (t.owner) {
    case TermOwner::Server: owner = "server"; break;
    case TermOwner::Silo: owner = "each silo"; break;
    case TermOwner::SplitSilo: owner = "silo k (split)"; break;
    case TermOwner::Coupling: owner = "server, from every silo's contribution"; break;
  }
  std::ostringstream s;
  s << "line " << std::setw(3) << std::left << t.loc.line << " " << std::setw(11) << term_kind_name(t.kind)
    << std::setw(28) << what << owner;
  return s.str();
}

}  // namespace

// A sparse GP: PVI (seed 003 Algorithm 2; Algorithm 1 when Z is a hyperparameter), whatever else
// the planner would say of a model whose likelihood is not a per-row factor.
bool plan_sparse_gp(const SemanticModel& m, const Groups& g, const SparseGpModel& gp, Diagnostics& diags, Plan& plan) {
  const std::string requested = m.settings.name("method", "auto");
  if (requested != "auto" && requested != "pvi") {
    diags.error(m.settings.loc("method"), "method " + requested + " cannot fit a sparse GP",
                "a sparse GP is fitted by PVI with each silo's pseudo-observations (seed 003): use method = pvi (or auto)");
    return false;
  }
  if (m.settings.name("family", "meanfield") != "meanfield") {
    diags.error(m.settings.loc("family"), "a sparse GP's q over Z and the hyperparameters is mean-field",
                "the paper's factors are fully factorised (seed 003 §2.4); use family = meanfield (or leave it out)");
    return false;
  }
  plan.sparse_gp = gp;
  plan.method = Method::PVI;
  plan.family = "meanfield";
  const bool dpo = m.settings.name("factors", "dpo") == "dpo";
  using K = SparseGpArgument::Kind;
  const std::string algorithm =
      gp.inducing.kind == K::Parameter        ? "Z random, with its own factors (a hierarchical variational model, Algorithm 2)"
      : gp.inducing.kind == K::Hyperparameter ? "Z one point estimate the server averages with weights N_k / N (FedAvg, Algorithm 1)"
                                              : "Z fixed (given in data)";
  plan.reasons.push_back("`" + gp.outcome + " ~ sparse_gp_normal(...)` (line " + std::to_string(gp.line) +
                         ") is a sparse GP: PVI in which each silo's factor over the inducing outputs u is " +
                         (dpo ? "decoupled pseudo-observations (DPO)" : "a coupled Gaussian (CPO)") + "; " + algorithm +
                         " (seed 003)");
  plan.conjugacy.closed_form = false;
  plan.conjugacy.reason = "each silo maximises its local free energy (seed 003 Eq. 7) by Adam";
  // Sizes (fvi/message/sizes.h): G global values, M_k pseudo-observations of silo k.
  using namespace fvi::message;
  const SymSize G = total(g.globals), D = gp.dimensions, M = gp.inducing_points;
  const SymSize Mk = SymSize::atom("M_k"), Mj = SymSize::atom("M_j");
  const SymSize own = sgp_factor_size(dpo, Mk, D, M), other = sgp_factor_size(dpo, Mj, D, M);
  const SymSize z = gp.inducing.kind == K::Hyperparameter ? M * D : SymSize::constant(0);
  const std::string qg = "q(" + join(names(g.globals), ", ") + ")";
  const std::string factor_words =
      dpo ? "pseudo-observations: inputs V, targets m and log pseudo-noise S (variational parameters that summarise "
            "the silo's data)"
          : "a Gaussian N(u; m, S) in natural parameters";
  const std::string z_down = gp.inducing.kind == K::Hyperparameter ? "; the shared Z" : "";
  plan.messages.push_back({"server", "silo k",
                           qg + " and silo k's factor t_k over them (mean-field, natural parameters); silo k's own "
                           "factor over u as it last sent it; how many other silos' factors follow" + z_down,
                           sgp_update_request_size(G, own, SymSize::constant(0), z)});
  plan.messages.push_back({"server", "silo k", "each other silo j's factor over u, one after another: " + factor_words, other});
  plan.messages.push_back({"silo k", "server",
                           "the new t_k in natural parameters; its new factor over u (" + factor_words + ")" +
                               (gp.inducing.kind == K::Hyperparameter ? "; its Z after its local steps and N_k" : "") +
                               "; its local objective",
                           sgp_update_reply_size(G, own, z) +
                               (gp.inducing.kind == K::Hyperparameter ? SymSize::constant(1) : SymSize::constant(0))});
  plan.messages.push_back({"server", "silo k",
                           "for the round's objective: " + qg + z_down + " and how many factors follow; then every "
                           "silo's factor over u as above",
                           sgp_evaluate_request_size(G, SymSize::constant(0), z)});
  plan.messages.push_back({"silo k", "server",
                           "its expected log-likelihood, its predictive log density and its row count N_k",
                           SymSize::constant(3)});
  // Each silo's row count leaves with its evaluation; its values never do.
  const std::string rows = gp.rows.str();
  for (const Symbol* s : g.silo_data)
    if (s->name != rows) plan.never_leaves.push_back(s->name);
  plan.notes.push_back(std::string("M_k = ") +
                       (dpo ? "min(0.8 N_k, " + std::to_string(m.settings.has("pseudo_cap") ? long(m.settings.values.at("pseudo_cap").number) : 500L) +
                                  ") pseudo-observations of silo k (M_j: of silo j)"
                            : "M for a CPO factor") +
                       "; the inducing inputs Z: " + M.str() + " x " + D.str());
  std::string fits = "the fit is the sparse-GP variational bound with M inducing inputs (Titsias 2009; seed 003), a "
                     "surrogate of the written GP: a lower bound of its evidence, tight when the inducing inputs "
                     "cover the data";
  if (gp.inducing.kind == K::Parameter) {
    const double w = m.settings.has("auxiliary_weight") ? m.settings.values.at("auxiliary_weight").number : 0.1;
    if (w != 1)
      fits += "; the KL of q(Z) is weighted by " + std::to_string(w).substr(0, 4) +
              " (auxiliary_weight; seed 003 uses 0.1 throughout): Z's written prior tempered";
  }
  plan.notes.push_back(fits);
  plan.notes.push_back("no Pareto k-hat: the GP couples every silo's rows, so no silo can evaluate its part of the "
                       "written model's log density");
  add_notes(m, plan);
  return true;
}

bool make_plan(const SemanticModel& model, Diagnostics& diags, Plan& plan) {
  plan.model = model.program->name;
  Groups g = group(model);
  bool gp_ok = true;
  if (auto gp = find_sparse_gp(model, diags, &gp_ok)) return plan_sparse_gp(model, g, *gp, diags, plan);
  if (!gp_ok) return false;
  if (!choose_method(model, g, diags, plan)) return false;
  if (!check_family(model, g, diags, plan)) return false;
  // clients_per_round samples the silos of a synchronous round (runtime: program/pvi_rounds.h).
  if (plan.method == Method::PVI && model.settings.has("clients_per_round")) {
    const std::string schedule =
        model.settings.name("schedule", fvic::stdlib::default_pvi_schedule(model.settings.name("loss", "nll")));
    if (schedule != "synchronous") {
      diags.error(model.settings.loc("clients_per_round"),
                  "clients_per_round samples the silos of synchronous rounds, and this PVI schedule is " + schedule,
                  "set schedule = synchronous (with a loss other than nll the default is sequential)");
      return false;
    }
  }
  if (function_space(plan.method))
    plan.conjugacy = {false, "the function-space KL at context points has no closed-form update"};
  else if (pvi_engine(plan.method))
    plan.conjugacy = detect_conjugacy(model, plan.family, plan.method == Method::PVI);
  add_messages(plan, model, g);
  if (plan.method == Method::VFLExact || plan.method == Method::VFLAugmented || plan.method == Method::VFLPower) {
    const Term* t = coupling_term(model);
    const Symbol* y = t ? model.find(t->subject) : nullptr;
    const bool labels_public = y && y->owner == Owner::Public;
    for (Method m : {Method::VFLExact, Method::VFLAugmented, Method::VFLPower}) {
      if (m == Method::VFLPower && !labels_public) continue;  // the power model needs public labels
      if (m != Method::VFLExact && split_prior_reading_globals(model)) continue;  // only vfl_exact sends the globals
      Plan alternative = plan;
      alternative.method = m;
      alternative.messages.clear();
      add_messages(alternative, model, g);
      SymSize total = SymSize::constant(0);
      for (const Message& message : alternative.messages) total = total + message.doubles;
      plan.vertical_options.push_back(
          {method_key(m),
           m == Method::VFLExact ? "the written model; eta_k leaves silo k"
                                 : std::string("an approximation (AXDA, rho); z_k leaves silo k each iteration, eta_k only at the end, for k-hat") +
                                       (m == Method::VFLPower ? ", and silo k sees the labels" : ""),
           total});
    }
  }
  add_privacy(g, plan);
  // Derived values a silo computes stay with it like its data (a vertical silo's: split).
  for (const Symbol& d : model.symbols)
    if (d.kind == SymbolKind::Transformed && (d.owner == Owner::Silo || d.owner == Owner::Split))
      plan.never_leaves.push_back(d.name);
  add_closing_messages(plan, model, g);
  add_notes(model, plan);  // after the closing messages: correct_moments applies where they exist
  add_rule_messages(plan, g);
  add_opening_messages(plan, model, g);
  add_vertical_centring_note(plan, model);
  if (plan.pooled) {  // one party: nothing travels
    plan.opening.clear();
    plan.messages.clear();
    plan.closing.clear();
    plan.rule.clear();
  }
  return true;
}

std::string plan_text(const Plan& plan, const SemanticModel& model, const DataSizes* sizes) {
  std::ostringstream out;
  std::string silos = sizes && sizes->silo_count() > 0 ? std::to_string(sizes->silo_count()) + " silos" : "S silos";
  const bool joint = plan.method == Method::VFLExact && plan.family != "meanfield";
  std::string family = joint                         ? "full-rank Gaussian family across the parties"
                       : plan.family == "fullrank"   ? "full-rank Gaussian family"
                       : plan.family == "structured" ? "structured Gaussian family"
                                                     : "mean-field Gaussian family";
  if (plan.pooled)
    out << plan.model << ": pooled VI (SFVI's engine on one party: no data is held by silos), " << family << '\n';
  else
    out << plan.model << ": " << method_title(plan.method) << ", " << silos << ", " << family << '\n';
  for (const std::string& r : plan.reasons) out << "  why: " << r << '\n';
  if (plan.sparse_gp) {
    const std::string schedule = model.settings.name("schedule", "sequential");
    out << "  client updates: stochastic optimisation (" << plan.conjugacy.reason << ")\n";
    out << "  schedule: " << schedule
        << (schedule == "sequential" ? ", one silo after another, each from the latest q (seed 003 App. D)"
                                     : ", every silo from the same q, the server damping each change")
        << '\n';
  }
  if (pvi_engine(plan.method) && !plan.sparse_gp)
    out << "  client updates: "
        << (plan.conjugacy.closed_form ? "closed form (" + plan.conjugacy.reason + ")"
                                       : "stochastic optimisation (" + plan.conjugacy.reason + ")")
        << '\n';
  if (plan.method == Method::PVI && !plan.sparse_gp) {
    const std::string loss = model.settings.name("loss", "nll");
    const std::string schedule = model.settings.name("schedule", fvic::stdlib::default_pvi_schedule(loss));
    out << "  schedule: " << schedule;
    if (model.settings.has("schedule"))
      out << " (set)";
    else if (schedule == "sequential")
      out << ", one silo after another (the loss " << loss
          << " need not be convex: silos updating at once can settle in another of its optima)";
    else
      out << ", every silo at once (the server damps the changes)";
    out << '\n';
  }
  if (averaged(plan.method)) {
    const std::string optimiser = model.settings.name("server_optimiser", "sgd");
    const double lr = model.settings.has("server_lr") ? model.settings.values.at("server_lr").number : 1.0;
    std::ostringstream step;
    step << optimiser << " with server_lr " << lr;
    out << "  schedule: every silo at once from the server's q, undamped; the server's step: " << step.str()
        << (optimiser == "sgd" && lr == 1.0
                ? (fedavg_aggregation(plan.method) ? " (plain averaging)" : " (the exact M-step)")
                : "")
        << '\n';
  }
  if (pvi_engine(plan.method) && model.settings.has("clients_per_round"))
    out << "  each round: " << static_cast<long long>(model.settings.values.at("clients_per_round").number)
        << " silos drawn from the seed are asked; the others wait\n";
  out << "  terms of the log joint\n";
  for (const Term& t : model.terms) out << "    " << term_line(t) << '\n';
  for (const Symbol& s : model.symbols) {
    if (!s.flat_prior) continue;
    std::ostringstream line;
    line << "line " << std::setw(3) << std::left << s.loc.line << " " << std::setw(11) << "flat prior"
         << std::setw(28) << s.name + " (none written)"
         << (s.owner == Owner::Silo ? "each silo" : s.owner == Owner::Split ? "silo k (split)" : "server");
    out << "    " << line.str() << '\n';
  }
  for (const Symbol& s : model.symbols) {
    if (s.kind != SymbolKind::Parameter || !s.decl || !s.decl->type.simplex) continue;
    out << "  simplex " << s.name << " (line " << s.loc.line << "): the softmax of " << s.shape.dims[0].str()
        << " unconstrained values, whose scale sum(exp(u)) is an auxiliary ~ gamma(" << s.shape.dims[0].str()
        << ", 1) independent of " << s.name << ": its posterior is the written model's\n";
  }
  for (const Symbol& s : model.symbols) {
    if (s.kind != SymbolKind::Parameter || !s.decl || !s.decl->type.affine()) continue;
    out << "  " << s.name << " (line " << s.loc.line << "): offset + multiplier * u of its unconstrained values u "
        << "(Stan's affine transform, with its log-Jacobian); q sees u, the model and the outputs " << s.name << "\n";
  }
  for (const Symbol& s : model.symbols) {
    if (s.kind != SymbolKind::Parameter || !s.decl || s.decl->type.structure == MatrixStructure::None) continue;
    const MatrixStructure m = s.decl->type.structure;
    const std::string k = s.shape.dims[0].str();
    if (m == MatrixStructure::UnitVector) {
      out << "  unit_vector " << s.name << " (line " << s.loc.line << "): u / |u| of " << k
          << " unconstrained values u, with -|u|^2 / 2 as its log-Jacobian (Stan's transform: u's length is an "
             "auxiliary with a chi density, independent of the direction); the vector is written to the outputs as a "
             "quantity\n";
      continue;
    }
    if (m == MatrixStructure::CholeskyCov) {
      const std::string n = s.shape.dims[1].str();
      const bool square = s.shape.dims[0].equals(s.shape.dims[1]);
      out << "  cholesky_factor_cov " << s.name << " (line " << s.loc.line << "): from " << n << "(" << n << " + 1)/2"
          << (square ? "" : " + (" + k + " - " + n + ")" + n)
          << " unconstrained values, a lower triangular L with exp of its diagonal"
          << (square ? "" : ", the rows below the triangle free")
          << " (Stan's transform, with its log-Jacobian); the "
          << k << " x " << n << " factor is written to the outputs as a quantity\n";
      continue;
    }
    const bool with_diagonal = m == MatrixStructure::Cov;
    out << "  " << structure_name(m) << " " << s.name << " (line " << s.loc.line << "): from " << k << "(" << k
        << (with_diagonal ? " + 1" : " - 1") << ")/2 unconstrained values, "
        << (m == MatrixStructure::Cov    ? "L L' of a lower triangular L with exp of its diagonal"
            : m == MatrixStructure::Corr ? "L L' of L whose rows are built from tanh of partial correlations"
                                         : "tanh of each a partial correlation")
        << " (Stan's transform, with its log-Jacobian); the " << k << " x " << k
        << " matrix is written to the outputs as a quantity\n";
  }
  bool derived = false;
  for (const Symbol& s : model.symbols) {
    if (s.kind != SymbolKind::Transformed) continue;
    if (!derived) out << "  derived values, each computed by the party that may read what it reads\n";
    derived = true;
    std::ostringstream line;
    line << "line " << std::setw(3) << std::left << s.loc.line << " " << std::setw(23) << block_name(s.block)
         << std::setw(15) << s.name << ' ' << derived_where(s, plan);
    if (s.decl && s.decl->from_product && s.value)
      line << " (the model's " << to_source(*s.value) << ", computed once)";
    out << "    " << line.str() << '\n';
  }
  if (plan.pooled) {
    out << "  no messages: pooled, one process\n";
  } else if (plan.messages.empty()) {
    out << "  no messages: each silo works alone\n";
  } else {
    if (!plan.opening.empty()) out << "  before the first iteration\n";
    for (const Message& m : plan.opening)
      out << "    " << std::setw(16) << std::left << (m.from + " -> " + m.to) << " : " << m.content << "; "
          << describe_count(m.doubles, sizes) << '\n';
    out << "  each iteration\n";
    int phases = 1;
    for (const Message& m : plan.messages) phases = std::max(phases, m.phase);
    for (const Message& m : plan.messages) {
      std::string route = m.from + " -> " + m.to;
      out << "    " << (phases > 1 ? "(" + std::to_string(m.phase) + ") " : "") << std::setw(16) << std::left
          << route << " : " << m.content << "; " << describe_count(m.doubles, sizes) << '\n';
    }
  }
  if (!plan.closing.empty()) {
    out << "  once, at the end (Pareto k-hat: the written model scores T = " << output_draws(model).str()
        << " draws of q, each party its own terms"
        << (std::any_of(model.symbols.begin(), model.symbols.end(), [](const Symbol& s) { return s.aggregate; })
                ? "; the silos' parts of each silo_sum at the same draws"
                : "")
        << (plan.method == Method::SFVI || plan.method == Method::SFVIAvg || pvi_engine(plan.method)
                ? "; with at most 50 parameters in q, the same again at max(T, 4000) draws of a heavier-tailed proposal, "
                  "the tail check (once more twice as wide where its own k-hat exceeds 0.7); where it finds q's moments "
                  "off, up to 4 times more around the moments it estimates, and q moved to them and sent to the silos "
                  "again (correct_moments)"
                : plan.method == Method::VFLExact
                ? "; with at most 50 parameters in q, the tail check at max(T, 4000) draws of a heavier-tailed "
                  "proposal (at most 10^6 / rows; once more twice as wide where its own k-hat exceeds 0.7): silo k "
                  "sends eta_k, its split priors and its noise's squared norm at each, its log det and block size; the "
                  "server sends back the importance weights, and silo k its block's largest move of a mean and change "
                  "of an sd, and whose (10 numbers)"
                : "")
        << ")\n";
    for (const Message& m : plan.closing)
      out << "    " << std::setw(16) << std::left << (m.from + " -> " + m.to) << " : " << m.content << "; "
          << describe_count(m.doubles, sizes) << '\n';
  }
  if (!plan.rule.empty()) {
    out << "  now and then, for the stopping rule (not with --set rounds=N)\n";
    for (const Message& m : plan.rule)
      out << "    " << std::setw(16) << std::left << (m.from + " -> " + m.to) << " : " << m.content << "; "
          << describe_count(m.doubles, sizes) << '\n';
  }
  if (!plan.vertical_options.empty()) {
    out << "  the vertical options, each iteration, silo k's messages both ways\n";
    for (const Plan::Option& o : plan.vertical_options)
      out << "    " << (o.method == method_key(plan.method) ? "* " : "  ") << std::setw(14) << std::left << o.method
          << ": " << describe_count(o.doubles, sizes) << "; " << o.fits << '\n';
  }
  if (!plan.never_leaves.empty()) out << "  never leaves silo k: " << join(plan.never_leaves) << '\n';
  if (!plan.server_keeps.empty()) out << "  never leaves the server: " << join(plan.server_keeps) << '\n';
  for (const std::string& n : plan.notes) out << "  note: " << n << '\n';
  return out.str();
}

std::string plan_json(const Plan& plan, const SemanticModel& model, const DataSizes* sizes) {
  nlohmann::ordered_json derived = nlohmann::ordered_json::array();
  for (const Symbol& s : model.symbols)
    if (s.kind == SymbolKind::Transformed)
      derived.push_back({{"line", s.loc.line}, {"block", block_name(s.block)}, {"name", s.name},
                         {"owner", owner_name(s.owner)}, {"where", derived_where(s, plan)}});
  nlohmann::ordered_json j;
  j["model"] = plan.model;
  j["method"] = method_key(plan.method);
  j["pooled"] = plan.pooled;
  j["family"] = plan.family;
  if (sizes && sizes->silo_count() > 0) j["silos"] = sizes->silo_count();
  else j["silos"] = nullptr;
  j["reasons"] = plan.reasons;
  if (pvi_engine(plan.method))
    j["closed_form"] = {{"applies", plan.conjugacy.closed_form}, {"reason", plan.conjugacy.reason}};
  if (plan.sparse_gp) {
    const SparseGpModel& gp = *plan.sparse_gp;
    auto role = [](const SparseGpArgument& a) {
      static const char* kinds[] = {"parameter", "hyperparameter", "data", "number"};
      nlohmann::ordered_json r = {{"kind", kinds[int(a.kind)]}};
      if (a.kind == SparseGpArgument::Kind::Number) r["value"] = a.value;
      else r["name"] = a.name;
      return r;
    };
    j["sparse_gp"] = {{"line", gp.line},          {"outcome", gp.outcome},
                      {"inputs", gp.inputs},      {"factors", model.settings.name("factors", "dpo")},
                      {"Z", role(gp.inducing)},   {"alpha", role(gp.scale)},
                      {"rho", role(gp.lengthscale)}, {"sigma", role(gp.noise)}};
  }
  nlohmann::ordered_json terms = nlohmann::ordered_json::array();
  for (const Term& t : model.terms)
    terms.push_back({{"line", t.loc.line},
                     {"kind", term_kind_name(t.kind)},
                     {"owner", term_owner_name(t.owner)},
                     {"subject", t.subject},
                     {"distribution", t.distribution}});
  for (const Symbol& s : model.symbols)
    if (s.flat_prior)
      terms.push_back({{"line", s.loc.line}, {"kind", "flat_prior"}, {"owner", s.owner == Owner::Silo ? "silo" : s.owner == Owner::Split ? "split_silo" : "server"},
                       {"subject", s.name}, {"distribution", "uniform"}});
  j["terms"] = terms;
  j["derived"] = derived;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const Message& m : plan.messages) {
    nlohmann::ordered_json msg = {{"phase", m.phase}, {"from", m.from}, {"to", m.to},
                                  {"content", m.content}, {"doubles", m.doubles.str()}};
    if (sizes) {
      std::vector<long long> v = evaluate(m.doubles, *sizes);
      if (!v.empty()) {
        msg["doubles_per_silo"] = v;
        std::vector<long long> bytes;
        for (long long x : v) bytes.push_back(8 * x);
        msg["bytes_per_silo"] = bytes;
      }
    }
    messages.push_back(msg);
  }
  j["messages"] = messages;
  // Once-only messages: each with its count per silo when the data is known.
  auto once = [&](const std::vector<Message>& list) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Message& m : list) {
      nlohmann::ordered_json msg = {{"from", m.from}, {"to", m.to}, {"content", m.content}, {"doubles", m.doubles.str()}};
      if (sizes) {
        std::vector<long long> v = evaluate(m.doubles, *sizes);
        if (!v.empty()) msg["doubles_per_silo"] = v;
      }
      out.push_back(msg);
    }
    return out;
  };
  j["opening_messages"] = once(plan.opening);
  j["closing_messages"] = once(plan.closing);
  nlohmann::ordered_json rule = nlohmann::ordered_json::array();
  for (const Message& m : plan.rule)
    rule.push_back({{"from", m.from}, {"to", m.to}, {"content", m.content}, {"doubles", m.doubles.str()}});
  j["rule_messages"] = rule;
  if (!plan.vertical_options.empty()) {
    nlohmann::ordered_json options = nlohmann::ordered_json::array();
    for (const Plan::Option& o : plan.vertical_options) {
      nlohmann::ordered_json option = {{"method", o.method}, {"fits", o.fits}, {"doubles", o.doubles.str()}};
      if (sizes) {
        std::vector<long long> v = evaluate(o.doubles, *sizes);
        if (!v.empty()) option["doubles_per_silo"] = v;
      }
      options.push_back(option);
    }
    j["vertical_options"] = options;
  }
  j["never_leaves_silo"] = plan.never_leaves;
  j["never_leaves_server"] = plan.server_keeps;
  j["notes"] = plan.notes;
  if (model.program) j["stated_priors"] = stated_priors_json(*model.program);
  return j.dump(2) + "\n";
}

}  // namespace fvic
