# Seed 003's Figs. 1 and 2 for this example, from compare.py's outputs (base R, no packages):
#   train_lpd.png   mean log predictive density of the training rows per round, mean and standard
#                   error over seeds 1-5, PVI (Algorithm 2) against FedAvg with J = 1000 (Algorithm 1)
#   predictive.png  seed 1's predictive (mean and 2 sds) on the held-out grid after 10 and 20
#                   rounds, each method, over the training rows and the held-out ones
# Run from this folder: Rscript plot.R
r <- read.csv("results.csv")
summ <- do.call(rbind, lapply(split(r, list(r$method, r$round)), function(d)
  data.frame(method = d$method[1], round = d$round[1], mean = mean(d$train_lpd),
             se = sd(d$train_lpd) / sqrt(nrow(d)))))
png("train_lpd.png", width = 720, height = 420)
cols <- c(pvi = "#1b6ca8", fedavg_j1000 = "#c0392b")
labels <- c(pvi = "PVI + HVM over Z (Algorithm 2)", fedavg_j1000 = "FedAvg of Z, J = 1000 (Algorithm 1)")
plot(NULL, xlim = c(1, max(summ$round)), ylim = c(-1.5, 0.3), xlab = "round (5 communications each)",
     ylab = "train log predictive density per row", main = "Synthetic regression, 5 silos, 5 seeds")
for (m in names(cols)) {
  d <- summ[summ$method == m, ]
  d <- d[order(d$round), ]
  arrows(d$round, d$mean - d$se, d$round, d$mean + d$se, angle = 90, code = 3, length = 0.02, col = cols[m])
  lines(d$round, d$mean, col = cols[m], lwd = 2, type = "b", pch = 19)
}
legend("bottomright", legend = labels, col = cols, lwd = 2, pch = 19, bty = "n")
dev.off()

train <- do.call(rbind, lapply(1:5, function(k) {
  txt <- readLines(sprintf("data/silo-%d.json", k), warn = FALSE)
  num <- function(key) as.numeric(strsplit(sub(sprintf('.*"%s": \\[([^]]*)\\].*', key), "\\1", txt), ",")[[1]])
  data.frame(x = num("x"), y = num("y"))
}))
png("predictive.png", width = 900, height = 600)
par(mfrow = c(2, 2), mar = c(4, 4, 2.5, 1))
for (m in c("pvi", "fedavg_j1000")) for (rounds in c(10, 20)) {
  p <- read.csv(sprintf("out/%s-seed-1-rounds-%d/predictive.csv", m, rounds))
  plot(train$x, train$y, pch = 16, cex = 0.5, col = "grey50", xlab = "x", ylab = "y", ylim = c(-3.5, 3.5),
       main = sprintf("%s after %d rounds", labels[m], rounds))
  points(p$x.1, p$y, pch = 1, cex = 0.5, col = "grey70")
  polygon(c(p$x.1, rev(p$x.1)), c(p$mean - 2 * p$sd, rev(p$mean + 2 * p$sd)), col = adjustcolor(cols[m], 0.25),
          border = NA)
  lines(p$x.1, p$mean, col = cols[m], lwd = 2)
}
dev.off()
