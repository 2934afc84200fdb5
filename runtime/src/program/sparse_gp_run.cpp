#include "fvi/program/sparse_gp_run.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "fvi/data/readers.h"
#include "fvi/data/validate.h"
#include "fvi/engine/bound_factor.h"
#include "fvi/engine/pvi.h"
#include "fvi/message/codec.h"
#include "fvi/message/sizes.h"
#include "fvi/program/output.h"
#include "fvi/program/server_loop.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using engine::DiagNatural;
using engine::SparseGpLayout;
using gp::FactorForm;
using gp::PseudoObservationFactor;

const fvi_variable_info* find_variable(const fvi_model& model, const std::string& name, int* index) {
  for (int i = 0; i < model.variable_count; ++i)
    if (name == model.variables[i].name) {
      *index = i;
      return &model.variables[i];
    }
  return nullptr;
}

const fvi_tensor* find_data(const fvi_data& data, const std::string& name) {
  for (int i = 0; i < data.count; ++i)
    if (name == data.names[i]) return &data.values[i];
  return nullptr;
}

Eigen::MatrixXd data_matrix(const fvi_data& data, const std::string& name, const char* what) {
  const fvi_tensor* t = find_data(data, name);
  if (!t) throw engine::ModelError(std::string("sparse GP: ") + what + " '" + name + "' is not in this party's data");
  return Eigen::Map<const Eigen::MatrixXd>(t->data, t->rows, t->cols * t->draws);
}

// One of Z, alpha, rho, sigma: its slot in theta, or its value (the log of a positive one).
SparseGpLayout::Slot slot(const fvi_model& model, const fvi_data& data, const fvi_gp_argument& a, bool positive,
                          const char* what, std::vector<int64_t>* dims) {
  SparseGpLayout::Slot s;
  if (a.kind == FVI_GP_NUMBER) {
    s.value = Eigen::VectorXd::Constant(1, positive ? std::log(a.value) : a.value);
    dims->clear();
    return s;
  }
  if (a.kind == FVI_GP_DATA) {
    const Eigen::MatrixXd m = data_matrix(data, a.name, what);
    if (positive && !(m.array() > 0).all())
      throw engine::ModelError(std::string("sparse GP: ") + what + " '" + a.name + "' must be positive");
    s.value = Eigen::Map<const Eigen::VectorXd>(m.data(), m.size());
    if (positive) s.value = s.value.array().log();
    *dims = {m.rows(), m.cols()};
    return s;
  }
  int index = -1;
  const fvi_variable_info* v = find_variable(model, a.name, &index);
  if (!v) throw engine::ModelError(std::string("sparse GP: no parameter '") + a.name + "'");
  int64_t offset = 0, d[4] = {1, 1, 1, 1};
  fvi_error error{};
  if (model.variable_shape(index, &data, &offset, d, &error))
    throw engine::ModelError(std::string("sparse GP: the shape of '") + a.name + "': " + error.message);
  *dims = std::vector<int64_t>(d, d + std::max(v->rank, 0));
  int64_t count = 1;
  for (int64_t x : *dims) count *= x;
  s.count = count;
  if (positive && !(v->transform == FVI_LOWER && v->lower == 0 && v->lower_data[0] == '\0'))
    throw engine::ModelError(std::string("sparse GP: ") + what + " '" + a.name + "' must be declared <lower=0>");
  if (!positive && v->transform != FVI_IDENTITY)
    throw engine::ModelError(std::string("sparse GP: ") + what + " '" + a.name + "' must be unconstrained");
  if (a.kind == FVI_GP_PARAMETER) s.offset = offset;
  return s;
}

}  // namespace

