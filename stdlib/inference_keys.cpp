#include "inference_keys.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace fvic::stdlib {

std::string KeyValue::str() const {
  if (kind == Kind::String) return "\"" + text + "\"";
  if (!has_call) return text;
  std::string s = text + "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].str();
  return s + ")";
}

namespace {

class ValueParser {
 public:
  explicit ValueParser(const std::string& text) : s_(text) {}

  std::optional<KeyValue> parse(std::string* error) {
    auto v = value();
    skip_space();
    if (v && pos_ != s_.size()) {
      fail("unexpected '" + s_.substr(pos_) + "'");
      v.reset();
    }
    if (!v && error) *error = error_;
    return v;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }

  // value : name ('(' value (',' value)* ')')? | '-'? number | '"' chars '"'
  std::optional<KeyValue> value() {
    skip_space();
    KeyValue v;
    if (pos_ >= s_.size()) {
      fail("a value is missing");
      return std::nullopt;
    }
    char c = s_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c))) {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      v.text = s_.substr(start, pos_ - start);
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '(') {
        ++pos_;
        v.has_call = true;
        while (true) {
          auto arg = value();
          if (!arg) return std::nullopt;
          v.args.push_back(*arg);
          skip_space();
          if (pos_ < s_.size() && s_[pos_] == ',') {
            ++pos_;
            continue;
          }
          if (pos_ < s_.size() && s_[pos_] == ')') {
            ++pos_;
            break;
          }
          fail("expected ',' or ')' in '" + s_ + "'");
          return std::nullopt;
        }
      }
      return v;
    }
    if (c == '"') {
      size_t end = s_.find('"', pos_ + 1);
      if (end == std::string::npos) {
        fail("unterminated string");
        return std::nullopt;
      }
      v.kind = KeyValue::Kind::String;
      v.text = s_.substr(pos_ + 1, end - pos_ - 1);
      pos_ = end + 1;
      return v;
    }
    if (c == '-' || c == '.' || std::isdigit(static_cast<unsigned char>(c))) {
      // Decimal only, as Stan writes numbers: strtod alone would also read 0x10, inf and nan.
      const size_t length = decimal_length(pos_);
      if (length == 0) {
        fail("'" + s_.substr(pos_) + "' is not a number");
        return std::nullopt;
      }
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      double x = std::strtod(std::string(begin, length).c_str(), &end);
      end = const_cast<char*>(begin) + length;
      v.kind = KeyValue::Kind::Number;
      v.text = std::string(begin, static_cast<const char*>(end));
      v.number = x;
      v.is_integer = v.text.find_first_of(".eE") == std::string::npos;
      pos_ += static_cast<size_t>(end - begin);
      return v;
    }
    fail(std::string("unexpected '") + c + "'");
    return std::nullopt;
  }

  // The length of the decimal number at `at`: -?(digits(.digits*)? | .digits)([eE][+-]?digits)?,
  // or 0 when there is none.
  size_t decimal_length(size_t at) const {
    const auto digit = [&](size_t i) { return i < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i])); };
    size_t i = at;
    if (i < s_.size() && s_[i] == '-') ++i;
    size_t digits = 0;
    while (digit(i)) ++i, ++digits;
    if (i < s_.size() && s_[i] == '.') {
      ++i;
      while (digit(i)) ++i, ++digits;
    }
    if (digits == 0) return 0;
    if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
      size_t j = i + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (!digit(j)) return 0;
      while (digit(j)) ++j;
      i = j;
    }
    // A number runs into no name: 0x10 and 1abc are not numbers.
    if (i < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i])) || s_[i] == '_')) return 0;
    return i - at;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

// A numeric argument's range; `open` ends exclude the bound.
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  bool integer;
};

bool in_range(const KeyValue& v, const Range& r) {
  if (v.kind != KeyValue::Kind::Number || !std::isfinite(v.number)) return false;
  if (r.integer && !v.is_integer) return false;
  if (r.lo_open ? v.number <= r.lo : v.number < r.lo) return false;
  if (r.hi_open ? v.number >= r.hi : v.number > r.hi) return false;
  return true;
}

