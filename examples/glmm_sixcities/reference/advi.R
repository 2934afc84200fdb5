# Stan's own Gaussian VI (ADVI, meanfield and fullrank) on the pooled data: an independent check
# that the Gaussian family's optimum puts the intercept above NUTS's (README, Results).
#   Rscript examples/glmm_sixcities/reference/advi.R
suppressMessages(library(rstan))
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
ohio <- read.csv(file.path(here, "ohio.csv"))
data <- list(N = nrow(ohio), C = 537, child = ohio$id + 1, smoke = ohio$smoke, age = ohio$age,
             wheeze = ohio$resp)
model <- stan_model(file.path(here, "glmm.stan"))
for (algorithm in c("meanfield", "fullrank")) {
  fit <- vb(model, data = data, algorithm = algorithm, iter = 100000, tol_rel_obj = 1e-5,
            output_samples = 20000, seed = 1, refresh = 0, eta = 0.1, adapt_engaged = FALSE)
  cat(algorithm, "\n")
  print(summary(fit, pars = c("beta", "omega"))$summary[, c("mean", "sd")])
}
