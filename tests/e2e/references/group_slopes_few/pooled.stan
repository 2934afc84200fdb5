data { int N; int K; vector[N] x; int y[N]; int silo[N]; }
parameters { real mu_a; real mu_b; real<lower=0> tau_a; real<lower=0> tau_b; vector[K] za; vector[K] zb; }
transformed parameters { vector[K] a = mu_a + tau_a * za; vector[K] b = mu_b + tau_b * zb; }
model { mu_a ~ normal(0, 10); mu_b ~ normal(0, 1); tau_a ~ cauchy(0, 1); tau_b ~ cauchy(0, 0.1);
  za ~ std_normal(); zb ~ std_normal();
  y ~ bernoulli_logit(a[silo] + b[silo] .* x); }
