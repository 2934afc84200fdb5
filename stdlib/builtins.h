#pragma once
// The one table of built-in functions and distributions. The checker reads it for signatures
// and shapes; the C++ emitter reads it for the names of the runtime's implementations.
#include <optional>
#include <string>
#include <vector>

namespace fvic::stdlib {

// What an argument position accepts.
enum class Arg {
  Reals,        // int, real, vector, row_vector, matrix or arrays of them (vectorised)
  Ints,         // int or array of int (vectorised)
  Int,          // a single int
  Real,         // a single real (an int is promoted)
  Vector,       // a vector
  VectorLike,   // a vector or row_vector
  Matrix,       // a matrix
  VectorOrMatrix,  // categorical_logit: one vector of logits, or one row of logits per outcome
  Any,          // any value (sizes, silo_sum)
};

// The support of a distribution's outcome, used to check a parameter's declared constraint.
enum class Support { Real, Positive, Unit, Bounded, Simplex, CholeskyCorr, CorrMatrix, CovMatrix, Int, NonNegativeInt, Binary, Category };

// A condition a parameter must meet; checked at compile time for constants, at run time else.
enum class Requires { Any, Positive, NonNegative, Unit, Finite };

struct DistParam {
  const char* name;
  Arg arg;
  Requires requires_;
};

struct Distribution {
  const char* name;
  bool discrete;  // *_lpmf rather than *_lpdf
  Arg outcome;
  Support support;
  std::vector<DistParam> params;
};

// How a function's result type and shape follow from its arguments.
enum class Rule {
  Elementwise,      // same container as the (broadcast) arguments, real-valued
  ElementwiseInt,   // like Elementwise but int stays int (abs)
  Reduce,           // a container to one scalar (sum of ints stays int)
  ReduceReal,       // a container to one real
  DotProduct,       // two vectors of equal length -> real
  RowsDotProduct,   // two matrices (or vectors) of equal shape -> vector of rows
  ColumnsDotProduct,  // -> row_vector of columns
  SameVector,       // vector -> vector of the same length (softmax)
  RepVector,        // (real, n) -> vector[n]
  RepRowVector,     // (real, n) -> row_vector[n]
  RepMatrix,        // (real, m, n) | (vector, n) | (row_vector, m) -> matrix
  RepArray,         // (int or real x, n) -> array[n], (x, m, n) -> array[m, n] of x's type
  ToVector,         // anything -> vector of all its elements
  ToRowVector,
  ToMatrix,         // (matrix|vector|row_vector|array[,] real) -> matrix of its shape; (v, int m, int n) column-major
  AppendRow,        // a above b: (vector|real, vector|real) -> vector, else (matrix|row_vector)^2 -> matrix
  AppendCol,        // a left of b: (row_vector|real, row_vector|real) -> row_vector, else (matrix|vector)^2 -> matrix
  Size,             // -> int
  Dims,             // (x) -> array[] int: x's dimensions, array dims first (Stan's dims)
  SiloSum,          // silo_sum(e): same type and shape as e
  ExpQuadCov,       // (array of reals or vectors x, real alpha, real rho) -> matrix[n, n]
  SquareMatrix,     // a square matrix -> a matrix of its shape (cholesky_decompose)
  DiagMatrix,       // vector[n] -> matrix[n, n]
  Diagonal,         // matrix[m, n] -> vector[min(m, n)]
  Conv2d,           // (matrix x, matrix w, vector b, int C, int H, int W, int k, int padding) -> matrix
  Pool2d,           // (matrix x, int C, int H, int W, int k) -> matrix (max_pool2d, avg_pool2d)
};

struct Function {
  const char* name;
  Rule rule;
  int min_args;
  int max_args;
  const char* usage = nullptr;  // how to call it, for messages; null: `name(x)`
};

// A density of a whole vector or matrix, one value per draw (multinomial_logit, dirichlet,
// multi_normal, multi_normal_cholesky, lkj_corr_cholesky), not one per element of its outcome.
bool joint_density(const std::string& name);
// ordered_logistic, ordered_probit: one density per outcome from eta and cutpoints shared by all.
bool ordinal_density(const std::string& name);

const Distribution* find_distribution(const std::string& name);
const Function* find_function(const std::string& name);
const std::vector<Distribution>& distributions();
const std::vector<Function>& functions();

// For a call spelled `normal_lpdf`, `bernoulli_logit_lpmf` or `normal_lupdf`: the distribution
// and whether the suffix matches its kind. Null if the name has no such suffix.
const Distribution* find_density_function(const std::string& name, bool* suffix_matches);

// Cumulative distribution functions, as Stan spells them: `normal_lcdf(y | mu, sigma)` (the log
// of P(Y <= y)), `normal_lccdf` (of P(Y > y)) and `normal_cdf` (P(Y <= y), a product over
// elements). Vectorised like the log densities: lcdf and lccdf sum over the elements.
enum class CdfKind { Lcdf, Lccdf, Cdf };

struct CdfFunction {
  const Distribution* distribution;
  CdfKind kind;
  // Arguments whose derivative the runtime does not have (student_t's nu): they must not read a
  // parameter. Indices into the distribution's params.
  std::vector<size_t> data_only;
};

// For a call spelled `normal_lcdf`, `student_t_lccdf` or `cauchy_cdf` of a distribution with a
// cumulative distribution function in the runtime: that function; else nullopt. `has_suffix`
// (if given) is set when the name ends in _lcdf, _lccdf or _cdf at all.
std::optional<CdfFunction> find_cdf_function(const std::string& name, bool* has_suffix = nullptr);

// The distributions with cumulative distribution functions, for messages.
std::vector<std::string> cdf_distributions();

// Stan's ODE solvers, whose first argument is the name of the system's function:
//   integrate_ode_rk45(f, y0, t0, ts, theta, x_r, x_i[, rtol, atol, max_num_steps]) with
//     f(real t, array[] real y, array[] real theta, array[] real x_r, array[] int x_i) -> array[] real,
//     giving array[size(ts), size(y0)] real;
//   ode_rk45(f, y0, t0, ts, ...) and ode_rk45_tol(f, y0, t0, ts, rtol, atol, max_num_steps, ...)
//     with f(real t, vector y, ...) -> vector, giving array[size(ts)] vector[size(y0)];
// and their _bdf, _adams (and ode_ckrk) namesakes, all solved by the same adaptive RK45
// (fvi/kernel/ode.h). The parser's Stan forms move the function's name into the call's `text`.
struct OdeSolver {
  const char* name;
  bool array_form;  // integrate_ode_*: arrays and (theta, x_r, x_i); else vectors and variadic
  int tolerances;   // 0: none; 3: rtol, atol, max_num_steps always; -3: optionally (integrate_ode_*)
};
const OdeSolver* find_ode_solver(const std::string& name);

const char* arg_description(Arg arg);  // "real or container of reals", ...

}  // namespace fvic::stdlib
