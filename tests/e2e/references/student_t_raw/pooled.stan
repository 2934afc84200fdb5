data { int<lower=0> N; vector[N] x; vector[N] y; }
parameters { real alpha; real beta; real<lower=0> sigma; real<lower=1> nu; }
model {
  alpha ~ normal(0, 100);
  beta ~ normal(0, 10);
  sigma ~ exponential(0.1);
  nu ~ gamma(2, 0.1);
  y ~ student_t(nu, alpha + beta * x, sigma);
}
