// Weibull proportional hazards with right-censoring and a frailty per hospital, on the pooled
// rows (silo[n] is row n's hospital).
data {
  int<lower=1> N;
  int<lower=1> K;
  int<lower=1> D;
  matrix[N, D] x;
  vector<lower=0>[N] t;
  array[N] int<lower=0, upper=1> event;
  array[N] int<lower=1, upper=K> silo;
}
parameters {
  real mu;
  vector[D] beta;
  real<lower=0> tau;
  real<lower=0> shape;
  vector[K] alpha;
}
model {
  mu ~ normal(0, 5);
  beta ~ normal(0, 1);
  tau ~ normal(0, 1);
  shape ~ gamma(2, 1);
  alpha ~ normal(mu, tau);
  for (n in 1:N) {
    if (event[n] == 1)
      t[n] ~ weibull(shape, exp(-(alpha[silo[n]] + x[n] * beta) / shape));
    else
      target += weibull_lccdf(t[n] | shape, exp(-(alpha[silo[n]] + x[n] * beta) / shape));
  }
}
