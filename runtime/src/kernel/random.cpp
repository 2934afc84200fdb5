#include "fvi/kernel/random.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "fvi/rng.h"

namespace fvi::kernel {

namespace {

constexpr double kTwoPi = 6.283185307179586477;

// Two uniforms in (0, 1] of 53 bits each from one Philox block. `attempt` > 0 gives the further
// blocks a rejection sampler asks for (gamma), each as independent as the first.
struct Uniforms {
  double u1, u2;
};
Uniforms uniforms(uint64_t key, uint32_t stream, uint64_t element, uint32_t attempt = 0) {
  // The element's block: its index's low 32 bits in the block counter, the high ones in `round`.
  const RngKey k{key, 0x67656E71u /* "genq" */ + attempt, uint32_t(element >> 32), stream};
  const std::array<uint32_t, 4> w = rng_block(k, uint32_t(element));
  auto unit = [](uint32_t hi, uint32_t lo) {
    return (double(hi >> 5) * 67108864.0 + double(lo >> 6) + 1.0) / 9007199254740992.0;  // (0, 1]
  };
  return {unit(w[0], w[1]), unit(w[2], w[3])};
}

// A discrete distribution's draw by inverse CDF over its support enumerated outward from `mode`
// (mode, mode + 1, mode - 1, ...): exact for any enumeration order, and O(sd) steps.
template <class LogPmf>
double discrete_draw(double u, double mode, double lowest, double highest, LogPmf log_pmf) {
  double remaining = u;
  double up = mode, down = mode - 1;
  for (long step = 0; step < 100000000; ++step) {
    const bool take_up = up <= highest && (down < lowest || step % 2 == 0);
    if (!take_up && down < lowest) break;
    const double k = take_up ? up++ : down--;
    remaining -= std::exp(log_pmf(k));
    if (remaining <= 0) return k;
  }
  return mode;  // rounding left a sliver of mass: the mode is its most likely home
}

// The uniforms of one element: the first block, and further ones on demand.
struct UniformSource {
  uint64_t key;
  uint32_t stream;
  uint64_t element;
  uint32_t next = 1;
  Uniforms first() const { return uniforms(key, stream, element, 0); }
  Uniforms more() { return uniforms(key, stream, element, next++); }
};

double standard_normal(const Uniforms& u) { return std::sqrt(-2 * std::log(u.u1)) * std::cos(kTwoPi * u.u2); }

// gamma(shape, 1) by Marsaglia and Tsang (2000): shape >= 1 by squeeze and rejection of a cubed
// normal; shape < 1 as gamma(shape + 1) U^(1 / shape).
double standard_gamma(double shape, UniformSource& source) {
  if (!(shape > 0) || !std::isfinite(shape)) throw std::domain_error("gamma_rng: the shape must be positive and finite");
  if (shape < 1) return standard_gamma(shape + 1, source) * std::pow(source.more().u1, 1 / shape);
  const double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (int tries = 0; tries < 10000; ++tries) {
    const Uniforms u = source.more();
    const double x = standard_normal(u), v = std::pow(1 + c * x, 3);
    if (v <= 0) continue;
    const double w = source.more().u1;
    if (w < 1 - 0.0331 * x * x * x * x || std::log(w) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
  return d;  // never reached in practice: each try is accepted with probability > 0.95
}

double draw_one(const std::string& d, const double* a, UniformSource& source) {
  const Uniforms u = source.first();
  if (d == "normal") return a[0] + a[1] * standard_normal(u);
  if (d == "lognormal") return std::exp(a[0] + a[1] * standard_normal(u));
  if (d == "cauchy") return a[0] + a[1] * std::tan(M_PI * (u.u1 - 0.5));
  if (d == "logistic") return a[0] + a[1] * std::log(u.u1 / (1 - u.u1 + 1e-300));
  if (d == "double_exponential") {
    const double v = u.u1 - 0.5;
    return a[0] - a[1] * (v < 0 ? -1.0 : 1.0) * std::log(std::max(1e-300, 1 - 2 * std::fabs(v)));
  }
  if (d == "exponential") return -std::log(u.u1) / a[0];
  if (d == "uniform") return a[0] + (a[1] - a[0]) * (1 - u.u1);
  if (d == "bernoulli") return u.u1 <= a[0] ? 1 : 0;
  if (d == "bernoulli_logit") return u.u1 <= 1 / (1 + std::exp(-a[0])) ? 1 : 0;
  if (d == "poisson" || d == "poisson_log") {
    const double rate = d == "poisson" ? a[0] : std::exp(a[0]);
    if (!(rate >= 0) || rate > 1e9) throw std::domain_error(d + "_rng: the rate must be in [0, 1e9]");
    if (rate == 0) return 0;
    const double log_rate = std::log(rate);
    return discrete_draw(u.u1, std::floor(rate), 0, std::numeric_limits<double>::infinity(),
                         [&](double k) { return k * log_rate - rate - std::lgamma(k + 1); });
  }
  if (d == "binomial" || d == "binomial_logit") {
    const double n = a[0], p = d == "binomial" ? a[1] : 1 / (1 + std::exp(-a[1]));
    if (!(n >= 0) || n != std::floor(n) || !(p >= 0 && p <= 1))
      throw std::domain_error(d + "_rng: needs a whole n >= 0 and a probability in [0, 1]");
    if (p == 0 || n == 0) return 0;
    if (p == 1) return n;
    return discrete_draw(u.u1, std::floor((n + 1) * p), 0, n, [&](double k) {
      return detail::lchoose(n, k) + k * std::log(p) + (n - k) * std::log1p(-p);
    });
  }
  // By inverse CDF of u1.
  if (d == "weibull") return a[1] * std::pow(-std::log(u.u1), 1 / a[0]);
  if (d == "frechet") return a[1] * std::pow(-std::log(u.u1), -1 / a[0]);
  if (d == "gumbel") return a[0] - a[1] * std::log(-std::log(u.u1));
  if (d == "pareto") return a[0] * std::pow(u.u1, -1 / a[1]);
  if (d == "pareto_type_2") return a[0] + a[1] * std::expm1(-std::log(u.u1) / a[2]);
  if (d == "rayleigh") return a[0] * std::sqrt(-2 * std::log(u.u1));
  // From gamma draws.
  if (d == "gamma") return standard_gamma(a[0], source) / a[1];
  if (d == "inv_gamma") return a[1] / standard_gamma(a[0], source);
  if (d == "chi_square") return 2 * standard_gamma(a[0] / 2, source);
  if (d == "inv_chi_square") return 1 / (2 * standard_gamma(a[0] / 2, source));
  if (d == "scaled_inv_chi_square") return a[0] * a[1] * a[1] / (2 * standard_gamma(a[0] / 2, source));
  if (d == "beta" || d == "beta_proportion") {
    const double alpha = d == "beta" ? a[0] : a[0] * a[1], beta = d == "beta" ? a[1] : (1 - a[0]) * a[1];
    const double x = standard_gamma(alpha, source), y = standard_gamma(beta, source);
    return x / (x + y);
  }
  if (d == "student_t")
    return a[1] + a[2] * standard_normal(u) / std::sqrt(2 * standard_gamma(a[0] / 2, source) / a[0]);
  // Counts by inverse CDF of u1 over the log pmf (neg_binomial's mean alpha / beta).
  if (d == "neg_binomial_2" || d == "neg_binomial_2_log" || d == "neg_binomial") {
    const double mu = d == "neg_binomial_2" ? a[0] : d == "neg_binomial_2_log" ? std::exp(a[0]) : a[0] / a[1];
    const double phi = d == "neg_binomial" ? a[0] : a[1];
    if (!(mu >= 0) || mu > 1e9 || !(phi > 0))
      throw std::domain_error(d + "_rng: needs a mean in [0, 1e9] and a positive dispersion");
    if (mu == 0) return 0;
    const double log_p = std::log(mu / (mu + phi)), log1m_p = std::log(phi / (mu + phi));
    return discrete_draw(u.u1, std::floor(mu), 0, std::numeric_limits<double>::infinity(), [&](double k) {
      return std::lgamma(k + phi) - std::lgamma(k + 1) - std::lgamma(phi) + k * log_p + phi * log1m_p;
    });
  }
  if (d == "beta_binomial") {
    const double n = a[0], al = a[1], be = a[2];
    if (!(n >= 0) || n != std::floor(n) || !(al > 0) || !(be > 0))
      throw std::domain_error(d + "_rng: needs a whole N >= 0 and positive alpha and beta");
    const double lbeta = std::lgamma(al) + std::lgamma(be) - std::lgamma(al + be);
    return discrete_draw(u.u1, std::floor(n * al / (al + be)), 0, n, [&](double k) {
      return detail::lchoose(n, k) + std::lgamma(k + al) + std::lgamma(n - k + be) - std::lgamma(n + al + be) - lbeta;
    });
  }
  throw std::invalid_argument("no random draws for '" + d + "'");
}


// categorical_logit_rng(beta): one category per posterior draw, by inverse CDF of softmax(beta)
// with the draw's first uniform (element s of the stream).
Tensor<double> categorical_draws(const Tensor<double>& logits, Eigen::Index draws, uint64_t key, uint32_t stream) {
  const Eigen::Index S = joint_draws(draws, logits.draws), K = logits.rows * logits.cols;
  if (K == 0) throw std::domain_error("categorical_logit_rng: no categories");
  Tensor<double> out(1, 1, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const auto beta = logits.flat().col(logits.draws == 1 ? 0 : s).array();
    const double top = beta.maxCoeff();
    const Eigen::ArrayXd weights = (beta - top).exp();
    double remaining = uniforms(key, stream, uint64_t(s)).u1 * weights.sum();
    Eigen::Index k = 0;
    while (k + 1 < K && (remaining -= weights(k)) > 0) ++k;
    out.m(0, s) = double(k + 1);
  }
  return out;
}

// ordered_logistic_rng(eta, c) and ordered_probit_rng(eta, c): one category per posterior draw,
// the first k with u <= P(y <= k) = F(c_k - eta), F the logistic or normal CDF (K = size(c) + 1
// past the last cutpoint), u the draw's first uniform (element s of the stream).
Tensor<double> ordered_draws(const std::string& dist, const Tensor<double>& eta, const Tensor<double>& c,
                             Eigen::Index draws, uint64_t key, uint32_t stream) {
  if (eta.size() != 1)
    throw std::domain_error(dist + "_rng: eta has " + std::to_string(eta.size()) + " values, not one");
  const bool probit = dist == "ordered_probit";
  const Eigen::Index S = joint_draws(joint_draws(draws, eta.draws), c.draws), cuts = c.size();
  Tensor<double> out(1, 1, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const double e = eta.flat()(0, eta.draws == 1 ? 0 : s);
    const auto cut = c.flat().col(c.draws == 1 ? 0 : s);
    const double u = uniforms(key, stream, uint64_t(s)).u1;
    Eigen::Index k = 0;
    while (k < cuts && u > ordinal_cdf(probit, cut(k) - e)) ++k;
    out.m(0, s) = double(k + 1);
  }
  return out;
}

// multi_normal_rng(mu, Sigma) and multi_normal_cholesky_rng(mu, L): mu + L z per posterior draw,
// L Sigma's lower Cholesky factor (or L itself), z standard normals by Box-Muller, element
// (s N + n) K + k of the stream. A K-vector mu (K x 1) gives one K x 1 draw; N vectors (an
// array, N x K, row n vector n) give N rows.
Tensor<double> multi_normal_draws(const std::string& dist, const Tensor<double>& mu, const Tensor<double>& scale,
                                  Eigen::Index draws, uint64_t key, uint32_t stream) {
  const Eigen::Index K = scale.rows;
  if (scale.cols != K) throw std::domain_error(dist + "_rng: the covariance is " + std::to_string(scale.rows) + " x " +
                                               std::to_string(scale.cols) + ", not square");
  const bool one_vector = mu.cols == 1 && mu.rows == K;
  if (!one_vector && mu.cols != K)
    throw std::domain_error(dist + "_rng: mu has " + std::to_string(one_vector ? mu.rows : mu.cols) +
                            " elements, the covariance " + std::to_string(K) + " rows");
  const Eigen::Index N = one_vector ? 1 : mu.rows, S = joint_draws(joint_draws(draws, mu.draws), scale.draws);
  Tensor<double> out(one_vector ? K : N, one_vector ? 1 : K, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    Eigen::MatrixXd L = scale.draw(s);
    if (dist == "multi_normal") {
      const Eigen::LLT<Eigen::MatrixXd> llt(L);
      if (llt.info() != Eigen::Success) throw std::domain_error("multi_normal_rng: the covariance is not positive definite");
      L = llt.matrixL();
    } else {
      L = L.triangularView<Eigen::Lower>();
    }
    const Eigen::MatrixXd m = mu.draw(s);
    for (Eigen::Index n = 0; n < N; ++n) {
      Eigen::VectorXd z(K);
      for (Eigen::Index k = 0; k < K; ++k) z(k) = standard_normal(uniforms(key, stream, uint64_t((s * N + n) * K + k)));
      const Eigen::VectorXd x = L * z;
      for (Eigen::Index k = 0; k < K; ++k) {
        if (one_vector) out.draw(s)(k, 0) = m(k, 0) + x(k);
        else out.draw(s)(n, k) = m(n, k) + x(k);
      }
    }
  }
  return out;
}

}  // namespace

template <>
Tensor<double> random_draws<double>(const std::string& dist, const Operands<double>& args, Eigen::Index rows,
                                    Eigen::Index cols, Eigen::Index draws, uint64_t key, uint32_t stream) {
  if (dist == "categorical_logit") return categorical_draws(*args.at(0), draws, key, stream);
  if (ordinal_density(dist)) return ordered_draws(dist, *args.at(0), *args.at(1), draws, key, stream);
  if (dist == "multi_normal" || dist == "multi_normal_cholesky")
    return multi_normal_draws(dist, *args.at(0), *args.at(1), draws, key, stream);
  Eigen::Index r = rows, c = cols, S = draws;
  for (const Tensor<double>* x : args) {
    Eigen::Index nr, nc;
    broadcast_shape(r, c, x->rows, x->cols, nr, nc);
    r = nr, c = nc;
    S = joint_draws(S, x->draws);
  }
  Tensor<double> out(r, c, S);
  std::vector<Arr<double>> v(args.size());
  std::vector<double> a(args.size());
  for (Eigen::Index s = 0; s < S; ++s) {
    for (size_t i = 0; i < args.size(); ++i) v[i] = expand(*args[i], r, c, s);
    for (Eigen::Index j = 0; j < c; ++j)
      for (Eigen::Index i = 0; i < r; ++i) {
        for (size_t k = 0; k < args.size(); ++k) a[k] = v[k](i, j);
        const uint64_t element = uint64_t((s * c + j) * r + i);
        UniformSource source{key, stream, element};
        out.draw(s)(i, j) = draw_one(dist, a.data(), source);
      }
  }
  return out;
}

template <>
Tensor<float> random_draws<float>(const std::string& dist, const Operands<float>& args, Eigen::Index rows,
                                  Eigen::Index cols, Eigen::Index draws, uint64_t key, uint32_t stream) {
  std::vector<Tensor<double>> wide;
  wide.reserve(args.size());
  for (const Tensor<float>* x : args) {
    Tensor<double> w(x->rows, x->cols, x->draws);
    w.m = x->m.cast<double>();
    wide.push_back(std::move(w));
  }
  Operands<double> ops;
  for (const Tensor<double>& w : wide) ops.push_back(&w);
  const Tensor<double> d = random_draws<double>(dist, ops, rows, cols, draws, key, stream);
  Tensor<float> out(d.rows, d.cols, d.draws);
  out.m = d.m.cast<float>();
  return out;
}

}  // namespace fvi::kernel
