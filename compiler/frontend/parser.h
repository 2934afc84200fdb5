#pragma once
// Parsing: .fvi text -> AST. Syntax errors are reported through Diagnostics with the location
// of the offending token and a sentence that says what to do; the AST is returned only when the
// text parsed cleanly (the checker never sees a half-built tree).
#include <memory>

#include "frontend/ast.h"
#include "frontend/diagnostics.h"

namespace fvic {

std::unique_ptr<Program> parse_program(const SourceFile& source, Diagnostics& diags);

}  // namespace fvic
