# Shared by the reference/nuts.R scripts of examples/stan_programs/: the long-run NUTS references
# are run with Debian's r-cran-rstan 2.21.
# Debian's r-cran-bh ships no include/ folder; rstan finds Boost only once it points at the
# system headers:  ln -s /usr/include /usr/lib/R/site-library/BH/include
suppressMessages(library(rstan))

# A JSON object name -> number, array or array of rows, as fvic data files hold (no jsonlite).
read_json_object <- function(path) {
  text <- gsub("^\\s*\\{|\\}\\s*$", "", paste(readLines(path, warn = FALSE), collapse = ""))
  at <- gregexpr('"[A-Za-z_][A-Za-z0-9_]*"\\s*:', text)[[1]]
  if (at[1] < 0) return(list())
  keys <- gsub('[":[:space:]]', "", regmatches(text, list(at))[[1]])
  ends <- c(at[-1] - 1, nchar(text))
  values <- lapply(seq_along(keys), function(i) {
    v <- trimws(sub(",\\s*$", "", substr(text, at[i] + attr(at, "match.length")[i], ends[i])))
    number <- function(s) as.numeric(strsplit(gsub("[][[:space:]]", "", s), ",")[[1]])
    if (startsWith(v, "[[")) do.call(rbind, lapply(strsplit(v, "\\]\\s*,\\s*\\[")[[1]], number))
    else number(v)
  })
  setNames(values, keys)
}

# Stan code with every `array[n] T x;` rewritten to `T x[n];`: Stan 2.21 predates the array
# keyword.
old_arrays <- function(code) {
  # The element type may hold bounds (`int<lower=1>`), and the declaration a value.
  code <- gsub("array\\[([^]]+)\\]\\s+((?:<[^>]*>|[^;=<])*?)\\s+([A-Za-z_][A-Za-z0-9_]*)(\\s*=[^;]*)?\\s*;",
               "\\2 \\3[\\1]\\4;", code, perl = TRUE)
  stopifnot(!grepl("array[", code, fixed = TRUE))
  code
}

# Compiles the example's ../<name>.stan (seen from `here`, the script's reference/ folder),
# samples it on `data` with 4 chains x (5000 warmup + 25000 kept), adapt_delta 0.95 and `seed`,
# one chain at a time, and writes nuts_summary.json beside the script: rstan's summary of `pars`,
# the divergent transitions and the seconds taken. `note` ends the "sampler" field (", pooled
# data" where the silos' data are pooled).
nuts_reference <- function(name, here, data, pars, seed, note = "") {
  code <- old_arrays(paste(readLines(file.path(here, "..", paste0(name, ".stan"))), collapse = "\n"))
  options(mc.cores = 1)
  model <- stan_model(model_code = code, model_name = name)
  started <- Sys.time()
  fit <- sampling(model, data = data, chains = 4, warmup = 5000, iter = 30000, seed = seed,
                  control = list(adapt_delta = 0.95), refresh = 0)
  seconds <- as.numeric(difftime(Sys.time(), started, units = "secs"))
  s <- summary(fit, pars = pars)$summary
  divergent <- sum(sapply(get_sampler_params(fit, inc_warmup = FALSE), function(x) sum(x[, "divergent__"])))
  entry <- function(p) sprintf('    "%s": {"mean": %.8f, "sd": %.8f, "se_mean": %.8f, "n_eff": %.0f, "rhat": %.5f}',
                               p, s[p, "mean"], s[p, "sd"], s[p, "se_mean"], s[p, "n_eff"], s[p, "Rhat"])
  writeLines(c("{",
    sprintf('  "sampler": "rstan %s NUTS (Stan %s), 4 chains x (5000 warmup + 25000 kept), adapt_delta 0.95, seed %d%s",',
            packageVersion("rstan"), stan_version(), seed, note),
    sprintf('  "command": "Rscript examples/stan_programs/%s/reference/nuts.R",', name),
    sprintf('  "divergent_transitions": %d,', divergent),
    sprintf('  "seconds": %.0f,', seconds),
    '  "parameters": {', paste(sapply(rownames(s), entry), collapse = ",\n"), "  }", "}"),
    file.path(here, "nuts_summary.json"))
  print(s)
  cat("divergent transitions:", divergent, "\n")
}
