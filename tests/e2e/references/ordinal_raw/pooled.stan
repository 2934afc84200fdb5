data { int N; int K; vector[N] age; vector[N] dose; int y[N]; int silo[N]; }
parameters { real b_age; real b_dose; ordered[3] c; }
model { b_age ~ normal(0, 1); b_dose ~ normal(0, 1); c ~ normal(0, 20);
  y ~ ordered_logistic(b_age * age + b_dose * dose, c); }
