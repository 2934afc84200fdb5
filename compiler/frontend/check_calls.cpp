// The checker (checker_impl.h) on calls in expressions: the built-in functions (stdlib/builtins.h)
// and the type of each one's result, silo_sum and where it may stand, density functions
// (`normal_lpdf(y | ...)`); calls of user functions go on to check_functions.cpp.
#include "frontend/checker_impl.h"

#include "builtins.h"
#include "frontend/ownership.h"

namespace fvic {
namespace check_detail {

// ---- expressions: calls --------------------------------------------------------------------

void Checker::call(Expr& e) {
  if (const stdlib::OdeSolver* ode = stdlib::find_ode_solver(e.name)) return ode_call(e, *ode);
  if (auto user = functions_.find(e.name); user != functions_.end()) return user_call(e, *user->second);
  if (refused_call(e)) return;
  if (random_call(e)) return;
  const stdlib::Function* f = stdlib::find_function(e.name);
  if (!f) {
    bool suffix_ok = false;
    if (stdlib::find_density_function(e.name, &suffix_ok) || stdlib::find_cdf_function(e.name)) {
      // `normal_lpdf(y, mu, sigma)`: the outcome is separated by '|'.
      std::string fixed = e.name + "(" + (e.args.empty() ? "y" : to_source(*e.args[0])) + " |";
      for (size_t i = 1; i < e.args.size(); ++i) fixed += (i > 1 ? ", " : " ") + to_source(*e.args[i]);
      if (e.args.size() < 2) fixed += " ...";
      diags_.error(e.loc, "'" + e.name + "' separates its outcome from the parameters with '|'",
                   "write `" + fixed + ")`");
      return;
    }
    if (const stdlib::Distribution* d = stdlib::find_distribution(e.name)) {
      std::string help = "use it as `y ~ " + e.name + "(...)` or `target += " + e.name +
                         (d->discrete ? "_lpmf" : "_lpdf") + "(y | ...)`";
      if (e.name == "bernoulli_logit" || e.name == "binomial_logit")
        help += "; for the probabilities themselves use inv_logit(...)";
      else if (e.name == "categorical_logit")
        help += "; for the probabilities themselves use softmax(...)";
      diags_.error(e.loc, "'" + e.name + "' is a distribution, not a function", help);
      return;
    }
    std::vector<std::string> names;
    for (const auto& fn : stdlib::functions()) names.push_back(fn.name);
    std::string near = closest(e.name, names);
    diags_.error(e.loc, "unknown function '" + e.name + "'",
                 near.empty() ? "see the language reference for the functions available"
                              : "did you mean '" + near + "'?");
    return;
  }
  int n = static_cast<int>(e.args.size());
  if (n < f->min_args || n > f->max_args) {
    std::string count = f->min_args == f->max_args ? std::to_string(f->min_args)
                                                   : std::to_string(f->min_args) + " to " + std::to_string(f->max_args);
    diags_.error(e.loc, e.name + " takes " + count + (f->max_args == 1 ? " argument" : " arguments") +
                            ", got " + std::to_string(n),
                 std::string("write ") + (f->usage ? f->usage : e.name + "(x)"));
    return;
  }
  if (any_error(e)) {
    if (f->rule == stdlib::Rule::SiloSum) e.taint = silo_sum_taint(*e.args[0]);  // no follow-on flow errors
    return;
  }
  function_type(e, *f);
}

void Checker::bad_args(Expr& e, const std::string& expected) {
  std::string got;
  for (size_t i = 0; i < e.args.size(); ++i) got += (i ? ", " : "") + to_string(e.args[i]->type);
  diags_.error(e.loc, e.name + " cannot take (" + got + ")", e.name + " takes " + expected);
}

void Checker::function_type(Expr& e, const stdlib::Function& f) {
  using stdlib::Rule;
  const Expr& a = *e.args[0];
  switch (f.rule) {
    case Rule::Elementwise:
    case Rule::ElementwiseInt: {
      if (e.args.size() == 2) {
        const Expr& b = *e.args[1];
        if (!(a.type.is_scalar() && b.type.is_scalar()) && a.type != b.type && !a.type.is_scalar() &&
            !b.type.is_scalar())
          return bad_args(e, "two scalars, or containers of one type (or a scalar and a container)");
        const Expr& c = a.type.is_scalar() ? b : a;
        e.type = c.type;
        e.shape = c.shape;
        if (!a.type.is_scalar() && !b.type.is_scalar()) require_same_dims(a.shape, b.shape, e.loc, e.name);
      } else {
        e.type = a.type;
        e.shape = a.shape;
      }
      // Ints become reals (abs keeps them); containers keep their own type: log(vector) is a vector.
      if (e.type.base == Base::Int && f.rule != Rule::ElementwiseInt) e.type.base = Base::Real;
      return;
    }
    case Rule::Reduce:
    case Rule::ReduceReal:
      if (a.type.is_scalar() && f.rule == Rule::ReduceReal && e.name != "dot_self")
        return bad_args(e, "a container");
      e.type = scalar(f.rule == Rule::Reduce && a.type.base == Base::Int ? Base::Int : Base::Real);
      return;
    case Rule::DotProduct: {
      const Expr& b = *e.args[1];
      if (!matches(Arg::VectorLike, a.type) || !matches(Arg::VectorLike, b.type))
        return bad_args(e, "two vectors or row_vectors");
      require_equal(a.shape.dims[0], b.shape.dims[0], e.loc, "the arguments of dot_product");
      e.type = scalar(Base::Real);
      return;
    }
    case Rule::RowsDotProduct:
    case Rule::ColumnsDotProduct: {
      const Expr& b = *e.args[1];
      if (a.type != b.type || a.type.array_dims > 0 || a.type.base_dims() == 0)
        return bad_args(e, "two matrices (or vectors) of one shape");
      require_same_dims(a.shape, b.shape, e.loc, "the arguments of " + e.name);
      bool rows = f.rule == Rule::RowsDotProduct;
      e.type = scalar(rows ? Base::Vector : Base::RowVector);
      if (a.type.base == Base::Matrix) e.shape.dims = {a.shape.dims[rows ? 0 : 1]};
      else e.shape.dims = {a.type.base == Base::Vector ? (rows ? a.shape.dims[0] : SymSize::constant(1))
                                                       : (rows ? SymSize::constant(1) : a.shape.dims[0])};
      return;
    }
    case Rule::SameVector:
      if (!matches(Arg::Vector, a.type)) return bad_args(e, "a vector");
      e.type = a.type;
      e.shape = a.shape;
      return;
    case Rule::RepVector:
    case Rule::RepRowVector: {
      const Expr& n = *e.args[1];
      if (!a.type.is_scalar() || !n.type.is_int()) return bad_args(e, "(real value, int n)");
      e.type = scalar(f.rule == Rule::RepVector ? Base::Vector : Base::RowVector);
      e.shape.dims = {size_of(n)};
      return;
    }
    case Rule::RepMatrix: {
      if (e.args.size() == 3) {
        if (!a.type.is_scalar() || !e.args[1]->type.is_int() || !e.args[2]->type.is_int())
          return bad_args(e, "(real value, int m, int n), (vector v, int n) or (row_vector v, int m)");
        e.type = scalar(Base::Matrix);
        e.shape.dims = {size_of(*e.args[1]), size_of(*e.args[2])};
        return;
      }
      const Expr& n = *e.args[1];
      if (!matches(Arg::VectorLike, a.type) || !n.type.is_int())
        return bad_args(e, "(real value, int m, int n), (vector v, int n) or (row_vector v, int m)");
      e.type = scalar(Base::Matrix);
      if (a.type.base == Base::Vector) e.shape.dims = {a.shape.dims[0], size_of(n)};
      else e.shape.dims = {size_of(n), a.shape.dims[0]};
      return;
    }
    case Rule::RepArray: {
      bool sizes = true;
      for (size_t i = 1; i < e.args.size(); ++i) sizes = sizes && e.args[i]->type.is_int();
      if (!a.type.is_scalar() || !sizes) return bad_args(e, "(int or real value, int n) or (value, int m, int n)");
      e.type = scalar(a.type.base);
      e.type.array_dims = static_cast<int>(e.args.size()) - 1;
      e.shape.dims.clear();
      for (size_t i = 1; i < e.args.size(); ++i) e.shape.dims.push_back(size_of(*e.args[i]));
      return;
    }
    case Rule::ToVector:
    case Rule::ToRowVector:
      e.type = scalar(f.rule == Rule::ToVector ? Base::Vector : Base::RowVector);
      e.shape.dims = {a.shape.elements()};
      return;
    case Rule::ToMatrix: {
      // to_matrix(x): a matrix of x's shape (a vector is one column, a row_vector one row, row i of
      // a 2-D array row i); to_matrix(v, m, n): v's elements column by column into m x n.
      const bool one_d = (a.type.array_dims == 0 && (a.type.base == Base::Vector || a.type.base == Base::RowVector)) ||
                         (a.type.array_dims == 1 && a.type.base_dims() == 0);
      e.type = scalar(Base::Matrix);
      if (e.args.size() == 1) {
        if (a.type.array_dims == 0 && a.type.base == Base::Matrix) e.shape = a.shape;
        else if (a.type.array_dims == 0 && a.type.base == Base::Vector) e.shape.dims = {a.shape.dims[0], SymSize::constant(1)};
        else if (a.type.array_dims == 0 && a.type.base == Base::RowVector) e.shape.dims = {SymSize::constant(1), a.shape.dims[0]};
        else if (a.type.array_dims == 2 && a.type.base_dims() == 0) e.shape.dims = {a.shape.dims[0], a.shape.dims[1]};
        else return fail(e), bad_args(e, "a matrix, vector, row_vector or 2-D array, or (vector v, int m, int n)");
        return;
      }
      if (e.args.size() != 3 || !(one_d || (a.type.array_dims == 0 && a.type.base == Base::Matrix)) ||
          !e.args[1]->type.is_int() || !e.args[2]->type.is_int())
        return fail(e), bad_args(e, "a matrix, vector, row_vector or 2-D array, or (vector v, int m, int n)");
      e.shape.dims = {size_of(*e.args[1]), size_of(*e.args[2])};
      require_equal(a.shape.elements(), e.shape.dims[0] * e.shape.dims[1], e.loc, "the elements of to_matrix's value and m x n");
      return;
    }
    case Rule::AppendRow:
    case Rule::AppendCol:
      return append(e, f.rule == Rule::AppendRow);
    case Rule::Size:
      if (a.type.is_scalar()) return bad_args(e, "a container");
      e.type = scalar(Base::Int);
      return;
    case Rule::Dims:
      e.type = scalar(Base::Int);
      e.type.array_dims = 1;
      e.shape.dims = {SymSize::constant(a.type.rank())};
      return;
    case Rule::SiloSum:
      return silo_sum(e);
    case Rule::ExpQuadCov: {
      // The points: an array of reals (one dimension) or of vectors; alpha and rho reals.
      const bool points = a.type.array_dims == 1 && (a.type.base == Base::Real || a.type.base == Base::Int ||
                                                     a.type.base == Base::Vector);
      if (!points || !e.args[1]->type.is_scalar() || !e.args[2]->type.is_scalar())
        return bad_args(e, "(array[] real or array[] vector x, real alpha, real rho)");
      e.type = scalar(Base::Matrix);
      e.shape.dims = {a.shape.dims[0], a.shape.dims[0]};
      return;
    }
    case Rule::SquareMatrix:
      if (!matches(Arg::Matrix, a.type)) return bad_args(e, "a square matrix");
      if (e.name == "multiply_lower_tri_self_transpose") {
        // Stan reads only the lower triangle; fvic computes a * a', which is the same for a factor
        // that is lower triangular by its type or by cholesky_decompose.
        const Symbol* s = a.kind == ExprKind::Var ? lookup(a.name) : nullptr;
        const bool lower = (s && s->decl && (s->decl->type.structure == MatrixStructure::CholeskyCorr ||
                                             s->decl->type.structure == MatrixStructure::CholeskyCov)) ||
                           (a.kind == ExprKind::Call && a.name == "cholesky_decompose");
        if (!lower)
          diags_.error(a.loc, "multiply_lower_tri_self_transpose is supported for Cholesky factors only",
                       "pass a `cholesky_factor_corr` or `cholesky_factor_cov` value or `cholesky_decompose(...)`, or write "
                       "`tcrossprod(a)` "
                       "for a * a'");
      }
      require_equal(a.shape.dims[0], a.shape.dims[1], e.loc, "the rows and columns of " + e.name + "'s matrix");
      e.type = a.type;
      e.shape = a.shape;
      return;
    case Rule::DiagMatrix:
      if (!matches(Arg::Vector, a.type)) return bad_args(e, "a vector");
      e.type = scalar(Base::Matrix);
      e.shape.dims = {a.shape.dims[0], a.shape.dims[0]};
      return;
    case Rule::Diagonal:
      if (!matches(Arg::Matrix, a.type)) return bad_args(e, "a matrix");
      e.type = scalar(Base::Vector);
      // Square in every model that uses it (a covariance, a Cholesky factor): its rows.
      require_equal(a.shape.dims[0], a.shape.dims[1], e.loc, "the rows and columns of diagonal's matrix");
      e.shape.dims = {a.shape.dims[0]};
      return;
    case Rule::Conv2d:
    case Rule::Pool2d:
      return image_call(e, f.rule == Rule::Conv2d);
  }
}

// conv2d(x, w, b, C, H, W, k, padding), max_pool2d / avg_pool2d(x, C, H, W, k): images one per
// row, flattened as PyTorch's x.view(N, -1) (fvi/kernel/ops_conv.h). The geometry is integer
// constants (an architecture is fixed in the model's text), so the result's size is known.
void Checker::image_call(Expr& e, bool conv) {
  const size_t first_int = conv ? 3 : 1;
  const char* names[] = {"channels", "height", "width", conv ? "kernel" : "size", "padding"};
  std::vector<long long> g;
  for (size_t i = first_int; i < e.args.size(); ++i) {
    const Expr& a = *e.args[i];
    std::optional<long long> v = a.type.is_int() ? size_of(a).constant_value() : std::nullopt;
    if (!v) {
      diags_.error(a.loc, e.name + "'s " + names[i - first_int] + " must be an integer constant",
                   "an architecture is fixed in the model: write e.g. " +
                       std::string(conv ? "conv2d(x, w, b, 1, 28, 28, 5, 2)" : e.name + "(h, 6, 28, 28, 2)"));
      return fail(e);
    }
    g.push_back(*v);
  }
  const long long C = g[0], H = g[1], W = g[2], k = g[3], pad = conv ? g[4] : 0;
  const Expr& x = *e.args[0];
  if (!matches(Arg::Matrix, x.type))
    return fail(e), bad_args(e, conv ? "(matrix images, matrix weight, vector bias, int channels, int height, int width, "
                                       "int kernel, int padding)"
                                     : "(matrix images, int channels, int height, int width, int size)");
  auto refuse = [&](const std::string& what, const std::string& help) {
    diags_.error(e.loc, e.name + ": " + what, help);
    fail(e);
  };
  if (C < 1 || H < 1 || W < 1 || k < 1 || pad < 0 || C > (1 << 20) || H > (1 << 20) || W > (1 << 20) || k > (1 << 20) ||
      pad > (1 << 20) || k > H + 2 * pad ||
      k > W + 2 * pad)
    return refuse("a " + std::to_string(k) + "x" + std::to_string(k) + " window" +
                      (conv ? " with padding " + std::to_string(pad) : "") + " does not fit " + std::to_string(C) + "x" +
                      std::to_string(H) + "x" + std::to_string(W) + " images (channels x height x width)",
                  "channels, height, width and the window are at least 1 and the window fits the (padded) image");
  require_equal(x.shape.dims[1], SymSize::constant(C * H * W), e.loc,
                "the columns of " + e.name + "'s images and channels x height x width");
  e.type = scalar(Base::Matrix);
  if (!conv) {
    if (H % k != 0 || W % k != 0)
      return refuse(std::to_string(k) + "x" + std::to_string(k) + " windows do not tile " + std::to_string(H) + "x" +
                        std::to_string(W) + " images",
                    "choose a size that divides the height and the width (pooling here has stride = size, no padding)");
    e.shape.dims = {x.shape.dims[0], SymSize::constant(C * (H / k) * (W / k))};
    return;
  }
  const Expr &w = *e.args[1], &b = *e.args[2];
  if (!matches(Arg::Matrix, w.type) || !matches(Arg::Vector, b.type))
    return fail(e), bad_args(e, "(matrix images, matrix weight, vector bias, int channels, int height, int width, "
                                "int kernel, int padding)");
  require_equal(w.shape.dims[1], SymSize::constant(C * k * k), e.loc,
                "the columns of conv2d's weight and channels x kernel x kernel");
  require_equal(b.shape.dims[0], w.shape.dims[0], e.loc, "conv2d's bias and the rows of its weight (output channels)");
  const long long positions = (H + 2 * pad - k + 1) * (W + 2 * pad - k + 1);
  e.shape.dims = {x.shape.dims[0], w.shape.dims[0] * SymSize::constant(positions)};
}

// Stan's append_row / append_col. Along the join a vector (append_row) or row_vector (append_col)
// and reals give the same kind of vector; otherwise the operands are matrices or the other kind
// of vector, whose extent across the join must agree, and the result is a matrix.
void Checker::append(Expr& e, bool rows) {
  const Expr &a = *e.args[0], &b = *e.args[1];
  const Base along = rows ? Base::Vector : Base::RowVector, across = rows ? Base::RowVector : Base::Vector;
  auto is = [](const Expr& x, Base base) { return x.type.array_dims == 0 && x.type.base == base; };
  auto scalar_value = [](const Expr& x) { return x.type.is_scalar(); };
  const std::string expected = rows ? "(vector or real, vector or real) or (matrix or row_vector, matrix or row_vector)"
                                    : "(row_vector or real, row_vector or real) or (matrix or vector, matrix or vector)";
  if ((is(a, along) || scalar_value(a)) && (is(b, along) || scalar_value(b))) {
    if (scalar_value(a) && scalar_value(b)) return bad_args(e, expected);
    auto length = [&](const Expr& x) { return scalar_value(x) ? SymSize::constant(1) : x.shape.dims[0]; };
    e.type = scalar(along);
    e.shape.dims = {length(a) + length(b)};
    return;
  }
  if (!(is(a, Base::Matrix) || is(a, across)) || !(is(b, Base::Matrix) || is(b, across))) return bad_args(e, expected);
  // extent along the join and across it, as (rows, cols) of each operand
  auto dims = [](const Expr& x) -> std::pair<SymSize, SymSize> {
    if (x.type.base == Base::Matrix) return {x.shape.dims[0], x.shape.dims[1]};
    if (x.type.base == Base::RowVector) return {SymSize::constant(1), x.shape.dims[0]};
    return {x.shape.dims[0], SymSize::constant(1)};
  };
  const auto [ar, ac] = dims(a);
  const auto [br, bc] = dims(b);
  require_equal(rows ? ac : ar, rows ? bc : br, e.loc, std::string("the ") + (rows ? "columns" : "rows") + " of " + e.name + "'s arguments");
  e.type = scalar(Base::Matrix);
  e.shape.dims = rows ? std::vector<SymSize>{ar + br, ac} : std::vector<SymSize>{ar, ac + bc};
}

// The sum over silos is no longer any one silo's value.
Taint Checker::silo_sum_taint(const Expr& operand) {
  Taint t;
  if (operand.taint.has(K::PublicData))
    t.add(K::PublicData, operand.taint.witness[static_cast<size_t>(K::PublicData)]);
  t.add(K::SiloSum, "silo_sum(" + to_source(operand) + ")");
  return t;
}

void Checker::silo_sum(Expr& e) {
  const Expr& a = *e.args[0];
  // Also when the operand is rejected: the error is reported once, here, not again by the term
  // around it.
  e.taint = silo_sum_taint(a);
  if (block_ == BlockKind::TransformedData || block_ == BlockKind::TransformedParameters) {
    diags_.error(e.loc, std::string("silo_sum in '") + block_name(block_) + "'",
                 "a sum over the silos is sent to the server once, after the fit: compute it in `generated "
                 "quantities`, as `real total = silo_sum(...);`");
    return;
  }
  if (block_ == BlockKind::GeneratedQuantities) {
    if (&e != aggregate_root_) {
      diags_.error(e.loc, "silo_sum must be the whole value of a generated quantity",
                   "the server receives each silo's part and adds them up, nothing more: declare "
                   "`real total = silo_sum(" + to_source(a) + ");` and compute with it after the run");
      return;
    }
    if (!check_aggregate_operand(a, diags_)) return;
    e.type = a.type;
    e.shape = a.shape;
    return;
  }
  if (!check_silo_sum_operand(a, diags_)) return;
  e.type = a.type;
  e.shape = a.shape;
}

void Checker::density_call(Expr& e) {
  if (auto user = functions_.find(e.name); user != functions_.end()) return user_call(e, *user->second);
  if (refused_call(e)) return;
  bool suffix_ok = false;
  const stdlib::Distribution* dist = stdlib::find_density_function(e.name, &suffix_ok);
  bool cdf_suffix = false;
  if (!dist) {
    if (std::optional<stdlib::CdfFunction> cdf = stdlib::find_cdf_function(e.name, &cdf_suffix)) return cdf_call(e, *cdf);
    if (cdf_suffix) {
      std::string names;
      for (const std::string& d : stdlib::cdf_distributions()) names += (names.empty() ? "" : ", ") + d;
      diags_.error(e.loc, "'" + e.name + "' is not available: cumulative distribution functions (_lcdf, _lccdf, _cdf) "
                          "are supported for " + names,
                   "a truncated prior's normalising term with constant arguments does not change the "
                   "posterior and may be left out");
      return;
    }
    if (const stdlib::Distribution* d = stdlib::find_distribution(e.name)) {
      // `normal(y | mu, sigma)`: the density function is normal_lpdf.
      std::string density = e.name + (d->discrete ? "_lpmf" : "_lpdf");
      diags_.error(e.loc, "'" + e.name + "' is a distribution, not a function",
                   "its log density is " + density + ": write `target += " + density + "(" +
                       to_source(*e.args[0]) + " | " + args_source(e.args, 1) + ")`");
      return;
    }
    std::vector<std::string> names;
    for (const auto& d : stdlib::distributions())
      names.push_back(std::string(d.name) + (d.discrete ? "_lpmf" : "_lpdf"));
    std::string near = closest(e.name, names);
    diags_.error(e.loc, "unknown density function '" + e.name + "'",
                 near.empty() ? "write a distribution name with _lpdf (continuous) or _lpmf "
                                "(discrete), e.g. normal_lpdf"
                              : "did you mean '" + near + "'?");
    return;
  }
  if (!suffix_ok) {
    std::string base = e.name.substr(0, e.name.rfind('_'));
    diags_.error(e.loc, "'" + base + "' is " + (dist->discrete ? "discrete" : "continuous") + ": write " +
                            base + (dist->discrete ? "_lpmf" : "_lpdf"),
                 "_lpmf is for discrete outcomes, _lpdf for continuous ones");
    return;
  }
  if (any_error(e)) return;
  std::vector<const Expr*> args;
  for (size_t i = 1; i < e.args.size(); ++i) args.push_back(e.args[i].get());
  if (!check_distribution_call(*dist, *e.args[0], args, e.loc)) return;
  e.type = scalar(Base::Real);
}

// `normal_lcdf(y | mu, sigma)`, `student_t_lccdf(0 | nu, 0, s)`, `normal_cdf(y | ...)`: the
// distribution's arguments as for its density; an argument the runtime has no derivative in
// (student_t's nu) must not read a parameter.
void Checker::cdf_call(Expr& e, const stdlib::CdfFunction& cdf) {
  if (any_error(e)) return;
  const stdlib::Distribution& dist = *cdf.distribution;
  std::vector<const Expr*> args;
  for (size_t i = 1; i < e.args.size(); ++i) args.push_back(e.args[i].get());
  if (!check_distribution_call(dist, *e.args[0], args, e.loc)) return;
  for (size_t i : cdf.data_only) {
    const Expr& a = *args[i];
    if (!a.taint.reads_parameters()) continue;
    diags_.error(a.loc, "argument " + std::string(dist.params[i].name) + " of " + e.name +
                            " reads a parameter, and its derivative in " + dist.params[i].name + " is not available",
                 "pass data or a constant as " + std::string(dist.params[i].name));
    return;
  }
  e.type = scalar(Base::Real);
}

}  // namespace check_detail
}  // namespace fvic