constexpr double kInf = HUGE_VAL;
const Range kPositive{0, kInf, true, false, false};
// Integer keys fit an int (the programs keep counts and seeds in at most that): a larger value,
// or one past 2^64, is refused here rather than wrapped by a cast.
constexpr double kMaxInt = 2147483647;
const Range kPositiveInt{1, kMaxInt, false, false, true};
const Range kNonNegativeInt{0, kMaxInt, false, false, true};

struct Choice {
  const char* key;
  std::vector<const char*> names;
};

const std::vector<Choice>& choices() {
  static const std::vector<Choice> table = {
      {"method", {"auto", "pvi", "fedavg", "fedvem", "fedavg_fsvi", "fedvem_hsvi", "sfvi", "sfvi_avg", "independent",
                  "vfl_exact", "vfl_augmented", "vfl_power"}},
      {"server_optimiser", {"sgd", "adam"}},
      {"local_optimiser", {"adam", "sgd"}},
      {"family", {"meanfield", "fullrank", "structured"}},
      {"schedule", {"synchronous", "sequential", "asynchronous"}},
      {"server_damping", {"on", "off"}},
      {"q_z", {"meanfield", "amortized", "none"}},
      {"q_z_offset", {"residual", "free"}},
      {"precision", {"float64", "float32"}},
      {"estimator", {"stl", "standard"}},
      {"local_reparam", {"on", "off"}},
      {"center", {"on", "off"}},
      {"mode_start", {"on", "off"}},
      {"weigh_locals", {"on", "off"}},
      {"correct_moments", {"on", "off"}},
      {"lr_schedule", {"cosine", "constant"}},
      {"factors", {"dpo", "cpo"}},
  };
  return table;
}

struct Numeric {
  const char* key;
  Range range;
};

const std::vector<Numeric>& numerics() {
  static const std::vector<Numeric> table = {
      {"damping", {0, 1, true, false, false}},
      {"rounds", kPositiveInt},
      {"max_rounds", kPositiveInt},
      {"window", kPositiveInt},
      {"tol", kPositive},
      {"tol_param", kPositive},
      {"local_steps", kPositiveInt},
      {"epochs", kPositiveInt},
      {"patience", kNonNegativeInt},
      {"init_sd", kPositive},
      {"init_mean_sd", kPositive},
      {"loss_weight", kPositive},
      {"output_draws", kPositiveInt},
      {"lr", kPositive},
      {"batch_size", kNonNegativeInt},
      {"mc_samples", kPositiveInt},
      {"local_samples", kPositiveInt},
      {"seed", kNonNegativeInt},
      {"avg_steps", kPositiveInt},
      {"warm_start", kNonNegativeInt},
      {"refresh", kPositiveInt},
      {"rho", kPositive},
      {"q_z_width", kPositiveInt},
      {"q_z_depth", kNonNegativeInt},
      {"quorum", kPositiveInt},
      {"deadline", kPositive},
      {"pseudo_cap", kPositiveInt},
      {"auxiliary_weight", {0, 1, false, false, false}},
      {"jitter", {0, 1, true, true, false}},
      {"server_lr", kPositive},
      {"server_tau", kPositive},
      {"clients_per_round", kPositiveInt},
      {"context_points", kPositiveInt},
      {"context_noise", {0, kInf, false, false, false}},
      {"function_kl_weight", kPositive},
  };
  return table;
}

// Forms of `loss = ...` and `divergence = ...`: a name, optionally with numeric arguments.
struct Form {
  const char* name;
  std::vector<Range> args;
  const char* first_arg_names = nullptr;  // score_matching's weight: "se" or "imq"
};

const std::vector<Form>& loss_forms() {
  static const std::vector<Form> table = {
      {"nll", {}},
      {"gce", {{0, 1, true, false, false}}},
      {"density_power", {kPositive}},
      {"gamma", {kPositive}},
      {"score_matching", {kPositive}, "se|imq"},
  };
  return table;
}

