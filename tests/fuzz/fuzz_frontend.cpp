// One fuzz input through the whole front end: parse, dump, check, plan, lower to the IR (user
// functions inlined, derived values bound) and emit C++, print diagnostics.
// Any input may be rejected; none may crash, hang, or trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "analysis/plan.h"
#include "backend/cpp/emit.h"
#include "frontend/parser.h"
#include "frontend/semantic.h"
#include "pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fvic::SourceFile source("fuzz.fvi", std::string(reinterpret_cast<const char*>(data), size));
  fvic::Diagnostics diags(&source);
  std::ostringstream sink;
  std::unique_ptr<fvic::Program> program = fvic::parse_program(source, diags);
  if (program) {
    program->name = "fuzz";
    sink << fvic::dump_ast(*program);
    std::unique_ptr<fvic::SemanticModel> model = fvic::check_program(*program, diags);
    if (!diags.has_errors()) {
      fvic::Plan plan;
      if (fvic::make_plan(*model, diags, plan)) {
        sink << fvic::plan_text(plan, *model, nullptr);
        sink << fvic::plan_json(plan, *model, nullptr);
      }
      fvic::ir::Module module;
      if (fvic::build_ir(*model, module, diags)) {
        sink << fvic::ir::dump(module);
        std::string cpp;
        if (fvic::backend::emit_cpp(module, *model, cpp, diags)) sink << cpp.size();
      }
    }
  }
  diags.print(sink);
  return 0;
}
