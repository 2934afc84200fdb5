data {
  int<lower=0> N;
  int<lower=0> y[N];
}
parameters {
  real<lower=0, upper=1> theta;
  real<lower=0> lambda;
}
model {
  theta ~ beta(1, 1);
  lambda ~ gamma(2, 0.5);
  for (n in 1:N) {
    if (y[n] == 0)
      target += log_sum_exp(bernoulli_lpmf(1 | theta), bernoulli_lpmf(0 | theta) + poisson_lpmf(0 | lambda));
    else
      target += bernoulli_lpmf(0 | theta) + poisson_lpmf(y[n] | lambda);
  }
}
