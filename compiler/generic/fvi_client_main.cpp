// fvi-client MODEL.fvi --accept-plan FILE --server HOST:PORT --silo K --data DIR [options]:
// NAME-client for any model, compiled at start by the compiler's own checks (information flow
// included). Before it joins, the silo prints what it will send each round and what never leaves
// it, and it joins only if that is what its data owner agreed to: the plan in FILE (`fvic plan
// --json MODEL.fvi > FILE`, saved when they reviewed the model), or a yes on a terminal. At join
// it refuses a server whose model text differs from this one (client_main.cpp). Other options
// are NAME-client's (`fvi-client MODEL.fvi --help`).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>

#include "fvi/net/programs.h"
#include "fvi/net/protocol.h"
#include "generic/compiled_model.h"
#include "generic/program_arguments.h"
#include "generic/silo_audit.h"

namespace {

constexpr int kUsage = 2, kModel = 1, kRefused = 3;  // NAME-client's exit statuses

// Removes `--accept-plan FILE` (or `--accept-plan=FILE`) from args; its value, or "".
std::string take_accept_plan(std::vector<std::string>& args, bool& missing_value) {
  std::string file;
  for (size_t i = 1; i < args.size();) {
    if (args[i] == "--accept-plan") {
      if (i + 1 >= args.size()) {
        missing_value = true;
        args.erase(args.begin() + long(i));
        continue;
      }
      file = args[i + 1];
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
    } else if (args[i].rfind("--accept-plan=", 0) == 0) {
      file = args[i].substr(14);
      args.erase(args.begin() + long(i));
    } else {
      ++i;
    }
  }
  return file;
}

}  // namespace

int main(int argc, char** argv) {
  fvic::generic::ProgramArguments args;
  std::string error;
  if (!fvic::generic::split_arguments(argc, argv, "fvi-client", args, error)) {
    std::cerr << error << '\n';
    return kUsage;
  }
  bool missing_value = false;
  const std::string accept_plan = take_accept_plan(args.rest, missing_value);
  if (missing_value) {
    std::cerr << "fvi-client: --accept-plan needs a file (`fvic plan --json MODEL.fvi > FILE`)\n";
    return kUsage;
  }
  const bool help = std::find_if(args.rest.begin(), args.rest.end(), [](const std::string& a) {
                      return a == "--help" || a == "-h";
                    }) != args.rest.end();
  std::optional<fvic::generic::CompiledModel> model =
      fvic::generic::compile_model(args.model, "fvi-client", std::cerr, args.jit);
  if (!model) return kModel;
  std::vector<char*> rest = args.argv();
  if (help) {
    std::cout << "usage: fvi-client MODEL.fvi --accept-plan FILE [NAME-client's options, below]\n"
              << "  --accept-plan FILE     join only if the model's plan sends nothing that FILE, a plan saved by\n"
              << "                         `fvic plan --json MODEL.fvi`, does not (without it: confirm on a terminal)\n"
              << "  --backend llvm|graph   the model's elementwise loops compiled by LLVM (the default) or interpreted\n";
    return fvi::net::run_client(model->graph->table(), model->description(), int(args.rest.size()), rest.data());
  }
  try {
    const std::string sha256 = fvi::net::model_sha256(model->source);
    std::cout << fvic::generic::audit_text(model->name, sha256, model->plan_json) << std::flush;
    const std::vector<fvic::generic::SentMessage> proposed =
        fvic::generic::silo_messages(model->plan_json, "the model's plan");
    if (!accept_plan.empty()) {
      std::vector<fvic::generic::SentMessage> agreed;
      try {
        agreed = fvic::generic::silo_messages(fvi::net::read_file(accept_plan), accept_plan);
      } catch (const std::exception& e) {
        std::cerr << "fvi-client: --accept-plan: " << e.what() << '\n';
        return kUsage;
      }
      const std::vector<fvic::generic::SentMessage> extra = fvic::generic::not_agreed(proposed, agreed);
      if (!extra.empty()) {
        std::cerr << "fvi-client: refusing to join: under " << args.model << "'s plan this silo would send what "
                  << accept_plan << " does not agree to:\n";
        for (const auto& m : extra) std::cerr << "  " << m.when << ": " << m.content << "; " << m.doubles << " doubles\n";
        return kRefused;
      }
      std::cout << "the plan agrees with " << accept_plan << ": joining\n" << std::flush;
    } else if (isatty(STDIN_FILENO)) {
      std::cout << "join the run and send these? [y/N] " << std::flush;
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") {
        std::cerr << "fvi-client: not joining (not confirmed)\n";
        return kRefused;
      }
    } else {
      std::cerr << "fvi-client: no --accept-plan FILE and no terminal to confirm on: save the plan the data's owner "
                   "agreed to with `fvic plan --json "
                << args.model << " > FILE` and give --accept-plan FILE\n";
      return kUsage;
    }
  } catch (const std::exception& e) {
    std::cerr << "fvi-client: " << e.what() << '\n';
    return kModel;
  }
  return fvi::net::run_client(model->graph->table(), model->description(), int(args.rest.size()), rest.data());
}
