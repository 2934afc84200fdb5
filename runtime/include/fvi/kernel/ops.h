#pragma once
// The operations generated kernels are written in, on batched tensors (tensor.h). The compiler
// lowers a model to a sequence of these calls and differentiates it by emitting more of them:
// each forward operation has its adjoint expressed with the `*_grad`, `sum_to` and `scatter_*`
// helpers beside it. The IR interpreter calls the same functions, so interpreted and compiled
// kernels compute identical numbers.
//
// This header includes them all, one header a concern:
//   ops_elementwise.h     broadcasting, zip and map, the arithmetic operators
//   ops_unary.h           the unary functions (UnaryFn): values and derivatives
//   ops_linear_algebra.h  matrix products and their adjoints, transpose, reshape
//   ops_reductions.h      sums, broadcasts and sum_to, (log_)softmax
//   ops_indexing.h        slices of input groups, 1-based indexing and its scatters
//   ops_concat.h          append_row / append_col and their adjoints
//   ops_cholesky.h        Cholesky factors and their adjoint, squared distances (Gaussian
//                         processes), diagonal matrices, multi_normal_cholesky
//   ops_matrix_constrain.h  structured matrix parameters (cholesky_factor_corr): transform,
//                         log-Jacobian, adjoints
//   ops_conv.h            images: conv2d (im2col + a product per draw), max/avg pooling
#include "fvi/kernel/ops_elementwise.h"
#include "fvi/kernel/ops_unary.h"
#include "fvi/kernel/ops_linear_algebra.h"
#include "fvi/kernel/ops_reductions.h"
#include "fvi/kernel/ops_indexing.h"
#include "fvi/kernel/ops_concat.h"
#include "fvi/kernel/ops_cholesky.h"
#include "fvi/kernel/ops_matrix_constrain.h"
#include "fvi/kernel/ops_conv.h"
