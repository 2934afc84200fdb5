#include "fvi/data/transformed_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fvi::data {

namespace {

constexpr int kMaxDepth = 512;                     // nesting of the program's lists
constexpr int64_t kMaxElements = int64_t(1) << 36;  // of one value: 512 GiB of doubles

// ---- the program's S-expressions -------------------------------------------------------------

struct Node {
  std::string atom;  // a leaf's text; empty for a list
  std::vector<Node> items;
  bool is_list() const { return atom.empty(); }
};

class Reader {
 public:
  explicit Reader(const std::string& text) : text_(text) {}

  Node read() {
    Node n = node(0);
    skip();
    if (pos_ != text_.size()) fail("text after the program");
    return n;
  }

 private:
  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError("transformed data: the program fvic wrote is malformed (" + what + " at character " +
                    std::to_string(pos_) + "); rebuild the program with this fvic");
  }
  Node node(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    skip();
    if (pos_ >= text_.size()) fail("the end of the text");
    Node n;
    if (text_[pos_] == '(') {
      ++pos_;
      for (;;) {
        skip();
        if (pos_ >= text_.size()) fail("an unclosed list");
        if (text_[pos_] == ')') break;
        n.items.push_back(node(depth + 1));
      }
      ++pos_;
      return n;
    }
    if (text_[pos_] == ')') fail("an unexpected ')'");
    const size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) && text_[pos_] != '(' &&
           text_[pos_] != ')')
      ++pos_;
    n.atom = text_.substr(start, pos_ - start);
    return n;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

// ---- values ----------------------------------------------------------------------------------

enum class Base { Scalar, Vector, RowVector, Matrix };

struct Value {
  Base base = Base::Scalar;
  bool is_int = false;
  int rank = 0;                // array dims, first in `dims`
  std::vector<int64_t> dims;   // the array dims, then the vector's length or the matrix's rows, cols
  std::vector<double> v;       // column-major over dims

  int base_dims() const { return base == Base::Scalar ? 0 : base == Base::Matrix ? 2 : 1; }
  bool scalar() const { return dims.empty(); }
  int64_t size() const { return static_cast<int64_t>(v.size()); }
};

// psi(x) for x > 0: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic
// series (DLMF 5.11.2) to x^-10.
double digamma(double x) {
  if (!(x > 0)) return std::nan("");
  double shift = 0;
  for (; x < 10; x += 1) shift -= 1 / x;
  const double w = 1 / (x * x);
  return shift + std::log(x) - 0.5 / x -
         w * (1.0 / 12 - w * (1.0 / 120 - w * (1.0 / 252 - w * (1.0 / 240 - w * (1.0 / 132)))));
}

[[noreturn]] void fail(int line, const std::string& what) {
  throw DataError("transformed data, line " + std::to_string(line) + ": " + what);
}

int64_t element_count(const std::vector<int64_t>& dims, int line) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) fail(line, "a size is negative (" + std::to_string(d) + ")");
    if (d != 0 && n > kMaxElements / d) fail(line, "a value has more than 2^36 elements");
    n *= d;
  }
  return n;
}

Value scalar(double x, bool is_int) {
  Value out;
  out.is_int = is_int;
  out.v = {x};
  return out;
}

// A value of the shape of `like` (base, rank, dims), filled with `fill`.
Value shaped(const Value& like, bool is_int, double fill = 0) {
  Value out;
  out.base = like.base;
  out.rank = like.rank;
  out.dims = like.dims;
  out.is_int = is_int;
  out.v.assign(like.v.size(), fill);
  return out;
}

