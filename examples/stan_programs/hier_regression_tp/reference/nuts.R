# Long-run NUTS reference for hier_regression_tp on the POOLED data (the 6 silos' 150 rows, the
# Stan program ../hier_regression_tp.stan with group index g = silo) with Debian's
# r-cran-rstan 2.21: 4 chains x (5,000 warmup + 25,000 kept) iterations, adapt_delta 0.95, seed
# 20261126, one chain at a time. Writes nuts_summary.json beside this script: for mu_alpha,
# sigma_alpha, z[1..6], beta, sigma and alpha[1..6], the posterior mean, sd, Monte Carlo standard
# error of the mean, effective sample size and R-hat (rstan's summary), the divergent transitions
# and the seconds taken.
#   Rscript examples/stan_programs/hier_regression_tp/reference/nuts.R
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
source(file.path(here, "..", "..", "common", "nuts_reference.R"))
silos <- lapply(1:6, function(k) read_json_object(file.path(here, "..", "data", sprintf("silo-%d.json", k))))
stopifnot(sapply(silos, function(s) s$N == 25 && length(s$x) == 25 && length(s$y) == 25))
data <- list(N = 150L, J = 6L, g = rep(1:6, each = 25),
             x = unlist(lapply(silos, `[[`, "x")), y = unlist(lapply(silos, `[[`, "y")))
nuts_reference("hier_regression_tp", here, data,
               pars = c("mu_alpha", "sigma_alpha", "z", "beta", "sigma", "alpha"),
               seed = 20261126, note = ", pooled data")
