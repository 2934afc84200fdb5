# Long-run NUTS reference for negbin_exposure on the POOLED data (the 4 silos' 240 rows, the Stan
# program ../negbin_exposure.stan) with Debian's r-cran-rstan 2.21: 4 chains x (5,000 warmup +
# 25,000 kept) iterations, adapt_delta 0.95, seed 20261130, one chain at a time. Writes
# nuts_summary.json beside this script: for a, b and phi, the posterior mean, sd, Monte Carlo
# standard error of the mean, effective sample size and R-hat (rstan's summary), the divergent
# transitions and the seconds taken.
#   Rscript examples/stan_programs/negbin_exposure/reference/nuts.R
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
source(file.path(here, "..", "..", "common", "nuts_reference.R"))
silos <- lapply(1:4, function(k) read_json_object(file.path(here, "..", "data", sprintf("silo-%d.json", k))))
stopifnot(sapply(silos, function(s) s$N == 60 && length(s$age) == 60 && length(s$y) == 60))
data <- list(N = 240L, age = unlist(lapply(silos, `[[`, "age")), expo = unlist(lapply(silos, `[[`, "expo")),
             y = as.integer(unlist(lapply(silos, `[[`, "y"))))
nuts_reference("negbin_exposure", here, data, pars = c("a", "b", "phi"), seed = 20261130, note = ", pooled data")
