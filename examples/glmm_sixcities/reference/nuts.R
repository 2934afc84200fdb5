# Long-run NUTS reference for glmm_sixcities on the POOLED data (all 537 children), with Debian's
# r-cran-rstan 2.21: 4 chains x (5,000 warmup + 25,000 kept) iterations, seed 20250603.
# Writes nuts_summary.json beside this script: for beta[1..4] and omega, the posterior mean, sd,
# Monte Carlo standard error of the mean, effective sample size and R-hat (rstan's summary).
#   Rscript examples/glmm_sixcities/reference/nuts.R
# Debian's r-cran-bh ships no include/ folder; rstan finds Boost only once it points at the
# system headers:  ln -s /usr/include /usr/lib/R/site-library/BH/include
suppressMessages(library(rstan))
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
ohio <- read.csv(file.path(here, "ohio.csv"))
data <- list(N = nrow(ohio), C = length(unique(ohio$id)), child = ohio$id + 1,
             smoke = ohio$smoke, age = ohio$age, wheeze = ohio$resp)
stopifnot(data$N == 2148, data$C == 537, max(data$child) == 537)
options(mc.cores = 2)
started <- Sys.time()
fit <- stan(file.path(here, "glmm.stan"), data = data, chains = 4, warmup = 5000, iter = 30000,
            seed = 20250603, refresh = 5000)
seconds <- as.numeric(difftime(Sys.time(), started, units = "secs"))
s <- summary(fit, pars = c("beta", "omega"))$summary
sampler <- get_sampler_params(fit, inc_warmup = FALSE)
divergent <- sum(sapply(sampler, function(x) sum(x[, "divergent__"])))
entry <- function(p) sprintf('    "%s": {"mean": %.8f, "sd": %.8f, "se_mean": %.8f, "n_eff": %.0f, "rhat": %.5f}',
                             p, s[p, "mean"], s[p, "sd"], s[p, "se_mean"], s[p, "n_eff"], s[p, "Rhat"])
json <- c("{",
  sprintf('  "sampler": "rstan %s NUTS (Stan %s), 4 chains x (5000 warmup + 25000 kept), seed 20250603, pooled data",',
          packageVersion("rstan"), stan_version()),
  '  "command": "Rscript examples/glmm_sixcities/reference/nuts.R",',
  sprintf('  "divergent_transitions": %d,', divergent),
  sprintf('  "seconds": %.0f,', seconds),
  '  "parameters": {',
  paste(sapply(rownames(s), entry), collapse = ",\n"),
  "  }", "}")
writeLines(json, file.path(here, "nuts_summary.json"))
print(s)
cat("divergent transitions:", divergent, "\n")
