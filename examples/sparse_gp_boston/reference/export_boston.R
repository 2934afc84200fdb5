# Exports the Boston housing data (Harrison and Rubinfeld 1978) from Debian's r-cran-mass to
# boston.csv: 506 rows, 13 inputs and the median value medv. Run: Rscript export_boston.R
library(MASS)
data(Boston)
write.csv(Boston, "boston.csv", row.names = FALSE)
