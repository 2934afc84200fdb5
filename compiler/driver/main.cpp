// The fvic command line: check, plan, dump, build, run, summary, report (DESIGN.md §5).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "analysis/plan.h"
#include "frontend/parser.h"
#include "frontend/semantic.h"
#include "inference_keys.h"
#include "pipeline.h"
#include "driver/build.h"
#include "driver/report.h"
#include "driver/summary.h"
#ifdef FVIC_GRAPH_BACKEND
#include "backend/graph/graph_model.h"
#include "backend/llvm/chain_jit.h"
#include "fvi/program/sim.h"
#endif
#include <unistd.h>

namespace {

constexpr int kOk = 0;
constexpr int kModelError = 1;
constexpr int kUsageError = 2;

const char* kUsage = R"(usage: fvic <command> [options] FILE.fvi

commands:
  check FILE              report every error and warning in the model
  plan FILE [--json] [--data PATH] [--set key=value]...
                          the federated decomposition: method, reasons, terms, and the
                          messages each party sends per iteration (bytes with --data)
  dump --ast FILE         the syntax tree
  dump --plan FILE        the plan as JSON (same as plan --json)
  dump --ir FILE          the factors of the log joint as IR, with their adjoints
  dump --cpp FILE [-o OUT.cpp]
                          the generated C++ kernels (docs/kernel-abi.md)
  build FILE -o DIR       emit and compile DIR/NAME-sim (server and silos in one process)
  run FILE --data DIR --output OUT [--set key=value]... [--test FILE [--ood FILE]] [--quiet]
      [--backend llvm|graph|cpp]
                          run the simulation (server and silos in one process): posterior.json,
                          draws.csv, metrics.csv in OUT; --test: held-out metrics each report,
                          --ood: the OOD AUROC. --backend llvm (the default) runs the model
                          from its IR, its elementwise loops compiled by LLVM's JIT in this
                          process; --backend graph interprets those loops; --backend cpp
                          compiles NAME-sim with the C++ compiler first (cached in $FVIC_CACHE
                          or ~/.cache/fvic): the same results to rounding
  report OUT [-o FILE]    one self-contained HTML page of the run in OUT (default OUT/report.html):
                          the plan, convergence, posterior marginals and table, traffic per silo
  summary OUT [--silo K]  the posterior table of OUT/draws.csv (silo K's: OUT/silo-K/draws.csv)
                          as R's posterior::summarise_draws prints it, with the run's
                          iterations, convergence and Pareto k-hat
  help keys               the inference keys and their values
  --version               print the version

exit status: 0 success, 1 the model has errors (summary, report: a file cannot be read),
             2 bad command line
)";

struct Options {
  std::string command;
  std::string file;
  std::string dump_what;
  std::optional<std::string> data;
  std::optional<std::string> output;
  std::vector<std::string> overrides;
  std::optional<std::string> test, ood;
  std::optional<long> silo;
#ifdef FVIC_GRAPH_BACKEND
  // run: llvm (backend/llvm/chain_jit.h), graph (backend/graph/graph_model.h) or cpp (compile NAME-sim)
  std::string backend = "llvm";
#else
  std::string backend = "cpp";
#endif
  bool json = false;
  bool quiet = false;
};

int usage_error(const std::string& message) {
  std::cerr << "fvic: " << message << "\n\n" << kUsage;
  return kUsageError;
}

std::optional<Options> parse_args(int argc, char** argv, int& status) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    status = usage_error("no command given");
    return std::nullopt;
  }
  o.command = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      if (i + 1 >= args.size()) {
        status = usage_error(std::string(flag) + " needs a value");
        return std::nullopt;
      }
      return args[++i];
    };
    if (a == "--json") {
      o.json = true;
    } else if (a == "--data") {
      auto v = value("--data");
      if (!v) return std::nullopt;
      o.data = *v;
    } else if (a == "-o" || a == "--output") {
      auto v = value("-o");
      if (!v) return std::nullopt;
      o.output = *v;
    } else if (a == "--set") {
      auto v = value("--set");
      if (!v) return std::nullopt;
      o.overrides.push_back(*v);
    } else if (a.rfind("--set=", 0) == 0) {
      o.overrides.push_back(a.substr(6));
    } else if (a == "--test") {
      auto v = value("--test");
      if (!v) return std::nullopt;
      o.test = *v;
    } else if (a == "--ood") {
      auto v = value("--ood");
      if (!v) return std::nullopt;
      o.ood = *v;
    } else if (a == "--silo") {
      auto v = value("--silo");
      if (!v) return std::nullopt;
      char* end = nullptr;
      errno = 0;
      const long k = std::strtol(v->c_str(), &end, 10);
      if (v->empty() || *end != '\0' || errno == ERANGE || k < 1 || k > INT_MAX) {
        status = usage_error("--silo needs a silo number (1, 2, ...), not '" + *v + "'");
        return std::nullopt;
      }
      o.silo = k;
    } else if (a == "--backend") {
      auto v = value("--backend");
      if (!v) return std::nullopt;
      if (*v != "cpp" && *v != "graph" && *v != "llvm") {
        status = usage_error("--backend is llvm, graph or cpp, not '" + *v + "'");
        return std::nullopt;
      }
      o.backend = *v;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--ast" || a == "--plan" || a == "--ir" || a == "--cpp") {
      o.dump_what = a.substr(2);
    } else if (!a.empty() && a[0] == '-') {
      status = usage_error("unknown option '" + a + "'");
      return std::nullopt;
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      status = usage_error("more than one file given ('" + o.file + "' and '" + a + "')");
      return std::nullopt;
    }
  }
  return o;
}