SparseGpLayout sparse_gp_layout(const fvi_model& model, const fvi_data& data) {
  if (!model.sparse_gp) throw engine::ModelError("this model has no sparse GP");
  const fvi_sparse_gp& g = *model.sparse_gp;
  SparseGpLayout L;
  L.dim = engine::group_dim(model, FVI_GROUP_GLOBAL, data);
  std::vector<int64_t> z_dims, dims;
  L.z = slot(model, data, g.inducing, false, "the inducing inputs", &z_dims);
  L.z_shared_point = g.inducing.kind == FVI_GP_HYPERPARAMETER;
  // Z is M x D (a matrix or an array of vectors), or M points of one dimension.
  L.inducing = z_dims.empty() ? 1 : z_dims[0];
  L.dimensions = z_dims.size() >= 2 ? z_dims[1] : 1;
  L.log_scale = slot(model, data, g.scale, true, "the kernel's scale", &dims);
  L.log_lengthscale = slot(model, data, g.lengthscale, true, "the lengthscale", &dims);
  L.log_lengthscale.count = L.log_lengthscale.random() ? L.log_lengthscale.count : L.log_lengthscale.value.size();
  L.log_noise_sd = slot(model, data, g.noise, true, "the noise sd", &dims);
  if (const std::string p = L.problem(); !p.empty()) throw engine::ModelError("sparse GP: " + p);
  return L;
}

namespace {

constexpr double kMaxCount = 1e9;

// A factor over u on the wire: [its size (DPO: pseudo-observations; CPO: M), its numbers].
void write_factor(message::Writer& w, const PseudoObservationFactor& f) {
  w.value(double(f.size())).values(gp::flatten(f));
}

PseudoObservationFactor read_factor(message::Reader& in, const SparseGpLayout& L, const engine::SparseGpOptions& o) {
  const double size = in.value("a factor's size");
  if (o.form == FactorForm::Dpo) {
    if (size < 1 || size > double(o.pseudo_cap) || size != std::floor(size))
      throw std::invalid_argument("a factor of " + std::to_string(size) + " pseudo-observations (1 to " +
                                  std::to_string(o.pseudo_cap) + ")");
    PseudoObservationFactor f = gp::initial_dpo(Eigen::MatrixXd::Zero(Eigen::Index(size), L.dimensions));
    gp::unflatten(in.vector(f.parameter_count(), "pseudo-observations"), &f);
    if (f.log_noise.cwiseAbs().maxCoeff() > 50) throw std::invalid_argument("a pseudo-noise outside e^-50 .. e^50");
    return f;
  }
  if (size != double(L.inducing)) throw std::invalid_argument("a CPO factor not over the M inducing outputs");
  PseudoObservationFactor f = gp::initial_cpo(L.inducing);
  gp::unflatten(in.vector(f.parameter_count(), "a CPO factor"), &f);
  return f;
}

std::vector<PseudoObservationFactor> read_factors(message::Reader& in, const SparseGpLayout& L,
                                                  const engine::SparseGpOptions& o) {
  const double count = in.value("the number of factors");
  if (count < 0 || count > kMaxCount || count != std::floor(count)) throw std::invalid_argument("a bad number of factors");
  std::vector<PseudoObservationFactor> out;
  for (double i = 0; i < count; ++i) out.push_back(read_factor(in, L, o));
  return out;
}

void write_factors(message::Writer& w, const std::vector<PseudoObservationFactor>& factors) {
  w.value(double(factors.size()));
  for (const auto& f : factors) write_factor(w, f);
}

Eigen::MatrixXd read_z(message::Reader& in, const SparseGpLayout& L) {
  if (!L.z_shared_point) return {};
  return in.matrix(L.inducing, L.dimensions, "the inducing inputs");
}

class SparseGpEndpoint : public SiloEndpoint {
 public:
  SparseGpEndpoint(const engine::SparseGpClient& client, SparseGpLayout layout, engine::SparseGpOptions options)
      : client_(client), layout_(std::move(layout)), options_(std::move(options)) {}