const std::vector<Form>& divergence_forms() {
  static const std::vector<Form> table = {
      {"kl", {}},
      {"rkl", {}},
      {"weighted_kl", {kPositive}},
      {"alpha_renyi", {kPositive}},
      {"fisher_rao", {}},
  };
  return table;
}

std::string describe(const Range& r) {
  std::ostringstream s;
  s << (r.integer ? "an integer" : "a number");
  if (r.integer && r.hi == kMaxInt) {
    s << " >= " << long(r.lo) << " and at most " << long(r.hi);
  } else if (r.hi == kInf) {
    s << (r.lo_open ? " > " : " >= ") << r.lo;
  } else {
    s << " in " << (r.lo_open ? "(" : "[") << r.lo << ", " << r.hi << (r.hi_open ? ")" : "]");
  }
  return s.str();
}

std::string validate_form(const std::vector<Form>& forms, const KeyValue& v, const char* what) {
  std::string accepted;
  for (const Form& f : forms) {
    accepted += accepted.empty() ? "" : ", ";
    accepted += f.name;
    if (f.first_arg_names) accepted += std::string("(") + f.first_arg_names + ", c)";
    else if (!f.args.empty()) accepted += "(x)";
  }
  if (v.kind != KeyValue::Kind::Name)
    return std::string("expected a ") + what + ", one of: " + accepted;
  for (const Form& f : forms) {
    if (v.text != f.name) continue;
    size_t expected = f.args.size() + (f.first_arg_names ? 1 : 0);
    if (v.args.size() != expected) {
      if (expected == 0)
        return std::string(what) + " '" + f.name + "' takes no arguments: write `" + f.name + "`";
      return std::string(what) + " '" + f.name + "' takes " + std::to_string(expected) +
             (expected == 1 ? " argument" : " arguments") + ", got " +
             std::to_string(v.args.size());
    }
    size_t a = 0;
    if (f.first_arg_names) {
      const KeyValue& w = v.args[0];
      std::string names = f.first_arg_names;
      bool ok = w.kind == KeyValue::Kind::Name && !w.has_call &&
                ("|" + names + "|").find("|" + w.text + "|") != std::string::npos;
      if (!ok) return std::string("the first argument of ") + f.name + " must be one of " + names;
      a = 1;
    }
    for (size_t i = 0; i < f.args.size(); ++i)
      if (!in_range(v.args[a + i], f.args[i]))
        return std::string("the argument of ") + f.name + " must be " + describe(f.args[i]) +
               ", got " + v.args[a + i].str();
    return "";
  }
  return std::string("unknown ") + what + " '" + v.text + "'; accepted: " + accepted;
}


}  // namespace

std::optional<KeyValue> parse_key_value(const std::string& text, std::string* error) {
  return ValueParser(text).parse(error);
}

const char* default_pvi_schedule(const std::string& loss_name) {
  return loss_name == "nll" ? "synchronous" : "sequential";
}

const char* default_pvi_family(std::optional<long long> global_values, const std::string& divergence_name) {
  if (divergence_name == "fisher_rao") return "meanfield";
  return !global_values || *global_values <= kPviFullRankAutoLimit ? "fullrank" : "meanfield";
}

