// The vertical engine on generated kernels (seed 004; spec 004 §3):
// - the decomposition is exact: the server's and the silos' gradients, exchanged as Algorithms 1
//   and 2 exchange them, equal the gradient of the pooled ELBO estimator at the same noise,
//   computed in one place by forward-mode dual numbers through a hand-written log joint, a
//   hand-written network and the Gaussian densities (no kernel or engine code) — for the
//   augmented and the power-likelihood model, with mean-field and amortised q(z);
// - with a Gaussian likelihood the augmented model is y ~ N(b + sum_k x_k beta_k, sigma^2 + J rho^2)
//   (spec 004 §2.2); mean-field VI of a Gaussian target has the exact posterior means and the
//   sds 1 / sqrt(diagonal of the precision), which the fit reaches within its Monte Carlo error;
// - the joint family of vfl_exact (one Gaussian across the parties, each holding its rows of the
//   Cholesky factor): its federated gradient is the pooled one (the layout of the rows written
//   out here from the documented parameter order), and on a Gaussian regression whose columns are
//   correlated across the silos it reaches the exact posterior's means and sds (full covariance).
#include <catch2/catch.hpp>

#include <random>
#include <tuple>

#include "abi_data.h"
#include "dual.h"
#include "fvi/engine/vfl.h"
#include "fvi/program/vfl_tail_check.h"

