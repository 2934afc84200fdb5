#pragma once
// The compiler's passes, in order, in one place (DESIGN.md §4):
//
//   read → parse → check → plan → lower → eliminate dead code → mean-field variants → adjoints → emit
//
// Each pass is a function of the previous one's output: the front end gives a checked
// SemanticModel, the planner a Plan from it, lowering the IR factors (ir/lower.h, nothing else),
// the transforms rewrite the IR (transform/), the backend prints it (backend/cpp/emit.h). The
// driver (driver/main.cpp), the tests and the fuzz harness all go through these functions, so
// what they test is what `fvic` runs.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/plan.h"
#include "frontend/ast.h"
#include "frontend/diagnostics.h"
#include "frontend/semantic.h"
#include "frontend/source.h"
#include "ir/ir.h"

namespace fvic {

// A model read, parsed and (when asked) checked. Diagnostics are collected, not printed.
struct FrontEnd {
  std::unique_ptr<SourceFile> source;
  std::unique_ptr<Diagnostics> diags;
  std::unique_ptr<Program> program;      // null when parsing failed
  std::unique_ptr<SemanticModel> model;  // null when not checked or the program did not parse
};

// Reads FILE (a model's name is its file's stem), parses it and, if `check`, checks it. Returns
// nothing when the file cannot be read (the reason in `error`).
std::optional<FrontEnd> run_front_end(const std::string& path, bool check, std::string& error);

// The model's inference block as written, key and value: what its programs are given
// (fvi::program::ModelDescription), before any --set.
std::vector<std::pair<std::string, std::string>> inference_block(const Program& program);

// lower → eliminate dead code (factors and quantities) → mean-field variants → adjoints: the IR
// the backends take. False (with diagnostics) for a construct the code generator does not handle.
bool build_ir(const SemanticModel& model, ir::Module& module, Diagnostics& diags);

// build_ir, then the C++ backend: the kernels' source. False with diagnostics.
bool build_cpp(const SemanticModel& model, ir::Module& module, std::string& cpp, Diagnostics& diags);

}  // namespace fvic
