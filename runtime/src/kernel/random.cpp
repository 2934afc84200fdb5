#include "fvi/kernel/random.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "fvi/rng.h"

namespace fvi::kernel {

namespace {

constexpr double kTwoPi = 6.283185307179586477;

// Two uniforms in (0, 1] of 53 bits each from one Philox block.
struct Uniforms {
  double u1, u2;
};
Uniforms uniforms(uint64_t key, uint32_t stream, uint64_t element) {
  // The element's block: its index's low 32 bits in the block counter, the high ones in `round`.
  const RngKey k{key, 0x67656E71u /* "genq" */, uint32_t(element >> 32), stream};
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

double draw_one(const std::string& d, const double* a, Uniforms u) {
  if (d == "normal") return a[0] + a[1] * std::sqrt(-2 * std::log(u.u1)) * std::cos(kTwoPi * u.u2);
  if (d == "lognormal") return std::exp(a[0] + a[1] * std::sqrt(-2 * std::log(u.u1)) * std::cos(kTwoPi * u.u2));
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

}  // namespace

template <>
Tensor<double> random_draws<double>(const std::string& dist, const Operands<double>& args, Eigen::Index rows,
                                    Eigen::Index cols, Eigen::Index draws, uint64_t key, uint32_t stream) {
  if (dist == "categorical_logit") return categorical_draws(*args.at(0), draws, key, stream);
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
        out.draw(s)(i, j) = draw_one(dist, a.data(), uniforms(key, stream, element));
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
