#include "fvi/engine/factor_loss.h"

#include <cmath>

#include "fvi/loss/likelihood_loss.h"

namespace fvi::engine {

bool loss_supported(const LossSpec& loss, const std::string& distribution) {
  if (!loss.needs_integral()) return true;
  return distribution == "bernoulli_logit" || distribution == "categorical_logit" || distribution == "poisson_log" ||
         distribution == "normal";
}

namespace {

// Seeds for the losses computed from the per-row log density alone.
double seed_from_log_density(const LossSpec& loss, const Eigen::Map<const Eigen::MatrixXd>& loglik, double weight,
                             Eigen::MatrixXd& seed) {
  seed.resize(loglik.rows(), loglik.cols());
  if (loss.kind == LossKind::kNegativeLogLikelihood) {  // nll_loss in one vectorised pass: -loglik, seed -1
    seed.setConstant(-weight);
    return -loglik.sum();
  }
  double total = 0;
  for (Eigen::Index k = 0; k < loglik.size(); ++k) {
    const LossTerm<double> term = evaluate_loss(loss, loglik.data()[k]);
    total += term.value;
    seed.data()[k] = weight * term.d_loglik;
  }
  return total;
}

// An argument's values for draw s (a constant argument, with one draw, serves every draw).
Eigen::MatrixXd argument_draw(const BoundFactor::Argument& a, Eigen::Index s) {
  const Eigen::Index col = (a.draws == 1 ? 0 : s) * a.cols;
  return a.values.middleCols(col, a.cols);
}

// Seeds for the losses that need the likelihood's power integral: computed per draw from the
// outcome and the distribution's arguments.
double seed_from_arguments(const LossSpec& loss, const std::string& dist, const std::vector<BoundFactor::Argument>& args,
                           Eigen::Index draws, double weight, std::vector<Eigen::MatrixXd>& seeds) {
  const Eigen::VectorXd y = args[0].values.col(0);
  const Eigen::Index n = y.size();
  double total = 0;
  seeds.assign(args.size(), Eigen::MatrixXd());
  for (size_t k = 1; k < args.size(); ++k) seeds[k] = Eigen::MatrixXd::Zero(args[k].rows, args[k].cols * args[k].draws);
  auto put = [&](size_t k, Eigen::Index s, const Eigen::MatrixXd& g) {
    const BoundFactor::Argument& a = args[k];
    if (a.draws == 1) {
      seeds[k] += g;  // one value for every draw: its seed is the sum over draws
    } else {
      seeds[k].middleCols(s * a.cols, a.cols) = g;
    }
  };
  for (Eigen::Index s = 0; s < draws; ++s) {
    if (dist == "bernoulli_logit" || dist == "poisson_log") {
      Eigen::VectorXd eta = argument_draw(args[1], s);
      if (eta.size() == 1 && n > 1) eta = Eigen::VectorXd::Constant(n, eta[0]);
      Eigen::VectorXd d_eta;
      Eigen::VectorXi yi = y.cast<int>();
      total += dist == "bernoulli_logit" ? bernoulli_logit_loss(loss, yi, eta, &d_eta) : poisson_log_loss(loss, yi, eta, &d_eta);
      Eigen::MatrixXd g = weight * d_eta;
      if (args[1].rows == 1) g = Eigen::MatrixXd::Constant(1, 1, g.sum());
      put(1, s, g);
    } else if (dist == "categorical_logit") {
      const Eigen::MatrixXd logits = argument_draw(args[1], s);
      Eigen::MatrixXd d_logits;
      const Eigen::VectorXi y0 = (y.array() - 1).cast<int>();  // Stan's categories are 1-based
      total += categorical_logit_loss(loss, y0, logits, &d_logits);
      put(1, s, weight * d_logits);
    } else if (dist == "normal") {
      Eigen::VectorXd mu = argument_draw(args[1], s);
      if (mu.size() == 1 && n > 1) mu = Eigen::VectorXd::Constant(n, mu[0]);
      const Eigen::MatrixXd sigma = argument_draw(args[2], s);
      if (sigma.size() != 1) throw ModelError("the " + loss.name() + " loss needs a scalar sigma in normal()");
      Eigen::VectorXd d_mu;
      double d_sigma = 0;
      total += normal_loss(loss, y, mu, sigma(0, 0), &d_mu, &d_sigma);
      Eigen::MatrixXd g = weight * d_mu;
      if (args[1].rows == 1) g = Eigen::MatrixXd::Constant(1, 1, g.sum());
      put(1, s, g);
      put(2, s, Eigen::MatrixXd::Constant(1, 1, weight * d_sigma));
    } else {
      throw ModelError("the " + loss.name() + " loss is not available for " + dist + " likelihoods");
    }
  }
  return total;
}

// After a forward call with `draws` draws: the loss (scaled, averaged over the draws) and the
// seeds that chain it to the factor's inputs: seeds[0] for the output, seeds[k] for argument k.
// The seeds live in the factor's seed_storage() until its backward call.
struct LossSeeds {
  double value = 0;
  const std::vector<Eigen::MatrixXd>* seeds = nullptr;
  std::vector<const Eigen::MatrixXd*> pointers() const {
    std::vector<const Eigen::MatrixXd*> p(seeds->size(), nullptr);
    for (size_t k = 0; k < seeds->size(); ++k)
      if ((*seeds)[k].size() > 0) p[k] = &(*seeds)[k];
    return p;
  }
};

LossSeeds loss_seeds(BoundFactor& factor, const LossSpec& loss, const Eigen::Map<const Eigen::MatrixXd>& loglik,
                     Eigen::Index draws, double scale) {
  const double weight = scale / double(draws);
  std::vector<Eigen::MatrixXd>& seeds = factor.seed_storage();
  LossSeeds out;
  out.seeds = &seeds;
  if (!loss.needs_integral()) {
    seeds.resize(1);
    out.value = weight * seed_from_log_density(loss, loglik, weight, seeds[0]);
    return out;
  }
  const std::string dist = factor.info().distribution;
  out.value = weight * seed_from_arguments(loss, dist, factor.arguments(), draws, weight, seeds);
  return out;
}

}  // namespace

FactorLoss factor_loss(BoundFactor& factor, const LossSpec& loss, int64_t begin, int64_t count,
                       const std::vector<Eigen::MatrixXd>& inputs, double scale, bool with_gradient) {
  const auto& loglik = factor.forward(begin, count, inputs);
  const Eigen::Index draws = inputs.empty() ? 1 : inputs[0].cols();
  const LossSeeds seeds = loss_seeds(factor, loss, loglik, draws, scale);
  FactorLoss out;
  out.value = seeds.value;
  if (with_gradient) out.gradients = factor.backward(seeds.pointers());
  return out;
}

template <class T>
MeanFieldLoss<T> factor_loss_meanfield(BoundFactor& factor, const LossSpec& loss, int64_t begin, int64_t count,
                                       const GroupVectors<T>& means, const GroupVectors<T>& sds, int64_t draws,
                                       uint64_t noise_key, double scale, bool with_gradient) {
  const auto& loglik = factor.forward_meanfield(begin, count, means, sds, draws, noise_key);
  // One value per row and draw; a single draw when nothing in the factor is sampled.
  const LossSeeds seeds = loss_seeds(factor, loss, loglik, loglik.cols(), scale);
  MeanFieldLoss<T> out;
  out.value = seeds.value;
  if (with_gradient) out.gradient = factor.backward_meanfield<T>(seeds.pointers());
  return out;
}

template MeanFieldLoss<double> factor_loss_meanfield<double>(BoundFactor&, const LossSpec&, int64_t, int64_t,
                                                             const GroupVectors<double>&, const GroupVectors<double>&,
                                                             int64_t, uint64_t, double, bool);
template MeanFieldLoss<float> factor_loss_meanfield<float>(BoundFactor&, const LossSpec&, int64_t, int64_t,
                                                           const GroupVectors<float>&, const GroupVectors<float>&,
                                                           int64_t, uint64_t, double, bool);

}  // namespace fvi::engine