extern "C" const fvi_model* fvi_model_vfl_logreg(void);
extern "C" const fvi_model* fvi_model_vfl_logreg_power(void);
extern "C" const fvi_model* fvi_model_vfl_linreg(void);
extern "C" const fvi_model* fvi_model_split_nn(void);
extern "C" const fvi_model* fvi_model_vfl_global_scale(void);

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace vfl_engine_test {

namespace {

using fvi::JointGaussianRows;
using fvi::engine::VflOptions;
using fvi::engine::VflServer;
using fvi::engine::VflSilo;
using fvic::test::Data;
using fvic::test::Dual;
using fvic::test::normal_lpdf;
using fvic::test::scalar;

// A vertically split data set: silo k holds columns [first_k, first_k + P_k) of X.
struct Split {
  int N = 0;
  std::vector<int> P;
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
  int first(int k) const {
    int f = 0;
    for (int j = 0; j < k; ++j) f += P[j];
    return f;
  }
  Eigen::MatrixXd columns(int k) const { return X.middleCols(first(k), P[k]); }
};

Split logistic_split(int N, const std::vector<int>& P, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Split s{N, P, {}, {}};
  int p = 0;
  for (int q : P) p += q;
  s.X.resize(N, p);
  s.y.resize(N);
  for (Eigen::Index i = 0; i < s.X.size(); ++i) s.X.data()[i] = normal(rng);
  for (int i = 0; i < N; ++i) s.y[i] = normal(rng) > 0 ? 1 : 0;
  return s;
}

// The documented network (fvi/family/amortized_gaussian.h) in any scalar type: layers of
// (weight out x in column-major, bias), tanh hidden layers, linear output (a, s).
template <typename T, typename P>
std::pair<T, T> network(const std::vector<P>& params, size_t at, const std::vector<T>& input, int width, int depth) {
  std::vector<T> h = input;
  for (int l = 0; l <= depth; ++l) {
    const int in = int(h.size()), out = l < depth ? width : 2;
    std::vector<T> next(out);
    for (int o = 0; o < out; ++o) {
      T sum = T(params[at + size_t(in * out + o)]);
      for (int i = 0; i < in; ++i) sum = sum + T(params[at + size_t(i * out + o)]) * h[i];
      next[o] = l < depth ? tanh(sum) : sum;
    }
    at += size_t(in * out + out);
    h = next;
  }
  return {h[0], h[1]};
}

struct Setup {
  bool power = false, amortized = false;
  bool exact = false;  // method = vfl_exact: no z, each silo's partial predictor goes up as it is
  bool center = false;  // vfl_exact's centred intercept: b = b_c - mean_i sum_k m_ik
  bool residual = false;  // q_z_offset = residual: the network's offsets less their fit on (1, m)
  double rho = 0.7;
  long S = 2;
  int width = 3, depth = 2;
};

// The federated ELBO estimate and gradient against the pooled estimator's, one coordinate at a
// time by forward-mode dual numbers, to 1e-10 relative.
template <class Pooled>
void check_against_pooled(double elbo, const Eigen::VectorXd& federated, const std::vector<double>& fixed,
                          Pooled pooled) {
  std::vector<Dual> p(fixed.begin(), fixed.end());
  const Dual value = pooled(p);
  CHECK(elbo == Approx(value.v).epsilon(0).margin(1e-10 * std::max(1.0, std::abs(value.v))));
  for (size_t c = 0; c < fixed.size(); ++c) {
    p[c].d = 1;
    const double gradient = pooled(p).d;
    p[c].d = 0;
    INFO("coordinate " << c << ": federated " << federated[c] << ", pooled " << gradient);
    CHECK(std::abs(federated[c] - gradient) <= 1e-10 * std::max(1.0, std::abs(gradient)));
  }
}

// The pooled ELBO estimator of the vertical logistic model at parameters p = [server (mu_b,
// log sd_b); silo 1; ...; silo J] (duals), with the noise each party drew; the densities of q use
// the plain values `fixed` for their parameters (STL), never for the draws. With mean-field q(z)
// the coupling's expectation and the entropies of q(z) and q(theta_k) are Gaussian moments.
Dual pooled_elbo(const std::vector<Dual>& p, const std::vector<double>& fixed, const Split& d, const Setup& o,
                 const Eigen::MatrixXd& eps_b, const std::vector<Eigen::MatrixXd>& eps,
                 const std::vector<Eigen::MatrixXd>& tau, const std::vector<size_t>& offset) {
  const int J = int(d.P.size()), N = d.N;
  const bool centred = !o.exact && !o.amortized;  // mean-field q(z), its means offsets from m_k(mean)
  Dual total = 0;
  for (long s = 0; s < o.S; ++s) {
    const Dual b_fit = p[0] + exp(p[1]) * Dual(eps_b(0, s));
    total = total - normal_lpdf(b_fit, fixed[0], std::exp(fixed[1]));
    std::vector<std::vector<Dual>> m(J, std::vector<Dual>(N)), z(J, std::vector<Dual>(N));
    for (int k = 0; k < J; ++k) {
      const size_t at = offset[k];
      const int P = d.P[k];
      std::vector<Dual> theta(P);
      for (int c = 0; c < P; ++c) {
        theta[c] = p[at + c] + exp(p[at + P + c]) * Dual(eps[k](c, s));
        total = total + normal_lpdf(theta[c], 0, 1);
        if (centred)  // the entropy of q(theta_k) in closed form
          total = total + p[at + P + c] + Dual(0.5 * (std::log(2 * M_PI) + 1));
        else
          total = total - normal_lpdf(theta[c], fixed[at + c], std::exp(fixed[at + P + c]));
      }
      const size_t zat = at + 2 * size_t(P);
      for (int i = 0; i < N; ++i)
        for (int c = 0; c < P; ++c) m[k][i] = m[k][i] + Dual(d.X(i, d.first(k) + c)) * theta[c];
      // The amortised network's outputs at every row: offsets a (psi live), a0 (psi fixed, m live).
      std::vector<Dual> a(N), sv(N), a0(N), s0(N);
      if (o.amortized && !o.exact) {
        for (int i = 0; i < N; ++i) {
          std::vector<Dual> u{m[k][i]};
          if (o.power) u.push_back(Dual(d.y[i]));
          std::tie(a[i], sv[i]) = network(p, zat, u, o.width, o.depth);
          std::tie(a0[i], s0[i]) = network(fixed, zat, u, o.width, o.depth);
        }
        if (o.residual) {  // each less its least-squares line on m over the rows, written out
          for (std::vector<Dual>* offsets : {&a, &a0}) {
            Dual m_bar = 0, a_bar = 0;
            for (int i = 0; i < N; ++i) m_bar = m_bar + m[k][i] / Dual(N), a_bar = a_bar + (*offsets)[i] / Dual(N);
            Dual cross = 0, square = 0;
            for (int i = 0; i < N; ++i) {
              cross = cross + ((*offsets)[i] - a_bar) * (m[k][i] - m_bar);
              square = square + (m[k][i] - m_bar) * (m[k][i] - m_bar);
            }
            for (int i = 0; i < N; ++i) (*offsets)[i] = (*offsets)[i] - a_bar - cross / square * (m[k][i] - m_bar);
          }
        }
      }
      for (int i = 0; i < N; ++i) {
        if (o.exact) {  // the written model: no auxiliary variable, no coupling term
          z[k][i] = m[k][i];
          continue;
        }
        Dual log_q;
        if (o.amortized) {
          z[k][i] = m[k][i] + a[i] + exp(sv[i]) * Dual(tau[k](i, s));
          log_q = normal_lpdf(z[k][i], m[k][i] + a0[i], exp(s0[i]));  // psi held fixed, m not
        } else {
          // z's mean: the offset plus x_i . (q(theta_k)'s mean), with theta's mean a parameter too.
          Dual centre = 0;
          double centre_fixed = 0;
          for (int c = 0; c < P; ++c) {
            centre = centre + Dual(d.X(i, d.first(k) + c)) * p[at + c];
            centre_fixed += d.X(i, d.first(k) + c) * fixed[at + c];
          }
          const Dual mean = centre + p[zat + i], sd = exp(p[zat + N + i]);
          z[k][i] = mean + sd * Dual(tau[k](i, s));
          // The coupling's expectation over q(z) and q(z)'s entropy, in closed form.
          const Dual gap = mean - m[k][i];
          total = total - (gap * gap + sd * sd) / Dual(2 * o.rho * o.rho) -
                  Dual(std::log(o.rho) + 0.5 * std::log(2 * M_PI)) + p[zat + N + i] +
                  Dual(0.5 * (std::log(2 * M_PI) + 1));
          continue;
        }
        total = total + normal_lpdf(z[k][i], m[k][i], o.rho) - log_q;
      }
    }
    // The written b: the fit's, or with the centred intercept b_c less the mean of the summed
    // partial predictors over the rows; its prior is the written model's.
    Dual b = b_fit;
    if (o.exact && o.center)
      for (int i = 0; i < N; ++i)
        for (int k = 0; k < J; ++k) b = b - z[k][i] / Dual(double(N));
    total = total + normal_lpdf(b, 0, 1);
    auto bernoulli_logit = [](double y, Dual eta) { return Dual(y) * eta - log1p_exp(eta); };
    for (int i = 0; i < N; ++i) {
      Dual all = 0;
      for (int k = 0; k < J; ++k) all = all + z[k][i];
      if (!o.power) {
        total = total + bernoulli_logit(d.y[i], b + all);  // seed 004 Eq. 6
      } else {
        for (int k = 0; k < J; ++k)  // seed 004 Eq. 7: silo k's own m plus the others' z, weight 1/J
          total = total + Dual(1.0 / J) * bernoulli_logit(d.y[i], b + m[k][i] + all - z[k][i]);
      }
    }
  }
  return total / Dual(double(o.S));
}

void check_exact_decomposition(const Setup& o) {
  std::mt19937_64 rng(o.power * 2 + o.amortized + 11);
  std::normal_distribution<double> normal;
  const Split d = logistic_split(7, {2, 3, 1}, rng);
  const int J = int(d.P.size());
  const fvi_model& model = o.power ? *fvi_model_vfl_logreg_power() : *fvi_model_vfl_logreg();
  VflOptions opt;
  opt.power = o.power;
  opt.amortized = o.amortized;
  opt.auxiliary = !o.exact;
  opt.exact = o.exact;
  opt.center = o.center;
  opt.residual_offset = o.residual;
  opt.rho = o.rho;
  opt.mc_samples = o.S;
  opt.width = o.width;
  opt.depth = o.depth;
  opt.seed = 5;
  Data server_data;
  server_data.add("N", scalar(d.N));
  server_data.add("y", d.y);
  VflServer server(model, server_data.abi(), opt, J);
  std::vector<Data> silo_data(J);
  std::vector<std::unique_ptr<VflSilo>> silos;
  std::vector<double> fixed{0.3 * normal(rng), -0.5 + 0.2 * normal(rng)};
  server.set_params(Eigen::Map<Eigen::VectorXd>(fixed.data(), 2));
  std::vector<size_t> offset;
  for (int k = 0; k < J; ++k) {
    silo_data[k].add("N", scalar(d.N));
    if (o.power) silo_data[k].add("y", d.y);
    silo_data[k].add("P", scalar(d.P[k]));
    silo_data[k].add("x", d.columns(k));
    silos.push_back(std::make_unique<VflSilo>(model, silo_data[k].abi(), k + 1, J, opt));
    Eigen::VectorXd params(silos[k]->params().size());
    for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.4 * normal(rng);
    params.segment(d.P[k], d.P[k]).array() -= 0.5;  // log sds of q(theta)
    silos[k]->set_params(params);
    offset.push_back(fixed.size());
    fixed.insert(fixed.end(), params.data(), params.data() + params.size());
  }

  // Federated, as the algorithms exchange it.
  const uint32_t t = 3;
  std::vector<Eigen::MatrixXd> z, eps, tau;
  Eigen::MatrixXd z_all = Eigen::MatrixXd::Zero(d.N, o.S);
  for (auto& s : silos) {
    z.push_back(s->propose(t));
    eps.push_back(s->kept_theta_noise());
    tau.push_back(s->kept_z_noise());
    z_all += z.back();
  }
  const Eigen::MatrixXd eps_b = server.global_noise(t);
  double elbo = 0;
  Eigen::VectorXd d_server;
  std::vector<Eigen::MatrixXd> adjoint(J);
  if (!o.power) {
    Eigen::MatrixXd G;
    elbo += server.augmented_gradient(eps_b, z_all, G, d_server);
    for (int k = 0; k < J; ++k) adjoint[k] = G;  // Alg. 1: one vector for every silo
  } else {
    const Eigen::MatrixXd b = server.globals(eps_b);
    Eigen::MatrixXd d_b = Eigen::MatrixXd::Zero(1, o.S), H_all = Eigen::MatrixXd::Zero(d.N, o.S);
    std::vector<Eigen::MatrixXd> H(J);
    for (int k = 0; k < J; ++k) {
      double term = 0;
      H[k] = silos[k]->power_message(b, z_all - z[k], d_b, term);  // silo k sees sum_{j != k} z_j only
      H_all += H[k];
    }
    for (int k = 0; k < J; ++k) adjoint[k] = H_all - H[k];  // Alg. 2 step 13
    elbo += server.prior_gradient(eps_b, d_b, d_server);
  }
  Eigen::VectorXd federated(fixed.size());
  federated.head(2) = d_server;
  for (int k = 0; k < J; ++k) {
    Eigen::VectorXd g;
    elbo += silos[k]->gradient(adjoint[k], g);
    federated.segment(offset[k], g.size()) = g;
  }

  // Pooled, by dual numbers, one coordinate at a time.
  check_against_pooled(elbo, federated, fixed,
                       [&](const std::vector<Dual>& p) { return pooled_elbo(p, fixed, d, o, eps_b, eps, tau, offset); });
}

}  // namespace

TEST_CASE("VFL exact split-predictor decomposition: federated gradient = pooled gradient of the written model",
          "[vfl]") {
  Setup o;
  o.exact = true;
  check_exact_decomposition(o);
}

TEST_CASE("VFL exact decomposition with the intercept centred: federated gradient = pooled gradient at b = b_c - "
          "mean(sum_k eta_k)",
          "[vfl][centring]") {
  Setup o;
  o.exact = true;
  o.center = true;
  check_exact_decomposition(o);
}

TEST_CASE("VFL augmented model: federated gradient = pooled gradient (mean-field q(z))", "[vfl]") {
  check_exact_decomposition({false, false});
}

TEST_CASE("VFL augmented model: federated gradient = pooled gradient (amortised q(z))", "[vfl]") {
  check_exact_decomposition({false, true});
}

TEST_CASE("VFL augmented model: federated gradient = pooled gradient (amortised q(z), residual offsets)", "[vfl]") {
  Setup o{false, true};
  o.residual = true;
  check_exact_decomposition(o);
}

TEST_CASE("VFL power model: federated gradient = pooled gradient (mean-field q(z))", "[vfl]") {
  check_exact_decomposition({true, false});
}

TEST_CASE("VFL power model: federated gradient = pooled gradient (amortised q(z))", "[vfl]") {
  check_exact_decomposition({true, true});
}

TEST_CASE("VFL power model: federated gradient = pooled gradient (amortised q(z), residual offsets)", "[vfl]") {
  Setup o{true, true};
  o.residual = true;
  check_exact_decomposition(o);
}

// ---- the joint family ------------------------------------------------------------------------

// One party's rows of the joint factor from its parameters, in any scalar type, as
// fvi/family/joint_gaussian_rows.h documents them: [m (p); row r: offset + r entries, log diag].
template <typename T>
void joint_rows(const std::vector<T>& p, size_t at, int offset, int dim, std::vector<T>& mean,
                std::vector<std::vector<T>>& rows) {
  mean.assign(p.begin() + long(at), p.begin() + long(at) + dim);
  rows.assign(size_t(dim), std::vector<T>(size_t(offset + dim), T(0)));
  size_t i = at + size_t(dim);
  for (int r = 0; r < dim; ++r) {
    for (int c = 0; c < offset + r; ++c) rows[size_t(r)][size_t(c)] = p[i++];
    rows[size_t(r)][size_t(offset + r)] = exp(p[i++]);
  }
}

// Draw s of the joint family's stacked parameters, x = m + L eps (every party's rows).
std::vector<Dual> joint_draw(const std::vector<Dual>& p, const Eigen::MatrixXd& eps, long s, const std::vector<size_t>& at,
                             const std::vector<int>& offset, const std::vector<int>& dim) {
  std::vector<Dual> x;
  for (size_t k = 0; k < dim.size(); ++k) {
    std::vector<Dual> mean;
    std::vector<std::vector<Dual>> rows;
    joint_rows(p, at[k], offset[k], dim[k], mean, rows);
    for (int r = 0; r < dim[k]; ++r) {
      Dual v = mean[size_t(r)];
      for (int c = 0; c < offset[k] + r + 1; ++c) v = v + rows[size_t(r)][size_t(c)] * Dual(eps(c, s));
      x.push_back(v);
    }
  }
  return x;
}

// The joint family's entropy in closed form: total/2 log(2 pi e) + log det L.
Dual joint_entropy(const std::vector<Dual>& p, const std::vector<size_t>& at, const std::vector<int>& offset,
                   const std::vector<int>& dim) {
  int total = 0;
  for (int k : dim) total += k;
  Dual value = Dual(0.5 * total * (std::log(2 * M_PI) + 1));
  for (size_t k = 0; k < dim.size(); ++k) {
    std::vector<Dual> mean;
    std::vector<std::vector<Dual>> rows;
    joint_rows(p, at[k], offset[k], dim[k], mean, rows);
    for (int r = 0; r < dim[k]; ++r) value = value + log(rows[size_t(r)][size_t(offset[k] + r)]);
  }
  return value;
}

// The logistic likelihood of eta_i = x[0] + sum_c X(i, c) x[first + c].
Dual logistic_log_likelihood(const std::vector<Dual>& x, const Split& d, size_t first) {
  Dual value = 0;
  for (int i = 0; i < d.N; ++i) {
    Dual eta = x[0];
    for (size_t c = 0; c + first < x.size(); ++c) eta = eta + Dual(d.X(i, Eigen::Index(c))) * x[c + first];
    value = value + Dual(d.y[i]) * eta - log1p_exp(eta);
  }
  return value;
}

// The pooled ELBO estimator of the logistic model under the joint family: x = m + L eps for the
// stacked (b, beta_1, ..., beta_J), entropy in closed form (total/2 log(2 pi e) + log det L).
Dual pooled_joint_elbo(const std::vector<Dual>& p, const Split& d, long S, const Eigen::MatrixXd& eps,
                       const std::vector<size_t>& at, const std::vector<int>& offset, const std::vector<int>& dim) {
  Dual value = 0;
  for (long s = 0; s < S; ++s) {
    const std::vector<Dual> x = joint_draw(p, eps, s, at, offset, dim);
    for (const Dual& v : x) value = value + normal_lpdf(v, 0, 1);
    value = value + logistic_log_likelihood(x, d, 1);
  }
  return value / Dual(double(S)) + joint_entropy(p, at, offset, dim);
}

// The joint family's parties on a logistic split: the server (its `globals` parameters first in
// the joint order) and one silo per block of d, every party's parameters random (`fixed`, in
// the order [server; silo 1; ...], each party's starting at `at`).
struct JointParties {
  std::unique_ptr<VflServer> server;
  std::vector<Data> silo_data;
  std::vector<std::unique_ptr<VflSilo>> silos;
  std::vector<int> offset, dim;
  std::vector<size_t> at{0};
  std::vector<double> fixed;
  Data server_data;
};

std::unique_ptr<JointParties> joint_parties(const fvi_model& model, const Split& d, const VflOptions& opt, int globals,
                                            std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  const int J = int(d.P.size());
  int total = globals;
  for (int P : d.P) total += P;
  auto out = std::make_unique<JointParties>();
  out->server_data.add("N", scalar(d.N));
  out->server_data.add("y", d.y);
  out->server = std::make_unique<VflServer>(model, out->server_data.abi(), opt, J);
  out->server->set_layout(true, total);
  out->offset = {0};
  out->dim = {globals};
  auto randomise = [&](Eigen::Index n) {
    Eigen::VectorXd v(n);
    for (Eigen::Index i = 0; i < n; ++i) v[i] = 0.3 * normal(rng) - (i >= 1 ? 0.2 : 0.0);
    out->fixed.insert(out->fixed.end(), v.data(), v.data() + n);
    return v;
  };
  out->server->set_params(randomise(out->server->params().size()));
  out->silo_data.resize(size_t(J));
  for (int k = 0; k < J; ++k) {
    out->silo_data[k].add("N", scalar(d.N));
    out->silo_data[k].add("P", scalar(d.P[k]));
    out->silo_data[k].add("x", d.columns(k));
    out->silos.push_back(std::make_unique<VflSilo>(model, out->silo_data[k].abi(), k + 1, J, opt));
    out->offset.push_back(globals + d.first(k));
    out->dim.push_back(d.P[k]);
    out->silos[k]->set_layout(true, out->offset.back(), total);
    out->at.push_back(out->fixed.size());
    out->silos[k]->set_params(randomise(out->silos[k]->params().size()));
  }
  return out;
}

TEST_CASE("VFL exact decomposition, joint family across the silos: federated gradient = pooled gradient", "[vfl]") {
  std::mt19937_64 rng(29);
  const Split d = logistic_split(7, {2, 3, 1}, rng);
  const int J = int(d.P.size());
  const long S = 3;
  const fvi_model& model = *fvi_model_vfl_logreg();
  VflOptions opt;
  opt.auxiliary = false;
  opt.exact = true;
  opt.center = false;  // the centred intercept's gradient: check_exact_decomposition
  opt.family = "fullrank";
  opt.mc_samples = S;
  opt.seed = 9;
  REQUIRE(fvi::engine::use_joint_family(opt, 1 + 6));
  const std::unique_ptr<JointParties> parties = joint_parties(model, d, opt, 1, rng);
  VflServer& server = *parties->server;
  auto& silos = parties->silos;
  const auto &offset = parties->offset, &dim = parties->dim;
  const auto& at = parties->at;
  const auto& fixed = parties->fixed;

  const uint32_t t = 4;
  Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(d.N, S);
  for (auto& s : silos) eta += s->propose(t);
  const Eigen::MatrixXd eps = server.global_noise(t);
  for (auto& s : silos) REQUIRE(s->kept_theta_noise() == eps);  // every party drew the same noise
  Eigen::MatrixXd G;
  Eigen::VectorXd d_server;
  double elbo = server.augmented_gradient(eps, eta, G, d_server);
  Eigen::VectorXd federated(fixed.size());
  federated.head(d_server.size()) = d_server;
  for (int k = 0; k < J; ++k) {
    Eigen::VectorXd g;
    elbo += silos[k]->gradient(G, g);
    federated.segment(Eigen::Index(at[size_t(k + 1)]), g.size()) = g;
  }
  check_against_pooled(elbo, federated, fixed,
                       [&](const std::vector<Dual>& p) { return pooled_joint_elbo(p, d, S, eps, at, offset, dim); });
}

// split_nn's network as each silo's partial predictor: eta_k = tanh(tanh(x_k W1 + c1) W2) w_k,
// W1 (P x H), c1 (H) and W2 (H x 2) point estimates (split hyperparameters, column-major in the
// group), w_k (2) random in the joint family. The pooled ELBO estimator of the written model,
// y ~ bernoulli_logit(sum_k eta_k), w ~ normal(0, 1), entropy in closed form.
Dual pooled_network_elbo(const std::vector<Dual>& p, const Split& d, int H, long S, const Eigen::MatrixXd& eps,
                         const std::vector<size_t>& at) {
  const int J = int(d.P.size()), N = d.N;
  Dual value = 0, log_det = 0;
  std::vector<std::vector<Dual>> eta(size_t(S), std::vector<Dual>(size_t(N), Dual(0)));
  for (int k = 0; k < J; ++k) {
    const int P = d.P[k];
    std::vector<Dual> mean;
    std::vector<std::vector<Dual>> rows;
    joint_rows(p, at[size_t(k)], 2 * k, 2, mean, rows);
    for (int r = 0; r < 2; ++r) log_det = log_det + log(rows[size_t(r)][size_t(2 * k + r)]);
    const size_t h = at[size_t(k)] + size_t(JointGaussianRows::num_params(2 * k, 2));  // W1, c1, W2
    auto W1 = [&](int i, int j) { return p[h + size_t(j * P + i)]; };
    auto c1 = [&](int j) { return p[h + size_t(P * H + j)]; };
    auto W2 = [&](int i, int j) { return p[h + size_t(P * H + H + j * H + i)]; };
    for (long s = 0; s < S; ++s) {
      std::vector<Dual> w(2);
      for (int r = 0; r < 2; ++r) {
        w[size_t(r)] = mean[size_t(r)];
        for (int c = 0; c <= 2 * k + r; ++c) w[size_t(r)] = w[size_t(r)] + rows[size_t(r)][size_t(c)] * Dual(eps(c, s));
        value = value + normal_lpdf(w[size_t(r)], 0, 1);
      }
      for (int i = 0; i < N; ++i) {
        std::vector<Dual> hidden(static_cast<size_t>(H), Dual(0));
        for (int j = 0; j < H; ++j) {
          Dual a = c1(j);
          for (int c = 0; c < P; ++c) a = a + Dual(d.X(i, d.first(k) + c)) * W1(c, j);
          hidden[size_t(j)] = tanh(a);
        }
        for (int o = 0; o < 2; ++o) {
          Dual a = 0;
          for (int j = 0; j < H; ++j) a = a + hidden[size_t(j)] * W2(j, o);
          eta[size_t(s)][size_t(i)] = eta[size_t(s)][size_t(i)] + tanh(a) * w[size_t(o)];
        }
      }
    }
  }
  for (long s = 0; s < S; ++s)
    for (int i = 0; i < N; ++i)
      value = value + Dual(d.y[i]) * eta[size_t(s)][size_t(i)] - log1p_exp(eta[size_t(s)][size_t(i)]);
  return value / Dual(double(S)) + Dual(0.5 * 2 * J * (std::log(2 * M_PI) + 1)) + log_det;
}

TEST_CASE("VFL exact decomposition with a network per silo (split_nn), joint family: federated gradient = pooled "
          "gradient",
          "[vfl]") {
  std::mt19937_64 rng(41);
  std::normal_distribution<double> normal;
  const Split d = logistic_split(6, {2, 3}, rng);
  const int J = 2, H = 3;
  const long S = 2;
  const fvi_model& model = *fvi_model_split_nn();
  VflOptions opt;
  opt.auxiliary = false;
  opt.exact = true;
  opt.center = false;  // the centred intercept's gradient: check_exact_decomposition
  opt.family = "auto";
  opt.mc_samples = S;
  opt.seed = 13;
  const int total = 2 * J;  // no globals: w_1, w_2
  REQUIRE(fvi::engine::use_joint_family(opt, total));
  Data server_data;
  server_data.add("N", scalar(d.N));
  server_data.add("H", scalar(H));
  server_data.add("y", d.y);
  VflServer server(model, server_data.abi(), opt, J);
  server.set_layout(true, total);
  REQUIRE(server.params().size() == 0);
  std::vector<Data> silo_data(J);
  std::vector<std::unique_ptr<VflSilo>> silos;
  std::vector<double> fixed;
  std::vector<size_t> at;
  for (int k = 0; k < J; ++k) {
    silo_data[k].add("N", scalar(d.N));
    silo_data[k].add("H", scalar(H));
    silo_data[k].add("P", scalar(d.P[k]));
    silo_data[k].add("x", d.columns(k));
    silos.push_back(std::make_unique<VflSilo>(model, silo_data[k].abi(), k + 1, J, opt));
    silos[k]->set_layout(true, 2 * k, total);
    REQUIRE(silos[k]->params().size() ==
            JointGaussianRows::num_params(2 * k, 2) + d.P[k] * H + H + 2 * H);  // q(w) rows, W1, c1, W2
    Eigen::VectorXd params(silos[k]->params().size());
    for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.5 * normal(rng);
    silos[k]->set_params(params);
    at.push_back(fixed.size());
    fixed.insert(fixed.end(), params.data(), params.data() + params.size());
  }
  const uint32_t t = 6;
  Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(d.N, S);
  for (auto& s : silos) eta += s->propose(t);
  const Eigen::MatrixXd eps = server.global_noise(t);
  Eigen::MatrixXd G;
  Eigen::VectorXd d_server;
  double elbo = server.augmented_gradient(eps, eta, G, d_server);
  Eigen::VectorXd federated(fixed.size());
  for (int k = 0; k < J; ++k) {
    Eigen::VectorXd g;
    elbo += silos[k]->gradient(G, g);
    federated.segment(Eigen::Index(at[size_t(k)]), g.size()) = g;
  }
  check_against_pooled(elbo, federated, fixed,
                       [&](const std::vector<Dual>& p) { return pooled_network_elbo(p, d, H, S, eps, at); });
}

// The vertical engine's fit of a Gaussian regression against its closed form: the augmented model
// (exact = false; spec 004 §2.2: integrating z out gives y ~ N(b + sum_k x_k beta_k, sigma^2 +
// J rho^2)) or, with exact = true (vfl_exact), the written model y ~ N(b + sum_k x_k beta_k,
// sigma^2).
// With joint = true (vfl_exact's joint family) silo 2's column is correlated 0.8 with silo 1's
// first, and the fit must reach the exact posterior's sds, not mean-field's. With center = true
// (vfl_exact) the columns are raw, their means `shift`, and the fit's coordinates are (b_c, beta),
// b_c = b + xbar . beta: the same posterior, mapped.
static void check_gaussian_posterior(bool exact, bool joint = false, bool center = false,
                                     const Eigen::Vector3d& shift = Eigen::Vector3d::Zero(),
                                     const Eigen::Vector3d& scale = Eigen::Vector3d::Ones()) {
  std::mt19937_64 rng(20261123);
  std::normal_distribution<double> normal;
  const int N = 40, J = 2;
  const double sigma = 0.8, rho = 0.5;
  Split d{N, {2, 1}, Eigen::MatrixXd(N, 3), Eigen::VectorXd(N)};
  for (Eigen::Index i = 0; i < d.X.size(); ++i) d.X.data()[i] = normal(rng);
  if (joint) d.X.col(2) = 0.8 * d.X.col(0) + 0.6 * d.X.col(2);
  if (scale != Eigen::Vector3d::Ones()) {
    // Columns at means `shift` exactly, so that the centred intercept b_c = b + shift . beta stays
    // near its prior at any scale: what is tested is the coefficients' steps.
    d.X.rowwise() -= d.X.colwise().mean();
    d.X = d.X * scale.asDiagonal();
  }
  d.X.rowwise() += shift.transpose();
  // Each column's effect on y the same at any scale: a standardised column's coefficient.
  const Eigen::Vector3d beta_true = Eigen::Vector3d(0.8, -0.5, 0.3).cwiseQuotient(scale);
  for (int i = 0; i < N; ++i) d.y[i] = 0.4 + d.X.row(i).dot(beta_true) + std::hypot(sigma, rho) * normal(rng);

  // The exact posterior of w = (b, beta) under the collapsed model, prior N(0, I).
  Eigen::MatrixXd A(N, 4);
  A << Eigen::VectorXd::Ones(N), d.X;
  const double v = sigma * sigma + (exact ? 0.0 : J * rho * rho);
  const Eigen::MatrixXd written_precision = Eigen::MatrixXd::Identity(4, 4) + A.transpose() * A / v;
  // The fit's coordinates T w: (b_c, beta) with the centred intercept, else w itself.
  Eigen::MatrixXd T = Eigen::MatrixXd::Identity(4, 4);
  if (exact && center) T.block(0, 1, 1, 3) = d.X.colwise().mean();
  const Eigen::VectorXd exact_mean = T * written_precision.ldlt().solve(A.transpose() * d.y / v);
  const Eigen::MatrixXd precision = (T * written_precision.inverse() * T.transpose()).inverse();
  // Mean-field VI of a Gaussian target: sd_i = 1 / sqrt(Lambda_ii). For the written model Lambda
  // is the precision above; for the joint over (b, beta, z) of the augmented model,
  // Lambda_bb = 1 + N / sigma^2 and Lambda_(beta_c) = 1 + sum_i x_ic^2 / rho^2.
  Eigen::VectorXd meanfield_sd(4);
  if (joint) {  // the joint family is exact for a Gaussian target: the posterior's own sds
    meanfield_sd = precision.inverse().diagonal().cwiseSqrt();
  } else if (exact) {
    meanfield_sd = precision.diagonal().cwiseSqrt().cwiseInverse();
  } else {
    meanfield_sd[0] = 1 / std::sqrt(1 + N / (sigma * sigma));
    for (int c = 0; c < 3; ++c) meanfield_sd[c + 1] = 1 / std::sqrt(1 + d.X.col(c).squaredNorm() / (rho * rho));
  }

  VflOptions opt;
  opt.auxiliary = !exact;
  opt.exact = exact;
  opt.center = center;
  opt.family = joint ? "fullrank" : "meanfield";
  opt.rho = rho;
  opt.mc_samples = 8;
  opt.lr = 0.01;
  Data server_data;
  server_data.add("N", scalar(N));
  server_data.add("sigma", scalar(sigma));
  server_data.add("y", d.y);
  const fvi_model& model = *fvi_model_vfl_linreg();
  VflServer server(model, server_data.abi(), opt, J);
  server.set_layout(joint, 4);
  std::vector<Data> silo_data(J);
  std::vector<std::unique_ptr<VflSilo>> silos;
  for (int k = 0; k < J; ++k) {
    silo_data[k].add("N", scalar(N));
    silo_data[k].add("sigma", scalar(sigma));
    silo_data[k].add("P", scalar(d.P[k]));
    silo_data[k].add("x", d.columns(k));
    silos.push_back(std::make_unique<VflSilo>(model, silo_data[k].abi(), k + 1, J, opt));
    silos[k]->set_layout(joint, 1 + d.first(k), 4);
  }
  auto current = [&]() {  // (means of b, beta; sds of b, beta)
    Eigen::VectorXd out(8);
    out[0] = server.mean()[0];
    out[4] = server.sd()[0];
    int c = 1;
    for (auto& s : silos) {
      const Eigen::VectorXd mean = s->theta_mean(), sd = s->theta_sd();
      for (Eigen::Index i = 0; i < mean.size(); ++i, ++c) out[c] = mean[i], out[c + 4] = sd[i];
    }
    return out;
  };
  // Burn in, then batch means of the iterates (Polyak averaging); the batch means' spread gives
  // the Monte Carlo error of their average.
  const int burn = 6000, batches = 20, per_batch = 300;
  Eigen::MatrixXd batch_means = Eigen::MatrixXd::Zero(8, batches);
  // The joint family: every party's parameters, and the moments they give.
  auto joint_params = [&]() {
    const Eigen::VectorXd own = server.params();
    std::vector<double> all(own.data(), own.data() + own.size());
    for (auto& s : silos) {
      const Eigen::VectorXd p = s->joint_q().params();
      all.insert(all.end(), p.data(), p.data() + p.size());
    }
    return Eigen::VectorXd(Eigen::Map<Eigen::VectorXd>(all.data(), Eigen::Index(all.size())));
  };
  auto joint_moments = [&](const Eigen::VectorXd& params) {
    Eigen::VectorXd out(8);
    fvi::JointGaussianRows q(0, 1, 1.0);
    q.set_params(params.head(2));
    out[0] = q.mean()[0], out[4] = q.sd()[0];
    Eigen::Index at = 2;
    int c = 1;
    for (auto& s : silos) {
      fvi::JointGaussianRows rows = s->joint_q();
      rows.set_params(params.segment(at, rows.params().size()));
      at += rows.params().size();
      for (Eigen::Index i = 0; i < rows.dim(); ++i, ++c) out[c] = rows.mean()[i], out[c + 4] = rows.sd()[i];
    }
    return out;
  };
  Eigen::MatrixXd batch_params;
  if (joint) batch_params = Eigen::MatrixXd::Zero(joint_params().size(), batches);
  for (uint32_t t = 1; t <= uint32_t(burn + batches * per_batch); ++t) {
    Eigen::MatrixXd z_sum = Eigen::MatrixXd::Zero(N, opt.mc_samples), G;
    for (auto& s : silos) z_sum += s->propose(t);
    Eigen::VectorXd d_server;
    server.augmented_gradient(server.global_noise(t), z_sum, G, d_server);
    server.step(d_server);
    for (auto& s : silos) s->update(G, t);
    if (t > uint32_t(burn) && !joint) batch_means.col((t - burn - 1) / per_batch) += current() / per_batch;
    if (t > uint32_t(burn) && joint) batch_params.col((t - burn - 1) / per_batch) += joint_params() / per_batch;
  }
  // The joint family's sds are norms of the factor's rows: averaged over the iterates they would
  // carry the iterates' jitter (E|L_r| > |E L_r|), so, as the stopping rule does, the parameters
  // are averaged and the moments taken from the average.
  if (joint)
    for (int b = 0; b < batches; ++b) batch_means.col(b) = joint_moments(batch_params.col(b));
  const Eigen::VectorXd average = joint ? joint_moments(batch_params.rowwise().mean()) : Eigen::VectorXd(batch_means.rowwise().mean());
  const Eigen::VectorXd se = ((batch_means.colwise() - average).array().square().rowwise().sum() / (batches - 1.0) / batches).sqrt();
  for (int c = 0; c < 4; ++c) {
    INFO("parameter " << c << ": mean " << average[c] << " exact " << exact_mean[c] << " (MC se " << se[c]
                      << "); sd " << average[c + 4] << " mean-field optimum " << meanfield_sd[c] << " (MC se " << se[c + 4] << ")");
    CHECK(std::abs(average[c] - exact_mean[c]) < 4 * se[c] + 1e-3 * meanfield_sd[c]);
    CHECK(std::abs(average[c + 4] - meanfield_sd[c]) < 4 * se[c + 4] + 1e-3 * meanfield_sd[c]);
  }
}

TEST_CASE("VFL augmented model with a Gaussian likelihood reaches the augmented model's exact posterior", "[vfl]") {
  check_gaussian_posterior(false);
}

TEST_CASE("VFL exact decomposition with a Gaussian likelihood reaches the written model's exact posterior", "[vfl]") {
  check_gaussian_posterior(true);
}

TEST_CASE("VFL exact decomposition, joint family: a Gaussian regression with columns correlated across silos "
          "reaches the exact posterior's means and sds",
          "[vfl]") {
  check_gaussian_posterior(true, true);
}

TEST_CASE("VFL exact decomposition, centred intercept: raw columns (means 3, -2, 5) reach the exact posterior in "
          "the fit's coordinates",
          "[vfl][centring]") {
  check_gaussian_posterior(true, false, true, Eigen::Vector3d(3, -2, 5));
  check_gaussian_posterior(true, true, true, Eigen::Vector3d(3, -2, 5));
}

TEST_CASE("VFL exact decomposition: columns of sds 800, 0.5 and 80 reach the exact posterior, Adam stepping each "
          "coefficient as a standardised column's",
          "[vfl][centring]") {
  // Without the step scales the coefficient of the widest column is walked in steps 800 times too
  // large for its posterior sd, and its q sd starts 800 times too wide: 6,000 iterations do not
  // settle its sd (measured: this case then fails on two sds).
  check_gaussian_posterior(true, true, true, Eigen::Vector3d(3, -2, 5), Eigen::Vector3d(800, 0.5, 80));
}

TEST_CASE("A vertical silo's step scales are its columns' sds (over 1), and q starts at init_sd over them", "[vfl]") {
  std::mt19937_64 rng(43);
  std::normal_distribution<double> normal;
  const int N = 200;
  Eigen::MatrixXd x(N, 3);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  x = x * Eigen::Vector3d(10, 0.5, 3).asDiagonal();
  x.col(0).array() += 1000;  // centred about its mean: the intercept is (center = on)
  Data data;
  data.add("N", scalar(N));
  data.add("P", scalar(3));
  data.add("x", x);
  VflOptions opt;
  opt.exact = true;
  opt.auxiliary = false;
  opt.center = true;
  opt.init_sd = 0.1;
  VflSilo silo(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
  Eigen::VectorXd sd(3);
  for (int c = 0; c < 3; ++c) sd[c] = std::sqrt((x.col(c).array() - x.col(c).mean()).square().sum() / N);
  // 64 random projections: each sd's relative Monte Carlo error about 1 / sqrt(128) = 9%; 4 times that.
  const Eigen::VectorXd& s = silo.step_scales();
  REQUIRE(s.size() == 3);
  CHECK(std::abs(s[0] / sd[0] - 1) < 0.35);
  CHECK(s[1] == 1.0);  // a narrow column keeps Adam's own steps
  CHECK(std::abs(s[2] / sd[2] - 1) < 0.35);
  for (int c = 0; c < 3; ++c) CHECK(silo.theta_sd()[c] == Approx(0.1 / s[c]).epsilon(1e-12));
  silo.set_layout(true, 1, 4);  // the joint family starts its rows of L at the same sds
  for (int c = 0; c < 3; ++c) CHECK(silo.theta_sd()[c] == Approx(0.1 / s[c]).epsilon(1e-12));
}

TEST_CASE("A vertical silo's checkpoint keeps the draws per gradient the stopping rule gave it", "[vfl]") {
  // The rule may double a silo's draws; a silo restarted from its checkpoint must send z_k with
  // as many columns as the server expects, and its kept proposal must be the same one.
  std::mt19937_64 rng(41);
  const Split d = logistic_split(9, {3}, rng);
  Data data;
  data.add("N", scalar(d.N));
  data.add("P", scalar(d.P[0]));
  data.add("x", d.columns(0));
  VflOptions opt;
  opt.mc_samples = 2;
  opt.seed = 9;
  VflSilo silo(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
  silo.set_mc_samples(8);
  const Eigen::MatrixXd z = silo.propose(5);
  REQUIRE(z.cols() == 8);
  const Eigen::VectorXd saved = silo.checkpoint();
  VflSilo again(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
  again.restore(saved);
  CHECK(again.mc_samples() == 8);
  CHECK(again.propose(5) == z);
  Eigen::VectorXd damaged = saved;
  damaged[damaged.size() - 2] = 2.5;  // not a count of draws (the outcome factor is last)
  VflSilo third(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
  CHECK_THROWS_AS(third.restore(damaged), std::invalid_argument);
  damaged = saved;
  damaged[damaged.size() - 1] = 0.5;  // an outcome factor below 1
  VflSilo fourth(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
  CHECK_THROWS_AS(fourth.restore(damaged), std::invalid_argument);
}

TEST_CASE("A vertical server starts b at the mode of its own terms with the predictors at 0, and measures the linear "
          "predictor's scale there", "[vfl]") {
  // vfl_linreg: b ~ normal(0, 1), y ~ normal(b + 0, sigma), sigma = 30 known: the mode is the
  // conjugate posterior mean sum(y) / sigma^2 / (N / sigma^2 + 1), its Laplace sd (N / sigma^2 +
  // 1)^-1/2, and -d^2 log p / d eta_n^2 = 1 / sigma^2 in every row, so the scale is sigma.
  std::mt19937_64 rng(45);
  std::normal_distribution<double> normal;
  const int N = 50;
  const double sigma = 30;
  Eigen::VectorXd y(N);
  for (int i = 0; i < N; ++i) y[i] = 400 + sigma * normal(rng);
  Data server_data;
  server_data.add("N", scalar(N));
  server_data.add("sigma", scalar(sigma));
  server_data.add("y", y);
  for (const bool joint : {false, true}) {
    VflOptions opt;
    opt.exact = true;
    opt.auxiliary = false;
    opt.family = joint ? "fullrank" : "meanfield";
    VflServer server(*fvi_model_vfl_linreg(), server_data.abi(), opt, 1);
    server.set_layout(joint, 3);
    const fvi::engine::Mode m = server.start_at_mode();
    REQUIRE(m.found);
    const double precision = N / (sigma * sigma) + 1;
    CHECK(server.mean()[0] == Approx(y.sum() / (sigma * sigma) / precision).epsilon(1e-9));
    CHECK(server.sd()[0] == Approx(1 / std::sqrt(precision)).epsilon(1e-6));
    CHECK(server.outcome_scale() == Approx(sigma).epsilon(1e-6));
  }
}

TEST_CASE("A vertical silo steps its coefficients at the outcome's scale over 10, and starts their sds with it",
          "[vfl]") {
  std::mt19937_64 rng(47);
  std::normal_distribution<double> normal;
  const int N = 100;
  Eigen::MatrixXd x(N, 2);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  x.col(0) *= 20;
  Data data;
  data.add("N", scalar(N));
  data.add("P", scalar(2));
  data.add("x", x);
  VflOptions opt;
  opt.exact = true;
  opt.auxiliary = false;
  opt.init_sd = 0.1;
  for (const bool joint : {false, true}) {
    VflSilo silo(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
    if (joint) silo.set_layout(true, 1, 3);
    const Eigen::VectorXd columns = silo.step_scales(), sd = silo.theta_sd();
    silo.set_outcome_scale(7);  // up to 10: nothing changes
    CHECK(silo.step_scales() == columns);
    CHECK(silo.theta_sd() == sd);
    silo.set_outcome_scale(250);  // steps 25 times larger, starting sds 25 times wider
    CHECK(silo.outcome_factor() == 25);
    for (int c = 0; c < 2; ++c) {
      CHECK(silo.step_scales()[c] == Approx(columns[c] / 25).epsilon(1e-12));
      CHECK(silo.theta_sd()[c] == Approx(25 * sd[c]).epsilon(1e-12));
    }
    // A restored silo keeps the factor and its q as saved.
    VflSilo again(*fvi_model_vfl_logreg(), data.abi(), 1, 1, opt);
    again.restore(silo.checkpoint());
    CHECK(again.outcome_factor() == 25);
    CHECK(again.step_scales() == silo.step_scales());
    CHECK(again.theta_sd().isApprox(silo.theta_sd(), 1e-12));
    CHECK_THROWS_AS(silo.set_outcome_scale(std::nan("")), std::invalid_argument);
  }
}

// vfl_global_scale's pooled ELBO estimator under the joint family: x = m + L eps stacks (b,
// u = log tau, beta_1, ..., beta_J); the server's priors N(b; 0, 1), N(tau; 0, 1) and the
// Jacobian u, every silo's N(beta; 0, tau), the logistic likelihood; the entropy in closed form.
Dual pooled_global_scale_elbo(const std::vector<Dual>& p, const Split& d, long S, const Eigen::MatrixXd& eps,
                              const std::vector<size_t>& at, const std::vector<int>& offset, const std::vector<int>& dim) {
  Dual value = 0;
  for (long s = 0; s < S; ++s) {
    const std::vector<Dual> x = joint_draw(p, eps, s, at, offset, dim);
    const Dual tau = exp(x[1]);
    value = value + normal_lpdf(x[0], 0, 1) + normal_lpdf(tau, 0, 1) + x[1];
    for (size_t c = 2; c < x.size(); ++c) value = value + normal_lpdf(x[c], 0, tau);
    value = value + logistic_log_likelihood(x, d, 2);
  }
  return value / Dual(double(S)) + joint_entropy(p, at, offset, dim);
}

TEST_CASE("VFL exact decomposition, a split prior reading a global: the silos' priors at the server's draws of tau, "
          "their gradient in tau sent back, = the pooled gradient",
          "[vfl]") {
  std::mt19937_64 rng(53);
  const Split d = logistic_split(7, {2, 3, 1}, rng);
  const int J = int(d.P.size());
  const long S = 3;
  const fvi_model& model = *fvi_model_vfl_global_scale();
  REQUIRE(fvi::engine::split_priors_read_globals(model));
  REQUIRE_FALSE(fvi::engine::split_priors_read_globals(*fvi_model_vfl_logreg()));
  VflOptions opt;
  opt.auxiliary = false;
  opt.exact = true;
  opt.center = false;
  opt.family = "fullrank";
  opt.mc_samples = S;
  opt.seed = 9;
  const std::unique_ptr<JointParties> parties = joint_parties(model, d, opt, 2, rng);
  VflServer& server = *parties->server;
  auto& silos = parties->silos;
  const auto &offset = parties->offset, &dim = parties->dim;
  const auto& at = parties->at;
  const auto& fixed = parties->fixed;
  for (const auto& silo : silos) REQUIRE(silo->prior_reads_globals());

  const uint32_t t = 4;
  Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(d.N, S);
  for (auto& s : silos) eta += s->propose(t);
  const Eigen::MatrixXd eps = server.global_noise(t);
  Eigen::MatrixXd G;
  Eigen::VectorXd d_server;
  double elbo = server.augmented_gradient(eps, eta, G, d_server);
  Eigen::VectorXd federated(fixed.size());
  Eigen::MatrixXd d_globals = Eigen::MatrixXd::Zero(2, S);
  for (int k = 0; k < J; ++k) {
    silos[k]->set_prior_globals(server.globals(eps));  // what Phase::kVflUpdate carries
    Eigen::VectorXd g;
    elbo += silos[k]->gradient(G, g);
    d_globals += silos[k]->prior_globals_gradient();
    federated.segment(Eigen::Index(at[size_t(k + 1)]), g.size()) = g;
  }
  federated.head(d_server.size()) = d_server + server.path_gradient(eps, d_globals);
  check_against_pooled(elbo, federated, fixed, [&](const std::vector<Dual>& p) {
    return pooled_global_scale_elbo(p, d, S, eps, at, offset, dim);
  });
  // The draws of tau a silo was not sent: refused, naming them.
  silos[0]->set_prior_globals(Eigen::MatrixXd::Zero(2, S + 1));
  Eigen::VectorXd g;
  CHECK_THROWS_WITH(silos[0]->gradient(G, g), Catch::Contains("split priors read the globals"));
}

TEST_CASE("A vertical silo's part of the tail check: its block's draws scored as written, and its moments at "
          "weights that reweigh the proposal back to q are q's",
          "[vfl][tail]") {
  using fvi::program::Message;
  std::mt19937_64 rng(47);
  const Split d = logistic_split(40, {3}, rng);
  Data data;
  data.add("N", scalar(d.N));
  data.add("P", scalar(3));
  data.add("x", d.columns(0));
  VflOptions opt;
  opt.exact = true;
  opt.auxiliary = false;
  opt.center = false;
  opt.family = "meanfield";
  const fvi_model& model = *fvi_model_vfl_logreg();
  VflSilo silo(model, data.abi(), 1, 1, opt);
  Eigen::VectorXd p = silo.params();
  p.head(6) << 0.4, -0.7, 0.1, std::log(0.3), std::log(0.5), std::log(0.2);  // q: means, log sds
  silo.set_params(p);
  const Eigen::VectorXd m = silo.theta_mean(), sd = silo.theta_sd();

  const long S = 4000;
  const Message reply = fvi::program::vfl_tail_draws(silo, {7, double(S), 1});
  REQUIRE(reply.size() == size_t(d.N * S + 2 * S + 2));
  const Eigen::MatrixXd eta = Eigen::Map<const Eigen::MatrixXd>(reply.data(), d.N, S);
  const Eigen::Map<const Eigen::VectorXd> log_prior(reply.data() + d.N * S, S), d2(reply.data() + d.N * S + S, S);
  CHECK(reply[reply.size() - 2] == Approx(sd.array().log().sum()).epsilon(1e-12));  // its log det
  CHECK(reply.back() == 3);                                                            // its block's size
  // The draws, recovered from eta = x beta by least squares (x has full column rank).
  const Eigen::MatrixXd beta = d.columns(0).colPivHouseholderQr().solve(eta);
  Eigen::VectorXd log_q(S), log_g(S);
  for (long s = 0; s < S; ++s) {
    const Eigen::VectorXd white = (beta.col(s) - m).cwiseQuotient(sd);
    CHECK(d2[s] == Approx(white.squaredNorm()).epsilon(1e-8));
    double prior = 0;  // beta ~ normal(0, 1)
    for (int j = 0; j < 3; ++j) prior += -0.5 * std::log(2 * M_PI) - 0.5 * beta(j, s) * beta(j, s);
    CHECK(log_prior[s] == Approx(prior).epsilon(1e-9));
    log_q[s] = -1.5 * std::log(2 * M_PI) - sd.array().log().sum() - 0.5 * white.squaredNorm();
    log_g[s] = fvi::program::log_tail_proposal(white.squaredNorm(), 3, sd.array().log().sum());
  }
  // Odd draws come from the t: wider than q's.
  double even = 0, odd = 0;
  for (long s = 0; s < S; ++s) (s % 2 ? odd : even) += d2[s];
  CHECK(odd > 1.5 * even);

  // Weights q / g (self-normalised) make the proposal's draws q's: the silo's largest mean move
  // and sd change are then Monte Carlo error (about 1 / sqrt(ESS) q sd and 1 / sqrt(2 ESS); the
  // ESS here is over 2,000 of 4,000, so 0.022 and 1.6%; limits of about 4 times the largest).
  const double top = (log_q - log_g).maxCoeff();
  const double norm = top + std::log((log_q - log_g).array().unaryExpr([&](double r) { return std::exp(r - top); }).sum());
  Message request{7, double(S), 1};
  for (long s = 0; s < S; ++s) request.push_back(log_q[s] - log_g[s] - norm);
  const Message figures = fvi::program::vfl_tail_moments(silo, model, data.abi(), request, 1, 1000);
  REQUIRE(figures.size() == fvi::program::kVflTailMomentsSize);
  CHECK(figures[0] < 0.1);
  CHECK(std::abs(figures[4]) < 0.07);
  CHECK(std::string(model.variables[int(figures[1])].name) == "beta");  // whose: beta.i
  CHECK(figures[2] >= 1);
  CHECK(figures[2] <= 3);
  CHECK(figures[8] == Approx(sd[int(figures[6]) - 1]).epsilon(1e-6));  // q's sd of that element
  // Equal weights: the proposal's own moments, wider than q's (its t half).
  Message flat{7, double(S), 1};
  flat.insert(flat.end(), size_t(S), -std::log(double(S)));
  const double flat_change = fvi::program::vfl_tail_moments(silo, model, data.abi(), flat, 1, 1000)[4];
  CHECK(flat_change > 0.2);

  // The check made again twice as wide (the retry where its k-hat exceeds 0.7): the same draws'
  // noise at twice the distance from q's mean, whitened by the wider scale to the same d2, and a
  // log det larger by p_k log 2; equal weights then give an sd change of 2 (1 + flat_change) - 1.
  const Message wide = fvi::program::vfl_tail_draws(silo, {7, double(S), 2});
  REQUIRE(wide.size() == reply.size());
  CHECK(wide[wide.size() - 2] == Approx(sd.array().log().sum() + 3 * std::log(2.0)).epsilon(1e-12));
  const Eigen::MatrixXd beta_wide =
      d.columns(0).colPivHouseholderQr().solve(Eigen::Map<const Eigen::MatrixXd>(wide.data(), d.N, S));
  for (long s = 0; s < S; s += 97) {
    CHECK(wide[size_t(d.N * S + S + s)] == Approx(d2[s]).epsilon(1e-10));
    CHECK((beta_wide.col(s) - m).norm() == Approx(2 * (beta.col(s) - m).norm()).epsilon(1e-8));
  }
  Message flat_wide = flat;
  flat_wide[2] = 2;
  CHECK(fvi::program::vfl_tail_moments(silo, model, data.abi(), flat_wide, 1, 1000)[4] ==
        Approx(2 * (1 + flat_change) - 1).epsilon(1e-9));

  // Malformed requests are refused, naming what is wrong.
  using Catch::Contains;
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7, 0, 1}), Contains("key and draws"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7.5, 10, 1}), Contains("key and draws"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7, 1e9, 1}), Contains("key and draws"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7, 10}), Contains("width"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7, 10, 0.5}), Contains("width"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7, 10, std::nan("")}), Contains("width"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_draws(silo, {7, 10, 1, 1}), Contains("not 3"));
  CHECK_THROWS_WITH(fvi::program::vfl_tail_moments(silo, model, data.abi(), {7, 10, 1, 0.0}, 1, 1000), Contains("not 13"));
  Message nan = flat;
  nan[5] = std::nan("");
  CHECK_THROWS_WITH(fvi::program::vfl_tail_moments(silo, model, data.abi(), nan, 1, 1000), Contains("not finite"));
}

}  // namespace vfl_engine_test