int print_keys() {
  for (const fvic::stdlib::KeySpec& k : fvic::stdlib::inference_keys()) {
    std::cout << "  " << k.key << " = " << k.values << "\n      " << k.meaning;
    if (*k.default_value) std::cout << " (default " << k.default_value << ")";
    std::cout << '\n';
  }
  return kOk;
}

// Reads, parses and (unless only the AST is wanted) checks FILE (pipeline.h).
std::optional<fvic::FrontEnd> compile(const std::string& path, bool check) {
  std::string error;
  std::optional<fvic::FrontEnd> c = fvic::run_front_end(path, check, error);
  if (!c) std::cerr << "fvic: " << error << '\n';
  return c;
}

// OUT/model.fvi and OUT/plan.json (with the message sizes of --data's sizes, when they can be
// read; the program names a data error itself), for `fvic report`.
bool write_run_files(const std::string& out, const std::string& source, const fvic::Plan& plan,
                     const fvic::SemanticModel& model, const std::string& data) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  std::optional<fvic::DataSizes> sizes;
  try {
    sizes = fvic::read_data_sizes(data);
  } catch (const std::exception&) {
  }
  std::ofstream model_file(out + "/model.fvi"), plan_file(out + "/plan.json");
  model_file << source;
  plan_file << fvic::plan_json(plan, model, sizes ? &*sizes : nullptr);
  if (model_file && plan_file) return true;
  std::cerr << "fvic: cannot write into the output directory '" << out << "'\n";
  return false;
}

// The arguments NAME-sim takes from `fvic run`'s, after argv[0] = `program`.
std::vector<std::string> sim_arguments(const Options& o, const std::string& program) {
  std::vector<std::string> args = {program, "--data", *o.data, "--output", *o.output};
  for (const std::string& kv : o.overrides) args.insert(args.end(), {"--set", kv});
  if (o.test) args.insert(args.end(), {"--test", *o.test});
  if (o.ood) args.insert(args.end(), {"--ood", *o.ood});
  if (o.quiet) args.push_back("--quiet");
  return args;
}

#ifdef FVIC_GRAPH_BACKEND
// What the JIT compiled, before the run's header.
void print_jit_statistics(const fvic::backend::llvm_jit::JitStatistics& s) {
  if (s.chains == 0) return;
  std::printf("llvm: %d fused loop%s compiled in %.0f ms (%d operations inline, %d through the runtime)\n", s.chains,
              s.chains == 1 ? "" : "s", 1000 * s.seconds, s.inline_members, s.runtime_members);
}
#endif

