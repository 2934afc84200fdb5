#!/usr/bin/env python3
"""Models whose likelihood is the server's: usage  check_pooled.py FVIC CACHE CASE.

  pooled             a model with no silo data, as a Stan user brings it (one data block, one
                     data file): `fvic plan` says pooled and lists no message, `fvic run --data
                     FILE.json` fits it with defaults, started at the mode's Laplace
                     approximation, converged, with k-hat; the posterior is
                     the exact Gaussian one (known noise, normal prior, computed here from the
                     data file); a data directory holding silo files is refused, naming the file.
  server_likelihood  a federated model with a likelihood of server data beside the silos' (the
                     server evaluates it, SFVI: PVI is not planned): the exact posterior of all
                     the rows, the server's and the silos'.
  simplex            a simplex[4] parameter with a Dirichlet(1.5) prior and multinomial counts
                     (pooled): the posterior is Dirichlet(1.5 + counts), whose means and sds are
                     known; `fvic plan` names the softmax and its auxiliary scale. The simplex is
                     the softmax of 4 values whose scale is an auxiliary, so q must also fit a
                     gamma(4, 1) in it: means within 0.25 posterior sd and sds within 20%, the
                     tolerances of the issues' held-out checks.
  gp_regression      posteriordb's gp_regr as written (gp_exp_quad_cov, diag_matrix,
                     cholesky_decompose, multi_normal_cholesky) on its 11 points: rho, alpha and
                     sigma against the exact posterior by quadrature on a 36^3 grid (each point's
                     11 x 11 Cholesky factor computed here): means within 0.25 posterior sd and
                     sds within 20%, as for the simplex (q is a Gaussian on the log scale of a
                     posterior that is not).
  lkj                a cholesky_factor_corr with lkj_corr_cholesky and no data: its correlations'
                     LKJ marginals.
  inv_wishart        a cov_matrix with the conjugate inverse-Wishart prior: the exact posterior.
  cholesky_cov       the same posterior through a cholesky_factor_cov parameter (its transform
                     and log-Jacobian), the Jacobian of L -> L L' written in the model.
  unit_vector        a unit_vector[3] under a von Mises-Fisher density: its exact moments.

Exact here: mu ~ normal(0, 10), every row ~ normal(mu, 1), so mu's posterior is normal with
precision 1/100 + n and mean sum(y) / precision. q is Gaussian and can equal it; what is left is
the optimiser's noise, which the stopping rule bounds (it stops when the averaged iterate drifts
less than 0.05 q sds): means within 0.15 posterior sd and sds within 15% (three times that).

Exit 0 on success, 1 with a message on the first failure.
"""
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import Failure, require  # noqa: E402

POOLED = """// A Stan program as written: one data block, no marks but `global`.
data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 10);
  y ~ normal(mu, 1);
}
"""

SERVER_LIKELIHOOD = """// The server holds rows of its own; each silo holds its rows.
server data {
  int<lower=0> M;
  vector[M] z;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 10);
  y ~ normal(mu, 1);
  z ~ normal(mu, 1);
}
"""

MEAN_SD, SD_RATIO = 0.15, 0.15