std::string shape_text(const Value& x) {
  if (x.scalar()) return "a scalar";
  std::string s = "[";
  for (size_t i = 0; i < x.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(x.dims[i]);
  return s + "]";
}

// Rows and columns of a vector (n x 1), row_vector (1 x n) or matrix, for products.
void matrix_shape(const Value& x, int64_t& r, int64_t& c) {
  if (x.base == Base::Vector) r = x.dims[0], c = 1;
  else if (x.base == Base::RowVector) r = 1, c = x.dims[0];
  else r = x.dims[0], c = x.dims[1];
}

int64_t whole(const Value& x, int line, const std::string& what) {
  if (!x.scalar()) fail(line, what + " must be a scalar, not " + shape_text(x));
  const double d = x.v[0];
  if (!(std::abs(d) < 9.0e15) || d != std::floor(d)) fail(line, what + " must be an int, not " + std::to_string(d));
  return static_cast<int64_t>(d);
}

// ---- the interpreter -------------------------------------------------------------------------

class Program {
 public:
  Program(DataSet& data, const DataSet& public_data) : data_(data), public_(public_data) {}

  void run(const Node& program) {
    if (!program.is_list() || program.items.empty() || program.items[0].atom != "program")
      throw DataError("transformed data: the program fvic wrote is malformed (no `program`)");
    scopes_.emplace_back();
    for (size_t i = 1; i < program.items.size(); ++i) statement(program.items[i], 0);
    for (const std::string& name : exported_) {
      const Value& x = scopes_.front().at(name);
      Variable out;
      out.name = name;
      out.source = "transformed data";
      out.values = x.v;
      std::vector<int64_t> dims = x.dims;
      if (x.base == Base::RowVector && x.rank == 0) dims = {1, x.dims[0]};
      out.set_dims(dims);
      data_.add(std::move(out));
    }
  }

 private:
  using Scope = std::map<std::string, Value>;

  static const std::string& atom(const Node& n, size_t i) {
    if (i >= n.items.size() || n.items[i].is_list())
      throw DataError("transformed data: the program fvic wrote is malformed (a missing name)");
    return n.items[i].atom;
  }
  static int line_of(const Node& n) { return std::atoi(atom(n, 1).c_str()); }

  Value* find(const std::string& name) {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      auto it = s->find(name);
      if (it != s->end()) return &it->second;
    }
    return nullptr;
  }

  // ---- statements

  void statement(const Node& s, int depth) {
    if (depth > kMaxDepth) throw DataError("transformed data: statements nested too deep");
    const std::string& kind = atom(s, 0);
    if (kind == "input") return input(s);
    if (kind == "bounds") return check_bounds(s);
    if (kind == "decl") return declare(s);
    if (kind == "assign") return assign(s);
    if (kind == "block") {
      scopes_.emplace_back();
      for (size_t i = 1; i < s.items.size(); ++i) statement(s.items[i], depth + 1);
      scopes_.pop_back();
      return;
    }
    if (kind == "if") {
      const int line = line_of(s);
      const Value c = expr(s.items.at(2), line, 0);
      if (!c.scalar()) fail(line, "a condition must be a scalar");
      if (c.v[0] != 0) statement(s.items.at(3), depth + 1);
      else if (s.items.size() > 4) statement(s.items[4], depth + 1);
      return;
    }
    if (kind == "for") {
      const int line = line_of(s);
      const std::string& var = atom(s, 2);
      const int64_t lo = whole(expr(s.items.at(3), line, 0), line, "a loop bound");
      const int64_t hi = whole(expr(s.items.at(4), line, 0), line, "a loop bound");
      for (int64_t i = lo; i <= hi; ++i) {
        scopes_.emplace_back();
        scopes_.back()[var] = scalar(static_cast<double>(i), true);
        statement(s.items.at(5), depth + 1);
        scopes_.pop_back();
      }
      return;
    }
    throw DataError("transformed data: the program fvic wrote is malformed (statement '" + kind + "')");
  }

  static Base base_of(const std::string& b) {
    return b == "v" ? Base::Vector : b == "r" ? Base::RowVector : b == "m" ? Base::Matrix : Base::Scalar;
  }

  // (input NAME TYPE BASE RANK): the party's data variable, or the public data's.
  void input(const Node& s) {
    const std::string& name = atom(s, 1);
    const Variable* x = data_.find(name);
    if (!x) x = public_.find(name);
    if (!x) throw DataError("transformed data: the data variable '" + name + "' is not in this party's data");
    Value out;
    out.is_int = atom(s, 2) == "int";
    out.base = base_of(atom(s, 3));
    out.rank = std::atoi(atom(s, 4).c_str());
    out.dims = x->dims;
    if (out.base == Base::RowVector && out.rank == 0 && out.dims.size() == 2) out.dims = {out.dims[1]};
    if (static_cast<int>(out.dims.size()) != out.rank + out.base_dims())
      throw DataError("transformed data: the data variable '" + name + "' does not have its declared shape");
    out.v = x->values;
    scopes_.front()[name] = std::move(out);
  }

  // (bounds LINE NAME LOWER UPPER): every element of NAME within its declared bounds.
  void check_bounds(const Node& s) {
    const int line = line_of(s);
    const std::string& name = atom(s, 2);
    const Value* x = find(name);
    if (!x) fail(line, "'" + name + "' is not declared");
    auto bound = [&](const Node& b, double open) {
      if (!b.is_list()) return open;
      const Value v = expr(b, line, 0);
      if (!v.scalar()) fail(line, "a bound of '" + name + "' is not a scalar");
      return v.v[0];
    };
    const double lo = bound(s.items.at(3), -INFINITY), hi = bound(s.items.at(4), INFINITY);
    for (size_t i = 0; i < x->v.size(); ++i)
      if (!(x->v[i] >= lo && x->v[i] <= hi))
        fail(line, "'" + name + "'" + (x->scalar() ? "" : " element " + std::to_string(i + 1) + " (column-major)") + " = " +
                       std::to_string(x->v[i]) + " is outside its declared bounds [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
  }

  // (decl LINE NAME TYPE BASE RANK EXPORT (DIM...) [EXPR])
  void declare(const Node& s) {
    const int line = line_of(s);
    const std::string& name = atom(s, 2);
    Value x;
    x.is_int = atom(s, 3) == "int";
    x.base = base_of(atom(s, 4));
    x.rank = std::atoi(atom(s, 5).c_str());
    const bool exported = atom(s, 6) == "1";
    const Node& dims = s.items.at(7);
    for (const Node& d : dims.items) {
      const int64_t n = whole(expr(d, line, 0), line, "the size of '" + name + "'");
      if (n < 0) fail(line, "the size of '" + name + "' is negative (" + std::to_string(n) + ")");
      x.dims.push_back(n);
    }
    if (static_cast<int>(x.dims.size()) != x.rank + x.base_dims())
      throw DataError("transformed data: the program fvic wrote is malformed (the dims of '" + name + "')");
    // Stan's value before an assignment: NaN for reals (an int reads as the smallest int).
    x.v.assign(static_cast<size_t>(element_count(x.dims, line)),
               x.is_int ? static_cast<double>(std::numeric_limits<int>::min()) : std::nan(""));
    if (s.items.size() > 8) store(x, expr(s.items[8], line, 0), line, name);
    scopes_.back()[name] = std::move(x);
    if (exported) exported_.push_back(name);
  }

  // Writes `value` into the whole of `target`, converted to its type; sizes must agree.
  static void store(Value& target, const Value& value, int line, const std::string& what) {
    if (value.scalar() && target.scalar()) {
      target.v[0] = value.v[0];
    } else if (value.dims != target.dims) {
      if (value.size() != target.size() || value.scalar())
        fail(line, "'" + what + "' is " + shape_text(target) + ", the value assigned " + shape_text(value));
      target.v = value.v;
    } else {
      target.v = value.v;
    }
    if (target.is_int)
      for (double d : target.v)
        if (d != std::floor(d)) fail(line, "'" + what + "' is an int, the value assigned is " + std::to_string(d));
  }

  // (assign LINE OP LVALUE EXPR)
  void assign(const Node& s) {
    const int line = line_of(s);
    const std::string& op = atom(s, 2);
    const Node& lhs = s.items.at(3);
    Value value = expr(s.items.at(4), line, 0);
    const Node& base = lhs.items.at(0).atom == "index" ? lhs.items.at(1) : lhs;
    const std::string& name = atom(base, 1);
    Value* target = find(name);
    if (!target) fail(line, "'" + name + "' is not declared");
    std::vector<int64_t> offsets;
    Value selected = lhs.items.at(0).atom == "index" ? select(*target, lhs, 2, line, &offsets) : *target;
    if (op != "=") value = binary(op.substr(0, 1), selected, value, line);
    if (lhs.items.at(0).atom != "index") {
      store(*target, value, line, name);
      return;
    }
    if (value.scalar() && selected.scalar()) {
      selected.v[0] = value.v[0];
    } else if (value.size() != selected.size() || value.scalar()) {
      fail(line, "the elements of '" + name + "' assigned are " + shape_text(selected) + ", the value " +
                     shape_text(value));
    }
    for (size_t i = 0; i < offsets.size(); ++i) {
      const double d = value.scalar() ? value.v[0] : value.v[i];
      if (target->is_int && d != std::floor(d))
        fail(line, "'" + name + "' is an int, the value assigned is " + std::to_string(d));
      target->v[static_cast<size_t>(offsets[i])] = d;
    }
  }

  // ---- expressions

  Value expr(const Node& e, int line, int depth) {
    if (depth > kMaxDepth) fail(line, "an expression nested too deep");
    const std::string& kind = atom(e, 0);
    if (kind == "int") return scalar(std::strtod(atom(e, 1).c_str(), nullptr), true);
    if (kind == "real") return scalar(std::strtod(atom(e, 1).c_str(), nullptr), false);
    if (kind == "var") {
      const Value* x = find(atom(e, 1));
      if (!x) fail(line, "'" + atom(e, 1) + "' has no value here");
      return *x;
    }
    if (kind == "unary") {
      Value x = expr(e.items.at(2), line, depth + 1);
      const std::string& op = atom(e, 1);
      if (op == "!") {
        if (!x.scalar()) fail(line, "'!' needs a scalar");
        return scalar(x.v[0] == 0 ? 1 : 0, true);
      }
      if (op == "-")
        for (double& d : x.v) d = -d;
      return x;
    }
    if (kind == "bin") {
      const std::string& op = atom(e, 1);
      Value a = expr(e.items.at(2), line, depth + 1);
      if (op == "&&" || op == "||") {  // short-circuit, as Stan
        if (!a.scalar()) fail(line, "'" + op + "' needs scalars");
        if ((op == "&&") == (a.v[0] == 0)) return scalar(op == "||" ? 1 : 0, true);
        Value b = expr(e.items.at(3), line, depth + 1);
        if (!b.scalar()) fail(line, "'" + op + "' needs scalars");
        return scalar(b.v[0] != 0 ? 1 : 0, true);
      }
      return binary(op, a, expr(e.items.at(3), line, depth + 1), line);
    }
    if (kind == "cond") {
      const Value c = expr(e.items.at(1), line, depth + 1);
      if (!c.scalar()) fail(line, "the condition of '?:' must be a scalar");
      return expr(e.items.at(c.v[0] != 0 ? 2 : 3), line, depth + 1);
    }
    if (kind == "index") {
      const Value x = expr(e.items.at(1), line, depth + 1);
      return select(x, e, 2, line, nullptr);
    }
    if (kind == "call") {
      std::vector<Value> args;
      for (size_t i = 2; i < e.items.size(); ++i) args.push_back(expr(e.items[i], line, depth + 1));
      return call(atom(e, 1), args, line);
    }
    if (kind == "array" || kind == "rowvec") {
      std::vector<Value> xs;
      for (size_t i = 1; i < e.items.size(); ++i) xs.push_back(expr(e.items[i], line, depth + 1));
      if (xs.empty()) fail(line, "an empty literal");
      Value out;
      out.is_int = true;
      for (const Value& x : xs) {
        if (x.dims != xs[0].dims) fail(line, "the elements of a literal differ in shape");
        out.is_int = out.is_int && x.is_int;
      }
      const int64_t n = static_cast<int64_t>(xs.size()), each = xs[0].size();
      if (kind == "rowvec" && !xs[0].scalar()) {  // [r1, r2]: a matrix of rows
        out.base = Base::Matrix;
        out.dims = {n, xs[0].dims[0]};
      } else if (kind == "rowvec") {
        out.base = Base::RowVector;
        out.dims = {n};
      } else {
        out.base = xs[0].base;
        out.rank = xs[0].rank + 1;
        out.dims = xs[0].dims;
        out.dims.insert(out.dims.begin(), n);
      }
      out.v.assign(static_cast<size_t>(n * each), 0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < each; ++j) out.v[static_cast<size_t>(i + n * j)] = xs[static_cast<size_t>(i)].v[static_cast<size_t>(j)];
      return out;
    }
    throw DataError("transformed data: the program fvic wrote is malformed (expression '" + kind + "')");
  }

  // x[IDX...] for e.items[first...]: each index selects along the next dim (array dims first, then
  // a matrix's rows and columns); a single index drops its dim. `offsets` (if given) receives the
  // selected elements' positions in x, in the result's order.
  Value select(const Value& x, const Node& e, size_t first, int line, std::vector<int64_t>* offsets) {
    const size_t count = e.items.size() - first;
    if (count > x.dims.size()) fail(line, "too many indices for " + shape_text(x));
    std::vector<std::vector<int64_t>> picks(x.dims.size());
    std::vector<bool> dropped(x.dims.size(), false);
    for (size_t d = 0; d < x.dims.size(); ++d) {
      const int64_t n = x.dims[d];
      std::vector<int64_t>& p = picks[d];
      auto check = [&](int64_t i) {
        if (i < 1 || i > n)
          fail(line, "index " + std::to_string(i) + " is outside 1.." + std::to_string(n) + " (dimension " +
                         std::to_string(d + 1) + ")");
        return i - 1;
      };
      if (d >= count) {
        for (int64_t i = 0; i < n; ++i) p.push_back(i);
        continue;
      }
      const Node& ix = e.items[first + d];
      const std::string& how = atom(ix, 0);
      if (how == "all") {
        for (int64_t i = 0; i < n; ++i) p.push_back(i);
      } else if (how == "range") {
        const bool open_lo = !ix.items.at(1).is_list(), open_hi = !ix.items.at(2).is_list();
        const int64_t lo = open_lo ? 1 : whole(expr(ix.items[1], line, 0), line, "a range bound");
        const int64_t hi = open_hi ? n : whole(expr(ix.items[2], line, 0), line, "a range bound");
        for (int64_t i = lo; i <= hi; ++i) p.push_back(check(i));
      } else {
        const Value i = expr(ix.items.at(1), line, 0);
        if (i.scalar()) {
          p.push_back(check(whole(i, line, "an index")));
          dropped[d] = true;
        } else {  // a multi-index: an array of ints
          for (double v : i.v) p.push_back(check(whole(scalar(v, true), line, "an index")));
        }
      }
    }
    Value out;
    out.is_int = x.is_int;
    int kept_array = 0;
    for (int d = 0; d < x.rank; ++d)
      if (!dropped[static_cast<size_t>(d)]) ++kept_array;
    out.rank = kept_array;
    const bool row_gone = x.base_dims() >= 1 && dropped[static_cast<size_t>(x.rank)];
    const bool col_gone = x.base == Base::Matrix && dropped[static_cast<size_t>(x.rank + 1)];
    if (x.base == Base::Matrix) {
      out.base = row_gone && col_gone ? Base::Scalar : row_gone ? Base::RowVector : col_gone ? Base::Vector : Base::Matrix;
    } else {
      out.base = row_gone ? Base::Scalar : x.base;
    }
    for (size_t d = 0; d < x.dims.size(); ++d)
      if (!dropped[d]) out.dims.push_back(static_cast<int64_t>(picks[d].size()));
    std::vector<int64_t> stride(x.dims.size(), 1);
    for (size_t d = 1; d < x.dims.size(); ++d) stride[d] = stride[d - 1] * x.dims[d - 1];
    const int64_t total = element_count(out.dims, line);
    out.v.reserve(static_cast<size_t>(total));
    std::vector<size_t> at(x.dims.size(), 0);  // position in each dim's picks, first fastest
    for (int64_t k = 0; k < total; ++k) {
      int64_t offset = 0;
      for (size_t d = 0; d < x.dims.size(); ++d) offset += picks[d][at[d]] * stride[d];
      out.v.push_back(x.v[static_cast<size_t>(offset)]);
      if (offsets) offsets->push_back(offset);
      for (size_t d = 0; d < x.dims.size(); ++d) {
        if (++at[d] < picks[d].size()) break;
        at[d] = 0;
      }
    }
    return out;
  }

  static Value elementwise(const Value& a, const Value& b, bool is_int, int line, const std::string& op,
                           const std::function<double(double, double)>& f) {
    if (!a.scalar() && !b.scalar() && a.dims != b.dims)
      fail(line, "'" + op + "' of " + shape_text(a) + " and " + shape_text(b));
    Value out = shaped(a.scalar() ? b : a, is_int);
    for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = f(a.scalar() ? a.v[0] : a.v[i], b.scalar() ? b.v[0] : b.v[i]);
    return out;
  }

  static Value product(const Value& a, const Value& b, int line) {
    if (a.rank || b.rank || a.base == Base::Scalar || b.base == Base::Scalar) fail(line, "'*' of arrays");
    int64_t ar, ac, br, bc;
    matrix_shape(a, ar, ac);
    matrix_shape(b, br, bc);
    if (ac != br) fail(line, "'*' of " + shape_text(a) + " and " + shape_text(b) + ": the inner sizes differ");
    Value out;
    out.is_int = a.is_int && b.is_int;
    if (ar == 1 && a.base == Base::RowVector && bc == 1 && b.base == Base::Vector) out.base = Base::Scalar;
    else if (b.base == Base::Vector) out.base = Base::Vector, out.dims = {ar};
    else if (a.base == Base::RowVector) out.base = Base::RowVector, out.dims = {bc};
    else out.base = Base::Matrix, out.dims = {ar, bc};
    out.v.assign(static_cast<size_t>(element_count({ar, bc}, line)), 0);
    for (int64_t j = 0; j < bc; ++j)
      for (int64_t k = 0; k < ac; ++k)
        for (int64_t i = 0; i < ar; ++i)
          out.v[static_cast<size_t>(i + ar * j)] += a.v[static_cast<size_t>(i + ar * k)] * b.v[static_cast<size_t>(k + br * j)];
    return out;
  }

  static Value binary(const std::string& op, const Value& a, const Value& b, int line) {
    const bool ints = a.is_int && b.is_int;
    if (op == "+") return elementwise(a, b, ints, line, op, [](double x, double y) { return x + y; });
    if (op == "-") return elementwise(a, b, ints, line, op, [](double x, double y) { return x - y; });
    if (op == "*" && !a.scalar() && !b.scalar()) return product(a, b, line);
    if (op == "*" || op == ".*") return elementwise(a, b, ints, line, op, [](double x, double y) { return x * y; });
    if (op == "/" || op == "./") {
      if (op == "/" && !b.scalar()) fail(line, "'/' by " + shape_text(b) + " (divide elementwise with ./)");
      if (ints) {  // Stan: an int divided by an int truncates
        return elementwise(a, b, true, line, op, [line](double x, double y) {
          if (y == 0) fail(line, "an int divided by zero");
          return std::trunc(x / y);
        });
      }
      return elementwise(a, b, false, line, op, [](double x, double y) { return x / y; });
    }
    if (op == "%") {
      if (!ints) fail(line, "'%' needs ints");
      return elementwise(a, b, true, line, op, [line](double x, double y) {
        if (y == 0) fail(line, "'%' by zero");
        return std::fmod(x, y);
      });
    }
    if (op == "^" || op == ".^") return elementwise(a, b, false, line, op, [](double x, double y) { return std::pow(x, y); });
    if (!a.scalar() || !b.scalar()) fail(line, "'" + op + "' compares scalars");
    const double x = a.v[0], y = b.v[0];
    bool r;
    if (op == "==") r = x == y;
    else if (op == "!=") r = x != y;
    else if (op == "<") r = x < y;
    else if (op == "<=") r = x <= y;
    else if (op == ">") r = x > y;
    else if (op == ">=") r = x >= y;
    else fail(line, "the operator '" + op + "'");
    return scalar(r ? 1 : 0, true);
  }

  // ---- functions

  static Value vector_of(std::vector<double> v, Base base, bool is_int) {
    Value out;
    out.base = base;
    out.is_int = is_int;
    out.dims = {static_cast<int64_t>(v.size())};
    out.v = std::move(v);
    return out;
  }

  static Value call(const std::string& f, const std::vector<Value>& a, int line) {
    auto arity = [&](size_t lo, size_t hi) {
      if (a.size() < lo || a.size() > hi) fail(line, f + " takes " + std::to_string(lo) + (lo == hi ? "" : " to " + std::to_string(hi)) + " arguments");
    };
    static const std::map<std::string, double (*)(double)> unary = {
        {"exp", [](double x) { return std::exp(x); }},       {"log", [](double x) { return std::log(x); }},
        {"log1p", [](double x) { return std::log1p(x); }},   {"expm1", [](double x) { return std::expm1(x); }},
        {"log1m", [](double x) { return std::log1p(-x); }},  {"sqrt", [](double x) { return std::sqrt(x); }},
        {"square", [](double x) { return x * x; }},          {"inv", [](double x) { return 1 / x; }},
        {"inv_sqrt", [](double x) { return 1 / std::sqrt(x); }},
        {"fabs", [](double x) { return std::abs(x); }},      {"floor", [](double x) { return std::floor(x); }},
        {"ceil", [](double x) { return std::ceil(x); }},     {"round", [](double x) { return std::round(x); }},
        {"trunc", [](double x) { return std::trunc(x); }},   {"tanh", [](double x) { return std::tanh(x); }},
        {"sin", [](double x) { return std::sin(x); }},       {"cos", [](double x) { return std::cos(x); }},
        {"lgamma", [](double x) { return std::lgamma(x); }}, {"erf", [](double x) { return std::erf(x); }},
        {"inv_logit", [](double x) { return 1 / (1 + std::exp(-x)); }},
        {"logit", [](double x) { return std::log(x / (1 - x)); }},
        {"Phi", [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }},
        {"log10", [](double x) { return std::log10(x); }},   {"log2", [](double x) { return std::log2(x); }},
        {"log1p_exp", [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }},
        {"log_inv_logit", [](double x) { return x < 0 ? x - std::log1p(std::exp(x)) : -std::log1p(std::exp(-x)); }},
        {"log1m_inv_logit", [](double x) { return x > 0 ? -x - std::log1p(std::exp(-x)) : -std::log1p(std::exp(x)); }},
        {"relu", [](double x) { return x > 0 ? x : 0.0; }},  {"digamma", [](double x) { return digamma(x); }},
        {"asin", [](double x) { return std::asin(x); }},     {"acos", [](double x) { return std::acos(x); }},
        {"atan", [](double x) { return std::atan(x); }},     {"tan", [](double x) { return std::tan(x); }},
        {"sinh", [](double x) { return std::sinh(x); }},     {"cosh", [](double x) { return std::cosh(x); }},
        {"asinh", [](double x) { return std::asinh(x); }},   {"acosh", [](double x) { return std::acosh(x); }},
        {"atanh", [](double x) { return std::atanh(x); }},   {"step", [](double x) { return x < 0 ? 0.0 : 1.0; }},
        {"inv_cloglog", [](double x) { return -std::expm1(-std::exp(x)); }},
        {"log1m_exp", [](double x) { return x > -M_LN2 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x)); }},
        {"Phi_approx", [](double x) { return 1 / (1 + std::exp(-(0.07056 * x * x * x + 1.5976 * x))); }},
        {"cbrt", [](double x) { return std::cbrt(x); }},     {"exp2", [](double x) { return std::exp2(x); }},
        {"erfc", [](double x) { return std::erfc(x); }},
    };
    if (auto it = unary.find(f); it != unary.end()) {
      arity(1, 1);
      Value out = shaped(a[0], false);
      for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = it->second(a[0].v[i]);
      return out;
    }
    if (f == "abs") {
      arity(1, 1);
      Value out = shaped(a[0], a[0].is_int);
      for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = std::abs(a[0].v[i]);
      return out;
    }
    if (f == "lbeta" || f == "lchoose") {
      arity(2, 2);
      if (f == "lbeta")
        return elementwise(a[0], a[1], false, line, f,
                           [](double x, double y) { return std::lgamma(x) + std::lgamma(y) - std::lgamma(x + y); });
      return elementwise(a[0], a[1], false, line, f, [](double n, double k) {
        return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
      });
    }
    if (f == "pow" || f == "fmin" || f == "fmax" || ((f == "min" || f == "max") && a.size() == 2)) {
      arity(2, 2);
      const bool ints = (f == "min" || f == "max") && a[0].is_int && a[1].is_int;
      if (f == "pow") return elementwise(a[0], a[1], false, line, f, [](double x, double y) { return std::pow(x, y); });
      const bool lower = f == "fmin" || f == "min";
      return elementwise(a[0], a[1], ints, line, f, [lower](double x, double y) { return lower ? std::min(x, y) : std::max(x, y); });
    }
    if (f == "sum" || f == "prod" || f == "min" || f == "max" || f == "mean" || f == "variance" || f == "sd" ||
        f == "log_sum_exp") {
      arity(1, 1);
      const std::vector<double>& v = a[0].v;
      const double n = static_cast<double>(v.size());
      if (f == "sum" || f == "prod") {
        double r = f == "sum" ? 0 : 1;
        for (double d : v) r = f == "sum" ? r + d : r * d;
        return scalar(r, a[0].is_int);
      }
      if (v.empty()) fail(line, f + " of no elements");
      if (f == "min" || f == "max")
        return scalar(f == "min" ? *std::min_element(v.begin(), v.end()) : *std::max_element(v.begin(), v.end()), a[0].is_int);
      if (f == "log_sum_exp") {
        const double m = *std::max_element(v.begin(), v.end());
        if (!std::isfinite(m)) return scalar(m, false);
        double s = 0;
        for (double d : v) s += std::exp(d - m);
        return scalar(m + std::log(s), false);
      }
      double mean = 0;
      for (double d : v) mean += d;
      mean /= n;
      if (f == "mean") return scalar(mean, false);
      if (v.size() < 2) fail(line, f + " of fewer than 2 elements");
      double ss = 0;
      for (double d : v) ss += (d - mean) * (d - mean);
      return scalar(f == "variance" ? ss / (n - 1) : std::sqrt(ss / (n - 1)), false);
    }
    if (f == "num_elements" || f == "size" || f == "rows" || f == "cols") {
      arity(1, 1);
      const Value& x = a[0];
      if (f == "num_elements") return scalar(static_cast<double>(x.size()), true);
      if (f == "size") return scalar(x.scalar() ? 1.0 : static_cast<double>(x.dims[0]), true);
      if (x.rank) fail(line, f + " of an array");
      int64_t r = 1, c = 1;
      if (x.base != Base::Scalar) matrix_shape(x, r, c);
      return scalar(static_cast<double>(f == "rows" ? r : c), true);
    }
    if (f == "rep_vector" || f == "rep_row_vector") {
      arity(2, 2);
      const int64_t n = whole(a[1], line, "the size of " + f);
      element_count({n}, line);
      return vector_of(std::vector<double>(static_cast<size_t>(n), a[0].v.at(0)),
                       f == "rep_vector" ? Base::Vector : Base::RowVector, false);
    }
    if (f == "rep_matrix") {
      arity(3, 3);
      if (!a[0].scalar()) fail(line, "rep_matrix of a container is not supported in transformed data yet");
      Value out;
      out.base = Base::Matrix;
      out.dims = {whole(a[1], line, "rows of rep_matrix"), whole(a[2], line, "cols of rep_matrix")};
      out.v.assign(static_cast<size_t>(element_count(out.dims, line)), a[0].v[0]);
      return out;
    }
    if (f == "rep_array") {
      arity(2, 4);
      if (!a[0].scalar()) fail(line, "rep_array of a container is not supported in transformed data yet");
      Value out;
      out.is_int = a[0].is_int;
      for (size_t i = 1; i < a.size(); ++i) out.dims.push_back(whole(a[i], line, "the size of rep_array"));
      out.rank = static_cast<int>(out.dims.size());
      out.v.assign(static_cast<size_t>(element_count(out.dims, line)), a[0].v[0]);
      return out;
    }
    if (f == "to_vector" || f == "to_row_vector") {
      arity(1, 1);
      return vector_of(a[0].v, f == "to_vector" ? Base::Vector : Base::RowVector, false);
    }
    if (f == "dot_product") {
      arity(2, 2);
      if (a[0].size() != a[1].size()) fail(line, "dot_product of " + shape_text(a[0]) + " and " + shape_text(a[1]));
      double s = 0;
      for (size_t i = 0; i < a[0].v.size(); ++i) s += a[0].v[i] * a[1].v[i];
      return scalar(s, false);
    }
    if (f == "cumulative_sum") {
      arity(1, 1);
      Value out = a[0];
      for (size_t i = 1; i < out.v.size(); ++i) out.v[i] += out.v[i - 1];
      return out;
    }
    if (f == "append_row") {
      arity(2, 2);
      for (const Value& x : a)
        if (x.rank || (x.base != Base::Scalar && x.base != Base::Vector))
          fail(line, "append_row of matrices is not supported in transformed data yet");
      std::vector<double> v = a[0].v;
      v.insert(v.end(), a[1].v.begin(), a[1].v.end());
      return vector_of(std::move(v), Base::Vector, false);
    }
    if (f == "col" || f == "row") {
      arity(2, 2);
      if (a[0].base != Base::Matrix || a[0].rank) fail(line, f + " of " + shape_text(a[0]));
      const int64_t r = a[0].dims[0], c = a[0].dims[1], i = whole(a[1], line, "the index of " + f);
      if (i < 1 || i > (f == "col" ? c : r)) fail(line, f + " " + std::to_string(i) + " is outside the matrix");
      std::vector<double> v;
      if (f == "col")
        for (int64_t k = 0; k < r; ++k) v.push_back(a[0].v[static_cast<size_t>(k + r * (i - 1))]);
      else
        for (int64_t k = 0; k < c; ++k) v.push_back(a[0].v[static_cast<size_t>(i - 1 + r * k)]);
      return vector_of(std::move(v), f == "col" ? Base::Vector : Base::RowVector, false);
    }
    fail(line, "the function '" + f + "' is not available in transformed data");
  }

  DataSet& data_;
  const DataSet& public_;
  std::vector<Scope> scopes_;
  std::vector<std::string> exported_;
};

}  // namespace

