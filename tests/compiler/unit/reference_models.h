#pragma once
// Hand-written log joint densities of the acceptance models (examples/acceptance/*.fvi), one
// function per model, written from the model's text alone: not from the IR, the interpreter or
// fvi::kernel, so that they check the whole chain (lowering, constraint transforms, kernels).
//
// Each function returns, for one Monte Carlo draw, the log joint on the UNCONSTRAINED scale:
//   - the variables arrive as in fvic::ir::Bindings::inputs: one flat vector per group (`global`,
//     `local`, `split`, `hyper`, `split_hyper`) with the variables in declaration order and
//     matrices column-major, one column per draw (point estimates: one column);
//   - each constrained parameter is mapped to its support here (lower = a: x = a + exp(u), with
//     log-Jacobian u) and its log-Jacobian is added once;
//   - hyperparameters are point estimates of the prior's parameters (empirical Bayes: they
//     maximise the ELBO); they are not random, so they carry no log-Jacobian;
//   - every prior and likelihood has its full normalising constant (Stan's densities).
// Data arrive as in Bindings::data (every value a real tensor, ints as whole numbers).
//
// Silo structure. A horizontal model's bindings describe one silo, so the log joint is the one
// of a model whose only silo holds all the data: global priors + local priors + likelihood. A
// vertical model (`split` data and parameters) is the original model with one silo:
// silo_sum(e) = e.
//
// Besides the value, each function accumulates the sum of the absolute values of every term it
// adds (`scale`): the float error of any way of computing the same sum is a small multiple of
// eps * scale, which sets the tolerance of a comparison.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "ir/interpret.h"

namespace fvic::test::reference {

using Values = std::map<std::string, ir::RealTensor>;

struct LogJoint {
  double value = 0;
  double scale = 0;  // sum of |term| over every term added
  void add(double term) {
    value += term;
    scale += std::abs(term);
  }
};

// Read access to one draw of the data and of the unconstrained variables.
class Draw {
 public:
  Draw(const Values& data, const Values& inputs, Eigen::Index draw) : data_(data), inputs_(inputs), draw_(draw) {}

  // Data: a scalar, an element of a vector or 1-D array (0-based), an element of a matrix.
  double d(const std::string& name) const { return data_.at(name).m(0, 0); }
  long long n(const std::string& name) const { return std::llround(d(name)); }
  double d(const std::string& name, long long i) const { return data_.at(name).m(i, 0); }
  long long n(const std::string& name, long long i) const { return std::llround(d(name, i)); }
  double d(const std::string& name, long long i, long long j) const { return data_.at(name).m(i, j); }

  // The unconstrained value at `offset` of a group, for this draw (a point estimate has one).
  double u(const std::string& group, long long offset) const {
    const ir::RealTensor& g = inputs_.at(group);
    return g.m(offset, g.draws == 1 ? 0 : draw_);
  }

