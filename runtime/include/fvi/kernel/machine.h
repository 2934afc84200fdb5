#pragma once
// The machine that runs a statement program (bytecode.h) on batched tensors and differentiates it.
//
// Every real value is a node of a tape (one per instruction executed, so a loop of T iterations
// leaves T nodes), computed with the same kernel operations the vectorised code calls, on all
// draws at once. backward() walks the tape in reverse, each node's adjoint given by the kernels'
// own derivative helpers (unary_derivative, lpdf_vjp, matmul_grad_*), and returns each operand's
// gradient. A branch or a loop bound must be the same in every draw: it reads ints or data, and
// one that reads a parameter is refused when it runs. A run is bounded: 2^31 instructions, 2^30
// numbers on its tape, every index checked against its container.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "fvi/kernel/bytecode.h"
#include "fvi/kernel/distributions.h"
#include "fvi/kernel/ode.h"
#include "fvi/kernel/ops.h"
#include "fvi/kernel/random.h"

namespace fvi::kernel {

class ProgramError : public std::runtime_error {
 public:
  ProgramError(int line, const std::string& what)
      : std::runtime_error((line > 0 ? "line " + std::to_string(line) + ": " : std::string()) + what) {}
};

// A branch or a loop bound whose test differs between the draws (a Viterbi path's `if (logp >
// best)` in generated quantities): a program of quantities then runs draw by draw.
class DrawsDiffer : public ProgramError {
 public:
  using ProgramError::ProgramError;
};

template <class T>
class Machine {
 public:
  // Runs p on its operands (active[k]: operand k depends on parameters and gets a gradient).
  // Returns the log density (1 x 1) of a log-density program, else the outputs, each flattened
  // column by column, one after another in a column.
  const Tensor<T>& run(const Program& p, const std::vector<const Tensor<T>*>& operands, const std::vector<bool>& active);

  // The noise key and posterior draw count of the `_rng` draws of the next run (a generated
  // quantity's): draw j of a run takes stream kRandomStreams + j of the key, so the streams of
  // the vectorised Rng nodes (numbered from 0) are not reused.
  void set_random(uint64_t key, Eigen::Index draws) { key_ = key, draws_ = draws; }
  static constexpr uint32_t kRandomStreams = 0x80000000u;

  // After run(): the gradient of sum(g .* result) with respect to operand k (the whole backward
  // pass is done at the first call for a given run, and kept for the other operands).
  const Tensor<T>& operand_gradient(const Tensor<T>& g, size_t k);

 private:
  enum class Kind { Leaf, Const, Index, Slice, Transpose, Unary, Neg, Add, Sub, Mul, Div, Pow, MatMul, Lpdf,
                    LogSumExp, Sum, Mean, Softmax, LogSoftmax, Gather, Broadcast, Extreme, Prod, Reshape, Select, CumulativeSum, Cholesky, DiagMatrix, Diagonal, Inverse, Inactive };
  // A node's operands: up to four held inline (almost every node: the machine makes one node per
  // instruction, and a heap vector each was one more allocation per instruction), more on the
  // heap (a container gathered from its elements).
  class NodeArgs {
   public:
    NodeArgs() = default;
    NodeArgs(std::initializer_list<int> args) {
      for (int a : args) push_back(a);
    }
    NodeArgs(const std::vector<int>& args) {  // NOLINT: converts, as the vector it replaces did
      for (int a : args) push_back(a);
    }
    void push_back(int a) {
      if (n_ < kInline) {
        inline_[n_] = a;
      } else {
        if (more_.empty()) more_.assign(inline_, inline_ + kInline);
        more_.push_back(a);
      }
      ++n_;
    }
    size_t size() const { return n_; }
    const int* begin() const { return n_ <= kInline ? inline_ : more_.data(); }
    const int* end() const { return begin() + n_; }
    int operator[](size_t k) const { return begin()[k]; }
    int at(size_t k) const {
      if (k >= n_) throw std::out_of_range("a statement program's node has no operand " + std::to_string(k));
      return begin()[k];
    }

   private:
    static constexpr size_t kInline = 4;
    int inline_[kInline] = {};
    std::vector<int> more_;
    size_t n_ = 0;
  };
  struct Node {
    Kind kind;
    Tensor<T> value;
    bool active = false;   // has an adjoint
    bool depends = false;  // reads a parameter (a comparison's result depends, without an adjoint)
    NodeArgs args = {};
    std::string name = {};
    int64_t r = -1, c = -1;  // Index: the row and column (0-based, -1 every one); Slice: first, last
    bool column = false;     // Index: the result transposed to a column; Slice: along columns
    int operand = -1;        // Leaf
    IntVec rows_picked = {}, cols_picked = {};  // Select: the source's rows and columns (0-based)
  };
  struct Register {
    enum class Holds { Nothing, Int, Real, Elements } holds = Holds::Nothing;
    int64_t i = 0;
    int node = -1;
    int64_t rows = 0, cols = 0;
    std::vector<int> elements;  // column-major, -1 where never written
  };

  const Tensor<T>& run_batched(const Program& p, const std::vector<const Tensor<T>*>& operands,
                               const std::vector<bool>& active);
  int add(Kind kind, Tensor<T> value, NodeArgs args, const std::string& name = {});
  int constant(T v) { return add(Kind::Const, Tensor<T>::constant(v), {}); }
  int real(const Register& r, int line);  // the register's value as a node
  int64_t integer(const Register& r, int line) const;
  const Tensor<T>& value(int node) const { return tape_[node].value; }
  void execute(const Instruction& in);
  int index(const Instruction& in);
  IntVec pick(const Instruction& in, size_t first, int64_t extent, bool& one);
  int select(const Instruction& in);
  void store_general(const Instruction& in);
  int call(const Instruction& in);
  int ode_control(const Instruction& in, const std::vector<int>& args);
  void store(const Instruction& in);
  void explode(Register& r, int line);
  void accumulate(int node, const Tensor<T>& g);
  void backward_node(int i);

