#!/usr/bin/env python3
"""The ELBO of one simple member of the augmented model's amortised family, by Monte Carlo: usage
    feasible_elbo.py DATA POOLED_FIT [--rho RHO]
DATA is generate.py's output folder; POOLED_FIT the output of poisson_pooled.fvi (centralised
mean-field VI) on DATA/pooled. The member: q(theta) = that fit's q (each sigma a lognormal with its
mean and sd), every q(z_ij | m_ij) = N(m_ij, s^2) with one s for all rows (a network with a zero
output weight and output biases (0, log s)), and b's mean lowered by s^2 (E[exp(e_i1 + e_i2)] =
exp(s^2)). It prints the ELBO for a few s (--s; 20 draws each, Monte Carlo error ~10).
If a fit of vfl_poisson_multilevel.fvi ends at a lower ELBO than this, the optimiser stopped in a
local optimum: README.md, "b = log 0.01".
"""
import argparse
import json
import math
import os
import random


def lnorm(v, m, s):
    return -0.5 * math.log(2 * math.pi) - math.log(s) - 0.5 * ((v - m) / s) ** 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data")
    parser.add_argument("pooled_fit")
    parser.add_argument("--rho", type=float, default=1.0)
    parser.add_argument("--s", type=float, nargs="+", default=[0.3, 0.4, 0.45, 0.5, 0.6], help="values of s")
    args = parser.parse_args()
    with open(os.path.join(args.pooled_fit, "posterior.json")) as f:
        post = json.load(f)["variables"]
    aug = os.path.join(args.data, "augmented")
    with open(os.path.join(aug, "data.json")) as f:
        d = json.load(f)
    with open(os.path.join(aug, "server.json")) as f:
        y = json.load(f)["y"]
    xs = []
    for k in (1, 2):
        with open(os.path.join(aug, "silo-%d.json" % k)) as f:
            xs.append(json.load(f)["x"])
    N, R, P, rho = d["N"], d["R"], len(xs[0][0]), args.rho
    rng = random.Random(7)
    log_y_factorial = sum(math.lgamma(v + 1) for v in y)

    def elbo_once(s):
        total, th = 0.0, {}
        for name, v in post.items():  # log p(theta) - log q(theta), on the unconstrained scale
            values = []
            for m, sd in zip(v["mean"], v["sd"]):
                if name.startswith("sigma"):  # sigma = exp(u), u ~ N(mu_u, s_u): lognormal, Jacobian u
                    s2 = math.log(1 + (sd / m) ** 2)
                    mu_u, s_u = math.log(m) - s2 / 2, math.sqrt(s2)
                    u = rng.gauss(mu_u, s_u)
                    total += u - lnorm(u, mu_u, s_u)
                    values.append(math.exp(u))
                else:
                    mean = m - s * s if name == "b" else m
                    t = rng.gauss(mean, sd)
                    total -= lnorm(t, mean, sd)
                    values.append(t)
            th[name] = values
        total += lnorm(th["b"][0], 0, 1)
        for j in (1, 2):
            mu, sg, be = th["mu%d" % j], th["sigma%d" % j], th["beta%d" % j]
            for p in range(P):
                total += lnorm(mu[p], 0, 1) + math.log(2) + lnorm(sg[p], 0, 1)
                total += sum(lnorm(be[r * P + p], mu[p], sg[p]) for r in range(R))
        # E_q[log N(z | m, rho^2) - log q(z | m)] = -KL(N(m, s^2) || N(m, rho^2)) per row and silo
        total -= 2 * N * (math.log(rho / s) + s * s / (2 * rho * rho) - 0.5)
        for i in range(N):
            r = d["level"][i] - 1
            eta = th["b"][0] + d["log_pop"][i] + rng.gauss(0, s) + rng.gauss(0, s)
            eta += sum(xs[j][i][p] * th["beta%d" % (j + 1)][r * P + p] for j in range(2) for p in range(P))
            total += y[i] * eta - math.exp(eta)
        return total - log_y_factorial

    for s in args.s:
        values = [elbo_once(s) for _ in range(20)]
        print("s = %.2f: ELBO %.1f" % (s, sum(values) / len(values)))


if __name__ == "__main__":
    main()