  Message handle(uint32_t round, Phase phase, const Message& request) override {
    const Eigen::Index G = layout_.dim;
    message::Reader in(request, phase_name(phase) + std::string(" request"));
    DiagNatural q, own;
    in.natural(G, q, "q");
    if (phase == Phase::kSgpEvaluate) {
      const auto all = read_factors(in, layout_, options_);
      const Eigen::MatrixXd z = read_z(in, layout_);
      in.finish();
      const auto e = client_.evaluate(round, q, all, z);
      return {e.expected_log_likelihood, e.predictive_log_density, double(client_.rows())};
    }
    if (phase != Phase::kSgpUpdate) throw std::invalid_argument(std::string("a sparse GP silo does not answer ") + phase_name(phase));
    in.natural(G, own, "t_k");
    const double has_own = in.value("whether the silo has a factor");
    if (has_own != 0 && has_own != 1) throw std::invalid_argument("a bad flag for the silo's factor");
    const PseudoObservationFactor own_pseudo = has_own ? read_factor(in, layout_, options_) : client_.initial_factor();
    const auto others = read_factors(in, layout_, options_);
    const Eigen::MatrixXd z = read_z(in, layout_);
    in.finish();
    const engine::SparseGpUpdate u = client_.update(round, q, own, own_pseudo, others, z);
    message::Writer w;
    w.natural(u.factor);
    write_factor(w, u.pseudo);
    if (layout_.z_shared_point) w.values(u.z_point).value(double(client_.rows()));  // Algorithm 1's weight N_k
    w.value(std::isfinite(u.free_energy) ? u.free_energy : 0.0);
    return w.done();
  }

 private:
  const engine::SparseGpClient& client_;
  SparseGpLayout layout_;
  engine::SparseGpOptions options_;
};

class SparseGpSiloHost : public SiloHost {
 public:
  SparseGpSiloHost(const fvi_model& model, const engine::Settings& settings, data::DataSet data, int silo)
      : data_(std::move(data)),
        layout_(sparse_gp_layout(model, data_.view())),
        options_(engine::SparseGpOptions::from(settings)),
        client_(layout_, data_matrix(data_.view(), model.sparse_gp->inputs, "the inputs"),
                Eigen::VectorXd(data_matrix(data_.view(), model.sparse_gp->outcome, "the outcome").reshaped()), options_,
                silo),
        endpoint_(client_, layout_, options_),
        silo_(silo) {}
  SiloEndpoint& endpoint() override { return endpoint_; }
  std::string describe() const override {
    return "silo " + std::to_string(silo_) + ": " + std::to_string(client_.rows()) + " observations, " +
           (options_.form == FactorForm::Dpo
                ? std::to_string(gp::pseudo_observation_count(client_.rows(), options_.pseudo_cap)) + " pseudo-observations"
                : "a CPO factor over u");
  }

 private:
  data::DataSet data_;
  SparseGpLayout layout_;
  engine::SparseGpOptions options_;
  engine::SparseGpClient client_;
  SparseGpEndpoint endpoint_;
  int silo_;
};

// Seed 003 Algorithm 2 (and Algorithm 1 when Z is a shared point estimate) as the server loop's
// coordinator. A round updates every silo once: one after another (sequential, the paper's
// schedule), or all from the same q (synchronous).
class SparseGpCoordinator : public Coordinator {
 public:
  explicit SparseGpCoordinator(ServerRun& run)
      : run_(run),
        options_(engine::SparseGpOptions::from(run.settings)),
        layout_(sparse_gp_layout(run.model, run.server_data.view())),
        rounds_(max_steps(run.settings, 50)),
        server_(layout_, prior(run, options_.seed), run.transport.silos(), options_, start_z(layout_, options_.seed)),
        variables_(variable_layout(run.model, FVI_GROUP_GLOBAL, run.server_data.view())),
        rows_(size_t(run.transport.silos()), 0) {
    if (!run.args.ood.empty())
      throw data::DataError("--ood: a sparse GP run scores held-out rows (--test) only; the OOD AUROC is PVI's and SFVI's");
    if (!run.args.test.empty()) {
      data::DataSet test = data::load_test_data(run.args.test);
      data::Problems problems;
      data::validate_party(*run.model.data_table, data::Party::Silo, test, run.public_data, problems);
      if (!problems.empty()) throw data::DataError(problems.text());
      test = std::move(test).merged(run.public_data);
      test_x_ = data_matrix(test.view(), run.model.sparse_gp->inputs, "the held-out inputs");
      test_y_ = data_matrix(test.view(), run.model.sparse_gp->outcome, "the held-out outcomes").reshaped();
    }
  }

  const char* checkpoint_kind() const override { return "sparse-gp-server"; }
  void print_header() const override {
    std::printf("%s: method = pvi, sparse GP (seed 003), factors = %s, silos = %d, rounds = %ld, schedule = %s\n",
                run_.description.name, options_.form == FactorForm::Dpo ? "dpo" : "cpo", run_.transport.silos(), rounds_,
                options_.schedule.c_str());
    std::printf("  M = %ld inducing inputs in %ld dimensions, %s; local steps = %ld, lr = %g\n", long(layout_.inducing),
                long(layout_.dimensions), z_words().c_str(), options_.local_steps, options_.learning_rate);
  }
  long steps() const override { return rounds_; }
  bool reports(long) const override { return true; }

