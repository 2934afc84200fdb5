#include "frontend/stan_forms.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "builtins.h"
#include "frontend/functions.h"

namespace fvic {
namespace {

// A GLM density: its core distribution and how many arguments follow x, a and b.
struct Glm {
  const char* core;
  size_t extra;  // normal_id_glm's sigma
};
const std::map<std::string, Glm>& glms() {
  static const std::map<std::string, Glm> table = {
      {"bernoulli_logit_glm", {"bernoulli_logit", 0}},
      {"poisson_log_glm", {"poisson_log", 0}},
      {"normal_id_glm", {"normal", 1}},
  };
  return table;
}

ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, const Loc& loc) {
  auto e = std::make_unique<Expr>(ExprKind::Binary, loc);
  e->name = op;
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr int_literal(long long v, const Loc& loc) {
  auto e = std::make_unique<Expr>(ExprKind::IntLit, loc);
  e->int_value = v;
  e->text = std::to_string(v);
  return e;
}

ExprPtr real_literal(double v, const std::string& text, const Loc& loc) {
  auto e = std::make_unique<Expr>(ExprKind::RealLit, loc);
  e->real_value = v;
  e->text = text;
  return e;
}

ExprPtr call(const std::string& name, std::vector<ExprPtr> args, const Loc& loc) {
  auto e = std::make_unique<Expr>(ExprKind::Call, loc);
  e->name = name;
  e->args = std::move(args);
  return e;
}

ExprPtr call1(const std::string& name, ExprPtr a, const Loc& loc) {
  std::vector<ExprPtr> args;
  args.push_back(std::move(a));
  return call(name, std::move(args), loc);
}

// Stan's constants, called with no arguments: their values (the text keeps the call for messages).
std::optional<double> constant_function(const std::string& name) {
  static const std::map<std::string, double> table = {
      {"pi", 3.14159265358979323846},      {"e", 2.71828182845904523536},
      {"sqrt2", 1.41421356237309504880},   {"log2", 0.69314718055994530942},
      {"log10", 2.30258509299404568402},   {"positive_infinity", std::numeric_limits<double>::infinity()},
      {"negative_infinity", -std::numeric_limits<double>::infinity()},
      {"not_a_number", std::numeric_limits<double>::quiet_NaN()},
      {"machine_precision", std::numeric_limits<double>::epsilon()},
  };
  auto it = table.find(name);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

// a + log1p_exp(b - a): log(exp(a) + exp(b)) without overflow, a evaluated twice.
ExprPtr log_sum_exp2(ExprPtr a, ExprPtr b, const Loc& loc) {
  ExprPtr a_again = substitute(*a, {});
  return binary("+", std::move(a), call1("log1p_exp", binary("-", std::move(b), std::move(a_again), loc), loc), loc);
}

Index single_index(ExprPtr at, const Loc& loc) {
  Index ix;
  ix.kind = IndexKind::Single;
  ix.lower = std::move(at);
  ix.loc = loc;
  return ix;
}

// first .. first + count - 1
Index count_range(ExprPtr first, ExprPtr count, const Loc& loc) {
  Index ix;
  ix.kind = IndexKind::Range;
  ix.upper = binary("-", binary("+", substitute(*first, {}), std::move(count), loc), int_literal(1, loc), loc);
  ix.lower = std::move(first);
  ix.loc = loc;
  return ix;
}

ExprPtr indexed(ExprPtr base, std::vector<Index> indices, const Loc& loc) {
  auto e = std::make_unique<Expr>(ExprKind::Index, loc);
  e->args.push_back(std::move(base));
  e->indices = std::move(indices);
  return e;
}

// Stan's slicing functions as the indexing they are: head(v, n) is v[1:n], tail(v, n) is
// v[(num_elements(v) - n + 1):], segment(v, i, n) is v[i:(i + n - 1)], sub_col(m, i, j, n) is
// m[i:(i + n - 1), j], sub_row(m, i, j, n) is m[i, j:(j + n - 1)]. Null when `e` is none of them.
ExprPtr slice_form(Expr& e) {
  const Loc loc = e.loc;
  std::vector<Index> ix;
  if (e.name == "head" && e.args.size() == 2) {
    ix.push_back(count_range(int_literal(1, loc), std::move(e.args[1]), loc));
  } else if (e.name == "tail" && e.args.size() == 2) {
    auto size = std::make_unique<Expr>(ExprKind::Call, loc);
    size->name = "num_elements";
    size->args.push_back(substitute(*e.args[0], {}));
    Index from;
    from.kind = IndexKind::Range;
    from.lower = binary("+", binary("-", std::move(size), std::move(e.args[1]), loc), int_literal(1, loc), loc);
    from.loc = loc;
    ix.push_back(std::move(from));
  } else if (e.name == "segment" && e.args.size() == 3) {
    ix.push_back(count_range(std::move(e.args[1]), std::move(e.args[2]), loc));
  } else if (e.name == "sub_col" && e.args.size() == 4) {
    ix.push_back(count_range(std::move(e.args[1]), std::move(e.args[3]), loc));
    ix.push_back(single_index(std::move(e.args[2]), loc));
  } else if (e.name == "sub_row" && e.args.size() == 4) {
    ix.push_back(single_index(std::move(e.args[1]), loc));
    ix.push_back(count_range(std::move(e.args[2]), std::move(e.args[3]), loc));
  } else {
    return nullptr;
  }
  return indexed(std::move(e.args[0]), std::move(ix), loc);
}

ExprPtr transposed(ExprPtr a, const Loc& loc) {
  auto e = std::make_unique<Expr>(ExprKind::Transpose, loc);
  e->args.push_back(std::move(a));
  return e;
}

// Stan's matrix shorthands as the products and indexing they stand for (each exact; a diagonal
// product costs a dense one): diag_pre_multiply(v, m) = diag_matrix(v) * m, diag_post_multiply(m,
// v) = m * diag_matrix(v), quad_form_diag(m, v) = diag_matrix(v) * m * diag_matrix(v),
// quad_form(a, b) = b' * a * b, tcrossprod(m) = m * m', crossprod(m) = m' * m, trace(m) =
// sum(diagonal(m)), col(m, j) = m[:, j], row(m, i) = m[i], columns_dot_self(m) =
// columns_dot_product(m, m), rows_dot_self(m) = rows_dot_product(m, m), transpose(m) = m'. Null
// when `e` is none.
ExprPtr matrix_form(Expr& e) {
  const Loc loc = e.loc;
  auto again = [](const ExprPtr& a) { return substitute(*a, {}); };
  const size_t n = e.args.size();
  if (e.name == "diag_pre_multiply" && n == 2)
    return binary("*", call1("diag_matrix", std::move(e.args[0]), loc), std::move(e.args[1]), loc);
  if (e.name == "diag_post_multiply" && n == 2)
    return binary("*", std::move(e.args[0]), call1("diag_matrix", std::move(e.args[1]), loc), loc);
  if (e.name == "quad_form_diag" && n == 2) {
    ExprPtr v2 = again(e.args[1]);
    return binary("*", binary("*", call1("diag_matrix", std::move(e.args[1]), loc), std::move(e.args[0]), loc),
                  call1("diag_matrix", std::move(v2), loc), loc);
  }
  if (e.name == "quad_form" && n == 2) {
    ExprPtr b2 = again(e.args[1]);
    return binary("*", binary("*", transposed(std::move(e.args[1]), loc), std::move(e.args[0]), loc), std::move(b2), loc);
  }
  if (e.name == "tcrossprod" && n == 1) {
    ExprPtr m2 = again(e.args[0]);
    return binary("*", std::move(e.args[0]), transposed(std::move(m2), loc), loc);
  }
  if (e.name == "crossprod" && n == 1) {
    ExprPtr m2 = again(e.args[0]);
    return binary("*", transposed(std::move(e.args[0]), loc), std::move(m2), loc);
  }
  if (e.name == "trace" && n == 1) return call1("sum", call1("diagonal", std::move(e.args[0]), loc), loc);
  if (e.name == "transpose" && n == 1) return transposed(std::move(e.args[0]), loc);
  if ((e.name == "columns_dot_self" || e.name == "rows_dot_self") && n == 1) {
    std::vector<ExprPtr> args;
    args.push_back(again(e.args[0]));
    args.push_back(std::move(e.args[0]));
    return call(e.name == "columns_dot_self" ? "columns_dot_product" : "rows_dot_product", std::move(args), loc);
  }
  if (e.name == "col" && n == 2) {
    std::vector<Index> ix;
    Index all;
    all.kind = IndexKind::All;
    all.loc = loc;
    ix.push_back(std::move(all));
    ix.push_back(single_index(std::move(e.args[1]), loc));
    return indexed(std::move(e.args[0]), std::move(ix), loc);
  }
  if (e.name == "row" && n == 2) {
    std::vector<Index> ix;
    ix.push_back(single_index(std::move(e.args[1]), loc));
    return indexed(std::move(e.args[0]), std::move(ix), loc);
  }
  return nullptr;
}

// `name` without its density suffix, and the suffix ("" for a distribution name after `~`).
std::pair<std::string, std::string> split_suffix(const std::string& name) {
  for (const char* suffix : {"_lpdf", "_lpmf", "_lcdf", "_lccdf", "_cdf"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return {name.substr(0, name.size() - s.size()), s};
  }
  return {name, ""};
}

// The GLM's parameters (x, a, b[, sigma]) as the core distribution's ((a + x * b)[, sigma]).
bool rewrite_glm(const std::string& base, std::vector<ExprPtr>& params, std::string& core) {
  auto it = glms().find(base);
  if (it == glms().end() || params.size() != 3 + it->second.extra) return false;
  const Loc loc = params[0]->loc;
  ExprPtr predictor = binary("+", std::move(params[1]), binary("*", std::move(params[0]), std::move(params[2]), loc), loc);
  std::vector<ExprPtr> out;
  out.push_back(std::move(predictor));
  for (size_t i = 3; i < params.size(); ++i) out.push_back(std::move(params[i]));
  params = std::move(out);
  core = it->second.core;
  return true;
}

bool rewrite_std_normal(const std::string& base, std::vector<ExprPtr>& params, const Loc& loc, std::string& core) {
  if (base != "std_normal" || !params.empty()) return false;
  params.push_back(int_literal(0, loc));
  params.push_back(int_literal(1, loc));
  core = "normal";
  return true;
}

// categorical(theta) over a simplex theta is categorical_logit(log(theta)): softmax(log(theta)) =
// theta when theta sums to 1, which Stan requires of it.
// categorical(theta) and multinomial(theta) as their _logit forms of log(theta): softmax(log
// theta) = theta for theta on the simplex, which their supports require.
bool rewrite_categorical(const std::string& base, std::vector<ExprPtr>& params, const Loc& loc, std::string& core) {
  if ((base != "categorical" && base != "multinomial") || params.size() != 1) return false;
  params[0] = call1("log", std::move(params[0]), loc);
  core = base + "_logit";
  return true;
}

// One expression node, its children already rewritten.
void rewrite(ExprPtr& slot) {
  Expr& e = *slot;
  if (e.kind == ExprKind::CondCall) {
    auto [base, suffix] = split_suffix(e.name);
    if (suffix.empty()) return;
    std::vector<ExprPtr> params;
    for (size_t i = 1; i < e.args.size(); ++i) params.push_back(std::move(e.args[i]));
    std::string core;
    if (rewrite_glm(base, params, core) || rewrite_std_normal(base, params, e.loc, core) ||
        rewrite_categorical(base, params, e.loc, core)) {
      e.name = core + suffix;
      e.args.resize(1);
      for (ExprPtr& p : params) e.args.push_back(std::move(p));
    } else {
      for (size_t i = 0; i < params.size(); ++i) e.args[i + 1] = std::move(params[i]);
    }
    return;
  }
  if (e.kind == ExprKind::Call && e.args.size() == 1 &&
      (e.name == "std_normal_lpdf" || e.name == "std_normal_lcdf" || e.name == "std_normal_lccdf" ||
       e.name == "std_normal_cdf")) {  // no '|': no parameters
    e.kind = ExprKind::CondCall;
    e.name = "normal" + e.name.substr(e.name.rfind('_'));
    e.args.push_back(int_literal(0, e.loc));
    e.args.push_back(int_literal(1, e.loc));
    return;
  }
  if (e.kind != ExprKind::Call) return;
  if (stdlib::find_ode_solver(e.name) && e.text.empty() && !e.args.empty() && e.args[0]->kind == ExprKind::Var &&
      e.args[0]->indices.empty()) {
    // integrate_ode_rk45(f, ...): the system's name, which is no value, kept apart from the values.
    e.text = e.args[0]->name;
    e.args.erase(e.args.begin());
    return;
  }
  const Loc loc = e.loc;
  if (e.name == "log_sum_exp" && e.args.size() == 2) {
    slot = log_sum_exp2(std::move(e.args[0]), std::move(e.args[1]), loc);
    return;
  }
  if (e.args.empty()) {
    if (auto v = constant_function(e.name)) slot = real_literal(*v, e.name + "()", loc);
    return;
  }
  if (ExprPtr sliced = slice_form(e)) {
    slot = std::move(sliced);
    return;
  }
  if (ExprPtr product = matrix_form(e)) {
    slot = std::move(product);
    return;
  }
  if (e.name == "categorical_rng" && e.args.size() == 1) {  // as categorical(theta) above
    e.name = "categorical_logit_rng";
    e.args[0] = call1("log", std::move(e.args[0]), loc);
    return;
  }
  if (e.name == "log_mix" && e.args.size() == 3) {
    // log(theta exp(lp1) + (1 - theta) exp(lp2)) = log_sum_exp(log(theta) + lp1, log1m(theta) + lp2)
    ExprPtr theta = std::move(e.args[0]), lp1 = std::move(e.args[1]), lp2 = std::move(e.args[2]);
    ExprPtr theta_again = substitute(*theta, {});
    slot = log_sum_exp2(binary("+", call1("log", std::move(theta), loc), std::move(lp1), loc),
                        binary("+", call1("log1m", std::move(theta_again), loc), std::move(lp2), loc), loc);
    return;
  }
  if ((e.name == "log10" || e.name == "log2") && e.args.size() == 1) {  // log(x) / log(base)
    const double base = e.name == "log10" ? 10.0 : 2.0;
    slot = binary("*", call1("log", std::move(e.args[0]), loc), real_literal(1.0 / std::log(base), "1 / log(" + std::string(e.name == "log10" ? "10" : "2") + ")", loc), loc);
    return;
  }
}

// Every expression under `root`, children before parents, without recursion (expressions are as
// deep as the user writes them).
void rewrite_tree(ExprPtr& root) {
  if (!root) return;
  std::vector<ExprPtr*> order, todo{&root};
  while (!todo.empty()) {
    ExprPtr* p = todo.back();
    todo.pop_back();
    order.push_back(p);
    for (ExprPtr& a : (*p)->args)
      if (a) todo.push_back(&a);
    for (Index& ix : (*p)->indices)
      for (ExprPtr* part : {&ix.lower, &ix.upper})
        if (*part) todo.push_back(part);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) rewrite(**it);
}

void rewrite_statement(Stmt& root) {
  std::vector<Stmt*> todo{&root};
  while (!todo.empty()) {
    Stmt& s = *todo.back();
    todo.pop_back();
    rewrite_tree(s.lhs);
    for (ExprPtr& a : s.args) rewrite_tree(a);
    if (s.decl) rewrite_tree(s.decl->init);
    for (StmtPtr& b : s.body)
      if (b) todo.push_back(b.get());
    if (s.kind != StmtKind::Tilde) continue;
    std::string core;
    if (rewrite_glm(s.name, s.args, core) || rewrite_std_normal(s.name, s.args, s.name_loc, core) ||
        rewrite_categorical(s.name, s.args, s.name_loc, core))
      s.name = core;
  }
}

}  // namespace

void desugar_stan_forms(Program& program) {
  for (Block& b : program.blocks) {
    for (StmtPtr& s : b.stmts)
      if (s) rewrite_statement(*s);
    for (FunctionDef& f : b.functions)
      if (f.body) rewrite_statement(*f.body);
  }
}

}  // namespace fvic
