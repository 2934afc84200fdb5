#pragma once
// The size and bound expressions of fvi_data_table ("N", "2*D + 1", "(D*D + D)/2", "-1.5", "K"):
// numbers, names, + - * / and parentheses, evaluated over data values. An int divided by an int
// truncates, as in Stan.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fvi::data {

struct Number {
  double value = 0;
  bool integer = false;
};

// The value of `expr`, or nullopt when it is empty or malformed, a name has no value (`lookup`
// returns nullopt), or an int is divided by zero.
std::optional<Number> evaluate(const std::string& expr,
                               const std::function<std::optional<Number>(const std::string&)>& lookup);

// The names `expr` refers to, in order of first appearance.
std::vector<std::string> expression_names(const std::string& expr);

}  // namespace fvi::data
