data { int N; int K; vector[N] x; vector[N] y; int silo[N]; }
parameters { vector[2] mu; vector<lower=0>[2] tau; cholesky_factor_corr[2] L; real<lower=0> sigma; matrix[2, K] z; }
transformed parameters { matrix[2, K] ab = rep_matrix(mu, K) + diag_pre_multiply(tau, L) * z; }
model { mu ~ normal(0, 5); tau ~ normal(0, 2); L ~ lkj_corr_cholesky(2); sigma ~ normal(0, 2);
  to_vector(z) ~ std_normal();
  y ~ normal(ab[1, silo]' + ab[2, silo]' .* x, sigma); }
generated quantities { real rho = L[2, 1]; }
