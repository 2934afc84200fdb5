#include "frontend/types.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace fvic {

int Type::base_dims() const {
  switch (base) {
    case Base::Vector:
    case Base::RowVector:
      return 1;
    case Base::Matrix:
      return 2;
    default:
      return 0;
  }
}

std::string to_string(const Type& type) {
  std::string base;
  switch (type.base) {
    case Base::Int: base = "int"; break;
    case Base::Real: base = "real"; break;
    case Base::Vector: base = "vector"; break;
    case Base::RowVector: base = "row_vector"; break;
    case Base::Matrix: base = "matrix"; break;
    case Base::Error: return "<error>";
  }
  if (type.array_dims == 0) return base;
  return "array[" + std::string(type.array_dims - 1, ',') + "] " + base;
}

SymSize SymSize::constant(long long value) {
  SymSize s;
  s.unknown_ = false;
  if (value != 0) s.terms_[{}] = value;
  return s;
}

SymSize SymSize::atom(const std::string& name) {
  SymSize s;
  s.unknown_ = false;
  s.terms_[{name}] = 1;
  return s;
}

std::optional<long long> SymSize::constant_value() const {
  if (unknown_) return std::nullopt;
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty() && denominator_ == 1)
    return terms_.begin()->second;
  return std::nullopt;
}

bool SymSize::provably_different(const SymSize& o) const {
  auto a = constant_value(), b = o.constant_value();
  return a && b && *a != *b;
}

SymSize SymSize::operator+(const SymSize& o) const {
  if (unknown_ || o.unknown_) return unknown();
  // Bring both to the common denominator.
  SymSize out = *this;
  long long scale_other = denominator_, scale_this = o.denominator_;
  for (auto& term : out.terms_) term.second *= scale_this;
  out.denominator_ = denominator_ * o.denominator_;
  for (const auto& [monomial, coeff] : o.terms_) {
    long long c = (out.terms_[monomial] += coeff * scale_other);
    if (c == 0) out.terms_.erase(monomial);
  }
  out.normalize();
  return out;
}

SymSize SymSize::divided_by(long long d) const {
  if (unknown_) return unknown();
  SymSize out = *this;
  out.denominator_ *= d;
  out.normalize();
  return out;
}

void SymSize::normalize() {
  long long g = denominator_;
  for (const auto& term : terms_) g = std::gcd(g, term.second);
  if (g < 0) g = -g;
  if (g > 1) {
    for (auto& term : terms_) term.second /= g;
    denominator_ /= g;
  }
  if (terms_.empty()) denominator_ = 1;
}

SymSize SymSize::operator-(const SymSize& o) const { return *this + o * constant(-1); }

SymSize SymSize::operator*(const SymSize& o) const {
  if (unknown_ || o.unknown_) return unknown();
  SymSize out = constant(0);
  for (const auto& [ma, ca] : terms_)
    for (const auto& [mb, cb] : o.terms_) {
      std::vector<std::string> m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      long long c = (out.terms_[m] += ca * cb);
      if (c == 0) out.terms_.erase(m);
    }
  out.denominator_ = denominator_ * o.denominator_;
  out.normalize();
  return out;
}

std::string SymSize::str() const {
  return str([](const std::string& a) { return a; });
}

std::string SymSize::str(const std::function<std::string(const std::string&)>& atom) const {
  if (unknown_) return "?";
  if (terms_.empty()) return "0";
  // Highest degree first, then by name, constants last: "D*K + 2*D + 3".
  std::vector<std::pair<std::vector<std::string>, long long>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return a.first.size() > b.first.size();
  });
  std::ostringstream out;
  bool first = true;
  for (const auto& [monomial, coeff] : ordered) {
    long long c = coeff;
    if (!first) out << (c < 0 ? " - " : " + ");
    else if (c < 0) out << "-";
    if (!first || c < 0) c = c < 0 ? -c : c;
    first = false;
    if (monomial.empty()) {
      out << c;
      continue;
    }
    if (c != 1) out << c << '*';
    for (size_t i = 0; i < monomial.size(); ++i) out << (i ? "*" : "") << atom(monomial[i]);
  }
  if (denominator_ != 1) return "(" + out.str() + ")/" + std::to_string(denominator_);
  return out.str();
}

std::optional<long long> SymSize::eval(
    const std::function<std::optional<long long>(const std::string&)>& lookup) const {
  if (unknown_) return std::nullopt;
  long long total = 0;
  for (const auto& [monomial, coeff] : terms_) {
    long long term = coeff;
    for (const std::string& atom : monomial) {
      auto v = lookup(atom);
      if (!v) return std::nullopt;
      term *= *v;
    }
    total += term;
  }
  return total / denominator_;
}

std::vector<std::string> SymSize::atoms() const {
  std::vector<std::string> out;
  for (const auto& term : terms_)
    for (const std::string& a : term.first)
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

SymSize Shape::elements() const {
  SymSize n = SymSize::constant(1);
  for (const SymSize& d : dims) n = n * d;
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

const char* taint_description(TaintKind kind) {
  switch (kind) {
    case TaintKind::PublicData: return "public data";
    case TaintKind::ServerData: return "server data";
    case TaintKind::SiloData: return "silo data";
    case TaintKind::SplitData: return "split data";
    case TaintKind::GlobalParam: return "global parameter";
    case TaintKind::LocalParam: return "local parameter";
    case TaintKind::SplitParam: return "split parameter";
    case TaintKind::GlobalHyper: return "global hyperparameter";
    case TaintKind::LocalHyper: return "local hyperparameter";
    case TaintKind::SplitHyper: return "split hyperparameter";
    case TaintKind::SiloSum: return "silo_sum";
    case TaintKind::Count: break;
  }
  return "?";
}

void Taint::add(TaintKind k, const std::string& who) {
  auto i = static_cast<size_t>(k);
  if (!has(k)) witness[i] = who;
  bits |= 1u << i;
}

void Taint::merge(const Taint& other) {
  for (size_t i = 0; i < witness.size(); ++i)
    if (other.bits & (1u << i)) add(static_cast<TaintKind>(i), other.witness[i]);
}

}  // namespace fvic