  const Program* p_ = nullptr;
  std::vector<const Tensor<T>*> operands_;
  std::vector<Register> regs_;
  std::vector<Node> tape_;
  std::vector<Tensor<T>> adjoint_;
  std::vector<bool> has_adjoint_;
  std::vector<int> terms_;    // Target nodes
  std::vector<int> outputs_;  // Output nodes, by number
  std::vector<Tensor<T>> gradients_;
  bool backward_done_ = false;
  size_t pc_ = 0;
  uint64_t key_ = 0;
  Eigen::Index draws_ = 1;
  uint32_t random_calls_ = 0;
  int line_ = 0;                 // of the instruction running
  int64_t tape_elements_ = 0;    // numbers held by the tape
  static constexpr int64_t kMaxTapeElements = int64_t(1) << 30;
  Tensor<T> result_;
};

// ---- running ----------------------------------------------------------------------------------

template <class T>
const Tensor<T>& Machine<T>::run(const Program& p, const std::vector<const Tensor<T>*>& operands,
                                 const std::vector<bool>& active) {
  bool differentiable = p.log_density;
  for (bool a : active) differentiable = differentiable || a;
  if (differentiable) return run_batched(p, operands, active);
  try {
    return run_batched(p, operands, active);
  } catch (const DrawsDiffer&) {
    // Quantities (no gradient): each draw on its own, its `_rng` draws from its own key.
    Eigen::Index draws = draws_;
    for (const Tensor<T>* o : operands) draws = std::max(draws, o->draws);
    std::vector<Tensor<T>> one(operands.size());
    std::vector<const Tensor<T>*> pointers(operands.size());
    Tensor<T> all;
    for (Eigen::Index s = 0; s < draws; ++s) {
      for (size_t k = 0; k < operands.size(); ++k) {
        one[k] = Tensor<T>(operands[k]->rows, operands[k]->cols, 1);
        one[k].draw(0) = operands[k]->draw(s);
        pointers[k] = &one[k];
      }
      Machine<T> single;
      single.set_random(key_ ^ (0x9e3779b97f4a7c15ULL * uint64_t(s + 1)), 1);
      const Tensor<T>& r = single.run_batched(p, pointers, active);
      if (s == 0) all = Tensor<T>(r.rows, r.cols, draws);
      all.draw(s) = r.draw(0);
    }
    result_ = std::move(all);
    tape_.clear();
    backward_done_ = true;  // nothing to differentiate
    gradients_.clear();
    return result_;
  }
}

template <class T>
const Tensor<T>& Machine<T>::run_batched(const Program& p, const std::vector<const Tensor<T>*>& operands,
                                         const std::vector<bool>& active) {
  p_ = &p;
  operands_ = operands;
  regs_.assign(static_cast<size_t>(p.registers), Register{});
  tape_.clear();
  terms_.clear();
  outputs_.assign(static_cast<size_t>(p.outputs), -1);
  backward_done_ = false;
  random_calls_ = 0;
  tape_elements_ = 0;
  if (operands.size() != p.operand_registers.size()) throw std::logic_error("a statement program given the wrong operands");
  for (size_t k = 0; k < operands.size(); ++k) {
    int n = add(Kind::Leaf, *operands[k], {});
    tape_[n].active = tape_[n].depends = k < active.size() && active[k];
    tape_[n].operand = static_cast<int>(k);
    Register& r = regs_[static_cast<size_t>(p.operand_registers[k])];
    r.holds = Register::Holds::Real;
    r.node = n;
  }
  // A bound on the work: every instruction executed leaves at most one node, and a program runs
  // its loops over data sizes, so this is reached only by a loop whose bound is wrong.
  const size_t limit = size_t(1) << 31;
  size_t steps = 0;
  for (pc_ = 0; pc_ < p.code.size();) {
    if (++steps > limit) throw ProgramError(p.code[pc_].line, "a loop ran more than 2^31 steps");
    const Instruction& in = p.code[pc_++];
    line_ = in.line;
    execute(in);
  }
  if (p.log_density) {
    result_ = Tensor<T>::constant(0);
    for (int t : terms_) result_ = fvi::kernel::add(result_, sum(value(t)));
    return result_;
  }
  long long total = 0;
  Eigen::Index draws = 1;
  for (size_t k = 0; k < outputs_.size(); ++k) {
    if (outputs_[k] < 0) throw std::logic_error("a statement program left an output unset");
    total += value(outputs_[k]).size();
    draws = joint_draws(draws, value(outputs_[k]).draws);
  }
  result_ = Tensor<T>(total, 1, draws);
  Eigen::Index at = 0;
  for (int o : outputs_) {
    const Tensor<T>& v = value(o);
    for (Eigen::Index s = 0; s < draws; ++s)
      result_.m.col(s).segment(at, v.size()) = Eigen::Map<const Mat<T>>(v.draw(s).eval().data(), v.size(), 1);
    at += v.size();
  }
  return result_;
}

template <class T>
int Machine<T>::add(Kind kind, Tensor<T> value, NodeArgs args, const std::string& name) {
  tape_elements_ += value.m.size();
  if (tape_elements_ > kMaxTapeElements)
    throw ProgramError(line_, "the statements' values would take more than 2^30 numbers (8 GiB) of memory");
  Node n{kind, std::move(value)};
  for (int a : args) {
    n.active = n.active || tape_[a].active;
    n.depends = n.depends || tape_[a].active || tape_[a].depends;
  }
  n.args = std::move(args);
  n.name = name;
  tape_.push_back(std::move(n));
  return static_cast<int>(tape_.size()) - 1;
}

template <class T>
int64_t Machine<T>::integer(const Register& r, int line) const {
  if (r.holds == Register::Holds::Int) return r.i;
  if (r.holds == Register::Holds::Real) {
    const Tensor<T>& v = value(r.node);
    if (v.size() != 1) throw ProgramError(line, "a container used as an int");
    if (tape_[r.node].depends)
      throw ProgramError(line, "an int or a test that depends on a parameter (a branch or a loop bound must be the same in every draw)");
    T x = v.m(0, 0);
    for (Eigen::Index s = 1; s < v.draws; ++s)
      if (v.m(0, s) != x) throw DrawsDiffer(line, "a test that differs between draws");
    if (!std::isfinite(double(x))) throw ProgramError(line, "an int from a value that is not finite");
    return static_cast<int64_t>(std::llround(double(x)));
  }
  throw ProgramError(line, "a variable read before it was given a value");
}

template <class T>
int Machine<T>::real(const Register& r, int line) {
  switch (r.holds) {
    case Register::Holds::Real: return r.node;
    case Register::Holds::Int: return constant(static_cast<T>(r.i));
    case Register::Holds::Elements: {
      std::vector<int> args;
      args.reserve(r.elements.size());
      Eigen::Index draws = 1;
      for (int e : r.elements)
        if (e >= 0) draws = joint_draws(draws, value(e).draws);
      Tensor<T> v = Tensor<T>::uninitialized(r.rows, r.cols, draws);  // every element written below
      for (size_t j = 0; j < r.elements.size(); ++j) {
        int e = r.elements[j];
        if (e < 0) e = constant(std::numeric_limits<T>::quiet_NaN());
        args.push_back(e);
        const Tensor<T>& x = value(e);
        if (x.size() != 1) throw ProgramError(line, "a container's element is not a scalar");
        for (Eigen::Index s = 0; s < draws; ++s) v.draw(s)(static_cast<Eigen::Index>(j)) = x.draw(s)(0, 0);
      }
      return add(Kind::Gather, std::move(v), std::move(args));
    }
    default: throw ProgramError(line, "a variable read before it was given a value");
  }
}

template <class T>
void Machine<T>::execute(const Instruction& in) {
  using H = typename Register::Holds;
  auto& dst = in.dst >= 0 ? regs_[static_cast<size_t>(in.dst)] : regs_.front();
  auto reg = [&](int32_t i) -> const Register& { return regs_[static_cast<size_t>(i)]; };
  auto set_real = [&](int node) {
    Register r;
    r.holds = H::Real;
    r.node = node;
    dst = std::move(r);
  };
  auto set_int = [&](int64_t v) {
    Register r;
    r.holds = H::Int;
    r.i = v;
    dst = std::move(r);
  };
  switch (in.op) {
    case Opcode::IntConst: return set_int(in.number);
    case Opcode::RealConst: return set_real(constant(static_cast<T>(in.value)));
    case Opcode::ToInt: return set_int(integer(reg(in.a), in.line));
    case Opcode::ToReal: return set_real(real(reg(in.a), in.line));
    case Opcode::IntOp: {
      const int64_t a = integer(reg(in.a), in.line), b = integer(reg(in.b), in.line);
      const std::string& o = in.name;
      if ((o == "/" || o == "%") && b == 0) throw ProgramError(in.line, "integer division by zero");
      return set_int(o == "+"    ? a + b
                     : o == "-"  ? a - b
                     : o == "*"  ? a * b
                     : o == "/"  ? a / b
                     : o == "%"  ? a % b
                     : o == "==" ? a == b
                     : o == "!=" ? a != b
                     : o == "<"  ? a < b
                     : o == "<=" ? a <= b
                     : o == ">"  ? a > b
                     : o == ">=" ? a >= b
                     : o == "&&" ? (a != 0 && b != 0)
                     : o == "||" ? (a != 0 || b != 0)
                     : o == "min" ? std::min(a, b)
                                  : std::max(a, b));
    }
    case Opcode::IntNot: return set_int(integer(reg(in.a), in.line) == 0);
    case Opcode::Index: return set_real(index(in));
    case Opcode::IndexInt: {
      int n = index(in);
      Register tmp;
      tmp.holds = H::Real;
      tmp.node = n;
      return set_int(integer(tmp, in.line));
    }
    case Opcode::Slice: {
      const int x = real(reg(in.a), in.line);
      const int64_t lo = integer(reg(in.b), in.line), hi = integer(reg(in.c), in.line);
      const Tensor<T>& v = value(x);
      const bool cols = in.number == 1;
      const int64_t extent = cols ? v.cols : v.rows;
      if (hi >= lo && (lo < 1 || hi > extent))
        throw ProgramError(in.line, "the range " + std::to_string(lo) + ":" + std::to_string(hi) + " is outside 1.." +
                                        std::to_string(extent));
      IntVec idx = range_index(lo, hi);
      int n = add(Kind::Slice, cols ? index_cols(v, idx) : index_rows(v, idx), {x});
      tape_[n].r = lo - 1, tape_[n].c = hi - 1, tape_[n].column = cols;
      return set_real(n);
    }
    case Opcode::Unary: {
      const int x = real(reg(in.a), in.line);
      return set_real(add(Kind::Unary, unary(in.name, value(x)), {x}, in.name));
    }
    case Opcode::Arith: {
      const int a = real(reg(in.a), in.line), b = real(reg(in.b), in.line);
      const Tensor<T>&x = value(a), &y = value(b);
      try {
        if (in.name == "+") return set_real(add(Kind::Add, fvi::kernel::add(x, y), {a, b}));
        if (in.name == "-") return set_real(add(Kind::Sub, sub(x, y), {a, b}));
        if (in.name == "*") return set_real(add(Kind::Mul, mul(x, y), {a, b}));
        if (in.name == "/") return set_real(add(Kind::Div, div(x, y), {a, b}));
        if (in.name == "^") return set_real(add(Kind::Pow, pow(x, y), {a, b}));
        if (in.name == "matmul") return set_real(add(Kind::MatMul, matmul(x, y), {a, b}));
        if (in.name == "neg") return set_real(add(Kind::Neg, neg(x), {a}));
      } catch (const ShapeError& e) {
        throw ProgramError(in.line, e.what());
      }
      throw std::logic_error("unknown arithmetic '" + in.name + "'");
    }
    case Opcode::Compare: {
      const int a = real(reg(in.a), in.line), b = real(reg(in.b), in.line);
      const int n = add(Kind::Inactive, compare(in.name, value(a), value(b)), {a, b});
      tape_[n].active = false;  // no derivative; `depends` stays
      return set_real(n);
    }
    case Opcode::Lpdf: {
      std::vector<int> args;
      Operands<T> xs;
      for (int32_t r : in.args) args.push_back(real(reg(r), in.line));
      for (int a : args) xs.push_back(&value(a));
      Tensor<T> densities;
      try {
        densities = lpdf(in.name, xs);
      } catch (const ShapeError& e) {
        throw ProgramError(in.line, in.name + ": " + e.what());
      }
      int n = add(Kind::Lpdf, sum(densities), std::move(args), in.name);
      tape_[n].r = densities.rows, tape_[n].c = densities.cols;
      return set_real(n);
    }
    case Opcode::Call: {
      if (in.name == "rows" || in.name == "cols" || in.name == "size" || in.name == "num_elements") {
        const Register& r = reg(in.args.at(0));
        int64_t rows = r.holds == H::Elements ? r.rows : value(real(r, in.line)).rows;
        int64_t cols = r.holds == H::Elements ? r.cols : value(real(r, in.line)).cols;
        return set_int(in.name == "rows" ? rows : in.name == "cols" ? cols : in.name == "size" ? (rows == 1 ? cols : rows) : rows * cols);
      }
      return set_real(call(in));
    }
    case Opcode::Rng: {
      std::vector<int> args;
      Operands<T> xs;
      for (int32_t r : in.args) args.push_back(real(reg(r), in.line));
      Eigen::Index draws = draws_, rows = 1, cols = 1;
      for (int a : args) {
        xs.push_back(&value(a));
        draws = std::max(draws, value(a).draws);
      }
      if (random_calls_ == 0x7fffffffu) throw ProgramError(in.line, "more than 2^31 random draws in one run");
      Tensor<T> x = random_draws<T>(in.name, xs, rows, cols, draws, key_, kRandomStreams + random_calls_++);
      return set_real(add(Kind::Inactive, std::move(x), {}));
    }
    case Opcode::Build: {
      std::vector<int> args;
      Eigen::Index draws = 1;
      for (int32_t r : in.args) {
        args.push_back(real(reg(r), in.line));
        if (value(args.back()).size() != 1) throw ProgramError(in.line, "a literal's element is not a scalar");
        draws = joint_draws(draws, value(args.back()).draws);
      }
      const Eigen::Index n = static_cast<Eigen::Index>(args.size());
      Tensor<T> v = in.number == 1 ? Tensor<T>(1, n, draws) : Tensor<T>(n, 1, draws);
      for (Eigen::Index s = 0; s < draws; ++s)
        for (Eigen::Index j = 0; j < n; ++j) v.draw(s)(j) = value(args[static_cast<size_t>(j)]).draw(s)(0, 0);
      return set_real(add(Kind::Gather, std::move(v), std::move(args)));
    }
    case Opcode::Declare: {
      const int64_t rows = integer(reg(in.a), in.line), cols = integer(reg(in.b), in.line);
      if (rows < 0 || cols < 0 || (cols > 0 && rows > kMaxTapeElements / cols))
        throw ProgramError(in.line, "a container of " + std::to_string(rows) + " x " + std::to_string(cols) +
                                        " elements (at most 2^30)");
      Register r;
      r.holds = H::Elements;
      r.rows = rows, r.cols = cols;
      r.elements.assign(static_cast<size_t>(rows * cols), -1);
      dst = std::move(r);
      return;
    }
    case Opcode::Move: {
      Register copy = reg(in.a);
      dst = std::move(copy);
      return;
    }
    case Opcode::Store: return store(in);
    case Opcode::Target: terms_.push_back(real(reg(in.a), in.line)); return;
    case Opcode::Output: outputs_.at(static_cast<size_t>(in.number)) = real(reg(in.a), in.line); return;
    case Opcode::Jump: pc_ = static_cast<size_t>(in.number); return;
    case Opcode::JumpIfFalse:
      if (integer(reg(in.a), in.line) == 0) pc_ = static_cast<size_t>(in.number);
      return;
  }
}

// a[b, c] of a real value (a parameter, data, a local container): an element, a row or a column.
template <class T>
int Machine<T>::index(const Instruction& in) {
  if (in.number & kGeneralIndex) return select(in);
  const Register& src = regs_[static_cast<size_t>(in.a)];
  const int64_t r = in.b >= 0 ? integer(regs_[static_cast<size_t>(in.b)], in.line) - 1 : -1;
  const int64_t c = in.c >= 0 ? integer(regs_[static_cast<size_t>(in.c)], in.line) - 1 : -1;
  const int64_t rows = src.holds == Register::Holds::Elements ? src.rows : value(real(src, in.line)).rows;
  const int64_t cols = src.holds == Register::Holds::Elements ? src.cols : value(real(src, in.line)).cols;
  auto check = [&](int64_t i, int64_t extent) {
    if (i >= extent || (i < 0 && i != -1) || (i == -1 && false))
      throw ProgramError(in.line, "index " + std::to_string(i + 1) + " outside 1.." + std::to_string(extent));
  };
  if (in.b >= 0) check(r, rows);
  if (in.c >= 0) check(c, cols);
  if (in.b >= 0 && r < 0) throw ProgramError(in.line, "index " + std::to_string(r + 1) + " outside 1.." + std::to_string(rows));
  if (in.c >= 0 && c < 0) throw ProgramError(in.line, "index " + std::to_string(c + 1) + " outside 1.." + std::to_string(cols));
  if (src.holds == Register::Holds::Elements && r >= 0 && c >= 0) {
    int e = src.elements[static_cast<size_t>(c * rows + r)];
    return e >= 0 ? e : constant(std::numeric_limits<T>::quiet_NaN());
  }
  const int x = real(src, in.line);
  const Tensor<T>& v = value(x);
  const Eigen::Index out_rows = r >= 0 ? 1 : v.rows, out_cols = c >= 0 ? 1 : v.cols;
  const bool column = in.number == 1 && out_rows == 1 && out_cols > 1;
  Tensor<T> out = column ? Tensor<T>(out_cols, 1, v.draws) : Tensor<T>(out_rows, out_cols, v.draws);
  for (Eigen::Index s = 0; s < v.draws; ++s) {
    auto d = v.draw(s);
    auto block = d.block(r >= 0 ? r : 0, c >= 0 ? c : 0, out_rows, out_cols);
    if (column) out.draw(s) = block.transpose();
    else out.draw(s) = block;
  }
  int n = add(Kind::Index, std::move(out), {x});
  tape_[n].r = r, tape_[n].c = c, tape_[n].column = column;
  return n;
}

template <class T>
int Machine<T>::call(const Instruction& in) {
  std::vector<int> args;
  for (int32_t r : in.args) args.push_back(real(regs_[static_cast<size_t>(r)], in.line));
  auto arg = [&](size_t i) -> const Tensor<T>& { return value(args.at(i)); };
  const std::string& f = in.name;
  if (f == "log_sum_exp") {
    // max + log(sum(exp(x - max))) over all the arguments' elements, draw by draw.
    Eigen::Index draws = 1;
    for (int a : args) draws = joint_draws(draws, value(a).draws);
    Tensor<T> out(1, 1, draws);
    for (Eigen::Index s = 0; s < draws; ++s) {
      T top = -std::numeric_limits<T>::infinity();
      for (int a : args) top = std::max(top, value(a).draw(s).maxCoeff());
      if (!std::isfinite(double(top))) {
        out.m(0, s) = top;
        continue;
      }
      T total = 0;
      for (int a : args) total += (value(a).draw(s).array() - top).exp().sum();
      out.m(0, s) = top + std::log(total);
    }
    return add(Kind::LogSumExp, std::move(out), std::move(args));
  }
  // Each value computed before `args` moves into its node (argument order is unspecified).
  auto node = [&](Kind kind, Tensor<T> v) { return add(kind, std::move(v), std::move(args)); };
  if (f == "sum") return node(Kind::Sum, sum(arg(0)));
  if (f == "mean") {
    Tensor<T> s = sum(arg(0));
    s.m /= static_cast<T>(std::max<Eigen::Index>(1, arg(0).size()));
    return node(Kind::Mean, std::move(s));
  }
  if (f == "softmax") return node(Kind::Softmax, softmax(arg(0)));
  if (f == "log_softmax") return node(Kind::LogSoftmax, log_softmax(arg(0)));
  if (f == "transpose") return node(Kind::Transpose, transpose(arg(0)));
  if ((f == "max" || f == "min") && args.size() == 1) return node(Kind::Extreme, reduce(f, arg(0)));
  if (f == "prod" && args.size() == 1) return node(Kind::Prod, reduce(f, arg(0)));
  if (f == "cumulative_sum") return node(Kind::CumulativeSum, cumulative_sum(arg(0)));
  if (f == "cholesky_decompose") {
    Tensor<T> l;
    try {
      l = cholesky(arg(0));
    } catch (const std::exception& e) {
      throw ProgramError(in.line, std::string("cholesky_decompose: ") + e.what());
    }
    return node(Kind::Cholesky, std::move(l));
  }
  if (f.compare(0, 4, "ode_") == 0) return ode_control(in, args);
  if (f == "diag_matrix") return node(Kind::DiagMatrix, diag_matrix(arg(0)));
  if (f == "inverse" || f == "inverse_spd") {
    Tensor<T> y;
    try {
      y = inverse(arg(0));
    } catch (const std::exception& e) {
      throw ProgramError(in.line, f + ": " + e.what());
    }
    return node(Kind::Inverse, std::move(y));
  }
  if (f == "diagonal") return node(Kind::Diagonal, diagonal(arg(0)));
  if ((f == "gp_exp_quad_cov" || f == "cov_exp_quad") && args.size() == 3) {
    // alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)) of the points x (data: rows), each step a node.
    if (tape_[static_cast<size_t>(args[0])].depends)
      throw ProgramError(in.line, f + " at points that depend on parameters (the points must be data)");
    const int x = args[0], alpha = args[1], rho = args[2];
    const int d2 = add(Kind::Inactive, squared_distances(value(x)), {});
    const int two = constant(2);
    const int rho2 = add(Kind::Mul, mul(value(rho), value(rho)), {rho, rho});
    const int two_rho2 = add(Kind::Mul, mul(value(two), value(rho2)), {two, rho2});
    const int minus = add(Kind::Neg, neg(value(d2)), {d2});
    const int scaled = add(Kind::Div, div(value(minus), value(two_rho2)), {minus, two_rho2});
    const int e = add(Kind::Unary, unary("exp", value(scaled)), {scaled}, "exp");
    const int alpha2 = add(Kind::Mul, mul(value(alpha), value(alpha)), {alpha, alpha});
    return add(Kind::Mul, mul(value(alpha2), value(e)), {alpha2, e});
  }
  if (f == "to_matrix" && args.size() == 3) {  // v's elements column by column into m x n
    const double m = double(arg(1).m(0, 0)), n = double(arg(2).m(0, 0));
    if (!(m >= 0 && n >= 0 && m * n == double(arg(0).size())))
      throw ProgramError(in.line, "to_matrix of " + std::to_string(arg(0).size()) + " elements into " + std::to_string(m) +
                                      " x " + std::to_string(n));
    return node(Kind::Reshape, reshape(arg(0), static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(n)));
  }
  if (f == "to_vector" || f == "to_row_vector") {
    const Eigen::Index n = arg(0).size();  // column-major, as Stan's to_vector of a matrix
    return node(Kind::Reshape, reshape(arg(0), f == "to_row_vector" ? 1 : n, f == "to_row_vector" ? n : 1));
  }
  if (f == "rep_vector" || f == "rep_row_vector" || f == "rep_array" || f == "rep_matrix") {
    // The sizes are ints (arguments 1 and 2), read as the whole numbers they hold.
    auto size = [&](size_t i) {
      const double v = double(arg(i).m(0, 0));
      if (!(v >= 0 && v < double(int64_t(1) << 40))) throw ProgramError(in.line, f + " of size " + std::to_string(v));
      return static_cast<Eigen::Index>(v);
    };
    const Tensor<T>& x = arg(0);
    Eigen::Index rows = 1, cols = 1;
    if (f == "rep_vector") rows = size(1);
    else if (f == "rep_row_vector") cols = size(1);
    else if (args.size() == 3) rows = size(1), cols = size(2);
    else if (f == "rep_array") rows = size(1);
    else if (x.cols == 1 && x.rows > 1) rows = x.rows, cols = size(1);  // rep_matrix(vector, n): n columns
    else rows = size(1), cols = x.cols;                                  // rep_matrix(row_vector, m): m rows
    if (x.size() != 1 && !(x.rows == rows && (x.cols == 1 || x.cols == cols)) && !(x.rows == 1 && x.cols == cols))
      throw ProgramError(in.line, f + " of a " + shape_string(x) + " value");
    args.resize(1);
    return node(Kind::Broadcast, broadcast(x, rows, cols));
  }
  throw ProgramError(in.line, "the function '" + f + "' inside statements run one at a time");
}

// dst[b, c] = a. A container given whole (a parameter's value, `x = ...`) is split into its
// elements first, so that each element's later value is its own node.
// The step control of an ODE solve (fvi/kernel/ode.h), from the values alone: constants of the
// discrete solution, the same in every draw, with no derivative. `ode_error` returns the largest
// scaled error over the draws, so one step size meets the tolerances in each of them.
template <class T>
int Machine<T>::ode_control(const Instruction& in, const std::vector<int>& args) {
  auto scalar = [&](size_t i) {
    const Tensor<T>& v = value(args.at(i));
    if (v.size() != 1 || v.draws != 1) throw std::logic_error(in.name + ": argument " + std::to_string(i) + " is not one number");
    return double(v.m(0, 0));
  };
  auto result = [&](double x) { return add(Kind::Inactive, Tensor<T>::constant(static_cast<T>(x)), {}); };
  const std::string& f = in.name;
  if (f == "ode_error" || f == "ode_first_step") {
    // ode_error(err, y, y_new, rtol, atol); ode_first_step(y0, f0, span, rtol, atol)
    const Tensor<T>&a = value(args.at(0)), &b = value(args.at(1));
    const double rtol = scalar(3), atol = scalar(4);
    if (!(rtol > 0 && atol > 0 && rtol < HUGE_VAL && atol < HUGE_VAL))
      throw ProgramError(in.line, "an ODE solve's tolerances must be positive and finite, not rtol = " + std::to_string(rtol) +
                                      ", atol = " + std::to_string(atol));
    const Eigen::Index draws = joint_draws(a.draws, b.draws);
    if (f == "ode_error") {
      const Tensor<T>& c = value(args.at(2));
      double worst = 0;
      for (Eigen::Index s = 0; s < joint_draws(draws, c.draws); ++s)
        worst = std::max(worst, ode::scaled_error(a.draw(s).reshaped(), b.draw(s).reshaped(), c.draw(s).reshaped(), rtol, atol));
      return result(worst);
    }
    double y_scaled = 0, f_scaled = 0;
    for (Eigen::Index s = 0; s < draws; ++s)
      for (Eigen::Index i = 0; i < a.draw(s).size(); ++i) {
        const double y = std::abs(double(a.draw(s).reshaped()(i))), scale = atol + rtol * y;
        y_scaled = std::max(y_scaled, y / scale);
        f_scaled = std::max(f_scaled, std::abs(double(b.draw(s).reshaped()(i))) / scale);
      }
    if (!std::isfinite(f_scaled)) throw ProgramError(in.line, "an ODE system's derivative at its initial state is not finite");
    return result(ode::first_step(y_scaled, f_scaled, scalar(2)));
  }
  if (f == "ode_next_step") return result(ode::next_step(scalar(0), scalar(1)));
  if (f == "ode_step") {
    // ode_step(h, t, t_out, steps, max_num_steps): the step to take from t towards t_out.
    const double h = scalar(0), t = scalar(1), t_out = scalar(2), steps = scalar(3), max_steps = scalar(4);
    if (steps >= max_steps)
      throw ProgramError(in.line, "an ODE solve took max_num_steps = " + std::to_string(static_cast<long long>(max_steps)) +
                                      " steps before t = " + std::to_string(t_out) +
                                      " (a stiff system, or tolerances too tight for it; raise max_num_steps with the _tol form)");
    if (!(h >= 16 * std::numeric_limits<double>::epsilon() * std::max(1.0, std::abs(t))))
      throw ProgramError(in.line, "an ODE solve's step size fell to " + std::to_string(h) + " at t = " + std::to_string(t) +
                                      " (the solution blows up, or is not finite, there)");
    return result(std::min(h, t_out - t));
  }
  if (f == "ode_advance") {
    // ode_advance(t, h, t_out): t + h, exactly t_out when the step was the rest of the way.
    const double t = scalar(0), h = scalar(1), t_out = scalar(2);
    const double next = t + h;
    return result(next >= t_out - 4 * std::numeric_limits<double>::epsilon() * std::max(1.0, std::abs(t_out)) ? t_out : next);
  }
  if (f == "ode_times") {
    // ode_times(t0, ts): the output times must increase from after t0.
    const double t0 = scalar(0);
    const Tensor<T>& ts = value(args.at(1));
    double last = t0;
    for (Eigen::Index i = 0; i < ts.draw(0).size(); ++i) {
      const double ti = double(ts.draw(0).reshaped()(i));
      if (!(ti > last))
        throw ProgramError(in.line, "the output times of an ODE solve must increase from after t0 = " + std::to_string(t0) +
                                        ", but time " + std::to_string(i + 1) + " is " + std::to_string(ti) +
                                        (i ? " after " + std::to_string(last) : std::string()));
      last = ti;
    }
    return result(0);
  }
  throw std::logic_error("unknown ODE control '" + f + "'");
}

template <class T>
void Machine<T>::store(const Instruction& in) {
  if (in.number & kGeneralIndex) return store_general(in);
  Register& dst = regs_[static_cast<size_t>(in.dst)];
  if (dst.holds == Register::Holds::Real) explode(dst, in.line);
  if (dst.holds != Register::Holds::Elements) throw ProgramError(in.line, "an element assigned in a variable that is not a container");
  const int64_t r = in.b >= 0 ? integer(regs_[static_cast<size_t>(in.b)], in.line) - 1 : -1;
  const int64_t c = in.c >= 0 ? integer(regs_[static_cast<size_t>(in.c)], in.line) - 1 : -1;
  if ((in.b >= 0 && (r < 0 || r >= dst.rows)) || (in.c >= 0 && (c < 0 || c >= dst.cols)))
    throw ProgramError(in.line, "index " + std::to_string((in.b >= 0 && (r < 0 || r >= dst.rows) ? r : c) + 1) +
                                    " outside the container's " + std::to_string(dst.rows) + " x " +
                                    std::to_string(dst.cols));
  int v = real(regs_[static_cast<size_t>(in.a)], in.line);
  const Tensor<T>& x = value(v);
  const int64_t n_rows = r >= 0 ? 1 : dst.rows, n_cols = c >= 0 ? 1 : dst.cols;
  if (x.size() != n_rows * n_cols)
    throw ProgramError(in.line, "a value of " + std::to_string(x.size()) + " elements assigned to " +
                                    std::to_string(n_rows * n_cols));
  if (x.size() == 1) {
    dst.elements[static_cast<size_t>((c >= 0 ? c : 0) * dst.rows + (r >= 0 ? r : 0))] = v;
    return;
  }
  // A row or column: one element node of each of the value's elements, in order.
  Register whole;
  whole.holds = Register::Holds::Real;
  whole.node = v;
  explode(whole, in.line);
  for (int64_t k = 0; k < n_rows * n_cols; ++k) {
    const int64_t rr = r >= 0 ? r : k, cc = c >= 0 ? c : k;
    dst.elements[static_cast<size_t>(cc * dst.rows + rr)] = whole.elements[static_cast<size_t>(k)];
  }
}

// The 0-based rows (columns) that the Pick at in.args[first..first+2] takes of `extent`.
template <class T>
IntVec Machine<T>::pick(const Instruction& in, size_t first, int64_t extent, bool& one) {
  const auto kind = static_cast<Pick>(in.args.at(first));
  const int32_t x = in.args.at(first + 1), y = in.args.at(first + 2);
  auto reg = [&](int32_t r) -> const Register& { return regs_[static_cast<size_t>(r)]; };
  auto check = [&](int64_t i) {
    if (i < 1 || i > extent)
      throw ProgramError(in.line, "index " + std::to_string(i) + " outside 1.." + std::to_string(extent));
    return i - 1;
  };
  one = kind == Pick::One;
  IntVec out;
  switch (kind) {
    case Pick::All: out = range_index(0, extent - 1); break;
    case Pick::One: out = IntVec::Constant(1, check(integer(reg(x), in.line))); break;
    case Pick::Range: {
      const int64_t lo = integer(reg(x), in.line), hi = integer(reg(y), in.line);
      out = IntVec(std::max<int64_t>(0, hi - lo + 1));
      for (Eigen::Index i = 0; i < out.size(); ++i) out[i] = check(lo + i);
      break;
    }
    case Pick::Many: {
      const Register& r = reg(x);
      const int node = real(r, in.line);
      const Tensor<T>& v = value(node);
      if (tape_[static_cast<size_t>(node)].depends) throw ProgramError(in.line, "a multi-index that depends on a parameter");
      out = IntVec(v.size());
      for (Eigen::Index i = 0; i < v.size(); ++i) out[i] = check(static_cast<int64_t>(std::llround(double(v.m(i, 0)))));
      break;
    }
  }
  return out;
}

// a[rows, cols] by ranges and multi-indices: |rows| x |cols| (a single row as a column if asked).
template <class T>
int Machine<T>::select(const Instruction& in) {
  const int x = real(regs_[static_cast<size_t>(in.a)], in.line);
  const Tensor<T>& v = value(x);
  bool one_row = false, one_col = false;
  IntVec rows = pick(in, 0, v.rows, one_row), cols = pick(in, 3, v.cols, one_col);
  const bool column = (in.number & kAsColumn) && one_row && rows.size() == 1;
  Tensor<T> out = column ? Tensor<T>(cols.size(), 1, v.draws) : Tensor<T>(rows.size(), cols.size(), v.draws);
  for (Eigen::Index s = 0; s < v.draws; ++s) {
    auto d = v.draw(s);
    auto o = out.draw(s);
    for (Eigen::Index j = 0; j < cols.size(); ++j)
      for (Eigen::Index i = 0; i < rows.size(); ++i) {
        if (column) o(j, 0) = d(rows[i], cols[j]);
        else o(i, j) = d(rows[i], cols[j]);
      }
  }
  int n = add(Kind::Select, std::move(out), {x});
  tape_[n].rows_picked = std::move(rows);
  tape_[n].cols_picked = std::move(cols);
  tape_[n].column = column;
  return n;
}

// dst[rows, cols] = a, element by element in column-major order of the selection.
template <class T>
void Machine<T>::store_general(const Instruction& in) {
  Register& dst = regs_[static_cast<size_t>(in.dst)];
  if (dst.holds == Register::Holds::Real) explode(dst, in.line);
  if (dst.holds != Register::Holds::Elements) throw ProgramError(in.line, "an element assigned in a variable that is not a container");
  bool one_row = false, one_col = false;
  const int64_t dst_rows = dst.rows, dst_cols = dst.cols;
  IntVec rows = pick(in, 0, dst_rows, one_row), cols = pick(in, 3, dst_cols, one_col);
  Register whole;
  whole.holds = Register::Holds::Real;
  whole.node = real(regs_[static_cast<size_t>(in.a)], in.line);
  const Eigen::Index n = rows.size() * cols.size();
  if (value(whole.node).size() != n && value(whole.node).size() != 1)
    throw ProgramError(in.line, "a value of " + std::to_string(value(whole.node).size()) + " elements assigned to " +
                                    std::to_string(n));
  explode(whole, in.line);
  for (Eigen::Index j = 0; j < cols.size(); ++j)
    for (Eigen::Index i = 0; i < rows.size(); ++i) {
      const size_t k = whole.elements.size() == 1 ? 0 : static_cast<size_t>(j * rows.size() + i);
      dst.elements[static_cast<size_t>(cols[j] * dst_rows + rows[i])] = whole.elements[k];
    }
}

template <class T>
void Machine<T>::explode(Register& reg, int line) {
  (void)line;
  const int x = reg.node;
  const Eigen::Index rows = value(x).rows, cols = value(x).cols;
  Register r;
  r.holds = Register::Holds::Elements;
  r.rows = rows, r.cols = cols;
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) {
      const Tensor<T>& v = value(x);
      Tensor<T> e(1, 1, v.draws);
      for (Eigen::Index s = 0; s < v.draws; ++s) e.m(0, s) = v.draw(s)(i, j);
      int n = add(Kind::Index, std::move(e), {x});
      tape_[n].r = i, tape_[n].c = j;
      r.elements.push_back(n);
    }
  reg = std::move(r);
}

