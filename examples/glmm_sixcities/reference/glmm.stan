// The Six Cities logistic mixed model of seed 002 section 4.3 on the pooled data, for the NUTS
// reference. Same priors as glmm_sixcities.fvi; the random intercepts are written non-centred
// (b = exp(-omega) * z), which leaves the posterior of (beta, omega, b) unchanged and lets NUTS
// mix. Old array syntax: Debian's rstan is 2.21.
data {
  int<lower=0> N;
  int<lower=0> C;
  int<lower=1, upper=C> child[N];
  vector[N] smoke;
  vector[N] age;
  int<lower=0, upper=1> wheeze[N];
}
parameters {
  vector[4] beta;
  real omega;
  vector[C] z;
}
transformed parameters {
  vector[C] b = exp(-omega) * z;
}
model {
  beta ~ normal(0, 10);
  omega ~ normal(0, 10);
  z ~ normal(0, 1);
  wheeze ~ bernoulli_logit(beta[1] + beta[2] * smoke + beta[3] * age
                           + beta[4] * (smoke .* age) + b[child]);
}
