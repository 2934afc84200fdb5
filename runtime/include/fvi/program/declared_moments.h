#pragma once
// q's mean and sd of each written element on its declared scale, without the Monte Carlo error of
// q's draws. A diagnostic that sets an estimate of the posterior's moments against q's (the tail
// check) must read q's own: against the sample moments of q's 1,000 draws, each sd carries about
// 2% of error (1 / sqrt(2 S)), and the largest of ten a few times that (posteriordb's nes: q's
// sample sd of beta[7] 7% under q's own, so the check found +11% where the posterior is q's).
#include <Eigen/Dense>

#include "fvi/program/server_loop.h"

namespace fvi::program {

struct DeclaredMoments {
  Eigen::VectorXd mean, sd;  // one per row of ServerDraws::constrained
};

// For each row of d.constrained: q's own where the element is unbounded (d.mean, d.sd); by
// Gauss-Hermite quadrature of q's marginal N(d.mean, d.sd) through the bound's transform where it
// is a lower, upper or interval bound (the element then depends on its own coordinate alone); and
// from the draws elsewhere (a simplex, an ordered vector, a structured matrix, an affine transform
// with parameters, and the quantities past q's rows).
DeclaredMoments declared_moments(const ServerDraws& d);

// The nodes x and weights w (summing to 1) of the n-point Gauss-Hermite rule for the standard
// normal: E f(Z) ~ sum w_k f(x_k), exact for polynomials of degree 2n - 1 (Golub and Welsch 1969).
void normal_quadrature(int n, Eigen::VectorXd& x, Eigen::VectorXd& w);

// The N(m, s^2) whose image through the interval transform, lower + (upper - lower) inv_logit(u),
// has mean `mean` and sd `sd` (a logit-normal's): false where no such Gaussian exists (the sd at or
// past the bound sqrt(p (1 - p)) of a two-point law) or it would need s > kMaxIntervalScale, where
// the quadrature loses its accuracy (the logistic's poles at distance pi / s from the real line).
bool interval_gaussian(double mean, double sd, double lower, double upper, double& m, double& s);
constexpr double kMaxIntervalScale = 4;

}  // namespace fvi::program
