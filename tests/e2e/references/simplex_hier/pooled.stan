data { int K; int y[K, 4]; }
parameters { simplex[4] theta; real<lower=0> alpha; simplex[4] p[K]; }
model { theta ~ dirichlet(rep_vector(1, 4)); alpha ~ gamma(2, 0.05);
  for (k in 1:K) { p[k] ~ dirichlet(alpha * theta); y[k] ~ multinomial(p[k]); } }
