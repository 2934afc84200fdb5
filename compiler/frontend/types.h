#pragma once
// The checker's view of a value: its type (int/real/vector/row_vector/matrix, possibly in
// arrays), its shape (each dimension a symbolic size over data, e.g. `N`, `2*D`), and its
// taint (which kinds of owned values it was computed from — the information-flow check).
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fvic {

enum class Base { Int, Real, Vector, RowVector, Matrix, Error };

struct Type {
  Base base = Base::Error;
  int array_dims = 0;

  static Type error() { return {}; }
  bool is_error() const { return base == Base::Error; }
  bool is_scalar() const { return array_dims == 0 && (base == Base::Int || base == Base::Real); }
  bool is_int_valued() const { return base == Base::Int; }  // int or array of int
  bool is_int() const { return base == Base::Int && array_dims == 0; }
  bool is_int_array() const { return base == Base::Int && array_dims > 0; }
  int base_dims() const;  // 0 scalar, 1 vector/row_vector, 2 matrix
  int rank() const { return array_dims + base_dims(); }
  bool operator==(const Type& o) const { return base == o.base && array_dims == o.array_dims; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};
std::string to_string(const Type& type);  // Stan spelling: "array[,] real", "matrix"

// A size known symbolically: a polynomial with integer coefficients over named atoms (data
// ints such as N and D, or an opaque expression). Two sizes are provably different only when
// both are constants; otherwise equality becomes a check made when the data is read.
class SymSize {
 public:
  SymSize() : unknown_(true) {}
  static SymSize constant(long long value);
  static SymSize atom(const std::string& name);
  static SymSize unknown() { return SymSize(); }

  bool is_unknown() const { return unknown_; }
  std::optional<long long> constant_value() const;
  bool equals(const SymSize& o) const {
    return !unknown_ && !o.unknown_ && terms_ == o.terms_ && denominator_ == o.denominator_;
  }
  bool provably_different(const SymSize& o) const;

  SymSize operator+(const SymSize& o) const;
  SymSize operator-(const SymSize& o) const;
  SymSize operator*(const SymSize& o) const;
  // Exact division by a constant that divides every value the size can take, e.g. D*(D+1)/2.
  SymSize divided_by(long long d) const;

  std::string str() const;  // "2*D*K + 3", "?" when unknown
  // The same with each atom spelled by `atom` (e.g. as a C++ variable).
  std::string str(const std::function<std::string(const std::string&)>& atom) const;
  // The value given each atom's value; nullopt if an atom has none or the size is unknown.
  std::optional<long long> eval(
      const std::function<std::optional<long long>(const std::string&)>& lookup) const;
  std::vector<std::string> atoms() const;

 private:
  void normalize();
  bool unknown_ = false;
  std::map<std::vector<std::string>, long long> terms_;  // monomial (sorted atoms) -> coeff
  long long denominator_ = 1;                             // the polynomial is terms_ / this
};

struct Shape {
  std::vector<SymSize> dims;  // array dims first, then the base's own dims
  SymSize elements() const;   // product of dims; 1 for a scalar
  std::string str() const;    // "[N, D]"
};

// Which owned values an expression was computed from. Each bit keeps the first variable that
// set it, so an error can name the culprit.
enum class TaintKind {
  PublicData,
  ServerData,
  SiloData,
  SplitData,
  GlobalParam,
  LocalParam,
  SplitParam,
  GlobalHyper,
  LocalHyper,
  SplitHyper,
  SiloSum,  // the value of a silo_sum(...): aggregated over silos, no longer one silo's
  Count
};
const char* taint_description(TaintKind kind);  // "silo data", "local parameter", ...

struct Taint {
  unsigned bits = 0;
  std::array<std::string, static_cast<size_t>(TaintKind::Count)> witness{};

  bool has(TaintKind k) const { return bits & (1u << static_cast<unsigned>(k)); }
  void add(TaintKind k, const std::string& who);
  void merge(const Taint& other);
  // Whether any parameter or hyperparameter (global, local or split) went into the value.
  bool reads_parameters() const {
    for (TaintKind k : {TaintKind::GlobalParam, TaintKind::LocalParam, TaintKind::SplitParam, TaintKind::GlobalHyper,
                        TaintKind::LocalHyper, TaintKind::SplitHyper})
      if (has(k)) return true;
    return false;
  }
  bool any_split() const {
    return has(TaintKind::SplitData) || has(TaintKind::SplitParam) || has(TaintKind::SplitHyper);
  }
};

}  // namespace fvic
