#pragma once
// A model compiled where it runs, for the generic programs (fvi-sim, fvi-server, fvi-client):
// read, checked, planned and lowered by the compiler's own passes, its kernel-ABI table built in
// memory by the graph backend (backend/graph/graph_model.h). One program per role runs any model.
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "analysis/plan.h"
#include "backend/graph/graph_model.h"
#include "fvi/program/sim.h"
#include "pipeline.h"

namespace fvic::generic {

struct CompiledModel {
  FrontEnd front;
  Plan plan;
  std::unique_ptr<backend::graph::GraphModel> graph;
  std::string name, method, source, plan_json;  // plan_json: `fvic plan --json`'s, without data sizes
  std::vector<std::pair<std::string, std::string>> inference;  // the inference block as written

  // For the runtime's programs: points into this object, which must outlive it.
  fvi::program::ModelDescription description() const;
};

// Compiles the model at `path`, its fused chains by the LLVM backend when `jit`; on an error
// prints the diagnostics (or why the file cannot be read) to `err`, prefixed by `program`, and
// returns nothing.
std::optional<CompiledModel> compile_model(const std::string& path, const std::string& program, std::ostream& err,
                                           bool jit = true);

// The main of a generic program whose role needs no more than the model: `PROGRAM MODEL.fvi
// [options]` compiles the model, then runs `role` (run_sim, run_server) with the options.
using RoleMain = int (*)(const fvi_model&, const fvi::program::ModelDescription&, int, char**);
int run_role(int argc, char** argv, const std::string& program, RoleMain role);

}  // namespace fvic::generic
