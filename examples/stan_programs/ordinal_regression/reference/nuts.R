# Long-run NUTS reference for ordinal_regression on the POOLED data (the 4 silos' 600 rows, the
# Stan program ../ordinal_regression.stan) with Debian's r-cran-rstan 2.21: 4 chains x (5,000
# warmup + 25,000 kept) iterations, adapt_delta 0.95, seed 20261130, one chain at a time. Writes
# nuts_summary.json beside this script: for beta[1..2] and c[1..3], the posterior mean, sd, Monte
# Carlo standard error of the mean, effective sample size and R-hat (rstan's summary), the
# divergent transitions and the seconds taken.
#   Rscript examples/stan_programs/ordinal_regression/reference/nuts.R
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
source(file.path(here, "..", "..", "common", "nuts_reference.R"))
silos <- lapply(1:4, function(k) read_json_object(file.path(here, "..", "data", sprintf("silo-%d.json", k))))
stopifnot(sapply(silos, function(s) s$N == 150 && nrow(s$x) == 150 && length(s$y) == 150))
data <- list(N = 600L, D = 2L, K = 4L, x = do.call(rbind, lapply(silos, `[[`, "x")),
             y = as.integer(unlist(lapply(silos, `[[`, "y"))))
nuts_reference("ordinal_regression", here, data, pars = c("beta", "c"), seed = 20261130, note = ", pooled data")
