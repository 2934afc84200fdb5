#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "fvi/data/validate.h"
#include "fvi/net/arguments.h"
#include "fvi/net/programs.h"
#include "fvi/net/protocol.h"
#include "fvi/net/tls.h"
#include "fvi/program/allocator.h"
#include "fvi/program/output.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/roles.h"
#include "fvi/program/threads.h"
#include "fvi/report/report_data.h"
#include "fvi/v1/federation.grpc.pb.h"

namespace fvi::net {

namespace {

using Clock = std::chrono::steady_clock;

const char* kClientUsage =
    "usage: %s --server HOST:PORT --silo K --data DIR [--output OUT] [options]\n"
    "  --server HOST:PORT     the server to join\n"
    "  --silo K               which silo this is (1-based)\n"
    "  --data DIR             this silo's data: DIR/data.json (public) and DIR/silo-K.*\n"
    "  --output OUT           OUT/silo-K/: the silo's own outputs and checkpoint (default .)\n"
    "  --set key=value        must agree with the server's keys (the silo runs the server's)\n"
    "  --ca F                 the PEM certificate that signed the server's (TLS is on by default)\n"
    "  --cert F --key F       this silo's certificate and key, when the server asks for one\n"
    "  --server-name NAME     the name in the server's certificate, if not the address dialled\n"
    "  --token-file F         a file holding this silo's token\n"
    "  --insecure             no TLS: a trusted network only\n"
    "  --reconnect-timeout S  give up after S seconds without reaching the server (default 120)\n"
    "  --max-message MB       refuse larger messages unread (default 256)\n"
    "  --resume               continue from OUT/silo-K/checkpoint\n"
    "  --quiet                no progress lines\n";

// How many times a silo sends a reply the server refused before it reports that it cannot answer.
constexpr int kResendsAfterRefusal = 3;

// A refusal the client cannot retry away (wrong token, wrong model, no such silo).
class Refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

bool retryable(const grpc::Status& status) {
  const grpc::StatusCode code = status.error_code();
  // RESOURCE_EXHAUSTED is retried (a busy server) unless it is gRPC's refusal of a message over
  // the peer's --max-message, which will not shrink on retry.
  if (code == grpc::StatusCode::RESOURCE_EXHAUSTED)
    return status.error_message().find("larger than") == std::string::npos;
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::ABORTED || code == grpc::StatusCode::CANCELLED ||
         code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN;
}

// Calls `rpc` (given a fresh context) until it succeeds; retries what a lost connection or a
// restarting server causes, with exponential backoff and jitter, for at most `patience` seconds.
// Each attempt waits for the channel to be ready (within its deadline): gRPC only makes progress
// on a reconnection while some call is waiting, so a call that failed fast while the server was
// down would leave the reconnection idle until the next attempt.
template <class Rpc>
void call(const char* what, double patience, double rpc_deadline, Rpc rpc) {
  const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(patience));
  double backoff = 0.1;
  static thread_local std::mt19937 jitter(std::random_device{}());
  for (;;) {
    const double left = std::chrono::duration<double>(give_up - Clock::now()).count();
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(std::clamp(left, 0.5, rpc_deadline))));
    const grpc::Status status = rpc(context);
    if (status.ok()) return;
    if (!retryable(status)) throw Refused(std::string(what) + ": refused by the server: " + status.error_message());
    if (Clock::now() >= give_up)
      throw std::runtime_error(std::string(what) + ": no answer from the server for " + std::to_string(int(patience)) +
                               " s (" + status.error_message() +
                               "); is it running, and do --server and the TLS options match its own?");
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff * (0.5 + std::uniform_real_distribution<>(0, 1)(jitter))));
    backoff = std::min(backoff * 2, 5.0);
  }
}

// Sends a reply in parts of at most kReplyPartValues values (federation.proto, Submit): the
// first carries who sends it, for which exchange, and how many values follow.
grpc::Status submit(fvi::v1::Federation::Stub& stub, grpc::ClientContext& context, const fvi::v1::Result& result,
                    fvi::v1::Ack& ack) {
  const auto& values = result.values();
  const size_t n = size_t(values.size());
  auto part_of = [&](fvi::v1::Result& part, size_t at) {
    part.mutable_values()->Clear();
    part.mutable_values()->Add(values.begin() + long(at), values.begin() + long(std::min(n, at + kReplyPartValues)));
  };
  fvi::v1::Result part;
  *part.mutable_who() = result.who();
  part.set_exchange(result.exchange());
  part.set_round(result.round());
  part.set_phase(result.phase());
  part.set_error(result.error());
  part.set_count(n);
  part_of(part, 0);
  std::unique_ptr<grpc::ClientWriter<fvi::v1::Result>> writer = stub.Submit(&context, &ack);
  bool sent = writer->Write(part);
  fvi::v1::Result rest;
  for (size_t at = kReplyPartValues; sent && at < n; at += kReplyPartValues) {
    part_of(rest, at);
    sent = writer->Write(rest);
  }
  if (sent) writer->WritesDone();
  return writer->Finish();  // the server's status, also when it stopped reading early
}

