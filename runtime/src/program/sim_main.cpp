#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>

#include "fvi/data/validate.h"
#include "fvi/engine/settings.h"
#include "fvi/program/allocator.h"
#include "fvi/program/output.h"
#include "fvi/program/pvi_run.h"
#include "fvi/program/roles.h"
#include "fvi/program/sfvi_run.h"
#include "fvi/program/sim.h"
#include "fvi/program/threads.h"
#include "fvi/program/vfl_run.h"
#include "fvi/report/report_data.h"

namespace fvi::program {

namespace {

const char* kUsage =
    "usage: %s --data DIR --output OUT [--set key=value]... [--test FILE [--ood FILE]] [--quiet]\n"
    "  --data DIR     data.json, server.json, silo-1.json ... silo-S.json (DESIGN.md section 5)\n"
    "  --output OUT   where posterior.json, draws.csv and metrics.csv are written\n"
    "  --set k=v      an inference key (fvic help keys), overriding the model's inference block\n"
    "  --test FILE    held-out data (the variables of one silo): predictive metrics each round\n"
    "  --ood FILE     out-of-distribution rows, laid out as --test's: the OOD AUROC each round\n";

}  // namespace

bool parse_sim_arguments(int argc, char** argv, SimArguments& a, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      into = argv[++i];
      return true;
    };
    if (arg == "--data") {
      if (!value(a.data)) return false;
    } else if (arg == "--output") {
      if (!value(a.output)) return false;
    } else if (arg == "--test") {
      if (!value(a.test)) return false;
    } else if (arg == "--ood") {
      if (!value(a.ood)) return false;
    } else if (arg == "--set") {
      std::string kv;
      if (!value(kv)) return false;
      a.overrides.push_back(kv);
    } else if (arg.rfind("--set=", 0) == 0) {
      a.overrides.push_back(arg.substr(6));
    } else if (arg == "--quiet") {
      a.quiet = true;
    } else {
      error = "unknown argument '" + arg + "'";
      return false;
    }
  }
  if (a.data.empty()) error = "--data DIR is required";
  else if (!a.ood.empty() && a.test.empty()) error = "--ood FILE needs --test FILE (its rows are told from the held-out ones)";
  else if (a.output.empty()) error = "--output OUT is required";
  return error.empty();
}

data::DataDirectory load_run_data(const fvi_model& model, const std::string& path) {
  if (!model.data_table) throw std::runtime_error("these kernels carry no data table; rebuild with fvic build");
  data::DataDirectory dir = pooled(model) ? data::load_pooled_data(path) : data::load_data_directory(path);
  data::validate_or_throw(*model.data_table, dir);
  if (dir.silos.empty()) throw data::DataError(path + ": no silo data (silo-1.json, silo-1.csv or silo-1/) was found");
  return dir;
}

int run_sim(const fvi_model& model, const ModelDescription& description, int argc, char** argv) {
  keep_freed_memory();
  // Messages name the program, not the cache directory `fvic run` built it in.
  const std::string program = std::filesystem::path(argv[0]).filename().string();
  argv[0] = const_cast<char*>(program.c_str());
  if (argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf(kUsage, argv[0]);
    return 0;
  }
  SimArguments args;
  std::string error;
  if (!parse_sim_arguments(argc, argv, args, error)) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
    std::fprintf(stderr, kUsage, argv[0]);
    return 2;
  }
  if (model.abi_version != FVI_ABI_VERSION) {
    std::fprintf(stderr, "%s: the model's kernels use ABI %d, the runtime %d; rebuild with fvic build\n", argv[0],
                 model.abi_version, FVI_ABI_VERSION);
    return 2;
  }
  // The silos run side by side on threads of their own, each silo's client on its share of the
  // cores: a multi-threaded BLAS under them would oversubscribe the cores.
  set_blas_threads(1);
  try {
    engine::Settings settings(description.inference, args.overrides);
    std::filesystem::create_directories(args.output);
    const std::string method = run_method(settings, description, pooled(model));
    // Every party's data is read and checked against the declarations before anything runs.
    data::DataDirectory dir = load_run_data(model, args.data);
    // With the data read, this run will write its own results: none of a previous run's stays.
    clear_previous_results(args.output, true);
    const int S = int(dir.silos.size());
    const data::DataSet server_data = dir.server.merged(dir.public_data);
    std::vector<std::unique_ptr<SiloHost>> hosts;
    std::vector<SiloEndpoint*> endpoints;
    std::vector<std::string> lines;
    for (int k = 0; k < S; ++k) {
      try {
        hosts.push_back(make_silo_host(model, settings, method, std::move(dir.silos[k]).merged(dir.public_data), k + 1,
                                       S, silo_threads(method, threads_per_silo(S))));
      } catch (const std::exception&) {
        rethrow_naming_silo(k + 1);
      }
      endpoints.push_back(&hosts.back()->endpoint());
      lines.push_back(hosts.back()->describe());
    }
    if (pooled(model)) lines = {"pooled: every data block is public or the server's; nothing is sent"};
    if (!args.test.empty() && (method == "vfl_exact" || method == "vfl_augmented" || method == "vfl_power")) {
      // A vertical model's held-out rows: each silo gets its own columns of them.
      data::DataDirectory test = load_run_data(model, args.test);
      if (int(test.silos.size()) != S)
        throw data::DataError("--test " + args.test + ": " + std::to_string(test.silos.size()) +
                              " silos' columns, but the run has " + std::to_string(S) + " silos");
      for (int k = 0; k < S; ++k) hosts[k]->set_test_data(std::move(test.silos[k]).merged(test.public_data));
    }
    InProcessTransport transport(endpoints);
    ServerRun run{model, description, settings, args, method, dir.public_data, server_data, transport, lines, "", false};
    run.report_after_silos = true;
    const int status = serve(run);
    for (int k = 0; k < S; ++k) hosts[k]->finish(args.output + "/silo-" + std::to_string(k + 1));
    // The run's page, once the silos' folders it points to exist.
    try {
      report::write_report(args.output);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "note: no report.html: %s\n", e.what());
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}

}  // namespace fvi::program
