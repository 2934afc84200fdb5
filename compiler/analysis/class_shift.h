#pragma once
// Which globals the likelihood sees only up to a shift along the classes of a softmax.
//
// `y ~ categorical_logit(x * W + b)` is unchanged when one number is added to every element of a
// row of W (each row of x * W moves by one number across the classes) or to every element of b.
// Only the prior then places q along those directions; with `W ~ normal(0, s)` (zero mean, one
// scale) the ELBO's dependence on them is the prior's quadratic alone, maximised where q's means
// have zero mean across the classes. An engine may put them there after each step: an exact move,
// where Adam creeps (examples/multinomial_eb: the class means of q's means 0.55 q sds from it after
// 20,000 iterations).
#include "frontend/semantic.h"

namespace fvic {

// The kernel ABI's fvi_variable_info.class_shift for global `s`: 1 when s is a matrix whose rows
// the likelihood sees only up to a shift (W above), 2 when s is a vector or row_vector the
// likelihood sees only up to one shift of all its elements (b above), 0 otherwise. Conservative:
// any other use of s in the transformed parameters or the model block, a prior that is not
// `s ~ normal(0, scale)` with a scale that reads no parameter, or a `target +=` that reads
// globals, gives 0.
int class_shift_of(const SemanticModel& model, const Symbol& s);

}  // namespace fvic
