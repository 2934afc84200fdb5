# Exports the North American rainfall data from Debian's r-cran-fields (`NorthAmericanRainfall`:
# average annual precipitation 1950-2010 at 1720 stations, in tenths of mm) to rainfall.csv:
# longitude, latitude, elevation (m) and precip. Run: Rscript export_rainfall.R
library(fields)
data(NorthAmericanRainfall)
d <- NorthAmericanRainfall
write.csv(data.frame(longitude = d$longitude, latitude = d$latitude, elevation = d$elevation,
                     precip = d$precip), "rainfall.csv", row.names = FALSE)
