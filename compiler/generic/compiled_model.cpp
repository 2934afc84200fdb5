#include "generic/compiled_model.h"

#include <iostream>

#include "backend/llvm/chain_jit.h"
#include "generic/program_arguments.h"

namespace fvic::generic {

fvi::program::ModelDescription CompiledModel::description() const {
  fvi::program::ModelDescription d{name.c_str(), method.c_str(), inference};
  d.source = source.c_str();
  d.plan_json = plan_json.c_str();
  return d;
}

std::optional<CompiledModel> compile_model(const std::string& path, const std::string& program, std::ostream& err,
                                           bool jit) {
  std::string error;
  std::optional<FrontEnd> front = run_front_end(path, true, error);
  if (!front) {
    err << program << ": " << error << '\n';
    return std::nullopt;
  }
  CompiledModel c;
  c.front = std::move(*front);
  Diagnostics& diags = *c.front.diags;
  ir::Module module;
  const bool ok = !diags.has_errors() && make_plan(*c.front.model, diags, c.plan) && !diags.has_errors() &&
                  build_ir(*c.front.model, module, diags);
  diags.print(err);
  if (!ok) return std::nullopt;
  c.name = c.front.model->program->name;
  c.method = method_key(c.plan.method);
  c.source = c.front.source->text();
  c.plan_json = plan_json(c.plan, *c.front.model, nullptr);
  c.inference = inference_block(*c.front.program);
  try {
    const backend::llvm_jit::LlvmChainCompiler compiler;
    c.graph = std::make_unique<backend::graph::GraphModel>(std::move(module), *c.front.model, jit ? &compiler : nullptr);
    if (!c.graph->jit_error().empty()) err << program << ": " << backend::llvm_jit::interpreted_warning(c.graph->jit_error());
  } catch (const std::exception& e) {
    err << program << ": " << e.what() << '\n';
    return std::nullopt;
  }
  return c;
}

int run_role(int argc, char** argv, const std::string& program, RoleMain role) {
  ProgramArguments args;
  std::string error;
  if (!split_arguments(argc, argv, program, args, error)) {
    std::cerr << error << '\n';
    return 2;
  }
  std::optional<CompiledModel> model = compile_model(args.model, program, std::cerr, args.jit);
  if (!model) return 1;
  std::vector<char*> rest = args.argv();
  return role(model->graph->table(), model->description(), int(args.rest.size()), rest.data());
}

}  // namespace fvic::generic