bool transformed_data_function(const std::string& name) {
  static const std::set<std::string> names = {
      "exp", "log", "log1p", "expm1", "log1m", "sqrt", "square", "inv", "inv_sqrt", "fabs", "floor", "ceil", "round",
      "trunc", "tanh", "sin", "cos", "lgamma", "erf", "inv_logit", "logit", "Phi", "log10", "log2", "abs", "pow",
      "log1p_exp", "log_inv_logit", "log1m_inv_logit", "relu", "digamma", "lbeta", "lchoose", "asin", "acos",
      "atan", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "step", "inv_cloglog", "log1m_exp", "Phi_approx",
      "cbrt", "exp2", "erfc",
      "fmin", "fmax", "min", "max", "sum", "prod", "mean", "variance", "sd", "log_sum_exp", "num_elements", "size",
      "rows", "cols", "rep_vector", "rep_row_vector", "rep_matrix", "rep_array", "to_vector", "to_row_vector",
      "dot_product", "cumulative_sum", "append_row", "col", "row"};
  return names.count(name) > 0;
}

void compute_transformed_data(const std::string& program, DataSet& data, const DataSet& public_data) {
  if (program.empty()) return;
  const Node tree = Reader(program).read();
  Program(data, public_data).run(tree);
}

}  // namespace fvi::data