const std::vector<KeySpec>& inference_keys() {
  static const std::vector<KeySpec> table = {
      {"method",
       "auto, pvi, fedavg, fedvem, fedavg_fsvi, fedvem_hsvi, sfvi, sfvi_avg, independent, vfl_exact, vfl_augmented, "
       "vfl_power",
       "the federated decomposition; auto picks it from the model's structure (seed 001's methods of a mean-field q "
       "and a global-only model only when asked: fedavg and fedvem in weight space, fedavg_fsvi and fedvem_hsvi with "
       "a function-space prior at context points)",
       "auto"},
      {"context_points", "an integer >= 1",
       "fedavg_fsvi, fedvem_hsvi: context points per local step, each a random row of the silo's data plus uniform "
       "noise (seed 001 App. E.1); they never leave the silo",
       "1"},
      {"context_noise", "a number >= 0",
       "fedavg_fsvi, fedvem_hsvi: each real value of a context point is moved by U[-context_noise, context_noise] "
       "(1/255: one grey level of a pixel scaled to [0, 1])",
       "0.00392157"},
      {"function_kl_weight", "a number > 0",
       "fedavg_fsvi, fedvem_hsvi: beta, the weight of the function-space KL in the local objective (seed 001 App. "
       "E.1 tuned 0.005 for MNIST)",
       "1"},
      {"family", "meanfield, fullrank, structured",
       "the variational family; vfl_exact: fullrank is one Gaussian across the server and the silos (each holds its "
       "rows of the factor)",
       "PVI: fullrank up to 50 global parameters (meanfield above, and with divergence = fisher_rao); SFVI: "
       "structured up to 50 global parameters, meanfield above; vfl_exact: fullrank up to 200 parameters; the AXDA "
       "methods: meanfield"},
      {"loss", "nll, gce(d), density_power(b), gamma(g), score_matching(se|imq, c)",
       "the loss that replaces each likelihood term's negative log likelihood", "nll"},
      {"divergence", "kl, rkl, weighted_kl(w), alpha_renyi(a), fisher_rao",
       "the client divergence to the cavity (PVI/FedGVI)", "kl"},
      {"damping", "a number in (0, 1]", "PVI damping of each silo's factor update (default: 1 in the synchronous schedule, where the server also scales every change by 1, halved down to 1/silos after a round whose objective falls, and in the sequential one, where each silo updates the q_s of the silos before it; 1/silos in the asynchronous one and with server_damping = off; 1/clients_per_round when it is set, where the server's scale cannot act; 1 for a closed-form update)", ""},
      {"rounds", "an integer >= 1",
       "server rounds (iterations): on the command line (--set) exactly this many; in the inference block the most "
       "the stopping rule may take",
       ""},
      {"max_rounds", "an integer >= 1",
       "without rounds: the most rounds (iterations) the stopping rule may take",
       "PVI 100, SFVI-Avg and independent 2000, SFVI 20000, VFL 40000"},
      {"window", "an integer >= 1", "rounds (iterations) per window of the stopping rule",
       "PVI 1, SFVI-Avg 5, SFVI and VFL 100"},
      {"tol", "a number > 0",
       "the stopping rule's plateau: relative change of the window-mean ELBO (or within two standard errors)", "1e-4"},
      {"tol_param", "a number > 0",
       "the stopping rule's precision: drift and standard error of the averaged posterior means, in posterior sds",
       "0.05"},
      {"schedule", "synchronous, sequential, asynchronous",
       "PVI client schedule: every silo at once, one after another, or as each is ready",
       "synchronous with loss = nll; sequential with any other loss, which need not be convex (silos updating at once "
       "can settle in another of its optima)"},
      {"server_damping", "on, off", "PVI, synchronous schedule: the server scales every silo's change by 1, halved (down to 1/silos) after a round whose objective falls; off: each change as the silo damped it (damping then defaults to 1/silos)", "on"},
      {"local_steps", "an integer >= 1",
       "optimiser steps per client update: PVI exactly this many (default: an update runs until its objective "
       "levels off and its averaged means and sds are stationary, as the stopping rule judges rounds, at most "
       "5000 steps); VFL silo steps per iteration (default 1)",
       ""},
      {"epochs", "an integer >= 1", "passes over the silo's data per client update", ""},
      {"patience", "an integer >= 0",
       "with epochs: stop a client update after this many epochs without a better objective, keeping the best (0: never)",
       "0"},
      {"lr", "a number > 0", "optimiser step size", "0.01"},
      {"local_optimiser", "adam, sgd",
       "PVI, fedavg, fedvem: the client's optimiser, Adam or plain gradient steps (spec 001's FedAvg and FedVEM clients "
       "take SGD steps; lr is then a step on the silo's whole objective, so it must be small for a silo of many rows)",
       "adam"},
      {"lr_schedule", "cosine, constant", "step size within a client update: cosine decay to 0, or constant", "cosine"},
      {"loss_weight", "a number > 0",
       "the generalised-Bayes learning rate: every likelihood's loss is multiplied by it (with kl, loss_weight = w is weighted_kl(w))",
       "1"},
      {"init_sd", "a number > 0",
       "PVI: a client's first update starts at N(prior mean, init_sd^2) instead of the prior (the reference BNNs use 0.0316); "
       "fedavg, fedvem: the server's first q has these sds",
       ""},
      {"init_mean_sd", "a number > 0",
       "PVI: a client's first update starts with its means at the prior's plus N(0, init_mean_sd^2) noise drawn from `seed`, "
       "the same on every silo (sds: init_sd if set, else the prior's); a deep network's units must differ at the start, or "
       "its signal vanishes; fedavg, fedvem: the server's first q has these means",
       ""},
      {"output_draws", "an integer >= 1",
       "draws of the posterior written to draws.csv (default 1000, fewer for models with over 10,000 parameters)", ""},
      {"batch_size", "an integer >= 0",
       "minibatch rows per step; 0 means all rows (default all rows; PVI's client updates run to convergence: all "
       "rows up to 4,096 in a silo, 1,024 beyond)",
       ""},
      {"mc_samples", "an integer >= 1",
       "Monte Carlo draws per gradient estimate (default PVI 10, others 1; SFVI and the vertical methods: unset, the "
       "stopping rule doubles the draws, up to 16 times, where their noise keeps the averaged means from settling)",
       ""},
      {"local_samples", "an integer >= 1",
       "SFVI: importance samples of each local element (or of a silo's whole local block, where its locals are "
       "read as a whole) per draw of the globals (K > 1: an importance-weighted bound)",
       "16 where every local element can be scored on its own or the local block has at most 4 values, else 1"},
      {"seed", "an integer >= 0", "random seed", "1"},
      {"avg_steps", "an integer >= 1", "SFVI-Avg local steps between averaging", "10"},
      {"warm_start", "an integer >= 0", "SFVI-Avg rounds before switching to SFVI", "0"},
      {"refresh", "an integer >= 1",
       "iterations (rounds) between progress lines, metrics rows and --test evaluations (not for a sparse GP)",
       "SFVI, SFVI-Avg and VFL: rounds / 20; PVI, fedavg and fedvem: 1"},
      {"correct_moments", "on, off",
       "PVI and SFVI against the written model: where the tail check's importance sampling holds and finds a "
       "mean of q over 0.25 sd or an sd over 20% from the posterior's (its warning), q is replaced by the Gaussian "
       "of the "
       "posterior's mean and covariance as that sampling estimates them (the moment-matching projection), "
       "checked again around it up to 4 times; of q and the Gaussians checked, the outputs are the one the "
       "check finds closest to the posterior on the declared scale; off: the ELBO's q, with "
       "the check's warning",
       "on"},
      {"weigh_locals", "on, off",
       "SFVI and SFVI-Avg with local parameters: where the closing exchange's k-hat is 0.7 or less, the server "
       "sends each silo that exchange's T normalised importance weights and the silo reports its locals weighed by "
       "them (the written model's posterior of the locals, not their mixture over q of the globals); up to a "
       "constant the weights are the other parties' log densities at the T draws, summed (fvic plan lists the "
       "message); off: no such message, and a silo refuses one; each silo reports the mixture",
       "on"},
      {"estimator", "stl, standard", "gradient estimator (sticking-the-landing or standard)",
       "stl"},
      {"local_reparam", "on, off",
       "SFVI, SFVI-Avg and independent, with a mean-field q and no local parameters: each silo samples the product "
       "of its data and the globals as its Gaussian row by row, from its own noise (local reparameterisation: the "
       "same gradient in expectation, its noise falling with the rows); off: every silo at the server's shared "
       "draws eps_G, as seed 002's Algorithm 1",
       "on"},
      {"center", "on, off",
       "SFVI: a global intercept added to silo data x times a global (`alpha + x * beta`, `x * W + b`) is fitted "
       "at x's pooled column means, as brms centres (the written model's posterior exactly: priors at the "
       "written intercept, which the outputs report), and so is a centred hierarchy's location with each silo's "
       "intercept (`alpha ~ normal(mu, tau)`, `alpha + x * beta`, also one row at a time, `x[n] * beta`); once, before "
       "the first iteration, each silo sends its column sums of x and its rows, then its sums of squares about the "
       "pooled means, and a coefficient of a column whose pooled sd exceeds 1 takes Adam's steps and its starting sd "
       "as of the standardised column's; vfl_exact: an intercept added to `silo_sum(...)` is fitted at the summed "
       "partial predictors centred at their mean over the rows (no message); off: at the raw x",
       "on"},
      {"mode_start", "on, off",
       "SFVI without local parameters or hyperparameters, up to 50 globals: q starts at the Laplace approximation of "
       "the log joint's mode, found by Newton's method from four points (q's default and three of Stan's random "
       "inits); each step asks every silo for its log likelihood and gradient at a batch of points (fvic plan lists "
       "the exchange), about two exchanges per step. With locals (no hyperparameters, up to 50 globals; a silo's "
       "locals scored element by element, or up to 50): the means of the globals declared without bounds start at "
       "the mode over them of the log joint with each silo's locals integrated out by Laplace's approximation "
       "(each silo's answer at a point) and every bounded global (a scale) at q's default, where that mode lies "
       "over 500 of Adam's steps from q's start; each silo's locals then start at their conditional mode there. A "
       "pooled fit (up to 200 globals) always starts there. "
       "vfl_exact: the server's globals start at the mode of its own terms with the silos' predictors at 0, and "
       "where the linear predictor's scale there (1 / sqrt of the likelihood's mean curvature) exceeds 10, each "
       "silo's coefficients step at it over 10 (one number to each silo, once). off: at q's default (means 0, sds "
       "init_sd)",
       "on"},
      {"rho", "a number > 0", "AXDA coupling scale of the auxiliary variables z", "1"},
      {"q_z", "meanfield, amortized, none",
       "the variational family of the auxiliary variables z; none: no auxiliary variables, each silo "
       "sends its contribution itself (the classical split network; rho is unused)",
       "meanfield"},
      {"q_z_width", "an integer >= 1", "hidden units of the amortised q(z) network", "16"},
      {"q_z_depth", "an integer >= 0", "hidden layers of the amortised q(z) network", "1"},
      {"q_z_offset", "residual, free",
       "the amortised q(z) network's mean offsets from m_ik: residual, less their least-squares fit on (1, m_ik) over "
       "the silo's rows at each draw, so that z's level and scale are b's and theta's alone; free: as the network "
       "gives them (seed 004)",
       "residual"},
      {"precision", "float64, float32", "the scalar type of the generated kernels (the PVI methods; the others compute in double and warn)", "float64"},
      {"server_optimiser", "sgd, adam",
       "fedavg, fedvem: the server's step on the pseudo-gradient (fedavg: the rows-weighted mean of the silos' changes "
       "of q's means and log variances; fedvem: q minus its closed-form match to the silos' q_k); sgd with server_lr "
       "= 1 is plain averaging, the exact M-step",
       "sgd"},
      {"server_lr", "a number > 0", "fedavg, fedvem: the server optimiser's step size", "1"},
      {"server_tau", "a number > 0", "fedavg, fedvem with server_optimiser = adam: Adam's epsilon (its adaptivity)",
       "1e-4"},
      {"clients_per_round", "an integer >= 1",
       "synchronous PVI, fedavg, fedvem: silos asked each round, drawn without replacement from the seed and the round "
       "(default: all)",
       ""},
      {"quorum", "an integer >= 1", "silos needed to close a round (deployment)", ""},
      {"deadline", "a number > 0", "seconds to wait for silos each round (deployment)", "60"},
      {"factors", "dpo, cpo",
       "sparse GP: each silo's factor over the inducing outputs u, decoupled pseudo-observations N(K_VZ K_ZZ^-1 u; m, S) "
       "with learnt pseudo-inputs, or coupled N(u; m, S) (seed 003)", "dpo"},
      {"pseudo_cap", "an integer >= 1", "sparse GP, dpo: pseudo-observations per silo, M_k = min(0.8 N_k, pseudo_cap)", "500"},
      {"auxiliary_weight", "a number in [0, 1]",
       "sparse GP: the weight alpha of the KL of q(Z) when the inducing inputs Z are random (seed 003 Eq. 7); 1 fits "
       "Z's written prior, below 1 tempers it", "0.1"},
      {"jitter", "a number in (0, 1)", "sparse GP: added to K_ZZ's diagonal, relative to the kernel's variance", "1e-6"},
  };
  return table;
}

