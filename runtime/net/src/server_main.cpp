#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "fvi/data/validate.h"
#include "fvi/net/arguments.h"
#include "fvi/net/programs.h"
#include "fvi/net/protocol.h"
#include "fvi/net/server_service.h"
#include "fvi/net/server_transport.h"
#include "fvi/net/status_page.h"
#include "fvi/net/tls.h"
#include "fvi/program/allocator.h"
#include "fvi/program/output.h"
#include "fvi/program/roles.h"

namespace fvi::net {

namespace {

const char* kServerUsage =
    "usage: %s --listen HOST:PORT --silos S --data DIR --output OUT [options]\n"
    "  --listen HOST:PORT   where silos connect (port 0: any free port, printed at start)\n"
    "  --silos S            the number of silos in the run\n"
    "  --data DIR           the server's data: DIR/data.json (public) and DIR/server.json\n"
    "  --output OUT         posterior.json, draws.csv, metrics.csv and server.checkpoint\n"
    "  --set key=value      an inference key (fvic help keys); the silos use the server's keys\n"
    "  --test FILE          held-out data: predictive metrics each round\n"
    "  --ood FILE           out-of-distribution rows (with --test): the OOD AUROC each round\n"
    "  --cert F --key F     the server's TLS certificate and key (PEM); TLS is on by default\n"
    "  --client-ca F        require a client certificate signed by F, for silo K named silo-K\n"
    "  --tokens F           one line per silo, \"K TOKEN\": the token silo K must present\n"
    "  --insecure           no TLS (and no authentication unless --tokens): a trusted network only\n"
    "  --quorum Q           replies an exchange needs to go on after its deadline (default: S)\n"
    "  --deadline SEC       how long an exchange waits for every silo (default 60)\n"
    "  --give-up SEC        stop (with the checkpoint saved) if the quorum is not met by then (600)\n"
    "  --join-timeout SEC   how long to wait for the silos to join (default 300)\n"
    "  --max-message MB     refuse larger replies unread (default 256)\n"
    "  --resume             continue from OUT/server.checkpoint\n"
    "  --status-port P      a read-only web page of the run as it goes on, at http://HOST:P/ (0: any\n"
    "                       free port, printed at start)\n"
    "  --status-host H      where the status page listens (default 127.0.0.1: this machine only)\n"
    "  --quiet              no progress lines\n";

data::DataSet load_checked(const fvi_model& model, const std::string& dir, data::Party party, const char* stem,
                           const data::DataSet& public_data) {
  data::DataSet own = data::load_party(dir, stem);
  data::Problems problems;
  validate_party(*model.data_table, party, own, public_data, problems);
  if (!problems.empty()) throw data::DataError(problems.text());
  return own;
}

}  // namespace

int run_server(const fvi_model& model, const program::ModelDescription& description, int argc, char** argv) {
  program::keep_freed_memory();
  const std::string name = std::filesystem::path(argv[0]).filename().string();
  if (argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf(kServerUsage, name.c_str());
    return 0;
  }
  Arguments args;
  std::string error;
  if (!parse_arguments(argc, argv,
                       {"listen", "silos", "data", "output", "test", "ood", "cert", "key", "client-ca", "tokens", "quorum",
                        "deadline", "give-up", "join-timeout", "max-message", "status-port", "status-host"},
                       {"insecure", "resume", "quiet"}, args, error)) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), error.c_str());
    std::fprintf(stderr, kServerUsage, name.c_str());
    return 2;
  }
  for (const char* required : {"listen", "silos", "data", "output"})
    if (!args.has(required)) {
      std::fprintf(stderr, "%s: --%s is required\n", name.c_str(), required);
      std::fprintf(stderr, kServerUsage, name.c_str());
      return 2;
    }
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const int silos = int(args.number("silos", 0));
    if (silos < 1) throw std::invalid_argument("--silos must be at least 1");
    engine::Settings settings(description.inference, args.sets);
    const std::string method = program::run_method(settings, description, program::pooled(model));
    if (program::pooled(model))
      throw std::invalid_argument("this model declares no silo data: it is fitted pooled, on one party, by NAME-sim "
                                  "(fvic run); declare the silos' rows in a `silo data` block to deploy it");
    if (method == "independent")
      throw std::invalid_argument("method = independent needs no server (each silo fits alone): run NAME-sim");
    program::SimArguments sim;
    sim.data = args.get("data");
    sim.output = args.get("output");
    sim.test = args.get("test");
    sim.ood = args.get("ood");
    sim.quiet = args.flag("quiet");
    std::filesystem::create_directories(sim.output);
    // The server reads only data.json and server.json, checked against the declarations.
    if (!model.data_table) throw std::runtime_error("these kernels carry no data table; rebuild with fvic build");
    data::DataSet public_data = load_checked(model, sim.data, data::Party::Public, "data", data::DataSet());
    const data::DataSet server_data =
        load_checked(model, sim.data, data::Party::Server, "server", public_data).merged(public_data);
    program::clear_previous_results(sim.output, false);

    ServerPolicy policy;
    policy.silos = silos;
    policy.quorum = int(args.number("quorum", silos));
    if (policy.quorum < 1 || policy.quorum > silos)
      throw std::invalid_argument("--quorum must be between 1 and --silos (" + std::to_string(silos) + ")");
    policy.deadline = args.number("deadline", 60);
    policy.give_up = args.number("give-up", 600);
    if (args.has("tokens")) policy.tokens = read_tokens(args.get("tokens"));
    policy.client_certificates = args.has("client-ca");
    if (!args.flag("insecure") && policy.tokens.empty() && !policy.client_certificates)
      throw std::runtime_error("no way to tell the silos apart: give --tokens FILE or --client-ca FILE (or "
                               "--insecure on a network you trust)");
    for (int k = 1; k <= silos && !policy.tokens.empty(); ++k)
      if (!policy.tokens.count(k))
        throw std::runtime_error(args.get("tokens") + ": no token for silo " + std::to_string(k));
    policy.model = description.name;
    policy.fingerprint = model_fingerprint(model);
    if (description.source) policy.model_source = description.source, policy.model_sha256 = model_sha256(description.source);
    policy.method = method;
    policy.settings = settings.entries();
    policy.quiet = sim.quiet;
    policy.max_reply_values = size_t(max_message_bytes(args)) / sizeof(double);
    ServerTransport transport(policy);
    ServerService service(transport);
    std::unique_ptr<StatusPage> status;
    if (args.has("status-port")) {
      const double port = args.number("status-port", 0);
      if (!(port >= 0 && port <= 65535 && port == std::floor(port)))
        throw std::invalid_argument("--status-port must be a whole number between 0 and 65535");
      const std::string host = args.has("status-host") ? args.get("status-host") : "127.0.0.1";
      status = std::make_unique<StatusPage>(host, int(port), description.name, method, silos, transport);
      transport.set_log_sink([page = status.get()](const std::string& line) { page->event(line); });
      std::printf("%s: status page at http://%s:%d/\n", name.c_str(), host.find(':') != std::string::npos
                                                                          ? ("[" + host + "]").c_str() : host.c_str(),
                  status->port());
    }

    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(args.get("listen"), server_credentials(args), &port);
    builder.RegisterService(&service);
    ServerService::configure(builder);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) throw std::runtime_error("cannot listen on " + args.get("listen"));
    const std::string listen = args.get("listen");
    const std::string host = listen.substr(0, listen.rfind(':'));
    std::printf("%s: listening on %s:%d (%s), waiting for %d silos\n", name.c_str(), host.c_str(), port,
                args.flag("insecure") ? "no TLS" : policy.client_certificates ? "TLS, client certificates" : "TLS",
                silos);
    // The fingerprint a client's programs must have been built with (a hash of the kernels, not
    // a secret): an operator compares it with the client's when a join is refused for the model.
    std::printf("%s: model %s, kernels fingerprint %016llx%s%s\n", name.c_str(), description.name,
                (unsigned long long)policy.fingerprint, policy.model_sha256.empty() ? "" : ", SHA-256 ",
                policy.model_sha256.c_str());
    std::fflush(stdout);

    int exit_status = 0;
    try {
      std::vector<std::string> lines = transport.wait_for_silos(args.number("join-timeout", 300));
      program::ServerRun run{model,       description, settings,  sim,   method, public_data,
                             server_data, transport,   lines,     sim.output + "/server.checkpoint",
                             args.flag("resume"), status.get()};
      exit_status = program::serve(run);
      transport.finish(10);
    } catch (const QuorumLost& e) {
      // Name the checkpoint only when there is one (a run that lost its quorum while the silos
      // were still joining has none).
      const std::string checkpoint = sim.output + "/server.checkpoint";
      if (std::filesystem::exists(checkpoint))
        std::fprintf(stderr, "%s: error: %s; the state after the last complete round is in %s: start again with "
                             "--resume\n", name.c_str(), e.what(), checkpoint.c_str());
      else
        std::fprintf(stderr, "%s: error: %s; no round was completed, so there is nothing to resume: start the "
                             "server again once the silos can reach it\n", name.c_str(), e.what());
      exit_status = 4;
    }
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (transport.refused() > 0)
      std::fprintf(stderr, "%s: %ld messages were refused (see above)\n", name.c_str(), transport.refused());
    return exit_status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace fvi::net
