#include "fvi/data/expression.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace fvi::data {

namespace {

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Recursive descent over
//   sum := product (('+' | '-') product)*    product := unary (('*' | '/') unary)*
//   unary := ('-' | '+') unary | primary      primary := number | name | '(' sum ')'
class Evaluator {
 public:
  Evaluator(const std::string& text, const std::function<std::optional<Number>(const std::string&)>& lookup)
      : s_(text), lookup_(lookup) {}

  std::optional<Number> run() {
    std::optional<Number> v = sum();
    skip();
    if (!v || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }

  static std::optional<Number> apply(char op, Number a, Number b) {
    const bool both_int = a.integer && b.integer;
    switch (op) {
      case '+': return Number{a.value + b.value, both_int};
      case '-': return Number{a.value - b.value, both_int};
      case '*': return Number{a.value * b.value, both_int};
      default:
        if (both_int) {
          if (b.value == 0) return std::nullopt;
          return Number{std::trunc(a.value / b.value), true};
        }
        return Number{a.value / b.value, false};
    }
  }

  std::optional<Number> sum() {
    std::optional<Number> v = product();
    while (v) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) break;
      char op = s_[pos_++];
      std::optional<Number> r = product();
      v = r ? apply(op, *v, *r) : std::nullopt;
    }
    return v;
  }

  std::optional<Number> product() {
    std::optional<Number> v = unary();
    while (v) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) break;
      char op = s_[pos_++];
      std::optional<Number> r = unary();
      v = r ? apply(op, *v, *r) : std::nullopt;
    }
    return v;
  }

  std::optional<Number> unary() {
    if (++depth_ > 200) return std::nullopt;  // hostile nesting
    std::optional<Number> v;
    if (eat('-')) {
      v = unary();
      if (v) v->value = -v->value;
    } else if (eat('+')) {
      v = unary();
    } else {
      v = primary();
    }
    --depth_;
    return v;
  }

  std::optional<Number> primary() {
    skip();
    if (pos_ >= s_.size()) return std::nullopt;
    if (eat('(')) {
      std::optional<Number> v = sum();
      if (!eat(')')) return std::nullopt;
      return v;
    }
    const char c = s_[pos_];
    if (name_start(c)) {
      size_t end = pos_;
      while (end < s_.size() && name_char(s_[end])) ++end;
      std::string name = s_.substr(pos_, end - pos_);
      pos_ = end;
      return lookup_(name);
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t end = pos_;
      bool integer = true;
      while (end < s_.size()) {
        const char d = s_[end];
        if (std::isdigit(static_cast<unsigned char>(d))) {
          ++end;
        } else if (d == '.' || d == 'e' || d == 'E') {
          integer = false;
          ++end;
          if ((d == 'e' || d == 'E') && end < s_.size() && (s_[end] == '+' || s_[end] == '-')) ++end;
        } else {
          break;
        }
      }
      double value = 0;
      const auto [ptr, ec] = std::from_chars(s_.data() + pos_, s_.data() + end, value);
      if (ec != std::errc() || ptr != s_.data() + end) return std::nullopt;
      pos_ = end;
      return Number{value, integer};
    }
    return std::nullopt;
  }

  const std::string& s_;
  const std::function<std::optional<Number>(const std::string&)>& lookup_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::optional<Number> evaluate(const std::string& expr,
                               const std::function<std::optional<Number>(const std::string&)>& lookup) {
  if (expr.empty()) return std::nullopt;
  return Evaluator(expr, lookup).run();
}

std::vector<std::string> expression_names(const std::string& expr) {
  std::vector<std::string> out;
  for (size_t i = 0; i < expr.size();) {
    const bool after_digit = i > 0 && (std::isdigit(static_cast<unsigned char>(expr[i - 1])) || expr[i - 1] == '.');
    if (name_start(expr[i]) && !after_digit) {  // the `e` of 1e-3 is not a name
      size_t end = i;
      while (end < expr.size() && name_char(expr[end])) ++end;
      std::string name = expr.substr(i, end - i);
      bool seen = false;
      for (const std::string& n : out) seen = seen || n == name;
      if (!seen) out.push_back(name);
      i = end;
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace fvi::data