def fvic(args, cache, ok=True):
    p = subprocess.run(args, env=dict(os.environ, FVIC_CACHE=cache), capture_output=True, text=True, timeout=900)
    if ok:
        require(p.returncode == 0, f"{' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def exact(rows):
    precision = 1 / 100 + len(rows)
    return sum(rows) / precision, 1 / math.sqrt(precision)


def check_posterior(out, rows, stdout):
    require("converged after" in stdout, "the run did not converge:\n" + stdout)
    require("Pareto k-hat" in stdout and "not computed" not in stdout.split("Pareto k-hat")[1].splitlines()[0],
            "no k-hat:\n" + stdout)
    with open(os.path.join(out, "posterior.json")) as f:
        mu = json.load(f)["variables"]["mu"]
    mean, sd = exact(rows)
    off, ratio = abs(mu["mean"][0] - mean) / sd, mu["sd"][0] / sd
    print(f"  mu: fvic {mu['mean'][0]:.5f} (sd {mu['sd'][0]:.5f}), exact {mean:.5f} (sd {sd:.5f}): "
          f"{off:.3f} sd off, sd ratio {ratio:.3f}")
    require(off <= MEAN_SD, f"mu's mean is {off:.3f} posterior sds from the exact one")
    require(abs(ratio - 1) <= SD_RATIO, f"mu's sd is {ratio:.3f} of the exact one")


def case_pooled(fvic_path, cache, work):
    model = os.path.join(work, "pooled.fvi")
    with open(model, "w") as f:
        f.write(POOLED)
    rng = random.Random(7)
    rows = [2.5 + rng.gauss(0, 1) for _ in range(40)]
    data = os.path.join(work, "pooled.json")
    with open(data, "w") as f:
        json.dump({"N": len(rows), "y": rows}, f)
    plan = fvic([fvic_path, "plan", model], cache).stdout
    require(plan.splitlines()[0].startswith("pooled: pooled VI") and "no messages: pooled" in plan,
            "the plan does not say pooled:\n" + plan)
    plan_json = json.loads(fvic([fvic_path, "plan", model, "--json"], cache).stdout)
    require(plan_json["pooled"] and not plan_json["messages"] and not plan_json["closing_messages"]
            and not plan_json["rule_messages"],
            f"the json plan: pooled {plan_json['pooled']}, messages {plan_json['messages']}")
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    require("started at the mode's Laplace approximation" in p.stdout, "the pooled fit did not start at the mode:\n" + p.stdout)
    print("pooled, --data FILE.json:")
    check_posterior(out, rows, p.stdout)
    # The same data as a directory's data.json, with a silo file beside it: refused.
    folder = os.path.join(work, "folder")
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({"N": len(rows), "y": rows}, f)
    with open(os.path.join(folder, "silo-1.json"), "w") as f:
        json.dump({}, f)
    p = fvic([fvic_path, "run", model, "--data", folder, "--output", os.path.join(work, "out2")], cache, ok=False)
    require(p.returncode != 0 and "silo-1.json" in p.stderr and "no silo data" in p.stderr,
            f"a silo file beside a pooled model's data: exit {p.returncode}\n{p.stderr}")
    print(f"  a silo file in a pooled model's data directory: {p.stderr.strip().splitlines()[-1][:150]}")


def case_server_likelihood(fvic_path, cache, work):
    model = os.path.join(work, "server_likelihood.fvi")
    with open(model, "w") as f:
        f.write(SERVER_LIKELIHOOD)
    rng = random.Random(11)
    data = os.path.join(work, "data")
    os.makedirs(data)
    server_rows = [4.0 + rng.gauss(0, 1) for _ in range(60)]
    with open(os.path.join(data, "server.json"), "w") as f:
        json.dump({"M": len(server_rows), "z": server_rows}, f)
    with open(os.path.join(data, "data.json"), "w") as f:
        json.dump({}, f)
    rows = list(server_rows)
    for k in (1, 2, 3):
        silo = [4.0 + rng.gauss(0, 1) for _ in range(5)]
        rows += silo
        with open(os.path.join(data, f"silo-{k}.json"), "w") as f:
            json.dump({"N": len(silo), "y": silo}, f)
    plan = fvic([fvic_path, "plan", model], cache).stdout
    require(re.search(r"likelihood z ~ normal\s+server", plan) and "SFVI" in plan.splitlines()[0],
            "the plan does not give the server's likelihood to the server, by SFVI:\n" + plan)
    p = fvic([fvic_path, "plan", model, "--set", "method=pvi"], cache, ok=False)
    require(p.returncode == 1 and "server evaluates it" in p.stderr, "method = pvi was not refused:\n" + p.stderr)
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    print("server_likelihood, 60 server rows and 3 silos of 5:")
    check_posterior(out, rows, p.stdout)


SIMPLEX = """// Category counts with a Dirichlet prior (Stan's simplex type).
data {
  int<lower=2> K;
  vector<lower=0>[K] counts;
}
parameters {
  global simplex[K] theta;
}
model {
  theta ~ dirichlet(rep_vector(1.5, K));
  target += dot_product(counts, log(theta));
}
"""


def case_simplex(fvic_path, cache, work):
    model = os.path.join(work, "simplex.fvi")
    with open(model, "w") as f:
        f.write(SIMPLEX)
    counts = [12, 3, 20, 7]
    data = os.path.join(work, "simplex.json")
    with open(data, "w") as f:
        json.dump({"K": len(counts), "counts": counts}, f)
    plan = fvic([fvic_path, "plan", model], cache).stdout
    require("simplex theta (line 7): the softmax of K unconstrained values" in plan and "gamma(K, 1)" in plan,
            "the plan does not name the simplex's transform:\n" + plan)
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    require("converged after" in p.stdout, "the run did not converge:\n" + p.stdout)
    with open(os.path.join(out, "posterior.json")) as f:
        theta = json.load(f)["variables"]["theta"]
    alpha = [1.5 + c for c in counts]
    total = sum(alpha)
    for k, a in enumerate(alpha):
        mean, sd = a / total, math.sqrt(a * (total - a) / (total * total * (total + 1)))
        got, got_sd = theta["mean"][k], theta["sd"][k]
        off, ratio = abs(got - mean) / sd, got_sd / sd
        print(f"  theta[{k + 1}]: fvic {got:.4f} (sd {got_sd:.4f}), Dirichlet {mean:.4f} (sd {sd:.4f}): "
              f"{off:.3f} sd off, sd ratio {ratio:.3f}")
        require(off <= 0.25 and abs(ratio - 1) <= 0.2, f"theta[{k + 1}] is {off:.3f} sds off, sd ratio {ratio:.3f}")
    with open(os.path.join(out, "draws.csv")) as f:
        rows = [line for line in f if not line.startswith("#")][2:]
    header = [line for line in open(os.path.join(out, "draws.csv")) if not line.startswith("#")][0].strip().split(",")
    columns = [i for i, name in enumerate(header) if name.startswith("theta")]
    worst = max(abs(sum(float(r.split(",")[i]) for i in columns) - 1) for r in rows)
    require(worst < 1e-8, f"a draw of theta sums to 1 +- {worst}")
    print(f"  every draw of theta sums to 1 (within {worst:.1e}, draws.csv's rounding)")


LKJ = """// A correlation matrix's Cholesky factor under the LKJ prior alone (no data).
data {
  int<lower=2> K;
  real<lower=0> eta;
}
parameters {
  global cholesky_factor_corr[K] L;
}
model {
  L ~ lkj_corr_cholesky(eta);
}
generated quantities {
  matrix[K, K] Omega = L * L';
}
"""


def case_lkj(fvic_path, cache, work):
    """Every correlation of LKJ(eta) in K dimensions is 2 Beta(a, a) - 1, a = eta - 1 + K / 2
    (Lewandowski, Kurowicka and Joe 2009, section 3.2): mean 0, sd 1 / sqrt(2 a + 1). The fit of
    the prior alone, through cholesky_factor_corr's transform and Jacobian, must give these
    within 0.25 sd and sds within 20% (a Gaussian q on tanh's scale has lighter tails than LKJ's,
    which k-hat may flag; the moments must hold all the same)."""
    model = os.path.join(work, "lkj.fvi")
    with open(model, "w") as f:
        f.write(LKJ)
    K, eta = 4, 2.0
    data = os.path.join(work, "lkj.json")
    with open(data, "w") as f:
        json.dump({"K": K, "eta": eta}, f)
    plan = fvic([fvic_path, "plan", model], cache).stdout
    require("cholesky_factor_corr L (line 7): from K(K - 1)/2 unconstrained values" in plan,
            "the plan does not name the factor's transform:\n" + plan)
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    with open(os.path.join(out, "posterior.json")) as f:
        variables = json.load(f)["variables"]
    require("L" in variables and "Omega" in variables, f"L or Omega missing from posterior.json: {list(variables)}")
    a = eta - 1 + K / 2
    sd = 1 / math.sqrt(2 * a + 1)
    omega = variables["Omega"]
    worst_off, worst_ratio = 0.0, 0.0
    for i in range(K):
        for j in range(i):
            at = i * K + j  # row-major
            off, ratio = abs(omega["mean"][at]) / sd, omega["sd"][at] / sd
            worst_off, worst_ratio = max(worst_off, off), max(worst_ratio, abs(ratio - 1))
            print(f"  Omega[{i + 1},{j + 1}]: fvic {omega['mean'][at]:.4f} (sd {omega['sd'][at]:.4f}), LKJ 0 "
                  f"(sd {sd:.4f}): {off:.3f} sd off, sd ratio {ratio:.3f}")
    warned = "warning:" in p.stderr
    require(worst_off <= 0.25 and worst_ratio <= 0.2,
            f"Omega is {worst_off:.3f} sds off, sd ratio off by {worst_ratio:.3f}")
    # Every draw: L lower triangular, L L' a correlation matrix (unit diagonal).
    lines = [line for line in open(os.path.join(out, "draws.csv")) if not line.startswith("#")]
    header = lines[0].strip().split(",")
    worst = 0.0
    for line in lines[2:]:
        row = dict(zip(header, map(float, line.split(","))))
        for i in range(1, K + 1):
            worst = max(worst, abs(row[f"Omega.{i}.{i}"] - 1))
            for j in range(i + 1, K + 1):
                require(row[f"L.{i}.{j}"] == 0, f"L.{i}.{j} = {row[f'L.{i}.{j}']} above the diagonal")
    require(worst < 1e-8, f"a draw's Omega has a diagonal 1 +- {worst}")
    require(not any(name.startswith("L.") and name.count(".") == 1 for name in header),
            "the unconstrained values are in draws.csv")
    print(f"  every draw: L lower triangular, diag(L L') = 1 within {worst:.1e}; "
          f"{'warned' if warned else 'no warning'}")


INV_WISHART = """// A covariance matrix with the conjugate inverse-Wishart prior, the mean known.
data {
  int<lower=1> N;
  int<lower=2> K;
  array[N] vector[K] y;
  vector[K] mu;
  real<lower=0> nu;
  matrix[K, K] S;
}
parameters {
  global cov_matrix[K] Sigma;
}
model {
  Sigma ~ inv_wishart(nu, S);
  y ~ multi_normal(mu, Sigma);
}
"""


# The same posterior through a cholesky_factor_cov parameter: Sigma = L L' given the
# inverse-Wishart prior with the Jacobian of L -> L L' (2^K prod_k L_kk^(K - k + 1)) written out,
# and the likelihood by the factor.
CHOLESKY_COV = INV_WISHART[:INV_WISHART.index("parameters {")] + """parameters {
  global cholesky_factor_cov[K] L;
}
transformed parameters {
  cov_matrix[K] Sigma = multiply_lower_tri_self_transpose(L);
}
model {
  Sigma ~ inv_wishart(nu, S);
  for (k in 1:K) target += (K - k + 1) * log(L[k, k]);
  y ~ multi_normal_cholesky(mu, L);
}
"""


UNIT_VECTOR = """// A direction with the von Mises-Fisher density exp(kappa m'x) on the sphere.
data {
  vector[3] m;
  real<lower=0> kappa;
}
parameters {
  global unit_vector[3] x;
}
model {
  target += kappa * dot_product(x, m);
}
"""


def case_unit_vector(fvic_path, cache, work):
    """A unit_vector[3] under the von Mises-Fisher density (kappa = 10, mean direction m): its
    exact moments are E[x] = A m, A = coth(kappa) - 1/kappa, with variance 1 - 2A/kappa - A^2
    along m and A/kappa in each direction across it (Mardia and Jupp 2000, 9.3). Through
    unit_vector's transform and its -|u|^2/2: means within 0.25 sd, sds within 20%."""
    m, kappa = [0.6, 0.0, 0.8], 10.0
    model = os.path.join(work, "unit_vector.fvi")
    with open(model, "w") as f:
        f.write(UNIT_VECTOR)
    data = os.path.join(work, "unit_vector.json")
    with open(data, "w") as f:
        json.dump({"m": m, "kappa": kappa}, f)
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    require("converged after" in p.stdout, "the run did not converge:\n" + p.stdout)
    a = 1 / math.tanh(kappa) - 1 / kappa
    along, across = 1 - 2 * a / kappa - a * a, a / kappa
    with open(os.path.join(out, "posterior.json")) as f:
        x = json.load(f)["variables"]["x"]
    for i in range(3):
        mean = a * m[i]
        sd = math.sqrt(m[i] ** 2 * along + (1 - m[i] ** 2) * across)  # Cov = along m m' + across (I - m m')
        got, got_sd = x["mean"][i], x["sd"][i]
        off, ratio = abs(got - mean) / sd, got_sd / sd
        print(f"  x[{i + 1}]: fvic {got:.4f} (sd {got_sd:.4f}), exact {mean:.4f} (sd {sd:.4f}): {off:.3f} sd off, "
              f"sd ratio {ratio:.3f}")
        require(off <= 0.25 and abs(ratio - 1) <= 0.2, f"x[{i + 1}] is {off:.3f} sds off, sd ratio {ratio:.3f}")


def case_cholesky_cov(fvic_path, cache, work):
    """inv_wishart's case through cholesky_factor_cov's transform and Jacobian."""
    case_inv_wishart(fvic_path, cache, work, CHOLESKY_COV)


def case_inv_wishart(fvic_path, cache, work, source=INV_WISHART):
    """The posterior is inv_wishart(nu + N, S + A), A = sum (y_n - mu)(y_n - mu)': each element's
    mean Psi_ij / (n - K - 1) and variance ((n - K + 1) Psi_ij^2 + (n - K - 1) Psi_ii Psi_jj) /
    ((n - K)(n - K - 1)^2 (n - K - 3)), n = nu + N (Press 1982). Through cov_matrix's transform and
    Jacobian and the two matrix densities: within 0.25 sd, sds within 20%."""
    import random
    rng = random.Random(7)
    K, N, nu = 2, 60, 5.0
    S = [[1.0, 0.2], [0.2, 0.5]]
    mu = [0.3, -0.2]
    y = []
    for _ in range(N):
        z1, z2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y.append([mu[0] + 1.2 * z1, mu[1] + 0.5 * z1 + 0.6 * z2])
    model = os.path.join(work, "inv_wishart.fvi")
    with open(model, "w") as f:
        f.write(source)
    data = os.path.join(work, "inv_wishart.json")
    with open(data, "w") as f:
        json.dump({"N": N, "K": K, "y": y, "mu": mu, "nu": nu, "S": S}, f)
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    require("converged after" in p.stdout, "the run did not converge:\n" + p.stdout)
    psi = [[S[i][j] + sum((r[i] - mu[i]) * (r[j] - mu[j]) for r in y) for j in range(K)] for i in range(K)]
    n = nu + N
    with open(os.path.join(out, "posterior.json")) as f:
        sigma = json.load(f)["variables"]["Sigma"]
    for i in range(K):
        for j in range(K):
            mean = psi[i][j] / (n - K - 1)
            var = ((n - K + 1) * psi[i][j] ** 2 + (n - K - 1) * psi[i][i] * psi[j][j]) / (
                (n - K) * (n - K - 1) ** 2 * (n - K - 3))
            sd = math.sqrt(var)
            got, got_sd = sigma["mean"][i * K + j], sigma["sd"][i * K + j]
            off, ratio = abs(got - mean) / sd, got_sd / sd
            print(f"  Sigma[{i + 1},{j + 1}]: fvic {got:.4f} (sd {got_sd:.4f}), exact {mean:.4f} (sd {sd:.4f}): "
                  f"{off:.3f} sd off, sd ratio {ratio:.3f}")
            require(off <= 0.25 and abs(ratio - 1) <= 0.2, f"Sigma[{i + 1},{j + 1}] is {off:.3f} sds off, sd ratio {ratio:.3f}")


GP_REGRESSION = """// posteriordb's gp_regr, `global` before each parameter.
data {
  int<lower=1> N;
  array[N] real x;
  vector[N] y;
}
parameters {
  global real<lower=0> rho;
  global real<lower=0> alpha;
  global real<lower=0> sigma;
}
model {
  matrix[N, N] cov = gp_exp_quad_cov(x, alpha, rho)
                     + diag_matrix(rep_vector(sigma, N));
  matrix[N, N] L_cov = cholesky_decompose(cov);

  rho ~ gamma(25, 4);
  alpha ~ normal(0, 2);
  sigma ~ normal(0, 1);

  y ~ multi_normal_cholesky(rep_vector(0, N), L_cov);
}
"""


def gp_log_posterior(x, y, rho, alpha, sigma):
    """log p(rho, alpha, sigma | y) up to a constant, written out: the gamma(25, 4) and half-normal
    priors, and the multivariate normal by a Cholesky factor computed here."""
    n = len(x)
    k = [[alpha * alpha * math.exp(-(x[i] - x[j]) ** 2 / (2 * rho * rho)) + (sigma if i == j else 0.0)
          for j in range(n)] for i in range(n)]
    low = [[0.0] * n for _ in range(n)]
    for j in range(n):
        d = k[j][j] - sum(low[j][m] ** 2 for m in range(j))
        low[j][j] = math.sqrt(d)
        for i in range(j + 1, n):
            low[i][j] = (k[i][j] - sum(low[i][m] * low[j][m] for m in range(j))) / low[j][j]
    z = []
    for i in range(n):
        z.append((y[i] - sum(low[i][m] * z[m] for m in range(i))) / low[i][i])
    log_lik = -sum(math.log(low[i][i]) for i in range(n)) - 0.5 * sum(v * v for v in z)
    log_prior = 24 * math.log(rho) - 4 * rho - alpha * alpha / 8 - sigma * sigma / 2
    return log_lik + log_prior


def case_gp_regression(fvic_path, cache, work):
    x = [-10, -8, -6, -4, -2, 0, 2, 4, 6, 8, 10]
    y = [4.75906, 1.59423, 2.99548, 5.27501, 1.66472, 2.24347, 2.8914, 4.08681, 4.60588, 0.802364, 3.92136]
    model = os.path.join(work, "gp_regr.fvi")
    with open(model, "w") as f:
        f.write(GP_REGRESSION)
    data = os.path.join(work, "gp_regr.json")
    with open(data, "w") as f:
        json.dump({"N": len(x), "x": x, "y": y}, f)
    out = os.path.join(work, "out")
    p = fvic([fvic_path, "run", model, "--data", data, "--output", out], cache)
    require("converged after" in p.stdout, "the run did not converge:\n" + p.stdout)
    with open(os.path.join(out, "posterior.json")) as f:
        variables = json.load(f)["variables"]
    # The exact posterior by the midpoint rule on the natural scale, over ranges that hold it
    # (posteriordb's NUTS: rho 6.9 +- 1.3, alpha 2.4 +- 0.8, sigma 1.8 +- 0.5).
    ranges = {"rho": (1.0, 16.0), "alpha": (0.0, 8.0), "sigma": (0.0, 5.0)}
    points = 36
    grid = {name: [lo + (i + 0.5) * (hi - lo) / points for i in range(points)] for name, (lo, hi) in ranges.items()}
    logs = []
    for r in grid["rho"]:
        for a in grid["alpha"]:
            for s in grid["sigma"]:
                logs.append((gp_log_posterior(x, y, r, a, s), r, a, s))
    top = max(v[0] for v in logs)
    weights = [(math.exp(v[0] - top), v[1:]) for v in logs]
    total = sum(w for w, _ in weights)
    for k, name in enumerate(("rho", "alpha", "sigma")):
        mean = sum(w * at[k] for w, at in weights) / total
        sd = math.sqrt(sum(w * (at[k] - mean) ** 2 for w, at in weights) / total)
        got, got_sd = variables[name]["mean"][0], variables[name]["sd"][0]
        off, ratio = abs(got - mean) / sd, got_sd / sd
        print(f"  {name}: fvic {got:.4f} (sd {got_sd:.4f}), quadrature {mean:.4f} (sd {sd:.4f}): "
              f"{off:.3f} sd off, sd ratio {ratio:.3f}")
        require(off <= 0.25 and abs(ratio - 1) <= 0.2, f"{name} is {off:.3f} sds off, sd ratio {ratio:.3f}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    fvic_path, cache, case = sys.argv[1:]
    try:
        with tempfile.TemporaryDirectory() as work:
            {"pooled": case_pooled, "server_likelihood": case_server_likelihood,
             "simplex": case_simplex, "gp_regression": case_gp_regression,
             "lkj": case_lkj, "inv_wishart": case_inv_wishart, "cholesky_cov": case_cholesky_cov,
             "unit_vector": case_unit_vector}[case](fvic_path, cache, work)
    except Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print(f"{case}: ok")


if __name__ == "__main__":
    main()