  double step(long t) override {
    const int K = run_.transport.silos();
    if (options_.schedule == "sequential") {
      for (int k = 0; k < K; ++k) exchange(t, {k});
    } else {
      std::vector<int> every(static_cast<size_t>(K));
      for (int k = 0; k < K; ++k) every[size_t(k)] = k;
      exchange(t, every);
    }
    return evaluate(t);
  }
  std::string position(long t) const override {
    char line[64];
    std::snprintf(line, sizeof line, "round %3ld/%ld", t, rounds_);
    return line;
  }
  std::string metrics(long, Extra& extra) override {
    extra.push_back({"train_lpd", train_lpd_});
    if (test_y_.size() == 0) return "  train lpd " + format(train_lpd_);
    const auto score = engine::predictive_score(layout_, predictive_draws(), server_.all(), server_.z_point(),
                                                options_.jitter, test_x_, test_y_);
    extra.push_back({"test_lpd", score.log_density});
    extra.push_back({"test_rmse", score.rmse});
    return "  train lpd " + format(train_lpd_) + ", test lpd " + format(score.log_density) + ", RMSE " +
           format(score.rmse);
  }
  // The rule judges the objective and the hyperparameters' q. Z is left out: it is a variational
  // auxiliary (seed 003 §4), and an inducing input the data barely use wanders along directions
  // in which the bound is flat, without changing the fit.
  void moments(Eigen::VectorXd& mean, Eigen::VectorXd& sd) const override {
    const auto q = to_mean_field(server_.posterior());
    std::vector<Eigen::Index> kept;
    for (Eigen::Index i = 0; i < q.dim(); ++i)
      if (!layout_.z.random() || i < layout_.z.offset || i >= layout_.z.offset + layout_.z.count) kept.push_back(i);
    mean = q.mean()(kept);
    sd = q.sd()(kept);
  }
  // Each round's objective carries the noise of the silos' stochastic fits: windows of three
  // rounds give the rule its standard error; three flat windows and settled means of q end it.
  ConvergenceOptions convergence() const override {
    ConvergenceOptions o;
    o.window = 3, o.plateaus = 1, o.min_average_windows = 3;
    return o;
  }
  const char* unit() const override { return "rounds"; }
  std::vector<double> state() const override {
    std::vector<double> s = server_.state();
    s.insert(s.end(), rows_.begin(), rows_.end());
    return s;
  }
  void restore(const std::vector<double>& state) override {
    const size_t K = rows_.size();
    if (state.size() < K) throw std::invalid_argument("sparse GP checkpoint: too short");
    server_.restore(std::vector<double>(state.begin(), state.end() - long(K)));
    rows_.assign(state.end() - long(K), state.end());
  }
  // With --test: OUT/predictive.csv, the predictive of y at each held-out row (the mixture over
  // seed 003's S = 100 draws of Z and the hyperparameters): its mean and sd beside the row.
  void finish(long) override {
    if (test_y_.size() == 0) return;
    const auto score = engine::predictive_score(layout_, predictive_draws(), server_.all(), server_.z_point(),
                                                options_.jitter, test_x_, test_y_);
    const std::string path = run_.args.output + "/predictive.csv";
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path);
    for (Eigen::Index d = 0; d < test_x_.cols(); ++d) std::fprintf(f, "x.%ld,", long(d + 1));
    std::fprintf(f, "y,mean,sd\n");
    for (Eigen::Index i = 0; i < test_y_.size(); ++i) {
      for (Eigen::Index d = 0; d < test_x_.cols(); ++d) std::fprintf(f, "%.17g,", test_x_(i, d));
      std::fprintf(f, "%.17g,%.17g,%.17g\n", test_y_[i], score.mean[i], score.sd[i]);
    }
    std::fclose(f);
  }
  std::optional<ServerDraws> draws() override {
    const auto q = to_mean_field(server_.posterior());
    CounterRng rng(RngKey{options_.seed, 0, 0, rng_stream::kUserStream + 3});
    ServerDraws d;
    d.layout = variables_;
    const long count = output_draws(run_.settings, q.dim());
    const Eigen::MatrixXd u = q.sample(rng.normal(q.dim(), count));
    d.log_q = q.dim() ? q.log_density(u) : Eigen::VectorXd::Zero(count);
    d.mean = q.mean();
    d.sd = q.sd();
    d.unconstrained = u;
    d.what = "the global parameters";
    if (layout_.z_shared_point) {
      // The shared Z (a hyperparameter) after the global parameters, as constant rows (as SFVI
      // writes its hyperparameters).
      const Eigen::Index n = u.rows(), m = server_.z_point().size();
      const Eigen::Map<const Eigen::VectorXd> z(server_.z_point().data(), m);
      d.unconstrained.conservativeResize(n + m, count);
      d.unconstrained.bottomRows(m) = z.replicate(1, count);
      d.mean.conservativeResize(n + m);
      d.mean.tail(m) = z;
      d.sd.conservativeResize(n + m);
      d.sd.tail(m).setZero();
      for (VariableLayout v : variable_layout(run_.model, FVI_GROUP_HYPER, run_.server_data.view())) {
        v.offset += n;
        d.layout.push_back(v);
      }
      d.what = "the global parameters and the shared inducing inputs";
    }
    d.constrained = constrain(d.layout, d.unconstrained);
    d.family = "meanfield";
    return d;
  }
  std::string outputs_note() const override { return test_y_.size() ? "; predictive.csv: the held-out rows' predictive" : ""; }
  bool closing(const ServerDraws&, Closing&, std::string& why) override {
    why = "not computed: the Gaussian process couples every silo's rows, so no silo can evaluate its part of the "
          "written model's log density";
    return false;
  }
  std::string target_note() const override { return surrogate(); }
  std::vector<std::string> closing_warnings() const override {
    std::vector<std::string> w;
    if (refused_) w.push_back(std::to_string(refused_) + " silo updates were refused or missing (see the lines above)");
    w.push_back("the fit is " + surrogate().substr(2));
    return w;
  }