 private:
  const Values& data_;
  const Values& inputs_;
  Eigen::Index draw_;
};

// ---- densities, written out term by term --------------------------------------------------------

inline const double kHalfLogTwoPi = 0.5 * std::log(2 * M_PI);

// log(1 + exp(x)) without overflow.
inline double log1p_exp(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// normal(y | mu, sigma) = -(y - mu)^2 / (2 sigma^2) - log sigma - log sqrt(2 pi)
inline void normal(LogJoint& lp, double y, double mu, double sigma) {
  double z = (y - mu) / sigma;
  lp.add(-0.5 * z * z);
  lp.add(-std::log(sigma));
  lp.add(-kHalfLogTwoPi);
}

// bernoulli_logit(y | eta) = y eta - log(1 + exp(eta))
inline void bernoulli_logit(LogJoint& lp, double y, double eta) {
  lp.add(y * eta);
  lp.add(-log1p_exp(eta));
}

// poisson_log(y | eta) = y eta - exp(eta) - log y!
inline void poisson_log(LogJoint& lp, double y, double eta) {
  lp.add(y * eta);
  lp.add(-std::exp(eta));
  lp.add(-std::lgamma(y + 1));
}

// categorical_logit(k | logits) = logits[k] - log sum_j exp(logits[j]), k = 1..K.
template <class Logits>
void categorical_logit(LogJoint& lp, long long k, const Logits& logits, long long K) {
  double mx = logits(0);
  for (long long j = 1; j < K; ++j) mx = std::max(mx, logits(j));
  double s = 0;
  for (long long j = 0; j < K; ++j) s += std::exp(logits(j) - mx);
  lp.add(logits(k - 1));
  lp.add(-mx);
  lp.add(-std::log(s));
}

// ---- constraint transforms ----------------------------------------------------------------------

// <lower=a>: x = a + exp(u), log|dx/du| = u.
inline double lower_bounded(LogJoint& lp, double a, double u, bool jacobian = true) {
  if (jacobian) lp.add(u);
  return a + std::exp(u);
}

// <upper=b>: x = b - exp(u), log|dx/du| = u.
inline double upper_bounded(LogJoint& lp, double b, double u, bool jacobian = true) {
  if (jacobian) lp.add(u);
  return b - std::exp(u);
}

// <lower=a, upper=b>: x = a + (b - a) inv_logit(u),
// log|dx/du| = log(b - a) + log inv_logit(u) + log(1 - inv_logit(u)).
inline double interval(LogJoint& lp, double a, double b, double u, bool jacobian = true) {
  if (jacobian) {
    lp.add(std::log(b - a));
    lp.add(-log1p_exp(-u));
    lp.add(-log1p_exp(u));
  }
  return a + (b - a) / (1 + std::exp(-u));
}

// ---- the models ---------------------------------------------------------------------------------

// bnn_classifier: W1 ~ normal(0, 1); b1, W2, b2 likewise;
// y ~ categorical_logit(relu(x * W1 + b1) * W2 + b2).
inline LogJoint bnn_classifier(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long D = v.n("D"), H = v.n("H"), K = v.n("K"), N = v.n("N");
  const long long W1 = 0, b1 = D * H, W2 = D * H + H, b2 = D * H + H + H * K;  // offsets in `global`
  for (long long i = 0; i < D * H + H + H * K + K; ++i) normal(lp, v.u("global", i), 0, 1);
  for (long long i = 0; i < N; ++i) {
    Eigen::VectorXd hidden(H), logits(K);
    for (long long j = 0; j < H; ++j) {
      double a = v.u("global", b1 + j);
      for (long long k = 0; k < D; ++k) a += v.d("x", i, k) * v.u("global", W1 + k + j * D);
      hidden(j) = a > 0 ? a : 0;
    }
    for (long long c = 0; c < K; ++c) {
      double a = v.u("global", b2 + c);
      for (long long j = 0; j < H; ++j) a += hidden(j) * v.u("global", W2 + j + c * H);
      logits(c) = a;
    }
    categorical_logit(lp, v.n("y", i), logits, K);
  }
  return lp;
}

// clutter: theta ~ normal(0, 1); x ~ normal(theta, 1).
inline LogJoint clutter(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  double theta = v.u("global", 0);
  normal(lp, theta, 0, 1);
  for (long long i = 0; i < v.n("N"); ++i) normal(lp, v.d("x", i), theta, 1);
  return lp;
}

// glmm_sixcities: beta ~ normal(0, 10); omega ~ normal(0, 10); b ~ normal(0, exp(-omega));
// wheeze ~ bernoulli_logit(beta1 + beta2 smoke + beta3 age + beta4 smoke age + b[child]).
inline LogJoint glmm_sixcities(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  double beta[4];
  for (int k = 0; k < 4; ++k) {
    beta[k] = v.u("global", k);
    normal(lp, beta[k], 0, 10);
  }
  double omega = v.u("global", 4);
  normal(lp, omega, 0, 10);
  for (long long c = 0; c < v.n("C"); ++c) normal(lp, v.u("local", c), 0, std::exp(-omega));
  for (long long i = 0; i < v.n("N"); ++i) {
    double smoke = v.d("smoke", i), age = v.d("age", i);
    double eta = beta[0] + beta[1] * smoke + beta[2] * age + beta[3] * (smoke * age) + v.u("local", v.n("child", i) - 1);
    bernoulli_logit(lp, v.d("wheeze", i), eta);
  }
  return lp;
}

// hier_logreg: beta ~ normal(0, 2); tau ~ normal(0, 1), tau > 0; alpha ~ normal(0, tau);
// y ~ bernoulli_logit(alpha + x * beta).
inline LogJoint hier_logreg(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long D = v.n("D");
  for (long long k = 0; k < D; ++k) normal(lp, v.u("global", k), 0, 2);
  double tau = lower_bounded(lp, 0, v.u("global", D));
  normal(lp, tau, 0, 1);
  double alpha = v.u("local", 0);
  normal(lp, alpha, 0, tau);
  for (long long i = 0; i < v.n("N"); ++i) {
    double eta = alpha;
    for (long long k = 0; k < D; ++k) eta += v.d("x", i, k) * v.u("global", k);
    bernoulli_logit(lp, v.d("y", i), eta);
  }
  return lp;
}

// linreg_conjugate: w ~ normal(0, 1); y ~ normal(x * w, sigma), sigma data.
inline LogJoint linreg_conjugate(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long D = v.n("D");
  for (long long k = 0; k < D; ++k) normal(lp, v.u("global", k), 0, 1);
  for (long long i = 0; i < v.n("N"); ++i) {
    double mu = 0;
    for (long long k = 0; k < D; ++k) mu += v.d("x", i, k) * v.u("global", k);
    normal(lp, v.d("y", i), mu, v.d("sigma"));
  }
  return lp;
}

// multinomial_eb: hyperparameters sigma_w, sigma_b > 0; W ~ normal(0, sigma_w);
// b ~ normal(0, sigma_b); y ~ categorical_logit(x * W + b).
inline LogJoint multinomial_eb(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long D = v.n("D"), K = v.n("K");
  // Point estimates: mapped to their support, no log-Jacobian.
  double sigma_w = lower_bounded(lp, 0, v.u("hyper", 0), /*jacobian=*/false);
  double sigma_b = lower_bounded(lp, 0, v.u("hyper", 1), /*jacobian=*/false);
  const long long W = 0, b = D * K;
  for (long long i = 0; i < D * K; ++i) normal(lp, v.u("global", W + i), 0, sigma_w);
  for (long long c = 0; c < K; ++c) normal(lp, v.u("global", b + c), 0, sigma_b);
  for (long long i = 0; i < v.n("N"); ++i) {
    Eigen::VectorXd logits(K);
    for (long long c = 0; c < K; ++c) {
      double a = v.u("global", b + c);
      for (long long k = 0; k < D; ++k) a += v.d("x", i, k) * v.u("global", W + k + c * D);
      logits(c) = a;
    }
    categorical_logit(lp, v.n("y", i), logits, K);
  }
  return lp;
}

// robust_logreg: w ~ normal(0, 10); b ~ normal(0, 10); y ~ bernoulli_logit(x * w + b).
inline LogJoint robust_logreg(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long D = v.n("D");
  for (long long k = 0; k < D; ++k) normal(lp, v.u("global", k), 0, 10);
  double b = v.u("global", D);
  normal(lp, b, 0, 10);
  for (long long i = 0; i < v.n("N"); ++i) {
    double eta = b;
    for (long long k = 0; k < D; ++k) eta += v.d("x", i, k) * v.u("global", k);
    bernoulli_logit(lp, v.d("y", i), eta);
  }
  return lp;
}

// split_nn (one silo): hyperparameters W1 (P x H), c1 (H), W2 (H x 2); w ~ normal(0, 1);
// y ~ bernoulli_logit(tanh(tanh(x * W1 + c1) * W2) * w).
inline LogJoint split_nn(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long H = v.n("H"), P = v.n("P");
  const long long W1 = 0, c1 = H * P, W2 = H * P + H;  // offsets in `split_hyper`
  double w[2] = {v.u("split", 0), v.u("split", 1)};
  normal(lp, w[0], 0, 1);
  normal(lp, w[1], 0, 1);
  for (long long i = 0; i < v.n("N"); ++i) {
    Eigen::VectorXd hidden(H);
    for (long long j = 0; j < H; ++j) {
      double a = v.u("split_hyper", c1 + j);
      for (long long p = 0; p < P; ++p) a += v.d("x", i, p) * v.u("split_hyper", W1 + p + j * P);
      hidden(j) = std::tanh(a);
    }
    double eta = 0;
    for (long long c = 0; c < 2; ++c) {
      double a = 0;
      for (long long j = 0; j < H; ++j) a += hidden(j) * v.u("split_hyper", W2 + j + c * H);
      eta += std::tanh(a) * w[c];
    }
    bernoulli_logit(lp, v.d("y", i), eta);
  }
  return lp;
}

// vfl_logreg (one silo): b ~ normal(0, 1); beta ~ normal(0, 1); y ~ bernoulli_logit(b + x * beta).
inline LogJoint vfl_logreg(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long P = v.n("P");
  double b = v.u("global", 0);
  normal(lp, b, 0, 1);
  for (long long p = 0; p < P; ++p) normal(lp, v.u("split", p), 0, 1);
  for (long long i = 0; i < v.n("N"); ++i) {
    double eta = 0;
    for (long long p = 0; p < P; ++p) eta += v.d("x", i, p) * v.u("split", p);
    bernoulli_logit(lp, v.d("y", i), b + eta);
  }
  return lp;
}

// vfl_logreg_power: the same model as vfl_logreg, with y public.
inline LogJoint vfl_logreg_power(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long P = v.n("P");
  double b = v.u("global", 0);
  normal(lp, b, 0, 1);
  for (long long p = 0; p < P; ++p) normal(lp, v.u("split", p), 0, 1);
  for (long long i = 0; i < v.n("N"); ++i) {
    double eta = b;
    for (long long p = 0; p < P; ++p) eta += v.d("x", i, p) * v.u("split", p);
    bernoulli_logit(lp, v.d("y", i), eta);
  }
  return lp;
}

// vfl_poisson_multilevel (one silo): b ~ normal(0, 1); mu ~ normal(0, 1); sigma ~ normal(0, 1),
// sigma > 0; beta[r, p] ~ normal(mu[p], sigma[p]);
// y ~ poisson_log(b + log_pop + rows_dot_product(x, beta[level])).
inline LogJoint vfl_poisson_multilevel(const Values& data, const Values& inputs, Eigen::Index draw) {
  Draw v(data, inputs, draw);
  LogJoint lp;
  const long long R = v.n("R"), P = v.n("P");
  const long long mu = 0, sigma = P, beta = 2 * P;  // offsets in `split`
  double b = v.u("global", 0);
  normal(lp, b, 0, 1);
  Eigen::VectorXd s(P);
  for (long long p = 0; p < P; ++p) {
    normal(lp, v.u("split", mu + p), 0, 1);
    s(p) = lower_bounded(lp, 0, v.u("split", sigma + p));
    normal(lp, s(p), 0, 1);
  }
  for (long long p = 0; p < P; ++p)
    for (long long r = 0; r < R; ++r) normal(lp, v.u("split", beta + r + p * R), v.u("split", mu + p), s(p));
  for (long long i = 0; i < v.n("N"); ++i) {
    long long r = v.n("level", i) - 1;
    double eta = b + v.d("log_pop", i);
    for (long long p = 0; p < P; ++p) eta += v.d("x", i, p) * v.u("split", beta + r + p * R);
    poisson_log(lp, v.d("y", i), eta);
  }
  return lp;
}

using Model = LogJoint (*)(const Values& data, const Values& inputs, Eigen::Index draw);

// The reference of each acceptance model, by file stem.
inline const std::map<std::string, Model>& models() {
  static const std::map<std::string, Model> all = {
      {"bnn_classifier", bnn_classifier},
      {"clutter", clutter},
      {"glmm_sixcities", glmm_sixcities},
      {"hier_logreg", hier_logreg},
      {"linreg_conjugate", linreg_conjugate},
      {"multinomial_eb", multinomial_eb},
      {"robust_logreg", robust_logreg},
      {"split_nn", split_nn},
      {"vfl_logreg", vfl_logreg},
      {"vfl_logreg_power", vfl_logreg_power},
      {"vfl_poisson_multilevel", vfl_poisson_multilevel},
  };
  return all;
}

}  // namespace fvic::test::reference
