#include "pipeline.h"

#include <exception>
#include <filesystem>

#include "backend/cpp/emit.h"
#include "frontend/parser.h"
#include "ir/lower.h"
#include "transform/adjoint.h"
#include "transform/dead_code.h"
#include "transform/local_reparam.h"

namespace fvic {

std::vector<std::pair<std::string, std::string>> inference_block(const Program& program) {
  std::vector<std::pair<std::string, std::string>> out;
  if (const Block* inference = program.find(BlockKind::Inference))
    for (const Setting& setting : inference->settings) out.push_back({setting.key, setting.value.str()});
  return out;
}

std::optional<FrontEnd> run_front_end(const std::string& path, bool check, std::string& error) {
  FrontEnd f;
  try {
    f.source = std::make_unique<SourceFile>(SourceFile::read(path));
  } catch (const std::exception& e) {
    error = e.what();
    return std::nullopt;
  }
  f.diags = std::make_unique<Diagnostics>(f.source.get());
  f.program = parse_program(*f.source, *f.diags);
  if (f.program) {
    f.program->name = std::filesystem::path(path).stem().string();
    if (check) f.model = check_program(*f.program, *f.diags);
  }
  return f;
}

bool build_ir(const SemanticModel& model, ir::Module& module, Diagnostics& diags) {
  if (!ir::lower(model, module, diags)) return false;
  transform::eliminate_dead_code(module);
  // The variants are made from the factors without dead code, and get their own adjoints.
  transform::make_meanfield_variants(module);
  transform::make_adjoints(module);
  return true;
}

bool build_cpp(const SemanticModel& model, ir::Module& module, std::string& cpp, Diagnostics& diags) {
  return build_ir(model, module, diags) && backend::emit_cpp(module, model, cpp, diags);
}

}  // namespace fvic
