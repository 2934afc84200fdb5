# Long-run NUTS reference for eight_schools_noncentered (all 8 schools, the Stan program
# ../eight_schools_noncentered.stan on the data of ../data/) with Debian's r-cran-rstan 2.21:
# 4 chains x (5,000 warmup + 25,000 kept) iterations, adapt_delta 0.95, seed 20261126, one chain
# at a time. Writes nuts_summary.json beside this script: for mu, tau, theta[1..8] and
# theta_tilde[1..8], the posterior mean, sd, Monte Carlo standard error of the mean, effective
# sample size and R-hat (rstan's summary), the divergent transitions and the seconds taken.
#   Rscript examples/stan_programs/eight_schools_noncentered/reference/nuts.R
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
source(file.path(here, "..", "..", "common", "nuts_reference.R"))
schools <- lapply(1:8, function(j) read_json_object(file.path(here, "..", "data", sprintf("silo-%d.json", j))))
data <- list(J = 8L, y = sapply(schools, `[[`, "y"), sigma = sapply(schools, `[[`, "sigma"))
stopifnot(data$y == c(28, 8, -3, 7, -1, 1, 18, 12), data$sigma == c(15, 10, 16, 11, 9, 11, 10, 18))
nuts_reference("eight_schools_noncentered", here, data, pars = c("mu", "tau", "theta", "theta_tilde"),
               seed = 20261126)
