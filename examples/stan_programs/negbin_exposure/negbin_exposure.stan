// Overdispersed counts with an exposure offset and an uncentred covariate (the pooled rows).
data {
  int<lower=0> N;
  vector[N] age;
  vector[N] expo;
  array[N] int<lower=0> y;
}
parameters {
  real a;
  real b;
  real<lower=0> phi;
}
model {
  a ~ normal(0, 5);
  b ~ normal(0, 1);
  phi ~ exponential(1);
  y ~ neg_binomial_2_log(a + b * age + log(expo), phi);
}
