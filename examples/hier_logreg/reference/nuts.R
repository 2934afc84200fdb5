# Long-run NUTS reference for hier_logreg on the POOLED data of its three hospitals, with Debian's
# r-cran-rstan 2.21 (old array syntax): 4 chains x (5,000 warmup + 25,000 kept), seed 20261122.
# Writes nuts_summary.json beside this script (mean, sd, se_mean, n_eff, Rhat of beta, tau and
# alpha). For the Boost headers rstan needs, see examples/glmm_sixcities/reference/nuts.R.
#   Rscript examples/hier_logreg/reference/nuts.R
suppressMessages(library(rstan))
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
read_silo <- function(k) {
  text <- paste(readLines(file.path(here, "..", "data", sprintf("silo-%d.json", k))), collapse = "")
  n <- as.integer(sub('.*"N": *([0-9]+).*', "\\1", text))
  x <- as.numeric(strsplit(gsub("[^0-9eE.,-]", "", sub('.*"x": *(\\[.*\\]\\]).*', "\\1", text)), ",")[[1]])
  y <- as.integer(strsplit(gsub("[^0-9,]", "", sub('.*"y": *(\\[[^]]*\\]).*', "\\1", text)), ",")[[1]])
  stopifnot(length(x) == 3 * n, length(y) == n)
  list(x = matrix(x, nrow = n, byrow = TRUE), y = y, silo = rep(k, n))
}
parts <- lapply(1:3, read_silo)
data <- list(D = 3, S = 3, N = sum(sapply(parts, function(p) length(p$y))),
             silo = unlist(lapply(parts, `[[`, "silo")), x = do.call(rbind, lapply(parts, `[[`, "x")),
             y = unlist(lapply(parts, `[[`, "y")))
options(mc.cores = 2)
fit <- stan(file.path(here, "hier_logreg.stan"), data = data, chains = 4, warmup = 5000,
            iter = 30000, seed = 20261122, refresh = 0)
s <- summary(fit, pars = c("beta", "tau", "alpha"))$summary
divergent <- sum(sapply(get_sampler_params(fit, inc_warmup = FALSE), function(x) sum(x[, "divergent__"])))
entry <- function(p) sprintf('    "%s": {"mean": %.8f, "sd": %.8f, "se_mean": %.8f, "n_eff": %.0f, "rhat": %.5f}',
                             p, s[p, "mean"], s[p, "sd"], s[p, "se_mean"], s[p, "n_eff"], s[p, "Rhat"])
writeLines(c("{",
  sprintf('  "sampler": "rstan %s NUTS (Stan %s), 4 chains x (5000 warmup + 25000 kept), seed 20261122, pooled data",',
          packageVersion("rstan"), stan_version()),
  '  "command": "Rscript examples/hier_logreg/reference/nuts.R",',
  sprintf('  "divergent_transitions": %d,', divergent),
  '  "parameters": {', paste(sapply(rownames(s), entry), collapse = ",\n"), "  }", "}"),
  file.path(here, "nuts_summary.json"))
print(s)
cat("divergent transitions:", divergent, "\n")
