#pragma once
// Stan's convenience forms, rewritten into the core ones before checking, so that the checker,
// the IR and both backends see one way of writing each (DESIGN.md §6b):
//   y ~ bernoulli_logit_glm(x, a, b)    ->  y ~ bernoulli_logit(a + x * b)
//   y ~ poisson_log_glm(x, a, b)        ->  y ~ poisson_log(a + x * b)
//   y ~ normal_id_glm(x, a, b, sigma)   ->  y ~ normal(a + x * b, sigma)
//   y ~ std_normal()                    ->  y ~ normal(0, 1)
// and their `_lpdf` / `_lpmf` calls alike; log_sum_exp(a, b) -> a + log1p_exp(b - a) when
// a >= b is unknown, which is exact and stable (log1p_exp(t) is t + log1p(exp(-t)) for t > 0).
// An ODE solver's call (`integrate_ode_rk45(f, y0, ...)`) keeps the system's name in its `text`,
// out of its arguments, which are values.
// A form with the wrong number of arguments is left as written, for the checker to name.
#include "frontend/ast.h"

namespace fvic {

void desugar_stan_forms(Program& program);

}  // namespace fvic