// The replies this silo gave last, per phase: a resumed server asks again for what it had not
// checkpointed, and must get the same answers (the silo's state has moved on since).
struct ReplyCache {
  std::map<uint32_t, std::pair<uint32_t, program::Message>> last;  // phase -> (round, reply)

  std::vector<double> flatten() const {
    std::vector<double> out;
    for (const auto& [phase, entry] : last) {
      out.push_back(phase);
      out.push_back(entry.first);
      out.push_back(double(entry.second.size()));
      out.insert(out.end(), entry.second.begin(), entry.second.end());
    }
    return out;
  }
  void unflatten(const std::vector<double>& in, const std::string& path) {
    last.clear();
    for (size_t i = 0; i < in.size();) {
      if (in.size() - i < 3 || in[i + 2] < 0 || in[i + 2] > double(in.size() - i - 3))
        throw std::runtime_error(path + ": a damaged checkpoint");
      const size_t n = size_t(in[i + 2]);
      last[uint32_t(in[i])] = {uint32_t(in[i + 1]), program::Message(in.begin() + long(i) + 3, in.begin() + long(i + 3 + n))};
      i += 3 + n;
    }
  }
};

// A silo runs the model it was built from or audited, and no other: the server's text must be
// the same, byte for byte (its SHA-256). On a difference the server's text is kept beside the
// silo's outputs, so its operator can see what differs.
void check_server_model(const program::ModelDescription& description, const fvi::v1::JoinReply& joined,
                        const std::string& out_dir) {
  if (!description.source) return;  // a program without the model's text has nothing to compare
  const std::string mine = model_sha256(description.source);
  if (joined.model_sha256().empty())
    throw Refused("the server did not say which model it runs, and this silo runs only the model it has (SHA-256 " +
                  mine + "); start the server from the same .fvi file");
  if (joined.model_sha256() == mine && model_sha256(joined.model_source()) == mine) return;
  std::filesystem::create_directories(out_dir);
  const std::string kept = out_dir + "/server-model.fvi";
  std::ofstream(kept, std::ios::binary) << joined.model_source();
  throw Refused("the server runs another model than this silo's: SHA-256 " + joined.model_sha256() +
                " against " + mine + " here; the server's text is in " + kept + " (diff it against yours)");
}

data::DataSet load_silo_data(const fvi_model& model, const std::string& dir, int silo) {
  if (!model.data_table) throw std::runtime_error("these kernels carry no data table; rebuild with fvic build");
  data::DataSet public_data = data::load_party(dir, "data");
  data::DataSet own = data::load_party(dir, "silo-" + std::to_string(silo));
  if (!own.found()) throw data::DataError(dir + ": no data for silo " + std::to_string(silo) + " (" + own.files()[0] + ")");
  data::Problems problems;
  validate_party(*model.data_table, data::Party::Public, public_data, data::DataSet(), problems);
  validate_party(*model.data_table, data::Party::Silo, own, public_data, problems);
  if (!problems.empty()) throw data::DataError(problems.text());
  return std::move(own).merged(public_data);
}

}  // namespace

