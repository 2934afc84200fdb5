// Bayesian linear regression with an intercept, D covariates and unknown noise; the generated
// quantities block reports the noise variance.
data {
  int<lower=0> N;
  int<lower=1> D;
  matrix[N, D] x;
  vector[N] y;
}
parameters {
  real alpha;
  vector[D] beta;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);   // half-normal
  y ~ normal(alpha + x * beta, sigma);
}
generated quantities {
  real sigma_sq = square(sigma);
  // Posterior predictive replicates of this silo's rows (Stan's vectorised normal_rng).
  array[N] real y_rep = normal_rng(alpha + x * beta, sigma);
}
