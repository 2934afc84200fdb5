#pragma once
// Diagnostics in the form every compiler user knows:
//
//   model.fvi:14:3: error: the prior of global parameter 'beta' uses silo data 'x'
//      14 |   beta ~ normal(mean(x), 1);
//         |                      ^
//     help: a global prior is evaluated by the server, which never sees silo data; ...
//
// The engine collects them (several per run), sorts by position, and prints them at the end.
#include <iosfwd>
#include <string>
#include <vector>

#include "frontend/source.h"

namespace fvic {

enum class Severity { Error, Warning };

struct Diagnostic {
  Severity severity;
  Loc loc;
  std::string message;
  std::string help;  // what to do; may be empty
};

class Diagnostics {
 public:
  explicit Diagnostics(const SourceFile* source) : source_(source) {}

  void error(const Loc& loc, std::string message, std::string help = "");
  void warning(const Loc& loc, std::string message, std::string help = "");

  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::vector<Diagnostic>& all() const { return diags_; }

  // Prints every diagnostic (ordered by position, duplicates dropped) and a summary line.
  void print(std::ostream& out) const;

 private:
  const SourceFile* source_;
  std::vector<Diagnostic> diags_;
  int errors_ = 0;
};

}  // namespace fvic