int run_client(const fvi_model& model, const program::ModelDescription& description, int argc, char** argv) {
  program::keep_freed_memory();
  const std::string name = std::filesystem::path(argv[0]).filename().string();
  if (argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf(kClientUsage, name.c_str());
    return 0;
  }
  Arguments args;
  std::string error;
  if (!parse_arguments(argc, argv,
                       {"server", "silo", "data", "output", "ca", "cert", "key", "server-name", "token-file",
                        "reconnect-timeout", "test-fault", "max-message"},
                       {"insecure", "resume", "quiet"}, args, error)) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), error.c_str());
    std::fprintf(stderr, kClientUsage, name.c_str());
    return 2;
  }
  for (const char* required : {"server", "silo", "data"})
    if (!args.has(required)) {
      std::fprintf(stderr, "%s: --%s is required\n", name.c_str(), required);
      std::fprintf(stderr, kClientUsage, name.c_str());
      return 2;
    }
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const int silo = int(args.number("silo", 0));
    if (silo < 1) throw std::invalid_argument("--silo must be at least 1");
    const bool quiet = args.flag("quiet");
    const double patience = args.number("reconnect-timeout", 120);
    const std::string out_dir = args.get("output", ".") + "/silo-" + std::to_string(silo);
    const std::string checkpoint = out_dir + "/checkpoint";
    // Fault injection for the deployment tests (docs/deployment.md): before its real reply in
    // round R, the silo sends a bad one: nan, size, nonpd, stale, or huge (2 MB); absurd makes its
    // real reply in round R 1e300s (the server refuses it each time it is sent).
    std::string fault;
    uint32_t fault_round = 0;
    if (args.has("test-fault")) {
      const std::string f = args.get("test-fault");
      const size_t at = f.find('@');
      fault = f.substr(0, at);
      const std::string round = at == std::string::npos ? "1" : f.substr(at + 1);
      if ((fault != "nan" && fault != "size" && fault != "nonpd" && fault != "stale" && fault != "huge" &&
           fault != "absurd") ||
          round.empty() || round.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("--test-fault " + f + ": expected KIND@ROUND, KIND one of nan, size, nonpd, stale, huge, absurd");
      fault_round = uint32_t(std::stoul(round));
    }

    // The data first: a silo with bad data stops before it bothers the server.
    data::DataSet data = load_silo_data(model, args.get("data"), silo);
    std::filesystem::create_directories(out_dir);
    program::clear_previous_results(out_dir, false);

    auto channel = grpc::CreateCustomChannel(args.get("server"), channel_credentials(args), channel_arguments(args));
    auto stub = fvi::v1::Federation::NewStub(channel);
    fvi::v1::Credentials who;
    who.set_protocol(kProtocolVersion);
    who.set_model(description.name);
    who.set_fingerprint(model_fingerprint(model));
    who.set_silo(uint32_t(silo));
    if (args.has("token-file")) who.set_token(read_secret(args.get("token-file")));

    // Join: learn the run's method, silos and keys.
    fvi::v1::JoinRequest join;
    *join.mutable_who() = who;
    join.set_description("silo " + std::to_string(silo) + ": joining");
    fvi::v1::JoinReply joined;
    call("join", patience, 10, [&](grpc::ClientContext& c) { return stub->Join(&c, join, &joined); });
    check_server_model(description, joined, out_dir);
    std::vector<std::string> server_keys;
    for (const auto& s : joined.settings()) server_keys.push_back(s.key() + "=" + s.value());
    engine::Settings settings(description.inference, server_keys);
    // A key given to the silo must be the server's: the silo runs the server's keys.
    const engine::Settings mine({}, args.sets);
    for (const auto& [key, value] : mine.entries()) {
      std::string theirs = "(not set)";
      for (const auto& [k, v] : settings.entries())
        if (k == key) theirs = v;
      if (theirs != value)
        throw std::runtime_error("the server runs " + key + " = " + theirs + "; this silo was given " + key + " = " + value);
    }
    const int silos = int(joined.silos());
    if (silo > silos) throw Refused("the run has " + std::to_string(silos) + " silos; there is no silo " + std::to_string(silo));
    // The silo has the machine to itself: its client's threads run their own products.
    const int threads = program::silo_threads(joined.method(), program::machine_threads());
    if (threads > 1) program::set_blas_threads(1);
    std::unique_ptr<program::SiloHost> host =
        program::make_silo_host(model, settings, joined.method(), std::move(data), silo, silos, threads);
    // Join again with what the silo holds (sizes only), for the server's echo.
    join.set_description(host->describe());
    join.set_ready(true);
    call("join", patience, 10, [&](grpc::ClientContext& c) { return stub->Join(&c, join, &joined); });

    ReplyCache cache;
    program::CheckpointRecord record;
    if (args.flag("resume") && program::load_checkpoint(checkpoint, "silo", record)) {
      host->endpoint().restore(record.state);
      cache.unflatten(record.extra, checkpoint);
      if (!quiet) std::printf("%s: resumed from %s (round %u)\n", name.c_str(), checkpoint.c_str(), record.round);
    }
    if (!quiet) {
      std::printf("%s: %s; server %s, method = %s, silos = %d\n", name.c_str(), host->describe().c_str(),
                  args.get("server").c_str(), joined.method().c_str(), silos);
      for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
      std::fflush(stdout);
    }

    long handled = 0;
    std::array<uint64_t, 3> refused_task{0, 0, 0};  // exchange, round, phase of the last refused reply
    std::string refused_reason;
    int refusals = 0;
    for (;;) {
      fvi::v1::TaskRequest ask;
      *ask.mutable_who() = who;
      fvi::v1::Task task;
      call("waiting for work", patience, 30, [&](grpc::ClientContext& c) { return stub->NextTask(&c, ask, &task); });
      if (task.status() == fvi::v1::Task::WAIT) continue;
      if (task.status() == fvi::v1::Task::DONE) break;
      if (!program::known_phase(task.phase())) throw std::runtime_error("the server asked for an unknown phase " + std::to_string(task.phase()));
      const program::Phase phase = program::Phase(task.phase());
      fvi::v1::Result result;
      *result.mutable_who() = who;
      result.set_exchange(task.exchange());
      result.set_round(task.round());
      result.set_phase(task.phase());
      const auto hit = cache.last.find(task.phase());
      program::Message reply;
      if (hit != cache.last.end() && hit->second.first == task.round()) {
        reply = hit->second.second;  // asked again (a resumed server): the same answer
      } else {
        try {
          reply = host->endpoint().handle(task.round(), phase, program::Message(task.values().begin(), task.values().end()));
          cache.last[task.phase()] = {task.round(), reply};
          record.kind = "silo";
          record.round = task.round();
          record.state = host->endpoint().state();
          record.extra = cache.flatten();
          program::save_checkpoint(checkpoint, record);  // before the reply leaves: a kill cannot lose it
        } catch (const std::exception& e) {
          result.set_error(std::string(e.what()).substr(0, 4000));
          std::fprintf(stderr, "%s: round %u (%s): %s\n", name.c_str(), task.round(), program::phase_name(phase), e.what());
        }
      }
      if (fault == "absurd" && task.round() == fault_round && result.error().empty() && !reply.empty()) {
        // The silo's own reply, and the copy it would send again, become 1e300s: the server
        // refuses it each time, and the silo must not send it again and again.
        reply.assign(reply.size(), 1e300);
        cache.last[task.phase()].second = reply;
        std::printf("%s: test fault absurd in round %u: this silo's reply is 1e300s\n", name.c_str(), task.round());
        std::fflush(stdout);
        fault.clear();
      }
      if (!fault.empty() && task.round() == fault_round && result.error().empty() && !reply.empty()) {
        fvi::v1::Result bad = result;
        program::Message values = reply;
        if (fault == "nan") values[values.size() / 2] = std::nan("");
        if (fault == "size") values.pop_back();
        if (fault == "nonpd")  // a precision change that makes q_s's precision negative
          for (size_t i = values.size() / 2; i < values.size(); ++i) values[i] = 1e6;
        if (fault == "stale") bad.set_round(task.round() - 1), bad.set_exchange(task.exchange() - 1);
        if (fault == "huge") values.assign(size_t(1) << 18, 1.0);  // 2 MB: over a --max-message 1 server's limit
        *bad.mutable_values() = {values.begin(), values.end()};
        fvi::v1::Ack ack;
        try {
          call("submit", patience, 30, [&](grpc::ClientContext& c) { return submit(*stub, c, bad, ack); });
        } catch (const Refused& e) {  // refused by gRPC before the server read it
          ack.set_accepted(false);
          ack.set_reason(e.what());
        }
        std::printf("%s: test fault %s in round %u: the server %s (%s)\n", name.c_str(), fault.c_str(), task.round(),
                    ack.accepted() ? "ACCEPTED it" : "refused it", ack.reason().c_str());
        std::fflush(stdout);
        fault.clear();
      }
      // Asked again for an exchange whose reply the server refused: this silo has no other reply to
      // give (its state has moved on, and a cached reply is the same bytes), so it waits, longer
      // each time, and then tells the server it cannot, instead of sending the same bytes again.
      const std::array<uint64_t, 3> this_task{task.exchange(), task.round(), task.phase()};
      if (this_task == refused_task && result.error().empty()) {
        ++refusals;
        std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(refusals, 5)));
        if (refusals >= kResendsAfterRefusal) {
          reply.clear();
          result.set_error("the server refused this silo's reply " + std::to_string(refusals) +
                           " times (the last time: " + refused_reason.substr(0, 500) + "); it has no other");
        }
      } else if (this_task != refused_task) {
        refusals = 0;
      }
      *result.mutable_values() = {reply.begin(), reply.end()};
      fvi::v1::Ack ack;
      call("submit", patience, 30, [&](grpc::ClientContext& c) { return submit(*stub, c, result, ack); });
      if (!ack.accepted()) {
        std::fprintf(stderr, "%s: round %u (%s): the server did not take the reply: %s\n", name.c_str(), task.round(),
                     program::phase_name(phase), ack.reason().c_str());
        refused_task = this_task;
        refused_reason = ack.reason();
      }
      ++handled;
    }
    host->finish(out_dir);
    if (!quiet) std::printf("%s: the run is over (%ld requests answered)\n", name.c_str(), handled);
    // This silo's own page of its outputs (its local posteriors): it stays here, with them.
    if (std::filesystem::exists(out_dir + "/draws.csv")) {
      try {
        const std::string page = report::write_report(out_dir);
        if (!quiet) std::printf("%s: wrote %s\n", name.c_str(), page.c_str());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: note: no report.html: %s\n", name.c_str(), e.what());
      }
    }
    return 0;
  } catch (const Refused& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace fvi::net
