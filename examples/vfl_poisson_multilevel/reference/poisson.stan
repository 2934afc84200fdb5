// The true (non-augmented) multilevel Poisson regression of seed 004 section 5.2 on the pooled
// data: the same model as ../poisson_pooled.fvi, in Stan 2.21's syntax. Centred levels: every
// level-specific slope is pinned by ~400 areas of ~300 counts, so the centred form mixes well.
data {
  int<lower=1> N;
  int<lower=1> R;
  int<lower=1, upper=R> level[N];
  vector[N] log_pop;
  matrix[N, 2] x1;
  matrix[N, 2] x2;
  int<lower=0> y[N];
}
parameters {
  real b;
  row_vector[2] mu1;
  row_vector<lower=0>[2] sigma1;
  matrix[R, 2] beta1;
  row_vector[2] mu2;
  row_vector<lower=0>[2] sigma2;
  matrix[R, 2] beta2;
}
model {
  b ~ normal(0, 1);
  mu1 ~ normal(0, 1);
  sigma1 ~ normal(0, 1);
  mu2 ~ normal(0, 1);
  sigma2 ~ normal(0, 1);
  for (r in 1:R) {
    beta1[r] ~ normal(mu1, sigma1);
    beta2[r] ~ normal(mu2, sigma2);
  }
  y ~ poisson_log(b + log_pop + rows_dot_product(x1, beta1[level]) + rows_dot_product(x2, beta2[level]));
}