// ---- differentiating -----------------------------------------------------------------------------

template <class T>
const Tensor<T>& Machine<T>::operand_gradient(const Tensor<T>& g, size_t k) {
  if (!backward_done_) {
    // The adjoints' buffers are kept from run to run (has_adjoint_ says which hold this run's
    // values), so a tape of the same shape allocates none of them again.
    if (adjoint_.size() < tape_.size()) adjoint_.resize(tape_.size());
    has_adjoint_.assign(tape_.size(), false);
    gradients_.clear();
    for (const Tensor<T>* o : operands_) gradients_.push_back(Tensor<T>::zeros_like(*o));
    if (p_->log_density) {
      for (int t : terms_) accumulate(t, g);  // lp = sum of the terms' sums
    } else {
      Eigen::Index at = 0;
      for (int o : outputs_) {
        const Tensor<T>& v = value(o);
        Tensor<T> part(v.rows, v.cols, g.draws);
        for (Eigen::Index s = 0; s < g.draws; ++s)
          part.draw(s) = Eigen::Map<const Mat<T>>(g.draw(s).col(0).segment(at, v.size()).eval().data(), v.rows, v.cols);
        accumulate(o, part);
        at += v.size();
      }
    }
    for (int i = static_cast<int>(tape_.size()) - 1; i >= 0; --i)
      if (has_adjoint_[static_cast<size_t>(i)] && tape_[static_cast<size_t>(i)].active) backward_node(i);
    backward_done_ = true;
  }
  return gradients_.at(k);
}

