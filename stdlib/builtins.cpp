#include "builtins.h"

#include <utility>

namespace fvic::stdlib {

namespace {
using A = Arg;
using Q = Requires;
using S = Support;
}  // namespace

const std::vector<Distribution>& distributions() {
  static const std::vector<Distribution> table = {
      {"normal", false, A::Reals, S::Real, {{"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}}},
      {"student_t", false, A::Reals, S::Real,
       {{"nu", A::Reals, Q::Positive}, {"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}}},
      {"cauchy", false, A::Reals, S::Real, {{"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}}},
      {"double_exponential", false, A::Reals, S::Real,
       {{"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}}},
      {"logistic", false, A::Reals, S::Real, {{"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}}},
      {"lognormal", false, A::Reals, S::Positive, {{"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}}},
      {"exponential", false, A::Reals, S::Positive, {{"beta", A::Reals, Q::Positive}}},
      {"gamma", false, A::Reals, S::Positive, {{"alpha", A::Reals, Q::Positive}, {"beta", A::Reals, Q::Positive}}},
      {"inv_gamma", false, A::Reals, S::Positive, {{"alpha", A::Reals, Q::Positive}, {"beta", A::Reals, Q::Positive}}},
      {"weibull", false, A::Reals, S::Positive, {{"alpha", A::Reals, Q::Positive}, {"sigma", A::Reals, Q::Positive}}},
      {"beta", false, A::Reals, S::Unit, {{"alpha", A::Reals, Q::Positive}, {"beta", A::Reals, Q::Positive}}},
      {"uniform", false, A::Reals, S::Bounded, {{"alpha", A::Reals, Q::Finite}, {"beta", A::Reals, Q::Finite}}},
      {"bernoulli", true, A::Ints, S::Binary, {{"theta", A::Reals, Q::Unit}}},
      {"bernoulli_logit", true, A::Ints, S::Binary, {{"alpha", A::Reals, Q::Finite}}},
      {"binomial", true, A::Ints, S::NonNegativeInt, {{"N", A::Ints, Q::NonNegative}, {"theta", A::Reals, Q::Unit}}},
      {"binomial_logit", true, A::Ints, S::NonNegativeInt,
       {{"N", A::Ints, Q::NonNegative}, {"alpha", A::Reals, Q::Finite}}},
      {"poisson", true, A::Ints, S::NonNegativeInt, {{"lambda", A::Reals, Q::Positive}}},
      {"poisson_log", true, A::Ints, S::NonNegativeInt, {{"alpha", A::Reals, Q::Finite}}},
      {"neg_binomial_2", true, A::Ints, S::NonNegativeInt,
       {{"mu", A::Reals, Q::Positive}, {"phi", A::Reals, Q::Positive}}},
      {"neg_binomial_2_log", true, A::Ints, S::NonNegativeInt,
       {{"eta", A::Reals, Q::Finite}, {"phi", A::Reals, Q::Positive}}},
      {"neg_binomial", true, A::Ints, S::NonNegativeInt,
       {{"alpha", A::Reals, Q::Positive}, {"beta", A::Reals, Q::Positive}}},
      {"beta_binomial", true, A::Ints, S::NonNegativeInt,
       {{"N", A::Ints, Q::NonNegative}, {"alpha", A::Reals, Q::Positive}, {"beta", A::Reals, Q::Positive}}},
      {"beta_proportion", false, A::Reals, S::Unit, {{"mu", A::Reals, Q::Unit}, {"kappa", A::Reals, Q::Positive}}},
      {"gumbel", false, A::Reals, S::Real, {{"mu", A::Reals, Q::Finite}, {"beta", A::Reals, Q::Positive}}},
      {"frechet", false, A::Reals, S::Positive, {{"alpha", A::Reals, Q::Positive}, {"sigma", A::Reals, Q::Positive}}},
      {"pareto", false, A::Reals, S::Positive, {{"y_min", A::Reals, Q::Positive}, {"alpha", A::Reals, Q::Positive}}},
      {"pareto_type_2", false, A::Reals, S::Real,
       {{"mu", A::Reals, Q::Finite}, {"lambda", A::Reals, Q::Positive}, {"alpha", A::Reals, Q::Positive}}},
      {"rayleigh", false, A::Reals, S::Positive, {{"sigma", A::Reals, Q::Positive}}},
      {"chi_square", false, A::Reals, S::Positive, {{"nu", A::Reals, Q::Positive}}},
      {"inv_chi_square", false, A::Reals, S::Positive, {{"nu", A::Reals, Q::Positive}}},
      {"scaled_inv_chi_square", false, A::Reals, S::Positive,
       {{"nu", A::Reals, Q::Positive}, {"s", A::Reals, Q::Positive}}},
      {"skew_normal", false, A::Reals, S::Real,
       {{"xi", A::Reals, Q::Finite}, {"omega", A::Reals, Q::Positive}, {"alpha", A::Reals, Q::Finite}}},
      {"exp_mod_normal", false, A::Reals, S::Real,
       {{"mu", A::Reals, Q::Finite}, {"sigma", A::Reals, Q::Positive}, {"lambda", A::Reals, Q::Positive}}},
      {"von_mises", false, A::Reals, S::Real, {{"mu", A::Reals, Q::Finite}, {"kappa", A::Reals, Q::Positive}}},
      {"categorical_logit", true, A::Ints, S::Category, {{"beta", A::VectorOrMatrix, Q::Finite}}},
      {"multinomial_logit", true, A::Ints, S::NonNegativeInt, {{"gamma", A::Vector, Q::Finite}}},
      // Ordinal outcomes 1..K: eta per outcome (or one for all), c the K - 1 increasing cutpoints.
      {"ordered_logistic", true, A::Ints, S::Category, {{"eta", A::Reals, Q::Finite}, {"c", A::Vector, Q::Finite}}},
      {"ordered_probit", true, A::Ints, S::Category, {{"eta", A::Reals, Q::Finite}, {"c", A::Vector, Q::Finite}}},
      {"dirichlet", false, A::Vector, S::Simplex, {{"alpha", A::Vector, Q::Positive}}},
      {"multi_normal", false, A::Vector, S::Real, {{"mu", A::Vector, Q::Finite}, {"Sigma", A::Matrix, Q::Any}}},
      {"multi_normal_cholesky", false, A::Vector, S::Real, {{"mu", A::Vector, Q::Finite}, {"L", A::Matrix, Q::Any}}},
      // LKJ's density of a correlation matrix's Cholesky factor L (Lewandowski, Kurowicka and Joe 2009)
      {"lkj_corr_cholesky", false, A::Matrix, S::CholeskyCorr, {{"eta", A::Real, Q::Positive}}},
      {"lkj_corr", false, A::Matrix, S::CorrMatrix, {{"eta", A::Real, Q::Positive}}},
      {"wishart", false, A::Matrix, S::CovMatrix, {{"nu", A::Real, Q::Positive}, {"Sigma", A::Matrix, Q::Any}}},
      {"inv_wishart", false, A::Matrix, S::CovMatrix, {{"nu", A::Real, Q::Positive}, {"Sigma", A::Matrix, Q::Any}}},
      // A GP with the SE-ARD kernel observed with Gaussian noise, through inducing inputs Z (seed
      // 003; compiler/analysis/sparse_gp.h): x and Z one point per row, rho real or one per dimension.
      {"sparse_gp_normal", false, A::Vector, S::Real,
       {{"x", A::Any, Q::Finite},
        {"Z", A::Any, Q::Finite},
        {"alpha", A::Real, Q::Positive},
        {"rho", A::Reals, Q::Positive},
        {"sigma", A::Real, Q::Positive}}},
  };
  return table;
}

const std::vector<Function>& functions() {
  static const std::vector<Function> table = {
      // elementwise, real-valued
      {"exp", Rule::Elementwise, 1, 1}, {"log", Rule::Elementwise, 1, 1},
      {"log1p", Rule::Elementwise, 1, 1}, {"expm1", Rule::Elementwise, 1, 1},
      {"log1m", Rule::Elementwise, 1, 1}, {"inv_logit", Rule::Elementwise, 1, 1},
      {"logit", Rule::Elementwise, 1, 1}, {"log_inv_logit", Rule::Elementwise, 1, 1},
      {"log1m_inv_logit", Rule::Elementwise, 1, 1}, {"log1p_exp", Rule::Elementwise, 1, 1},
      {"tanh", Rule::Elementwise, 1, 1}, {"sin", Rule::Elementwise, 1, 1},
      {"cos", Rule::Elementwise, 1, 1}, {"sqrt", Rule::Elementwise, 1, 1},
      {"square", Rule::Elementwise, 1, 1}, {"inv", Rule::Elementwise, 1, 1},
      {"inv_sqrt", Rule::Elementwise, 1, 1}, {"relu", Rule::Elementwise, 1, 1},
      {"lgamma", Rule::Elementwise, 1, 1}, {"digamma", Rule::Elementwise, 1, 1},
      {"Phi", Rule::Elementwise, 1, 1}, {"erf", Rule::Elementwise, 1, 1},
      {"fabs", Rule::Elementwise, 1, 1}, {"abs", Rule::ElementwiseInt, 1, 1},
      {"asin", Rule::Elementwise, 1, 1}, {"acos", Rule::Elementwise, 1, 1},
      {"atan", Rule::Elementwise, 1, 1}, {"tan", Rule::Elementwise, 1, 1},
      {"sinh", Rule::Elementwise, 1, 1}, {"cosh", Rule::Elementwise, 1, 1},
      {"asinh", Rule::Elementwise, 1, 1}, {"acosh", Rule::Elementwise, 1, 1},
      {"atanh", Rule::Elementwise, 1, 1}, {"step", Rule::Elementwise, 1, 1},
      {"inv_cloglog", Rule::Elementwise, 1, 1}, {"log1m_exp", Rule::Elementwise, 1, 1},
      {"Phi_approx", Rule::Elementwise, 1, 1}, {"cbrt", Rule::Elementwise, 1, 1},
      {"exp2", Rule::Elementwise, 1, 1}, {"erfc", Rule::Elementwise, 1, 1},
      {"pow", Rule::Elementwise, 2, 2, "pow(x, y)"}, {"fmin", Rule::Elementwise, 2, 2, "fmin(x, y)"},
      {"fmax", Rule::Elementwise, 2, 2, "fmax(x, y)"}, {"lbeta", Rule::Elementwise, 2, 2, "lbeta(a, b)"},
      {"lchoose", Rule::Elementwise, 2, 2, "lchoose(n, k)"},
      // reductions
      {"sum", Rule::Reduce, 1, 1}, {"prod", Rule::Reduce, 1, 1},
      {"max", Rule::Reduce, 1, 1}, {"min", Rule::Reduce, 1, 1},
      {"mean", Rule::ReduceReal, 1, 1}, {"sd", Rule::ReduceReal, 1, 1},
      {"variance", Rule::ReduceReal, 1, 1}, {"log_sum_exp", Rule::ReduceReal, 1, 1},
      {"dot_self", Rule::ReduceReal, 1, 1},
      // linear algebra
      {"dot_product", Rule::DotProduct, 2, 2, "dot_product(a, b)"},
      {"rows_dot_product", Rule::RowsDotProduct, 2, 2, "rows_dot_product(a, b)"},
      {"columns_dot_product", Rule::ColumnsDotProduct, 2, 2, "columns_dot_product(a, b)"},
      {"softmax", Rule::SameVector, 1, 1}, {"log_softmax", Rule::SameVector, 1, 1},
      {"cumulative_sum", Rule::SameVector, 1, 1},
      // constructors
      {"rep_vector", Rule::RepVector, 2, 2, "rep_vector(value, n)"}, {"rep_row_vector", Rule::RepRowVector, 2, 2, "rep_row_vector(value, n)"},
      {"rep_array", Rule::RepArray, 2, 3, "rep_array(value, n) or rep_array(value, m, n), value an int or a real"},
      {"rep_matrix", Rule::RepMatrix, 2, 3, "rep_matrix(value, m, n), rep_matrix(vector, n) or rep_matrix(row_vector, m)"}, {"to_vector", Rule::ToVector, 1, 1},
      {"to_row_vector", Rule::ToRowVector, 1, 1},
      {"to_matrix", Rule::ToMatrix, 1, 3, "to_matrix(x) of a matrix, vector, row_vector or 2-D array, or to_matrix(v, m, n)"},
      {"append_row", Rule::AppendRow, 2, 2, "append_row(a, b): a above b"},
      {"append_col", Rule::AppendCol, 2, 2, "append_col(a, b): a left of b"},
      // dense matrices and Gaussian processes
      {"cholesky_decompose", Rule::SquareMatrix, 1, 1, "cholesky_decompose(symmetric positive-definite matrix)"},
      {"inverse", Rule::SquareMatrix, 1, 1, "inverse(square matrix)"},
      {"inverse_spd", Rule::SquareMatrix, 1, 1, "inverse_spd(symmetric positive-definite matrix)"},
      {"multiply_lower_tri_self_transpose", Rule::SquareMatrix, 1, 1,
       "multiply_lower_tri_self_transpose(L), L a Cholesky factor"},
      {"diag_matrix", Rule::DiagMatrix, 1, 1, "diag_matrix(vector)"},
      {"diagonal", Rule::Diagonal, 1, 1, "diagonal(matrix)"},
      {"conv2d", Rule::Conv2d, 8, 8, "conv2d(images, weight, bias, channels, height, width, kernel, padding)"},
      {"max_pool2d", Rule::Pool2d, 5, 5, "max_pool2d(images, channels, height, width, size)"},
      {"avg_pool2d", Rule::Pool2d, 5, 5, "avg_pool2d(images, channels, height, width, size)"},
      {"gp_exp_quad_cov", Rule::ExpQuadCov, 3, 3, "gp_exp_quad_cov(array of points x, real alpha, real rho)"},
      {"cov_exp_quad", Rule::ExpQuadCov, 3, 3, "cov_exp_quad(array of points x, real alpha, real rho)"},
      // sizes
      {"num_elements", Rule::Size, 1, 1}, {"rows", Rule::Size, 1, 1},
      {"cols", Rule::Size, 1, 1}, {"size", Rule::Size, 1, 1}, {"dims", Rule::Dims, 1, 1},
      // federation
      {"silo_sum", Rule::SiloSum, 1, 1, "silo_sum(per-silo expression)"},
  };
  return table;
}

bool joint_density(const std::string& name) {
  return name == "multinomial_logit" || name == "dirichlet" || name == "multi_normal" ||
         name == "multi_normal_cholesky" || name == "lkj_corr_cholesky" || name == "lkj_corr" || name == "wishart" ||
         name == "inv_wishart";
}

bool ordinal_density(const std::string& name) { return name == "ordered_logistic" || name == "ordered_probit"; }

const Distribution* find_distribution(const std::string& name) {
  for (const Distribution& d : distributions())
    if (name == d.name) return &d;
  return nullptr;
}

const Function* find_function(const std::string& name) {
  for (const Function& f : functions())
    if (name == f.name) return &f;
  return nullptr;
}

const Distribution* find_density_function(const std::string& name, bool* suffix_matches) {
  for (const char* suffix : {"_lpdf", "_lpmf", "_lupdf", "_lupmf"}) {
    std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const Distribution* d = find_distribution(name.substr(0, name.size() - s.size()));
      if (d && suffix_matches) *suffix_matches = d->discrete == (s.find("mf") != std::string::npos);
      return d;
    }
  }
  return nullptr;
}

namespace {

// The distributions whose CDFs fvi/kernel/cdfs.h computes, with the arguments that must be data.
struct CdfEntry {
  const char* distribution;
  std::vector<size_t> data_only;
};
const std::vector<CdfEntry>& cdf_table() {
  static const std::vector<CdfEntry> table = {
      {"normal", {}},   {"student_t", {0}}, {"cauchy", {}},      {"logistic", {}},
      {"double_exponential", {}}, {"lognormal", {}}, {"exponential", {}},
      {"weibull", {}},  {"frechet", {}},    {"rayleigh", {}},    {"pareto", {}},
      {"pareto_type_2", {}},      {"gumbel", {}},
  };
  return table;
}

}  // namespace

std::optional<CdfFunction> find_cdf_function(const std::string& name, bool* has_suffix) {
  if (has_suffix) *has_suffix = false;
  for (auto [suffix, kind] : {std::pair{"_lcdf", CdfKind::Lcdf}, std::pair{"_lccdf", CdfKind::Lccdf},
                              std::pair{"_cdf", CdfKind::Cdf}}) {
    const std::string s = suffix;
    if (name.size() <= s.size() || name.compare(name.size() - s.size(), s.size(), s) != 0) continue;
    // "_cdf" also ends "_lcdf" and "_lccdf": the longer suffixes are tried first.
    if (has_suffix) *has_suffix = true;
    const std::string base = name.substr(0, name.size() - s.size());
    for (const CdfEntry& e : cdf_table())
      if (base == e.distribution) return CdfFunction{find_distribution(base), kind, e.data_only};
    return std::nullopt;
  }
  return std::nullopt;
}

std::vector<std::string> cdf_distributions() {
  std::vector<std::string> names;
  for (const CdfEntry& e : cdf_table()) names.push_back(e.distribution);
  return names;
}

const char* arg_description(Arg arg) {
  switch (arg) {
    case A::Reals: return "a real or a container of reals";
    case A::Ints: return "an int or an array of ints";
    case A::Int: return "an int";
    case A::Real: return "a real";
    case A::Vector: return "a vector";
    case A::VectorLike: return "a vector or row_vector";
    case A::Matrix: return "a matrix";
    case A::VectorOrMatrix: return "a vector or a matrix";
    case A::Any: return "a value";
  }
  return "?";
}

const OdeSolver* find_ode_solver(const std::string& name) {
  static const OdeSolver table[] = {
      {"integrate_ode_rk45", true, -3}, {"integrate_ode_bdf", true, -3}, {"integrate_ode_adams", true, -3},
      {"ode_rk45", false, 0},           {"ode_bdf", false, 0},           {"ode_adams", false, 0},
      {"ode_ckrk", false, 0},           {"ode_rk45_tol", false, 3},      {"ode_bdf_tol", false, 3},
      {"ode_adams_tol", false, 3},      {"ode_ckrk_tol", false, 3},
  };
  for (const OdeSolver& s : table)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace fvic::stdlib
