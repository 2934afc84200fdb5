data { int<lower=0> N; int J; int g[N]; int n[N]; int k[N]; vector[N] x; }
parameters { real mu; real<lower=0> tau; real beta; vector[J] a_raw; }
transformed parameters { vector[J] a = mu + tau * a_raw; }
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 1);
  beta ~ normal(0, 1);
  a_raw ~ normal(0, 1);
  k ~ binomial_logit(n, a[g] + beta * x);
}
