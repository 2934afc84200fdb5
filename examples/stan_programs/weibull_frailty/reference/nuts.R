# Long-run NUTS reference for weibull_frailty on the POOLED data (the 5 silos' 395 rows, the Stan
# program ../weibull_frailty.stan) with Debian's r-cran-rstan 2.21: 4 chains x (5,000 warmup +
# 25,000 kept) iterations, adapt_delta 0.95, seed 20261202, one chain at a time. Writes
# nuts_summary.json beside this script: for mu, beta, tau, shape and alpha, the posterior mean, sd,
# Monte Carlo standard error of the mean, effective sample size and R-hat (rstan's summary), the
# divergent transitions and the seconds taken.
#   Rscript examples/stan_programs/weibull_frailty/reference/nuts.R
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
source(file.path(here, "..", "..", "common", "nuts_reference.R"))
silos <- lapply(1:5, function(k) read_json_object(file.path(here, "..", "data", sprintf("silo-%d.json", k))))
rows <- sapply(silos, `[[`, "N")
stopifnot(all(rows == c(60, 90, 75, 100, 70)))
data <- list(N = as.integer(sum(rows)), K = 5L, D = 2L, x = do.call(rbind, lapply(silos, `[[`, "x")),
             t = unlist(lapply(silos, `[[`, "t")), event = as.integer(unlist(lapply(silos, `[[`, "event"))),
             silo = as.integer(rep(1:5, rows)))
nuts_reference("weibull_frailty", here, data, pars = c("mu", "beta", "tau", "shape", "alpha"), seed = 20261202,
               note = ", pooled data")