// `fvic run --backend graph` (or llvm): NAME-sim's driver in this process on the model's graph
// table, its chains compiled by the LLVM backend for llvm.
int run_graph(const Options& o, const fvic::FrontEnd& c, const fvic::Plan& plan) {
#ifdef FVIC_GRAPH_BACKEND
  fvic::ir::Module module;
  const bool built = fvic::build_ir(*c.model, module, *c.diags);
  c.diags->print(std::cerr);
  if (!built) return kModelError;
  if (!write_run_files(*o.output, c.source->text(), plan, *c.model, *o.data)) return kModelError;
  const std::string name = c.model->program->name, method = fvic::method_key(plan.method);
  const fvi::program::ModelDescription description{name.c_str(), method.c_str(), fvic::inference_block(*c.program)};
  std::vector<std::string> args = sim_arguments(o, name + "-sim");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  try {
    fvic::backend::llvm_jit::LlvmChainCompiler jit;
    fvic::backend::graph::GraphModel graph(std::move(module), *c.model, o.backend == "llvm" ? &jit : nullptr);
    if (!graph.jit_error().empty()) std::cerr << fvic::backend::llvm_jit::interpreted_warning(graph.jit_error());
    else if (o.backend == "llvm" && !o.quiet) print_jit_statistics(jit.statistics());
    return fvi::program::run_sim(graph.table(), description, int(args.size()), argv.data());
  } catch (const std::exception& e) {
    std::cerr << "fvic: " << e.what() << '\n';
    return kModelError;
  }
#else
  (void)c, (void)plan;
  std::cerr << "fvic: this build has no graph backend (" << o.file << "): use --backend cpp\n";
  return kUsageError;
#endif
}