// Adds g to the node's adjoint: summed to its shape and draws (an operand broadcast forward), or
// spread over its elements (the adjoint of a sum, a 1 x 1 g).
template <class T>
void Machine<T>::accumulate(int node, const Tensor<T>& g) {
  const Node& n = tape_[static_cast<size_t>(node)];
  if (!n.active) return;
  const Tensor<T>& v = n.value;
  Tensor<T>& a = adjoint_[static_cast<size_t>(node)];
  if (g.rows == v.rows && g.cols == v.cols && g.draws == v.draws) {  // the common case: no reshaping, no copy to add
    if (has_adjoint_[static_cast<size_t>(node)]) a.m += g.m;
    else a = g;
    has_adjoint_[static_cast<size_t>(node)] = true;
    return;
  }
  Tensor<T> shaped = (g.size() == 1 && v.size() != 1) ? sum_to(broadcast(g, v.rows, v.cols), v.rows, v.cols, v.draws)
                                                      : sum_to(g, v.rows, v.cols, v.draws);
  if (!has_adjoint_[static_cast<size_t>(node)]) {
    a = std::move(shaped);
    has_adjoint_[static_cast<size_t>(node)] = true;
  } else {
    a.m += shaped.m;
  }
}

template <class T>
void Machine<T>::backward_node(int i) {
  const Node& n = tape_[static_cast<size_t>(i)];
  // A reference: the node's arguments come before it on the tape, so accumulating into them
  // never touches (or moves) this adjoint.
  const Tensor<T>& g = adjoint_[static_cast<size_t>(i)];
  auto arg = [&](size_t k) -> const Tensor<T>& { return tape_[static_cast<size_t>(n.args.at(k))].value; };
  auto active = [&](size_t k) { return tape_[static_cast<size_t>(n.args.at(k))].active; };
  switch (n.kind) {
    case Kind::Leaf: {
      Tensor<T>& out = gradients_.at(static_cast<size_t>(n.operand));
      out.m += sum_like(g, out).m;
      return;
    }
    case Kind::Const:
    case Kind::Inactive: return;
    case Kind::Index: {
      const Tensor<T>& x = arg(0);
      Tensor<T> gx(x.rows, x.cols, g.draws);
      const Eigen::Index rows = n.r >= 0 ? 1 : x.rows, cols = n.c >= 0 ? 1 : x.cols;
      for (Eigen::Index s = 0; s < g.draws; ++s) {
        auto block = gx.draw(s).block(n.r >= 0 ? n.r : 0, n.c >= 0 ? n.c : 0, rows, cols);
        if (n.column) block = g.draw(s).transpose();
        else block = g.draw(s);
      }
      return accumulate(n.args[0], gx);
    }
    case Kind::Slice: {
      const Tensor<T>& x = arg(0);
      IntVec idx = range_index(n.r + 1, n.c + 1);
      return accumulate(n.args[0], n.column ? scatter_cols(g, idx, x.cols) : scatter_rows(g, idx, x.rows));
    }
    case Kind::Transpose: return accumulate(n.args[0], transpose(g));
    case Kind::Unary: return accumulate(n.args[0], mul(g, unary_derivative(n.name, arg(0), n.value)));
    case Kind::Neg: return accumulate(n.args[0], neg(g));
    case Kind::Add:
      accumulate(n.args[0], g);
      return accumulate(n.args[1], g);
    case Kind::Sub:
      accumulate(n.args[0], g);
      return accumulate(n.args[1], neg(g));
    case Kind::Mul:
      if (active(0)) accumulate(n.args[0], mul(g, arg(1)));
      if (active(1)) accumulate(n.args[1], mul(g, arg(0)));
      return;
    case Kind::Div:
      if (active(0)) accumulate(n.args[0], div(g, arg(1)));
      if (active(1)) accumulate(n.args[1], neg(div(mul(g, n.value), arg(1))));
      return;
    case Kind::Pow:
      // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a)
      if (active(0)) accumulate(n.args[0], mul(g, mul(arg(1), pow(arg(0), sub(arg(1), Tensor<T>::constant(1))))));
      if (active(1)) accumulate(n.args[1], mul(g, mul(n.value, unary("log", arg(0)))));
      return;
    case Kind::MatMul:
      if (active(0)) accumulate(n.args[0], matmul_grad_left(g, arg(1), arg(0).draws));
      if (active(1)) accumulate(n.args[1], matmul_grad_right(arg(0), g, arg(1).draws));
      return;
    case Kind::Lpdf: {
      Operands<T> xs;
      for (size_t k = 0; k < n.args.size(); ++k) xs.push_back(&arg(k));
      const Tensor<T> spread = broadcast(g, n.r, n.c);  // the adjoint of each density summed
      for (size_t k = 0; k < n.args.size(); ++k)
        if (active(k)) accumulate(n.args[k], lpdf_vjp(n.name, k, spread, xs));
      return;
    }
    case Kind::LogSumExp:
      // d lse / dx = exp(x - lse)
      for (size_t k = 0; k < n.args.size(); ++k)
        if (active(k)) accumulate(n.args[k], mul(g, unary("exp", sub(arg(k), n.value))));
      return;
    case Kind::Sum: return accumulate(n.args[0], broadcast(g, arg(0).rows, arg(0).cols));
    case Kind::Mean: {
      Tensor<T> share = g;
      share.m /= static_cast<T>(std::max<Eigen::Index>(1, arg(0).size()));
      return accumulate(n.args[0], broadcast(share, arg(0).rows, arg(0).cols));
    }
    case Kind::Broadcast: return accumulate(n.args[0], g);  // summed to the operand's shape
    case Kind::Prod:  // d prod / d x_i = prod / x_i
      return accumulate(n.args[0], div(mul(g, n.value), arg(0)));
    case Kind::Reshape: return accumulate(n.args[0], reshape(g, arg(0).rows, arg(0).cols));
    case Kind::CumulativeSum: return accumulate(n.args[0], cumulative_sum_grad(g));
    case Kind::Cholesky: return accumulate(n.args[0], cholesky_grad(n.value, g));
    case Kind::DiagMatrix: return accumulate(n.args[0], diagonal(g));
    case Kind::Inverse: return accumulate(n.args[0], inverse_grad(n.value, g));
    case Kind::Diagonal: return accumulate(n.args[0], diag_matrix(g));
    case Kind::Select: {
      const Tensor<T>& x = arg(0);
      Tensor<T> gx(x.rows, x.cols, g.draws);
      const bool column = n.column;
      for (Eigen::Index s = 0; s < g.draws; ++s) {
        auto d = gx.draw(s);
        auto gs = g.draw(s);
        for (Eigen::Index j = 0; j < n.cols_picked.size(); ++j)
          for (Eigen::Index i = 0; i < n.rows_picked.size(); ++i)
            d(n.rows_picked[i], n.cols_picked[j]) += column ? gs(j, 0) : gs(i, j);
      }
      return accumulate(n.args[0], gx);
    }
    case Kind::Extreme:  // max or min: the derivative goes to the elements equal to it
      return accumulate(n.args[0], mul(g, compare("==", arg(0), n.value)));
    case Kind::Softmax: return accumulate(n.args[0], softmax_grad(n.value, g));
    case Kind::LogSoftmax: return accumulate(n.args[0], log_softmax_grad(n.value, g));
    case Kind::Gather:
      for (size_t k = 0; k < n.args.size(); ++k) {
        Tensor<T> e(1, 1, g.draws);
        for (Eigen::Index s = 0; s < g.draws; ++s) e.m(0, s) = g.draw(s)(static_cast<Eigen::Index>(k));
        accumulate(n.args[k], e);
      }
      return;
  }
}

}  // namespace fvi::kernel
