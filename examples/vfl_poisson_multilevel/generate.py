#!/usr/bin/env python3
"""The synthetic multilevel Poisson regression of seed 004 section 5.2 (deterministic, seed 20250605):
N = 2000 areas, J = 2 silos with P = 2 covariates each, x ~ N(0, 1); pop_i ~ DiscreteUniform(250, 350)
with log(pop_i) a public offset; r_i uniform over R = 5 remoteness levels (public); and

    y_i ~ Poisson(exp(b + log(pop_i) + sum_j x_ij . beta_j[r_i]))
    beta_j[r] ~ N(mu_j, sigma_j)  (elementwise, r = 1..R),  mu_j ~ N(0, 1),  sigma_j ~ HalfNormal(1)

(the digest's reading: mu_j, sigma_j in R^2 shared by silo j's five level-specific slope vectors).
The paper gives no true values. Here mu_j, sigma_j and beta_j[r] are drawn from those priors and then
multiplied by SCALE = 1/sqrt(8): under the priors E[beta^2] = E[mu^2] + E[sigma^2] = 2 per covariate,
so the linear predictor of 4 unit-variance covariates has prior variance 8 (sd 2.8; unscaled,
this seed's draw spans -7.7..8.2, rates from pop/2300 to 3700 pop); scaled, its prior variance
is 1 (this draw: sd 0.75, -2.7..2.9).
b = 0, its prior's mean (--intercept to change it): the offset log(pop) then makes an area's
expected count about pop_i exp(x_i beta) (~300). A cancer atlas's rate of 1 % (b = log 0.01, about 3
cases per area) is 4.6 prior sds from b's N(0, 1) prior, and the amortised fits of the augmented
model, which start at b = 0, then end in a sign-flipped local optimum (README.md).

Writes under OUT (default build/vfl_poisson_multilevel):
  augmented/  data.json {N, R, level, log_pop} (public), server.json {y}, silo-k.json {P, x}
              (vfl_poisson_multilevel.fvi)
  pooled/     data.json {R, P}, silo-1.json {N, level, log_pop, x1, x2, y}: both silos' columns on
              one machine (poisson_pooled.fvi, the centralised baseline)
  pooled.csv  the same rows as CSV (level, log_pop, x1_1, x1_2, x2_1, x2_2, y) for reference/nuts.R
  truth.json  b, mu, sigma, beta (per silo; beta R x P, rows = levels) and the settings above.
"""
import argparse
import json
import math
import os
import random

SEED = 20250605
N, J, P, R = 2000, 2, 2, 5
SCALE = 1 / math.sqrt(8)
B = 0.0


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
        f.write("\n")


def poisson(rng, lam):
    """An exact Poisson(lam) draw: Knuth's product of uniforms on pieces of rate <= 20, summed."""
    count = 0
    while lam > 0:
        piece = min(lam, 20.0)
        lam -= piece
        limit, prod = math.exp(-piece), rng.random()
        while prod > limit:
            count += 1
            prod *= rng.random()
    return count


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", help="output folder (default build/vfl_poisson_multilevel)")
    parser.add_argument("--intercept", type=float, default=B, help="the true b (default 0)")
    args = parser.parse_args()
    out = os.path.normpath(args.output or os.path.join(here, "..", "..", "build", "vfl_poisson_multilevel"))
    rng = random.Random(SEED)
    mu = [[SCALE * rng.gauss(0, 1) for _ in range(P)] for _ in range(J)]
    sigma = [[SCALE * abs(rng.gauss(0, 1)) for _ in range(P)] for _ in range(J)]
    beta = [[[rng.gauss(mu[j][p], sigma[j][p]) for p in range(P)] for _ in range(R)] for j in range(J)]
    pop = [rng.randint(250, 350) for _ in range(N)]
    level = [rng.randint(1, R) for _ in range(N)]
    x = [[[round(rng.gauss(0, 1), 6) for _ in range(P)] for _ in range(J)] for _ in range(N)]
    log_pop = [math.log(n) for n in pop]
    eta = [args.intercept + log_pop[i] + sum(x[i][j][p] * beta[j][level[i] - 1][p] for j in range(J) for p in range(P))
           for i in range(N)]
    y = [poisson(rng, math.exp(e)) for e in eta]

    aug = os.path.join(out, "augmented")
    pooled = os.path.join(out, "pooled")
    for d in (aug, pooled):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    write(os.path.join(aug, "data.json"), {"N": N, "R": R, "level": level, "log_pop": log_pop})
    write(os.path.join(aug, "server.json"), {"y": y})
    for j in range(J):
        write(os.path.join(aug, "silo-%d.json" % (j + 1)), {"P": P, "x": [row[j] for row in x]})
    write(os.path.join(pooled, "data.json"), {"R": R, "P": P})
    write(os.path.join(pooled, "silo-1.json"), {"N": N, "level": level, "log_pop": log_pop,
                                                "x1": [row[0] for row in x], "x2": [row[1] for row in x], "y": y})
    with open(os.path.join(out, "pooled.csv"), "w") as f:
        f.write("level,log_pop,x1_1,x1_2,x2_1,x2_2,y\n")
        for i in range(N):
            f.write("%d,%r,%s,%d\n" % (level[i], log_pop[i], ",".join("%r" % v for row in x[i] for v in row), y[i]))
    write(os.path.join(out, "truth.json"), {
        "seed": SEED, "scale": SCALE, "b": args.intercept, "mu": mu, "sigma": sigma, "beta": beta,
        "note": "mu[j], sigma[j]: silo j+1's P values; beta[j][r]: silo j+1's slopes at level r+1"})
    lam = sorted(math.exp(e) for e in eta)
    print("vfl_poisson_multilevel: %d areas, %d silos of %d columns, %d levels; y total %d, max %d; "
          "lambda median %.2f, max %.1f; wrote %s" % (N, J, P, R, sum(y), max(y), lam[N // 2], lam[-1], out))


if __name__ == "__main__":
    main()