const KeySpec* find_key(const std::string& key) {
  for (const KeySpec& k : inference_keys())
    if (key == k.key) return &k;
  return nullptr;
}

std::string validate_key_value(const KeySpec& spec, const KeyValue& v) {
  std::string key = spec.key;
  if (key == "loss") return validate_form(loss_forms(), v, "loss");
  if (key == "divergence") return validate_form(divergence_forms(), v, "divergence");
  for (const Choice& c : choices()) {
    if (key != c.key) continue;
    std::string accepted;
    for (const char* n : c.names) accepted += (accepted.empty() ? "" : ", ") + std::string(n);
    if (v.kind != KeyValue::Kind::Name || v.has_call)
      return "'" + key + "' takes one of: " + accepted;
    for (const char* n : c.names)
      if (v.text == n) return "";
    return "unknown " + key + " '" + v.text + "'; accepted: " + accepted;
  }
  for (const Numeric& n : numerics()) {
    if (key != n.key) continue;
    if (!in_range(v, n.range)) return "'" + key + "' must be " + describe(n.range) + ", got " + v.str();
    return "";
  }
  return "";
}

std::string suggest_value(const KeySpec& spec, const KeyValue& value) {
  if (value.kind != KeyValue::Kind::Name) return "";
  std::vector<std::string> names;
  std::string key = spec.key;
  for (const Choice& c : choices())
    if (key == c.key)
      for (const char* n : c.names) names.push_back(n);
  if (key == "loss")
    for (const Form& f : loss_forms()) names.push_back(f.name);
  if (key == "divergence")
    for (const Form& f : divergence_forms()) names.push_back(f.name);
  std::string best;
  size_t best_distance = 3;  // suggest only close spellings
  for (const std::string& n : names) {
    if (n == value.text) return "";  // the name is right; something else is wrong
    size_t d = edit_distance(value.text, n);
    if (d < best_distance) {
      best_distance = d;
      best = n;
    }
  }
  return best;
}

