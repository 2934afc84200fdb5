// Hierarchical linear regression with varying intercepts: N rows in J groups, one covariate x,
// a common slope beta, and group intercepts alpha written non-centred as a transformed
// parameter (alpha = mu_alpha + sigma_alpha * z).
data {
  int<lower=0> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> g;   // group of each row
  vector[N] x;
  vector[N] y;
}
parameters {
  real mu_alpha;
  real<lower=0> sigma_alpha;
  vector[J] z;
  real beta;
  real<lower=0> sigma;
}
transformed parameters {
  vector[J] alpha = mu_alpha + sigma_alpha * z;
}
model {
  mu_alpha ~ normal(0, 2);
  sigma_alpha ~ normal(0, 1);   // half-normal
  z ~ normal(0, 1);
  beta ~ normal(0, 1);
  sigma ~ normal(0, 1);         // half-normal
  y ~ normal(alpha[g] + beta * x, sigma);
}
