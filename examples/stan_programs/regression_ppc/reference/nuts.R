# Long-run NUTS reference for regression_ppc on the POOLED data (the 3 silos' 120 rows, the Stan
# program ../regression_ppc.stan) with Debian's r-cran-rstan 2.21: 4 chains x (5,000 warmup +
# 25,000 kept) iterations, adapt_delta 0.95, seed 20261127, one chain at a time. Writes
# nuts_summary.json beside this script: for alpha, beta[1..2], sigma and the generated quantity
# sigma_sq, the posterior mean, sd, Monte Carlo standard error of the mean, effective sample size
# and R-hat (rstan's summary), the divergent transitions and the seconds taken.
#   Rscript examples/stan_programs/regression_ppc/reference/nuts.R
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
source(file.path(here, "..", "..", "common", "nuts_reference.R"))
public <- read_json_object(file.path(here, "..", "data", "data.json"))
silos <- lapply(1:3, function(k) read_json_object(file.path(here, "..", "data", sprintf("silo-%d.json", k))))
stopifnot(public$D == 2, sapply(silos, function(s) s$N == 40 && all(dim(s$x) == c(40, 2)) && length(s$y) == 40))
data <- list(N = 120L, D = 2L, x = do.call(rbind, lapply(silos, `[[`, "x")), y = unlist(lapply(silos, `[[`, "y")))
nuts_reference("regression_ppc", here, data, pars = c("alpha", "beta", "sigma", "sigma_sq"),
               seed = 20261127, note = ", pooled data")