size_t edit_distance(const std::string& a, const std::string& b, size_t limit) {
  // The distance is at least the difference of the lengths.
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) >= limit) return limit;
  // Row i holds the distances from a's first i characters to b's first j, for |i - j| <= limit;
  // cells outside the band count as `limit` (at least that much).
  std::vector<size_t> prev(b.size() + 1, limit), cur(b.size() + 1, limit);
  for (size_t j = 0; j <= b.size() && j <= limit; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    const size_t from = i > limit ? i - limit : 1, to = std::min(b.size(), i + limit);
    // Only the band's edges are reset: the row is O(limit), not O(length).
    cur[from - 1] = from == 1 ? std::min(i, limit) : limit;
    if (to < b.size()) cur[to + 1] = limit;
    size_t row_min = cur[from - 1];
    for (size_t j = from; j <= to; ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]), limit});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min >= limit) return limit;  // every path goes through this row
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], limit);
}

std::string suggest_key(const std::string& key) {
  std::string best;
  size_t best_distance = 3;  // suggest only close spellings
  for (const KeySpec& k : inference_keys()) {
    size_t d = edit_distance(key, k.key);
    if (d < best_distance) {
      best_distance = d;
      best = k.key;
    }
  }
  return best;
}

}  // namespace fvic::stdlib
