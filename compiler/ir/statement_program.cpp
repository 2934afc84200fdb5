#include "ir/statement_program.h"

#include <map>
#include <set>
#include <stdexcept>

#include "builtins.h"
#include "fvi/kernel/ode.h"
#include "fvi/kernel/ops_unary.h"
#include "fvi/kernel/random.h"

namespace fvic::ir {

namespace {

using fvi::kernel::Instruction;
using fvi::kernel::Opcode;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How a value of type t lies in a tensor (ir/lower.cpp's dims_of, and arrays of vectors as rows):
// the indices that pick its elements.
enum class Layout { Scalar, Column, Row, Matrix, ArrayOfColumns, ArrayOfRows, Unsupported };

Layout layout_of(const Type& t) {
  if (t.array_dims == 0) {
    switch (t.base) {
      case Base::Int:
      case Base::Real: return Layout::Scalar;
      case Base::Vector: return Layout::Column;
      case Base::RowVector: return Layout::Row;
      case Base::Matrix: return Layout::Matrix;
      default: return Layout::Unsupported;
    }
  }
  if (t.array_dims == 1 && t.base_dims() == 0) return Layout::Column;
  if (t.array_dims == 2 && t.base_dims() == 0) return Layout::ArrayOfColumns;  // M x N, row i is element i
  if (t.array_dims == 1 && t.base == Base::Vector) return Layout::ArrayOfColumns;
  if (t.array_dims == 1 && t.base == Base::RowVector) return Layout::ArrayOfRows;
  return Layout::Unsupported;
}

class Translator {
 public:
  Translator(const SemanticModel& m, StatementProgram& out, Diagnostics& diags)
      : m_(m), out_(out), p_(out.code), diags_(diags) {}

  bool ok() const { return ok_; }

  void statements(const std::vector<const Stmt*>& stmts) {
    find_varying_ints(stmts);
    scopes_.emplace_back();
    for (const Stmt* s : stmts) statement(*s);
  }

  void finish(bool log_density, const std::vector<std::string>& outputs) {
    p_.log_density = log_density;
    for (const std::string& name : outputs) {
      const Variable* v = lookup(name);
      if (!v) {
        fail(Loc{}, "'" + name + "' is not declared in the statements that build it");
        continue;
      }
      emit({Opcode::Output, -1, v->reg, -1, -1, static_cast<int64_t>(out_.outputs.size())});
      out_.outputs.push_back(name);
    }
    p_.outputs = static_cast<int32_t>(out_.outputs.size());
  }

 private:
  struct Variable {
    int reg;
    Type type;
  };

  int reg() { return p_.registers++; }

  // ---- ints the same in every draw -----------------------------------------------------------
  // Ints of the data, loop variables and their arithmetic are computed as ints (indices, bounds,
  // tests); an int that an `_rng` draw gives (`z[i] = bernoulli_rng(p);`), or that is computed
  // from one, differs between draws and is computed as a real holding whole numbers.

  static bool calls_rng(const Expr& e) {
    if (e.inlined) return calls_rng(*e.inlined);
    if (e.kind == ExprKind::Call && ends_with(e.name, "_rng")) return true;
    for (const ExprPtr& a : e.args)
      if (a && calls_rng(*a)) return true;
    for (const Index& ix : e.indices)
      if ((ix.lower && calls_rng(*ix.lower)) || (ix.upper && calls_rng(*ix.upper))) return true;
    return false;
  }
  bool reads_varying(const Expr& e) const {
    if (e.inlined) return reads_varying(*e.inlined);
    if (e.kind == ExprKind::Var && varying_.count(e.name)) return true;
    if (e.kind == ExprKind::Call && ends_with(e.name, "_rng")) return true;
    for (const ExprPtr& a : e.args)
      if (a && reads_varying(*a)) return true;
    return false;
  }
  // The int variables assigned a value that reads a draw or another such variable, to a fixed
  // point (each pass adds a name or stops).
  void find_varying_ints(const std::vector<const Stmt*>& stmts) {
    std::vector<std::pair<std::string, const Expr*>> assignments;
    std::vector<const Stmt*> todo(stmts.begin(), stmts.end());
    while (!todo.empty()) {
      const Stmt* s = todo.back();
      todo.pop_back();
      if (!s) continue;
      for (const StmtPtr& b : s->body) todo.push_back(b.get());
      if (s->kind == StmtKind::Decl && s->decl->init && s->decl->type.base == Base::Int)
        assignments.push_back({s->decl->name, s->decl->init.get()});
      if (s->kind == StmtKind::Assign && s->lhs->type.is_int_valued()) {
        const Expr* target = s->lhs.get();
        for (int hops = 0; target->kind == ExprKind::Index && hops < 8; ++hops) target = target->args[0].get();
        if (target->kind == ExprKind::Var) assignments.push_back({target->name, s->args[0].get()});
      }
    }
    for (size_t pass = 0; pass <= assignments.size(); ++pass) {
      bool grew = false;
      for (const auto& [name, value] : assignments)
        if (!varying_.count(name) && reads_varying(*value)) grew = varying_.insert(name).second || grew;
      if (!grew) break;
    }
  }
  // An int expression the same in every draw.
  bool fixed_int(const Expr& e) const { return e.type.is_int() && !reads_varying(e); }
  size_t emit(Instruction in) {
    if (in.line == 0) in.line = line_;
    p_.code.push_back(std::move(in));
    return p_.code.size() - 1;
  }
  void fail(const Loc& loc, const std::string& what, const std::string& help = "") {
    if (ok_)
      diags_.error(loc, what + " is not supported in statements run one at a time yet",
                   help.empty() ? "write it with the functions and densities the vectorised forms support" : help);
    ok_ = false;
  }

  const Variable* lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  // The register of a variable of the model the program reads: operand k, loaded before it runs.
  int operand(const std::string& name) {
    auto it = operands_.find(name);
    if (it != operands_.end()) return it->second;
    int r = reg();
    operands_[name] = r;
    out_.operands.push_back(name);
    p_.operand_registers.push_back(r);
    return r;
  }

  int int_const(int64_t v) {
    int r = reg();
    emit({Opcode::IntConst, r, -1, -1, -1, v});
    return r;
  }

  // ---- expressions ------------------------------------------------------------------------

  // e's value in a new or existing register: an int for int expressions, else a real.
  int expr(const Expr& e) {
    if (e.inlined) return expr(*e.inlined);
    line_ = e.loc.line;
    switch (e.kind) {
      case ExprKind::IntLit: return int_const(e.int_value);
      case ExprKind::RealLit: {
        int r = reg();
        Instruction in{Opcode::RealConst, r};
        in.value = e.real_value;
        emit(in);
        return r;
      }
      case ExprKind::Var: {
        if (const Variable* v = lookup(e.name)) return v->reg;
        const Symbol* s = m_.find(e.name);
        if (!s) {
          fail(e.loc, "the variable '" + e.name + "'");
          return int_const(0);
        }
        int r = operand(e.name);
        if (e.type.is_int() && (s->kind == SymbolKind::Data || s->block == BlockKind::TransformedData)) {
          // an int of the data: its value, the same in every draw
          int i = reg();
          emit({Opcode::ToInt, i, r});
          return i;
        }
        return r;
      }
      case ExprKind::Unary: {
        int a = expr(*e.args[0]);
        if (e.name == "+") return a;
        int r = reg();
        if (e.name == "!") emit({Opcode::IntNot, r, a});
        else if (fixed_int(e)) emit(op(Opcode::IntOp, r, int_const(0), a, "-"));
        else emit(op(Opcode::Arith, r, a, a, "neg"));
        return r;
      }
      case ExprKind::Binary: return binary(e);
      case ExprKind::Cond: {
        const int result = reg();
        const int test = expr(*e.args[0]);
        const size_t to_else = emit({Opcode::JumpIfFalse, -1, test});
        emit({Opcode::Move, result, expr(*e.args[1])});
        const size_t to_end = emit({Opcode::Jump});
        p_.code[to_else].number = static_cast<int64_t>(p_.code.size());
        emit({Opcode::Move, result, expr(*e.args[2])});
        p_.code[to_end].number = static_cast<int64_t>(p_.code.size());
        return result;
      }
      case ExprKind::Call: return call(e);
      case ExprKind::CondCall: return density_call(e);
      case ExprKind::Index: return indexed(e);
      case ExprKind::Transpose: {
        int r = reg();
        Instruction in{Opcode::Call, r};
        in.name = "transpose";
        in.args = {expr(*e.args[0])};
        emit(in);
        return r;
      }
      case ExprKind::ArrayLit:
      case ExprKind::RowVectorLit: {
        if (!e.type.is_error() && e.type.array_dims + e.type.base_dims() > 1) {
          fail(e.loc, "a literal of containers");
          return int_const(0);
        }
        int r = reg();
        Instruction in{Opcode::Build, r};
        in.number = e.kind == ExprKind::RowVectorLit ? 1 : 0;
        for (const ExprPtr& a : e.args) in.args.push_back(expr(*a));
        emit(in);
        return r;
      }
    }
    fail(e.loc, "this expression");
    return int_const(0);
  }

  static Instruction op(Opcode code, int dst, int a, int b, const std::string& name) {
    Instruction in{code, dst, a, b};
    in.name = name;
    return in;
  }

  int binary(const Expr& e) {
    const std::string& o = e.name;
    const Expr &x = *e.args[0], &y = *e.args[1];
    const int a = expr(x), b = expr(y);
    const int r = reg();
    const bool ints = fixed_int(x) && fixed_int(y);
    const bool comparison = o == "==" || o == "!=" || o == "<" || o == "<=" || o == ">" || o == ">=" || o == "&&" || o == "||";
    if (ints && (comparison || o == "+" || o == "-" || o == "*" || o == "/" || o == "%/%" || o == "%")) {
      emit(op(Opcode::IntOp, r, a, b, o == "%/%" ? "/" : o));
      return r;
    }
    if (comparison) {
      emit(op(Opcode::Compare, r, a, b, o));
      return r;
    }
    std::string name = o == ".*" ? "*" : o == "./" ? "/" : o == ".^" ? "^" : o;
    if (o == "*" && !x.type.is_scalar() && !y.type.is_scalar()) name = "matmul";
    if (name != "+" && name != "-" && name != "*" && name != "/" && name != "^" && name != "matmul") {
      fail(e.loc, "the operator '" + o + "'");
      return r;
    }
    emit(op(Opcode::Arith, r, a, b, name));
    return r;
  }

  // A user function whose body is statements (the checker does not inline it): its body in
  // line, the arguments' values copied into its own registers, each `return` a move into the
  // result and a jump past the body. Calls cannot recurse (a function calls only those above it).
  const FunctionDef* statement_function(const std::string& name) const {
    const Block* functions = m_.program ? m_.program->find(BlockKind::Functions) : nullptr;
    if (!functions) return nullptr;
    for (const FunctionDef& f : functions->functions)
      if (f.name == name) return &f;
    return nullptr;
  }

  int call_function(const Expr& e, const FunctionDef& f) {
    std::vector<int> values;
    for (const ExprPtr& a : e.args) values.push_back(expr(*a));
    return call_with(f, values, e.loc);
  }

  // f's body in line on the values in registers `values`; its result's register.
  int call_with(const FunctionDef& f, const std::vector<int>& values, const Loc& loc) {
    if (calls_.size() >= 32) {
      fail(loc, "calls of functions nested more than 32 deep");
      return int_const(0);
    }
    const int result = reg();
    std::vector<std::map<std::string, Variable>> outer;
    outer.swap(scopes_);  // the body sees its arguments and its own locals only
    scopes_.emplace_back();
    for (size_t i = 0; i < f.args.size() && i < values.size(); ++i) {
      const int r = reg();
      emit({Opcode::Move, r, values[i]});
      scopes_.back()[f.args[i].name] = Variable{r, f.args[i].type};
    }
    calls_.push_back({result, {}});
    statement(*f.body);
    for (size_t jump : calls_.back().returns) p_.code[jump].number = static_cast<int64_t>(p_.code.size());
    calls_.pop_back();
    scopes_.swap(outer);
    if (p_.code.size() > kMaxInstructions) fail(loc, "a program of more than 10^6 instructions (its calls in line)");
    return result;
  }

  // ---- ODE solves -------------------------------------------------------------------------
  // integrate_ode_rk45(f, y0, t0, ts, ...) and its kin: Dormand-Prince RK5(4) steps in bytecode,
  // so the tape differentiates the discrete solution; each step's size comes from the machine's
  // ode_* controls (fvi/kernel/ode.h), constants the same in every draw. The system's body is in
  // line at each of the 7 stages; the result is size(ts) x size(y0), row n the state at ts[n].

  int real_const(double v) {
    const int r = reg();
    Instruction in{Opcode::RealConst, r};
    in.value = v;
    emit(in);
    return r;
  }
  int arith(int a, int b, const char* name) {
    const int r = reg();
    emit(op(Opcode::Arith, r, a, b, name));
    return r;
  }
  int machine_call(const char* name, const std::vector<int>& args) {
    const int r = reg();
    Instruction in{Opcode::Call, r};
    in.name = name;
    in.args.assign(args.begin(), args.end());
    emit(in);
    return r;
  }
  int element(int container, int i) {  // container[i] of a column
    Instruction in{Opcode::Index, reg(), container, i, int_const(1)};
    emit(in);
    return in.dst;
  }

  int ode_solve(const Expr& e, const stdlib::OdeSolver& solver) {
    namespace ode = fvi::kernel::ode;
    const FunctionDef* f = statement_function(e.text);
    if (!f) {
      fail(e.loc, "the ODE system '" + e.text + "'");
      return int_const(0);
    }
    std::vector<int> a;
    for (const ExprPtr& x : e.args) a.push_back(expr(*x));
    line_ = e.loc.line;
    const int y0 = a.at(0), t0 = a.at(1), ts = a.at(2);
    const bool tolerances = solver.tolerances == 3 || (solver.tolerances == -3 && a.size() == 9);
    const size_t at = solver.array_form ? 6 : 3;
    const int rtol = tolerances ? a.at(at) : real_const(ode::kDefaultRelativeTolerance);
    const int atol = tolerances ? a.at(at + 1) : real_const(ode::kDefaultAbsoluteTolerance);
    const int max_steps = tolerances ? a.at(at + 2) : real_const(double(ode::kDefaultMaxSteps));
    std::vector<int> passed;  // what the system gets after t and y
    if (solver.array_form) passed = {a.at(3), a.at(4), a.at(5)};
    else
      passed.assign(a.begin() + static_cast<long>(tolerances ? 6 : 3), a.end());
    auto system = [&](int t, int y) {
      std::vector<int> values{t, y};
      values.insert(values.end(), passed.begin(), passed.end());
      const int r = call_with(*f, values, e.loc);
      line_ = e.loc.line;  // the solve's own instructions are the call's line
      return r;
    };
    auto int_op = [&](int x, int y, const char* o) {
      const int r = reg();
      emit(op(Opcode::IntOp, r, x, y, o));
      return r;
    };
    const int n_out = machine_call("size", {ts}), n_state = machine_call("size", {y0});
    const int result = reg();
    emit({Opcode::Declare, result, n_out, n_state});
    machine_call("ode_times", {t0, ts});
    const int t = reg(), y = reg(), h = reg(), k1 = reg(), steps = reg(), n = reg(), one = int_const(1);
    emit({Opcode::Move, t, t0});
    emit({Opcode::Move, y, y0});
    emit({Opcode::Move, k1, system(t, y)});
    const int span = arith(element(ts, n_out), t0, "-");
    emit({Opcode::Move, h, machine_call("ode_first_step", {y, k1, span, rtol, atol})});
    emit({Opcode::IntConst, n, -1, -1, -1, 1});
    // for n in 1..size(ts): step to ts[n], then store the state
    const size_t outer = p_.code.size();
    const size_t outer_exit = emit({Opcode::JumpIfFalse, -1, int_op(n, n_out, "<=")});
    const int t_out = element(ts, n);
    emit({Opcode::IntConst, steps, -1, -1, -1, 0});  // max_num_steps bounds each interval, as Stan's
    const size_t inner = p_.code.size();
    const size_t inner_exit = emit({Opcode::JumpIfFalse, -1, [&] {
                                      const int r = reg();
                                      emit(op(Opcode::Compare, r, t, t_out, "<"));
                                      return r;
                                    }()});
    const int step = machine_call("ode_step", {h, t, t_out, steps, max_steps});
    emit(op(Opcode::IntOp, steps, steps, one, "+"));
    std::vector<int> k{k1};
    int y_new = -1;
    for (int i = 1; i < ode::kStages; ++i) {
      int state = y;
      for (int j = 0; j < i; ++j) {
        if (ode::kA[i][j] == 0) continue;
        const int weight = arith(step, real_const(ode::kA[i][j]), "*");
        state = arith(state, arith(weight, k[static_cast<size_t>(j)], "*"), "+");
      }
      const int stage_time = arith(t, arith(step, real_const(ode::kC[i]), "*"), "+");
      if (i == ode::kStages - 1) y_new = state;
      k.push_back(system(stage_time, state));
    }
    int error = -1;  // h sum_i e_i k_i
    for (int i = 0; i < ode::kStages; ++i) {
      if (ode::kE[i] == 0) continue;
      const int term = arith(arith(step, real_const(ode::kE[i]), "*"), k[static_cast<size_t>(i)], "*");
      error = error < 0 ? term : arith(error, term, "+");
    }
    const int scaled = machine_call("ode_error", {error, y, y_new, rtol, atol});
    const int accepted = reg();
    emit(op(Opcode::Compare, accepted, scaled, real_const(1), "<="));
    emit({Opcode::Move, h, machine_call("ode_next_step", {step, scaled})});
    emit({Opcode::JumpIfFalse, -1, accepted, -1, -1, static_cast<int64_t>(inner)});  // rejected: again, shorter
    emit({Opcode::Move, t, machine_call("ode_advance", {t, step, t_out})});
    emit({Opcode::Move, y, y_new});
    emit({Opcode::Move, k1, k.back()});  // first same as last
    emit({Opcode::Jump, -1, -1, -1, -1, static_cast<int64_t>(inner)});
    p_.code[inner_exit].number = static_cast<int64_t>(p_.code.size());
    emit({Opcode::Store, result, y, n, -1});
    emit(op(Opcode::IntOp, n, n, one, "+"));
    emit({Opcode::Jump, -1, -1, -1, -1, static_cast<int64_t>(outer)});
    p_.code[outer_exit].number = static_cast<int64_t>(p_.code.size());
    return result;
  }

  int call(const Expr& e) {
    const std::string& f = e.name;
    if (const stdlib::OdeSolver* solver = stdlib::find_ode_solver(f)) return ode_solve(e, *solver);
    if (const FunctionDef* user = statement_function(f)) return call_function(e, *user);
    std::vector<int> args;
    for (const ExprPtr& a : e.args) args.push_back(expr(*a));
    line_ = e.loc.line;
    const int r = reg();
    const stdlib::Function* fn = stdlib::find_function(f);
    auto emit_call = [&](const std::string& name, std::vector<int> operands) {
      Instruction in{Opcode::Call, r};
      in.name = name;
      in.args.assign(operands.begin(), operands.end());
      emit(in);
      return r;
    };
    if (fn && (fn->rule == stdlib::Rule::Elementwise || fn->rule == stdlib::Rule::ElementwiseInt) && args.size() == 1) {
      try {
        (void)fvi::kernel::unary_fn(f);
      } catch (const std::invalid_argument&) {
        fail(e.loc, "the function '" + f + "'");
        return r;
      }
      emit(op(Opcode::Unary, r, args[0], -1, f));
      return r;
    }
    if (ends_with(f, "_rng")) {
      const std::string dist = f.substr(0, f.size() - 4);
      if (!fvi::kernel::has_random_draws(dist)) {
        fail(e.loc, "the function '" + f + "'");
        return r;
      }
      Instruction in{Opcode::Rng, r};
      in.name = dist;
      in.args.assign(args.begin(), args.end());
      emit(in);
      return r;
    }
    if (f == "pow") {
      emit(op(Opcode::Arith, r, args.at(0), args.at(1), "^"));
      return r;
    }
    if (f == "multiply_lower_tri_self_transpose") {  // L L' (the checker took L lower triangular)
      const int t = reg();
      Instruction transpose{Opcode::Call, t};
      transpose.name = "transpose";
      transpose.args = {args.at(0)};
      emit(transpose);
      emit(op(Opcode::Arith, r, args.at(0), t, "*"));
      return r;
    }
    if ((f == "max" || f == "min") && args.size() == 2 && fixed_int(*e.args[0]) && fixed_int(*e.args[1])) {
      emit(op(Opcode::IntOp, r, args[0], args[1], f));
      return r;
    }
    if ((f == "max" || f == "min") && args.size() == 1 && !e.args[0]->type.is_scalar()) return emit_call(f, args);
    if (f == "rows" || f == "cols" || f == "size" || f == "num_elements") return emit_call(f, args);
    if (f == "dims") {
      // x's dimensions in the order Stan gives them: the rows and columns of its layout.
      const Layout layout = layout_of(e.args[0]->type);
      std::vector<int> dims;
      auto size = [&](const char* which) {
        const int d = reg();
        Instruction in{Opcode::Call, d};
        in.name = which;
        in.args = {args[0]};
        emit(in);
        return d;
      };
      if (layout == Layout::Column) dims = {size("rows")};
      else if (layout == Layout::Row) dims = {size("cols")};
      else if (layout != Layout::Scalar && layout != Layout::Unsupported) dims = {size("rows"), size("cols")};
      Instruction in{Opcode::Build, r};
      in.args.assign(dims.begin(), dims.end());
      emit(in);
      return r;
    }
    if (f == "log_sum_exp" || f == "sum" || f == "mean" || f == "softmax" || f == "log_softmax" || f == "rep_vector" ||
        f == "rep_row_vector" || f == "rep_array" || f == "rep_matrix" || f == "prod" || f == "to_vector" ||
        f == "to_row_vector" || f == "cumulative_sum" || f == "cholesky_decompose" || f == "gp_exp_quad_cov" ||
        f == "cov_exp_quad" || f == "diag_matrix" || f == "diagonal" || f == "inverse" || f == "inverse_spd")
      return emit_call(f, args);
    if (f == "to_matrix") {
      // One argument: the layouts already agree (a vector is n x 1, a 2-D array's row i is element i).
      if (args.size() == 1) return args[0];
      return emit_call(f, args);
    }
    if (f == "dot_product" || f == "dot_self") {
      const int product = reg();
      emit(op(Opcode::Arith, product, args.at(0), f == "dot_self" ? args.at(0) : args.at(1), "*"));
      return emit_call("sum", {product});
    }
    if (f == "negative_infinity" || f == "positive_infinity" || f == "not_a_number" || f == "pi" || f == "e") {
      Instruction in{Opcode::RealConst, r};
      in.value = f == "negative_infinity"   ? -HUGE_VAL
                 : f == "positive_infinity" ? HUGE_VAL
                 : f == "not_a_number"      ? NAN
                 : f == "pi"                ? 3.14159265358979323846
                                            : 2.71828182845904523536;
      emit(in);
      return r;
    }
    fail(e.loc, "the function '" + f + "'");
    return r;
  }

  // name_lpdf(y | ...), name_lpmf, name_lcdf, name_lccdf: the sum of the log densities.
  int density_call(const Expr& e) {
    // `y ~ dist(...)` of a user density (desugared to dist_lpdf(y | ...)): its body in line.
    if (const FunctionDef* user = statement_function(e.name)) return call_function(e, *user);
    std::string dist = e.name;
    for (const char* suffix : {"_lpdf", "_lpmf", "_lupdf", "_lupmf"})
      if (ends_with(dist, suffix)) dist = dist.substr(0, dist.size() - std::string(suffix).size());
    if (dist == e.name && !ends_with(dist, "_lcdf") && !ends_with(dist, "_lccdf")) {
      fail(e.loc, "the function '" + e.name + "'");
      return int_const(0);
    }
    std::vector<int> args;
    for (const ExprPtr& a : e.args) args.push_back(expr(*a));
    return density(dist, args, e.loc);
  }

  // The sum of dist's log densities at (outcome, operands...); multi_normal(y | mu, Sigma) as
  // multi_normal_cholesky(y | mu, cholesky_decompose(Sigma)), as the vectorised form has it.
  int density(std::string dist, std::vector<int> args, const Loc& loc) {
    if (dist == "multi_normal" && args.size() == 3) {
      const int l = reg();
      Instruction chol{Opcode::Call, l};
      chol.name = "cholesky_decompose";
      chol.args = {args[2]};
      emit(chol);
      args[2] = l;
      dist = "multi_normal_cholesky";
    }
    const int r = reg();
    Instruction in{Opcode::Lpdf, r};
    in.name = dist;
    in.args.assign(args.begin(), args.end());
    line_ = loc.line;
    emit(in);
    return r;
  }

  // x[i], x[i, j], x[lo:hi] of a variable, local or the model's.
  int indexed(const Expr& e) {
    const Expr& base = *e.args[0];
    const Layout layout = layout_of(base.type);
    int x = expr(base);
    line_ = e.loc.line;
    if (layout == Layout::Unsupported || layout == Layout::Scalar) {
      fail(e.loc, "indexing a value of type " + to_string(base.type));
      return x;
    }
    // A row of an array of vectors, of a 2-D array, or a matrix's column: Stan's vector (or 1-D
    // array) is a column here.
    const bool column = (e.type.array_dims == 0 && e.type.base == Base::Vector) ||
                        (e.type.array_dims == 1 && e.type.base_dims() == 0);
    Instruction in{fixed_int(e) ? Opcode::IndexInt : Opcode::Index, -1, x};
    std::vector<const Index*> indices;
    for (const Index& ix : e.indices) indices.push_back(&ix);
    if (!place(layout, indices, e.loc, in)) return x;
    if (column) in.number |= fvi::kernel::kAsColumn;
    in.dst = reg();
    line_ = e.loc.line;
    emit(in);
    return in.dst;
  }

  // What indices pick in a value of this layout, into `in` (an Index or a Store): single ints
  // and `:` in b and c (-1: every one), or, for ranges and multi-indices, a general index of one
  // Pick per dimension in args. False (reported) for anything else.
  bool place(Layout layout, const std::vector<const Index*>& indices, const Loc& loc, Instruction& in) {
    using fvi::kernel::Pick;
    struct Spec {
      Pick kind;
      int x = -1, y = -1;
    };
    auto spec = [&](const Index& ix) -> Spec {
      if (ix.kind == IndexKind::All || (ix.kind == IndexKind::Range && !ix.lower && !ix.upper)) return {Pick::All};
      if (ix.kind == IndexKind::Single)
        return ix.lower->type.is_int() ? Spec{Pick::One, expr(*ix.lower)} : Spec{Pick::Many, expr(*ix.lower)};
      // lo:, :hi, lo:hi
      const int lo = ix.lower ? expr(*ix.lower) : int_const(1);
      return {Pick::Range, lo, ix.upper ? expr(*ix.upper) : -2};
    };
    const Spec one{Pick::One, int_const(1)};
    const size_t n = indices.size();
    Spec r{Pick::All}, c{Pick::All};
    switch (layout) {
      case Layout::Column:
        if (n != 1) return fail(loc, "this index"), false;
        r = spec(*indices[0]), c = one;
        break;
      case Layout::Row:
        if (n != 1) return fail(loc, "this index"), false;
        r = one, c = spec(*indices[0]);
        break;
      case Layout::Matrix:
      case Layout::ArrayOfColumns:
      case Layout::ArrayOfRows:
        if (n > 2) return fail(loc, "three indices"), false;
        r = spec(*indices[0]);
        if (n > 1) c = spec(*indices[1]);
        break;
      default: return fail(loc, "this index"), false;
    }
    for (const Spec* sp : {&r, &c})
      if (sp->kind == Pick::Range && sp->y == -2) return fail(loc, "a range without its upper bound"), false;
    auto simple = [](const Spec& sp) { return sp.kind == Pick::One || sp.kind == Pick::All; };
    if (simple(r) && simple(c)) {
      in.b = r.kind == Pick::One ? r.x : -1;
      in.c = c.kind == Pick::One ? c.x : -1;
      return true;
    }
    in.number |= fvi::kernel::kGeneralIndex;
    in.args = {static_cast<int32_t>(r.kind), r.x, r.y, static_cast<int32_t>(c.kind), c.x, c.y};
    return true;
  }

  // ---- statements -------------------------------------------------------------------------

  void statement(const Stmt& s) {
    line_ = s.loc.line;
    switch (s.kind) {
      case StmtKind::Empty: return;
      case StmtKind::Block:
        scopes_.emplace_back();
        for (const StmtPtr& b : s.body) statement(*b);
        scopes_.pop_back();
        return;
      case StmtKind::Decl: return declare(*s.decl);
      case StmtKind::Assign: return assign(s);
      case StmtKind::Tilde: {
        std::vector<int> args{expr(*s.lhs)};
        for (const ExprPtr& a : s.args) args.push_back(expr(*a));
        emit({Opcode::Target, -1, density(s.name, args, s.loc)});
        return;
      }
      case StmtKind::Target: emit({Opcode::Target, -1, expr(*s.args[0])}); return;
      case StmtKind::For: {
        const int i = reg();
        emit({Opcode::Move, i, expr(*s.args[0])});
        const int last = reg();
        emit({Opcode::Move, last, expr(*s.args[1])});
        const int one = int_const(1);
        const size_t top = p_.code.size();
        const int test = reg();
        emit(op(Opcode::IntOp, test, i, last, "<="));
        const size_t exit = emit({Opcode::JumpIfFalse, -1, test});
        scopes_.emplace_back();
        Type int_type;
        int_type.base = Base::Int;
        scopes_.back()[s.name] = Variable{i, int_type};
        statement(*s.body.at(0));
        scopes_.pop_back();
        emit(op(Opcode::IntOp, i, i, one, "+"));
        emit({Opcode::Jump, -1, -1, -1, -1, static_cast<int64_t>(top)});
        p_.code[exit].number = static_cast<int64_t>(p_.code.size());
        return;
      }
      case StmtKind::If: {
        const int test = expr(*s.args[0]);
        const size_t to_else = emit({Opcode::JumpIfFalse, -1, test});
        scopes_.emplace_back();
        statement(*s.body.at(0));
        scopes_.pop_back();
        if (s.body.size() < 2) {
          p_.code[to_else].number = static_cast<int64_t>(p_.code.size());
          return;
        }
        const size_t to_end = emit({Opcode::Jump});
        p_.code[to_else].number = static_cast<int64_t>(p_.code.size());
        scopes_.emplace_back();
        statement(*s.body[1]);
        scopes_.pop_back();
        p_.code[to_end].number = static_cast<int64_t>(p_.code.size());
        return;
      }
      case StmtKind::Return: {
        if (calls_.empty() || s.args.empty()) return fail(s.loc, "`return` outside a function");
        const int value = expr(*s.args[0]);
        emit({Opcode::Move, calls_.back().result, value});
        calls_.back().returns.push_back(emit({Opcode::Jump}));
        return;
      }
    }
  }

  // A local (or a declaration the program outputs): its container of the declared size, or its
  // declared value.
  void declare(const VarDecl& d) {
    Type t;
    t.base = d.type.base;
    t.array_dims = static_cast<int>(d.type.array_sizes.size());
    const int r = reg();
    const Layout layout = layout_of(t);
    if (layout == Layout::Unsupported) return fail(d.loc, "a local of type " + to_string(t));
    if (layout == Layout::Scalar) {
      if (d.init) {
        emit({Opcode::Move, r, expr(*d.init)});
      } else if (t.base == Base::Int) {
        emit({Opcode::IntConst, r});
      } else {
        Instruction nan{Opcode::RealConst, r};
        nan.value = NAN;
        emit(nan);
      }
    } else {
      // rows x cols: vector[n] n x 1, row_vector[n] 1 x n, matrix[r, c], array[n] of scalars
      // n x 1, array[m, n] and array[m] vector[n] m x n.
      std::vector<const Expr*> sizes;
      for (const ExprPtr& a : d.type.array_sizes) sizes.push_back(a.get());
      for (const ExprPtr& a : d.type.sizes) sizes.push_back(a.get());
      int rows, cols;
      if (layout == Layout::Row) {
        rows = int_const(1), cols = expr(*sizes.at(0));
      } else {
        rows = expr(*sizes.at(0));
        cols = sizes.size() > 1 ? expr(*sizes[1]) : int_const(1);
      }
      emit({Opcode::Declare, r, rows, cols});
      if (d.init) emit({Opcode::Move, r, expr(*d.init)});
    }
    scopes_.back()[d.name] = Variable{r, t};
  }

  void assign(const Stmt& s) {
    const Expr& lhs = *s.lhs;
    const std::string compound = s.name == "=" ? "" : s.name.substr(0, s.name.size() - 1);
    // x[i][j] is x[i, j]: the indices of nested indexing, outermost variable's first.
    std::vector<const Expr*> chain{&lhs};
    while (chain.back()->kind == ExprKind::Index && chain.back()->args[0]->kind == ExprKind::Index && chain.size() < 8)
      chain.push_back(chain.back()->args[0].get());
    const Expr& target = lhs.kind == ExprKind::Index ? *chain.back()->args[0] : lhs;
    std::vector<const Index*> indices;
    if (lhs.kind == ExprKind::Index)
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        for (const Index& ix : (*it)->indices) indices.push_back(&ix);
    const Variable* v = target.kind == ExprKind::Var ? lookup(target.name) : nullptr;
    if (!v) return fail(lhs.loc, "an assignment to '" + to_source(target) + "' (a variable declared outside these statements)");
    const int dst = v->reg;
    auto combine = [&](int old, int value, bool ints) {
      if (compound.empty()) return value;
      const int r = reg();
      const std::string o = compound == ".*" ? "*" : compound == "./" ? "/" : compound;
      if (ints) emit(op(Opcode::IntOp, r, old, value, o));
      else emit(op(Opcode::Arith, r, old, value, o == "*" && !lhs.type.is_scalar() && !s.args.empty() ? "matmul" : o));
      return r;
    };
    const Expr& rhs = *s.args.at(0);
    if (lhs.kind == ExprKind::Var) {
      const int value = expr(rhs);
      emit({Opcode::Move, dst, combine(dst, value, fixed_int(lhs) && fixed_int(rhs))});
      return;
    }
    // x[i] = value, x[i, j] = value, x[:, j] = value, x[a:b, j] = value: elements, rows, columns.
    Instruction store{Opcode::Store, dst};
    if (!place(layout_of(target.type), indices, lhs.loc, store)) return;
    int value = expr(rhs);
    if (!compound.empty()) {
      Instruction read = store;
      read.op = Opcode::Index;
      read.dst = reg();
      read.a = dst;
      emit(read);
      value = combine(read.dst, value, false);
    }
    line_ = s.loc.line;
    store.a = value;
    emit(store);
  }

  const SemanticModel& m_;
  StatementProgram& out_;
  fvi::kernel::Program& p_;
  Diagnostics& diags_;
  std::vector<std::map<std::string, Variable>> scopes_;
  std::map<std::string, int> operands_;
  std::set<std::string> varying_;  // int variables whose values differ between draws
  struct Call {
    int result;
    std::vector<size_t> returns;  // jumps to the end of the body
  };
  std::vector<Call> calls_;  // the user functions being translated in line, innermost last
  static constexpr size_t kMaxInstructions = 1000000;
  int line_ = 0;
  bool ok_ = true;
};

}  // namespace

bool compile_statements(const SemanticModel& model, const std::vector<const Stmt*>& stmts, bool log_density,
                        const std::vector<std::string>& outputs, StatementProgram& out, Diagnostics& diags) {
  out = StatementProgram{};
  Translator t(model, out, diags);
  t.statements(stmts);
  t.finish(log_density, outputs);
  return t.ok();
}

}  // namespace fvic::ir