int run(const Options& o) {
  if (o.command == "help") {
    if (o.file == "keys") return print_keys();
    std::cout << kUsage;
    return kOk;
  }
  if (o.command == "--help" || o.command == "-h") {
    std::cout << kUsage;
    return kOk;
  }
  if (o.command == "--version") {
    std::cout << "fvic 0.1.0\n";
    return kOk;
  }
  if (o.command == "report") {
    if (o.file.empty()) return usage_error("report needs the run's output directory (fvic report OUT)");
    return fvic::driver::report_command(o.file, o.output);
  }
  if (o.command == "summary") {
    if (o.file.empty()) return usage_error("summary needs the run's output directory (fvic summary OUT)");
    return fvic::driver::summary_command(o.file, o.silo);
  }
  if (o.command != "check" && o.command != "plan" && o.command != "dump" && o.command != "build" &&
      o.command != "run")
    return usage_error("unknown command '" + o.command + "'");
  if (o.file.empty()) return usage_error(o.command + " needs a .fvi file");
  if (o.command == "build" && !o.output) return usage_error("build needs -o DIR");
  if (o.command == "run" && (!o.data || !o.output)) return usage_error("run needs --data DIR and --output OUT");
  if (o.command == "dump" && o.dump_what.empty())
    return usage_error("dump needs one of --ast, --plan, --ir, --cpp");

  bool ast_only = o.command == "dump" && o.dump_what == "ast";
  std::optional<fvic::FrontEnd> c = compile(o.file, !ast_only);
  if (!c) return kModelError;
  auto finish = [&](int status) {
    c->diags->print(std::cerr);
    return status;
  };
  if (c->diags->has_errors()) return finish(kModelError);
  if (ast_only) {
    std::cout << fvic::dump_ast(*c->program);
    return finish(kOk);
  }
  std::string error;
  if (!fvic::apply_overrides(c->model->settings, o.overrides, &error)) {
    c->diags->print(std::cerr);
    return usage_error(error);
  }
  // Blocks whose statements the kernels' machine runs one at a time: the planner must know where
  // the model block is one (its terms are then no factors of their own), and the plan says so.
  std::vector<std::string> program_origins;
  {
    fvic::ir::Module module;
    fvic::Diagnostics quiet(nullptr);
    if (fvic::build_ir(*c->model, module, quiet)) {
      program_origins = module.program_origins;
      for (fvic::Term& t : c->model->terms) t.in_program = module.model_block_programs;
    }
  }
  fvic::Plan plan;
  bool planned = fvic::make_plan(*c->model, *c->diags, plan);
  if (!planned || c->diags->has_errors()) return finish(kModelError);
  {
    if (!program_origins.empty()) {
      std::vector<std::string> origins;
      for (const std::string& o : program_origins)
        if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
      std::string list;
      for (size_t i = 0; i < origins.size(); ++i) list += (i ? ", " : "") + origins[i];
      const bool model_block = list.find("the model block") != std::string::npos;
      plan.notes.push_back("statements run one at a time by the kernels' machine (docs/language.md, \"Other "
                           "statements run one at a time\"): " + list +
                           (model_block ? "; to the method, the model block's terms are `target +=` terms" : ""));
    }
  }
  if (o.command == "check") {
    // What the code generator cannot do yet is the model's error too: named here, not after a
    // user has prepared data and waited for a build.
    fvic::ir::Module module;
    std::string cpp;
    if (!fvic::build_cpp(*c->model, module, cpp, *c->diags)) return finish(kModelError);
  }
  if (o.command == "check") return finish(kOk);
  // A setting the chosen method ignores is the user's mistake to hear of before a long run.
  if (o.command == "run" || o.command == "build")
    for (const std::string& ignored : plan.ignored_settings) std::cerr << "fvic: warning: " << ignored << '\n';
  if (o.command == "run" && o.backend != "cpp") return run_graph(o, *c, plan);
  if (o.command == "build" || o.command == "run") {
    fvic::ir::Module module;
    fvic::driver::BuildRequest request;
    request.model = c->model->program->name;
    request.method = fvic::method_key(plan.method);
    if (!fvic::build_cpp(*c->model, module, request.kernels_cpp, *c->diags)) return finish(kModelError);
    // The program gets the inference block as written; run's --set goes to the program itself.
    request.inference = fvic::inference_block(*c->program);
    request.verbose = !o.quiet;
    request.networked = o.command == "build";
    if (o.command == "build") {
      request.source = c->source->text();
      request.plan_json = fvic::plan_json(plan, *c->model, nullptr);
    }
    c->diags->print(std::cerr);
    request.out_dir = o.command == "build" ? *o.output : fvic::driver::cache_directory(request);
    std::string error;
    const std::string program = o.command == "build" ? fvic::driver::build_programs(request, error)
                                                     : fvic::driver::build_cached(request, error);
    if (program.empty()) {
      std::cerr << "fvic: " << error << '\n';
      return kModelError;
    }
    if (o.command == "build") {
      std::cout << program << '\n';
      return kOk;
    }
    if (!write_run_files(*o.output, c->source->text(), plan, *c->model, *o.data)) return kModelError;
    std::vector<std::string> args = sim_arguments(o, program);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::cout.flush();
    execv(program.c_str(), argv.data());
    std::cerr << "fvic: cannot run " << program << '\n';
    return kModelError;
  }
  if (o.command == "dump" && (o.dump_what == "ir" || o.dump_what == "cpp")) {
    fvic::ir::Module module;
    std::string cpp;
    if (o.dump_what == "ir") {
      if (!fvic::build_ir(*c->model, module, *c->diags)) return finish(kModelError);
      std::cout << fvic::ir::dump(module);
      return finish(kOk);
    }
    if (!fvic::build_cpp(*c->model, module, cpp, *c->diags)) return finish(kModelError);
    if (o.output) {
      std::ofstream file(*o.output);
      file << cpp;
      if (!file) {
        std::cerr << "fvic: cannot write '" << *o.output << "'\n";
        return finish(kModelError);
      }
    } else {
      std::cout << cpp;
    }
    return finish(kOk);
  }

  std::optional<fvic::DataSizes> sizes;
  if (o.data) {
    try {
      sizes = fvic::read_data_sizes(*o.data);
    } catch (const std::exception& e) {
      c->diags->print(std::cerr);
      std::cerr << "fvic: cannot read sizes from --data: " << e.what() << '\n';
      return kUsageError;
    }
  }
  const fvic::DataSizes* s = sizes ? &*sizes : nullptr;
  if (o.json || o.command == "dump") std::cout << fvic::plan_json(plan, *c->model, s);
  else std::cout << fvic::plan_text(plan, *c->model, s);
  return finish(kOk);
}

}  // namespace

int main(int argc, char** argv) {
  int status = kOk;
  std::optional<Options> options = parse_args(argc, argv, status);
  if (!options) return status;
  try {
    return run(*options);
  } catch (const std::exception& e) {
    // A bug in fvic, never the user's fault: say so plainly rather than crash.
    std::cerr << "fvic: internal error: " << e.what() << "\nplease report this with the model file\n";
    return 3;
  }
}
