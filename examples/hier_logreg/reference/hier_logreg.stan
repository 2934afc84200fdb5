// hier_logreg.fvi on the pooled data of its three hospitals, for the NUTS reference. Same priors;
// the intercepts are written non-centred (alpha = tau * z), which leaves the posterior unchanged.
// Old array syntax: Debian's rstan is 2.21.
data {
  int<lower=1> D;
  int<lower=1> S;              // hospitals (silos)
  int<lower=0> N;
  int<lower=1, upper=S> silo[N];
  matrix[N, D] x;
  int<lower=0, upper=1> y[N];
}
parameters {
  vector[D] beta;
  real<lower=0> tau;
  vector[S] z;
}
transformed parameters {
  vector[S] alpha = tau * z;
}
model {
  beta ~ normal(0, 2);
  tau ~ normal(0, 1);
  z ~ normal(0, 1);
  y ~ bernoulli_logit(alpha[silo] + x * beta);
}
