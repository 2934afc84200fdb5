#pragma once
// A parameter times an expression of one silo's data alone, rewritten before checking into the
// parameter times a silo's transformed datum of that value:
//   y ~ normal(a + b1 * age + b2 * square(age), s)   ->  ... + b2 * square_age
//   ... + b_int * (income .* age)                     ->  ... + b_int * income_times_age
//   y[2:T] ~ normal(a + rho * y[1:(T - 1)], s)        ->  ... + rho * y_rows
//   y[n] ~ normal(a + c * square(age[n]) + b * income[n] * age[n], s)
//                                   ->  ... + c * square_age[n] + b * income_times_age[n]
// with `vector[N] square_age = square(age);` (`vector[(T - 1) - 1 + 1] y_rows = y[1:(T - 1)];`)
// added to transformed data. The silo computes it once, when it reads its data (semantic.h,
// value_at_load), exactly the value the kernels would have computed where it was written; held as
// data, it is a covariate like any other, which the fit may centre (analysis/centring.h: an
// intercept and the coefficient of a quadratic or a lag far from 0 trade off along a ridge).
//
// Only what is surely data of one silo is taken: a call of one of the runtime's elementwise
// functions (fvi/data/transformed_data.h) of a silo data vector or of one index of it (`x[n]`:
// the datum's row n), `.*` or `./` of two silo data vectors declared with the same size (or `*`,
// `/`, `.*`, `./` of the same index of each; `*` and `/` only at an index that is surely one row,
// a loop's variable or an int literal: rows picked by an int array are vectors, whose `*` is an
// error the rewrite must not make valid), or a range of rows of a silo data vector with both
// bounds written; the other factor a parameter's name (`w * x[n] * v[n]`, parsed (w * x[n]) * v[n],
// is regrouped). Anything else is left as written.
#include "frontend/ast.h"

namespace fvic {

void hoist_data_products(Program& program);

}  // namespace fvic