 private:
  static DiagNatural prior(ServerRun& run, uint64_t seed) {
    // The prior of the global parameters, read as a Gaussian on their unconstrained scale the
    // way PVI's server reads it (a lognormal prior of a <lower=0> parameter is one). A model whose
    // only unknowns are the inducing inputs, as a point estimate, has none.
    if (engine::group_dim(run.model, FVI_GROUP_GLOBAL, run.server_data.view()) == 0) return DiagNatural::zero(0);
    return engine::PviServer<MeanFieldGaussian<double>>(run.model, run.server_data.view(), seed).prior();
  }
  // Z's starting value when it is a point estimate: N(0, I) (seed 003 §6.2.1), the same on a
  // resumed run (the checkpoint then replaces it).
  static Eigen::MatrixXd start_z(const SparseGpLayout& L, uint64_t seed) {
    if (!L.z_shared_point) return {};
    CounterRng rng(RngKey{seed, 0, 0, rng_stream::kInitialisation});
    return rng.normal(L.inducing, L.dimensions);
  }
  std::string z_words() const {
    if (layout_.z.random())
      return "Z random (a hierarchical variational model, KL weight " + format(options_.auxiliary_weight) + ")";
    if (layout_.z_shared_point) return "Z a point estimate the server averages (seed 003 Algorithm 1)";
    return "Z fixed";
  }
  std::string surrogate() const {
    std::string s = "; the sparse-GP variational bound with " + std::to_string(layout_.inducing) +
                    " inducing inputs (Titsias 2009; seed 003), a lower bound of the written GP's evidence";
    if (layout_.z.random() && options_.auxiliary_weight != 1)
      s += ", with the KL of q(Z) weighted by " + format(options_.auxiliary_weight) + " (a tempered Z prior)";
    return s;
  }
  static std::string format(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", v);
    return text;
  }
  Eigen::MatrixXd predictive_draws() const {
    engine::SparseGpOptions o = options_;
    o.evaluation_draws = 100;  // seed 003 §6: S = 100
    return engine::evaluation_draws(server_.posterior(), o, 0);
  }

