// Ordinal regression (proportional odds) on the pooled rows: y in 1..K from eta = x * beta and
// K - 1 increasing cutpoints c.
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=2> K;
  matrix[N, D] x;
  array[N] int<lower=1, upper=K> y;
}
parameters {
  vector[D] beta;
  ordered[K - 1] c;
}
model {
  beta ~ normal(0, 2.5);
  c ~ normal(0, 5);
  y ~ ordered_logistic(x * beta, c);
}
