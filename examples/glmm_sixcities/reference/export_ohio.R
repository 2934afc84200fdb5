# Writes the Six Cities wheeze data (Fitzmaurice & Laird 1993) as shipped by Debian's
# r-cran-geepack (dataset `ohio`: 537 children x 4 years; resp = wheeze, id = child 0..536,
# age = age - 9 in years (-2..1), smoke = mother smoked) to ohio.csv beside this script.
# Run once: Rscript examples/glmm_sixcities/reference/export_ohio.R
library(geepack)
data(ohio)
stopifnot(nrow(ohio) == 2148, length(unique(ohio$id)) == 537)
here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
write.csv(ohio[, c("id", "age", "smoke", "resp")], file.path(here, "ohio.csv"), row.names = FALSE, quote = FALSE)
cat("wrote", file.path(here, "ohio.csv"), "\n")