  void exchange(long t, const std::vector<int>& silos) {
    const DiagNatural q = server_.posterior();
    Exchange x;
    x.round = uint32_t(t);
    x.phase = Phase::kSgpUpdate;
    x.silos = silos;
    x.request = [&](int k) {
      message::Writer w;
      w.natural(silos.size() == 1 ? server_.posterior() : q).natural(server_.factor(k));
      w.value(server_.pseudo(k) ? 1.0 : 0.0);
      if (server_.pseudo(k)) write_factor(w, *server_.pseudo(k));
      write_factors(w, server_.others(k));
      if (layout_.z_shared_point) w.values(server_.z_point());
      return w.done();
    };
    std::vector<std::pair<int, engine::SparseGpUpdate>> replies;
    x.reply = [&](int k, Message& reply) -> std::string {
      try {
        message::Reader in(reply, "silo " + std::to_string(k + 1) + "'s sparse GP update");
        engine::SparseGpUpdate u;
        in.natural(layout_.dim, u.factor, "t_k");
        u.pseudo = read_factor(in, layout_, options_);
        u.z_point = read_z(in, layout_);
        if (layout_.z_shared_point) rows_[size_t(k)] = read_rows(in);
        u.free_energy = in.value("its objective");
        in.finish();
        if (silos.size() == 1) return accept(k, u);  // sequential: applied before the next silo's request
        replies.push_back({k, std::move(u)});
        return "";
      } catch (const std::exception& e) {
        return e.what();
      }
    };
    const std::vector<bool> ok = run_.transport.exchange(x);
    for (int k : silos) refused_ += ok[size_t(k)] ? 0 : 1;
    for (auto& [k, u] : replies) {
      const std::string why = accept(k, u);
      if (!why.empty()) std::fprintf(stderr, "silo %d's update refused: %s\n", k + 1, why.c_str()), ++refused_;
    }
  }

  static double read_rows(message::Reader& in) {
    const double n = in.value("its rows");
    if (n < 1 || n > 1e15 || n != std::floor(n)) throw std::invalid_argument("a bad number of rows");
    return n;
  }

  // Algorithm 1's weights N_k / N, over the silos that have said their N_k so far.
  std::string accept(int k, const engine::SparseGpUpdate& u) {
    Eigen::Index total = 0;
    for (double r : rows_) total += Eigen::Index(r);
    return server_.accept(k, u, options_.schedule == "sequential" ? 1.0 : options_.damping, Eigen::Index(rows_[size_t(k)]),
                          total);
  }

  double evaluate(long t) {
    message::Writer w;
    w.natural(server_.posterior());
    write_factors(w, server_.all());
    if (layout_.z_shared_point) w.values(server_.z_point());
    std::vector<Message> replies;
    ask_every_silo(run_.transport, uint32_t(t), Phase::kSgpEvaluate, w.done(), 3, replies);
    double ell = 0, lpd = 0, rows = 0;
    for (const Message& m : replies) {
      if (m.size() != 3 || !(m[2] >= 1)) continue;  // a silo that did not answer
      ell += m[0], lpd += m[1], rows += m[2];
    }
    train_lpd_ = rows > 0 ? lpd / rows : std::nan("");
    return ell - server_.kl_part(uint32_t(t));
  }

  ServerRun& run_;
  engine::SparseGpOptions options_;
  SparseGpLayout layout_;
  long rounds_;
  engine::SparseGpServer server_;
  std::vector<VariableLayout> variables_;
  std::vector<double> rows_;  // each silo's N_k, for Algorithm 1's weights (Z a shared point only)
  Eigen::MatrixXd test_x_;
  Eigen::VectorXd test_y_;
  double train_lpd_ = 0;
  long refused_ = 0;
};

}  // namespace

int serve_sparse_gp(ServerRun& run) {
  SparseGpCoordinator coordinator(run);
  return run_server(run, coordinator, "pvi");
}

std::unique_ptr<SiloHost> sparse_gp_silo_host(const fvi_model& model, const engine::Settings& settings,
                                              data::DataSet data, int silo, int) {
  return std::make_unique<SparseGpSiloHost>(model, settings, std::move(data), silo);
}

}  // namespace fvi::program
