// The checker (checker_impl.h) on Stan's ODE solvers (stdlib::OdeSolver): the system's function
// against the form the solver calls it in, the initial state, times and tolerances, and the type
// and shape of the solution. Statement programs solve them (ir/statement_program.cpp).
#include "frontend/checker_impl.h"

namespace fvic {
namespace check_detail {

namespace {

Type array_of(Base base, int dims) { return Type{base, dims}; }

bool accepts(const Type& want, const Type& got) {
  return got == want || (want.base == Base::Real && got.base == Base::Int && want.array_dims == got.array_dims);
}

}  // namespace

void Checker::ode_call(Expr& e, const stdlib::OdeSolver& solver) {
  const std::string& name = e.name;
  const Type real_array = array_of(Base::Real, 1), int_array = array_of(Base::Int, 1);
  const Type state = solver.array_form ? real_array : Type{Base::Vector, 0};
  const std::string usage =
      solver.array_form ? name + "(f, y0, t0, ts, theta, x_r, x_i) or " + name +
                              "(f, y0, t0, ts, theta, x_r, x_i, rtol, atol, max_num_steps)"
      : solver.tolerances ? name + "(f, y0, t0, ts, rtol, atol, max_num_steps, ...)"
                          : name + "(f, y0, t0, ts, ...)";
  if (e.text.empty()) {
    diags_.error(e.loc, name + " takes the name of the system's function first", "write " + usage);
    return;
  }
  auto found = functions_.find(e.text);
  if (found == functions_.end()) {
    diags_.error(e.loc, "'" + e.text + "', the system of " + name + ", is not a function defined in `functions`",
                 "define it there, above the blocks that solve it: " +
                     std::string(solver.array_form ? "array[] real " + e.text +
                                                         "(real t, array[] real y, array[] real theta, array[] real "
                                                         "x_r, array[] int x_i)"
                                                   : "vector " + e.text + "(real t, vector y, ...)"));
    return;
  }
  const FunctionDef& f = *found->second;
  // The values after the system: y0, t0, ts, then the tolerances (where the form has them), then
  // what the system is passed besides t and y.
  const size_t n = e.args.size();
  const size_t fixed = solver.array_form ? 6 : solver.tolerances ? 6 : 3;
  const bool with_tolerances = solver.tolerances == 3 || (solver.tolerances == -3 && n == 9);
  if (n < 3 || (solver.array_form && n != 6 && n != 9) || (!solver.array_form && n < fixed)) {
    diags_.error(e.loc, name + " cannot take " + std::to_string(n + 1) + " arguments", "write " + usage);
    return;
  }
  if (any_error(e)) return;
  const Expr &y0 = *e.args[0], &t0 = *e.args[1], &ts = *e.args[2];
  bool ok = true;
  auto require = [&](const Expr& a, const Type& want, const std::string& what) {
    if (accepts(want, a.type)) return true;
    diags_.error(a.loc, "the " + what + " of " + name + " is " + to_string(want) + ", got " + to_string(a.type),
                 "write " + usage);
    return ok = false;
  };
  // The times: the steps are chosen for every draw at once, so they must be the same in every
  // draw, as must the tolerances.
  auto require_data = [&](const Expr& a, const std::string& what) {
    if (!(a.taint.bits & param_bits())) return;
    unsigned bits = a.taint.bits & param_bits(), k = 0;
    while (!(bits & (1u << k))) ++k;
    diags_.error(a.loc, "the " + what + " of " + name + " reads " + taint_description(static_cast<K>(k)) + " '" +
                            a.taint.witness[k] + "'",
                 "the times and tolerances of an ODE solve must be data (its steps are chosen for every draw at once)");
    ok = false;
  };
  require(y0, state, "initial state y0");
  require(t0, Type{Base::Real, 0}, "initial time t0");
  require(ts, real_array, "output times ts");
  require_data(t0, "initial time t0");
  require_data(ts, "output times ts");
  size_t first_passed = 3;  // the first value passed on to the system
  if (with_tolerances) {
    const size_t at = solver.array_form ? 6 : 3;
    require(*e.args[at], Type{Base::Real, 0}, "relative tolerance");
    require(*e.args[at + 1], Type{Base::Real, 0}, "absolute tolerance");
    // integrate_ode_*'s max_num_steps may be written as a real (`5e2`), as stanc accepts.
    require(*e.args[at + 2], Type{solver.array_form ? Base::Real : Base::Int, 0}, "max_num_steps");
    for (size_t i = at; i < at + 3; ++i) require_data(*e.args[i], i == at ? "relative tolerance" : i == at + 1 ? "absolute tolerance" : "max_num_steps");
    if (!solver.array_form) first_passed = 6;
  }
  if (solver.array_form) {
    require(*e.args[3], real_array, "parameters theta");
    require(*e.args[4], real_array, "real data x_r");
    require(*e.args[5], int_array, "int data x_i");
    require_data(*e.args[4], "real data x_r");
  }
  if (!ok) return;
  // The system's signature: (t, y, what is passed) -> the state's type.
  std::vector<Type> passed;
  if (solver.array_form) passed = {real_array, real_array, int_array};
  else
    for (size_t i = first_passed; i < n; ++i) passed.push_back(e.args[i]->type);
  const std::string signature = to_string(state) + " " + e.text + "(real t, " + to_string(state) + " y" +
                                (solver.array_form ? ", array[] real theta, array[] real x_r, array[] int x_i" : ", ...") + ")";
  bool matches = f.args.size() == passed.size() + 2 && f.return_type == state &&
                 f.args[0].type == Type{Base::Real, 0} && f.args[1].type == state;
  for (size_t i = 0; matches && i < passed.size(); ++i) matches = accepts(f.args[i + 2].type, passed[i]);
  if (!matches) {
    std::string got = to_string(f.return_type) + " " + f.name + "(";
    for (size_t i = 0; i < f.args.size(); ++i) got += (i ? ", " : "") + to_string(f.args[i].type);
    std::string want = "(real, " + to_string(state);
    for (const Type& t : passed) want += ", " + to_string(t);
    diags_.error(e.loc, name + " calls '" + f.name + "' as " + to_string(state) + " " + f.name + want + "), but it is " + got + ")",
                 "define the system as " + signature + (solver.array_form ? "" : ", the values after it being those passed after ts" +
                     std::string(solver.tolerances ? " and the tolerances" : "")));
    return;
  }
  if (broken_functions_.count(f.name)) return;
  // The solution: one state per output time, array[size(ts), size(y0)] real or array[size(ts)] vector.
  e.type = solver.array_form ? array_of(Base::Real, 2) : array_of(Base::Vector, 1);
  e.shape.dims = {ts.shape.dims.empty() ? SymSize::unknown() : ts.shape.dims[0],
                  y0.shape.dims.empty() ? SymSize::unknown() : y0.shape.dims[0]};
}

}  // namespace check_detail
}  // namespace fvic
