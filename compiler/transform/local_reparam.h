#pragma once
// Mean-field variants of the factors, with local reparameterisation (Kingma, Salimans & Welling
// 2015; the reference BNN code of seed 000, spec 000 §3.1 and §6).
//
// The engine of a mean-field Gaussian family calls forward_meanfield with each input group's
// means and sds instead of draws (docs/kernel-abi.md). The kernel then samples
// theta = mean + sd .* eps itself (ordinary reparameterisation), except where a parameter W
// enters the factor only through one product with data, P = x * W: there the rows of P are
// Gaussian given q, P[n, h] ~ N(sum_d x[n,d] mu[d,h], sum_d x[n,d]^2 sd[d,h]^2), and the variant
// samples P directly,
//     P = x * mu + safe_sqrt((x .* x) * (sd .* sd)) .* eps,   eps ~ N(0, 1) per (row, column, draw),
// so the expected log density (a sum over rows of per-row expectations) is unchanged, the
// estimator's variance falls, and the product costs two matrix products whatever the number of
// draws. Unlike the reference code we add no 1e-6 to the variance: it would bias the estimator;
// safe_sqrt's derivative is 0 at 0 instead, which is exact there (the value does not depend on
// any sd[d,h] with x[n,d] != 0 when the variance is 0).
//
// Eligible: a MatMul whose left operand does not vary and depends on no parameter (data) and whose
// right operand is an Input of a sampled group used by nothing else in the factor.
#include "ir/ir.h"

namespace fvic::transform {

// The mean-field variant of factor `index` of `module` (forward nodes only).
ir::Factor meanfield_variant(const ir::Module& module, size_t index);

// Fills module.meanfield, one variant per factor.
void make_meanfield_variants(ir::Module& module);

}  // namespace fvic::transform
