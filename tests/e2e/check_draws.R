# Reads one fvic draws.csv the way an R user does and checks it against fvic's own reading:
#   Rscript check_draws.R DRAWS_CSV SUMMARY_TXT MODE
# DRAWS_CSV    a run's draws.csv (the server's or a silo's)
# SUMMARY_TXT  what `fvic summary` printed for it
# MODE         server: loo's Pareto k-hat of log_p__ - log_g__ must be within 0.05 of fvic_khat
#              conjugate: that, and q is exact: k-hat < 0.5, log_p__ - log_g__ constant
#              silo: k-hat compared only when the file records fvic_khat
# Checks: rstan::read_stan_csv reads the file with no warning but the one it gives every
# CmdStan variational file (no "Elapsed Time"); posterior::summarise_draws() prints, to the
# digit, the numbers `fvic summary` printed. Prints each failure; exits 1 if there was one.
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 3) stop("usage: Rscript check_draws.R DRAWS_CSV SUMMARY_TXT server|conjugate|silo")
csv <- args[1]; summary_txt <- args[2]; mode <- args[3]
failures <- character()
fail <- function(...) failures <<- c(failures, paste0(...))

# rstan: the stanfit, warnings kept.
warnings_seen <- character()
fit <- withCallingHandlers(
  rstan::read_stan_csv(csv),
  warning = function(w) {
    warnings_seen <<- c(warnings_seen, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
unexpected <- warnings_seen[!grepl("Elapsed Time", warnings_seen, fixed = TRUE)]
if (length(unexpected)) fail("rstan::read_stan_csv warned: ", paste(unexpected, collapse = "; "))
args_of_fit <- fit@stan_args[[1]]
if (!identical(args_of_fit$method, "variational")) fail("rstan does not see method = variational")
draws <- as.array(fit, pars = c("lp__", "log_p__", "log_g__"), include = FALSE)
n_draws <- dim(draws)[1]
if (!identical(as.integer(args_of_fit$output_samples), as.integer(n_draws)))
  fail("output_samples = ", args_of_fit$output_samples, " but rstan found ", n_draws, " draws")
cat(sprintf("%s: rstan read %d draws of %d variables\n", csv, n_draws, dim(draws)[3]))

# posterior: the table as it prints, against fvic summary's, cell by cell.
s <- posterior::summarise_draws(draws, "mean", "median", "sd", "mad", "quantile2")
options(width = 10000)
printed <- capture.output(print(s, n = Inf, width = 10000))
r_rows <- printed[grepl("^ *[0-9]+ ", printed)]
r_cells <- lapply(strsplit(trimws(r_rows), " +"), function(x) x[-1])  # drop the row number
lines <- readLines(summary_txt)
start <- grep("^  variable ", lines)
if (length(start) != 1) {
  fail("no table in ", summary_txt)
  f_cells <- list()
} else {
  end <- start + which(lines[-(1:start)] == "")[1] - 1
  f_cells <- strsplit(trimws(lines[(start + 1):end]), " +")
}
if (length(f_cells) != length(r_cells)) {
  fail("fvic summary has ", length(f_cells), " rows, summarise_draws ", length(r_cells))
} else {
  for (i in seq_along(r_cells)) {
    if (!identical(f_cells[[i]], r_cells[[i]]))
      fail("row ", i, ": fvic summary prints '", paste(f_cells[[i]], collapse = " "),
           "', summarise_draws '", paste(r_cells[[i]], collapse = " "), "'")
  }
  cat(sprintf("summarise_draws and fvic summary agree on %d rows x 6 numbers\n", length(r_cells)))
}

# loo: Pareto k-hat of the log importance ratios log p(theta, y) - log q(theta).
log_p <- as.vector(as.array(fit, pars = "log_p__"))
log_g <- as.vector(as.array(fit, pars = "log_g__"))
# A silo's file holds what that silo may see; the log joint needs every silo's data, so a silo
# writes log_p__ = 0 (its comment block says so).
if (mode != "silo" && all(log_p == 0)) {
  fail("log_p__ is 0 on every draw: the log joint at the draws is not written")
}
fvic_khat <- suppressWarnings(as.numeric(args_of_fit$fvic_khat))
if (mode != "silo" || length(fvic_khat)) {
  ratios <- log_p - log_g
  khat <- suppressWarnings(loo::psis(ratios, r_eff = 1))$diagnostics$pareto_k
  cat(sprintf("loo k-hat %.4f, fvic_khat %s\n", khat, if (length(fvic_khat)) format(fvic_khat) else "absent"))
  if (!length(fvic_khat)) {
    fail("the file records no fvic_khat")
  } else if (is.na(fvic_khat)) {
    fail(sprintf("fvic_khat is %s (fvic computed no k-hat) where loo's is %.4f", args_of_fit$fvic_khat, khat))
  } else if (mode == "conjugate" && is.infinite(fvic_khat) && fvic_khat < 0) {
    # fvic reads ratios equal to a millionth as exact (k-hat -Inf); a fit of their rounding
    # noise means nothing, so here the agreement is that both read "good" (checked below).
    if (!(khat < 0.5)) fail(sprintf("fvic reads q as exact (k-hat -Inf) but loo's k-hat is %.4f", khat))
  } else if (!(abs(khat - fvic_khat) <= 0.05)) {
    fail(sprintf("loo's k-hat %.4f and fvic_khat %.4f differ by more than 0.05", khat, fvic_khat))
  }
  if (mode == "conjugate") {
    spread <- sd(ratios)
    cat(sprintf("log_p__ - log_g__: mean %.6f, sd %.3g\n", mean(ratios), spread))
    if (!(khat < 0.5)) fail(sprintf("q is exact here, yet loo's k-hat is %.4f (>= 0.5)", khat))
    if (!(spread < 1e-6 * (1 + abs(mean(ratios)))))
      fail(sprintf("q is exact here, yet log_p__ - log_g__ varies: sd %.3g around %.6f", spread, mean(ratios)))
  }
}

if (length(failures)) {
  cat(paste0("FAILED: ", failures, "\n"), sep = "")
  quit(status = 1)
}
cat("ok:", csv, "\n")
