// The server under many silos (issue 27): the real ServerTransport and its gRPC service on
// loopback, and S lightweight silos in a second process (a thread and a connection each, the
// protocol of NAME-client with a trivial reply), for S = 10, 100 and 1,000 (or the counts given).
// Prints the server's threads and memory (from /proc/self/status) when listening, once every silo
// has joined and after the rounds, the memory per silo, and the time of a round beside the
// machine's own limit, measured in the same run: the rate of trivial unary calls (Join, which
// the server answers at once) from 8 threads on loopback. A round costs each silo two calls
// (NextTask, Submit), so a round of S silos cannot take less than 2 S over that rate.
//   usage: bench_server_load [ROUNDS [S ...]]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "fvi/net/protocol.h"
#include "fvi/net/server_service.h"
#include "fvi/net/server_transport.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kFingerprint = 0x10ad;
constexpr int kValues = 16;  // a request and a reply: 16 doubles each

struct Status {
  long threads = 0, rss_kb = 0;
};

Status own_status() {
  std::ifstream in("/proc/self/status");
  Status s;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) s.threads = std::atol(line.c_str() + 8);
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::atol(line.c_str() + 6);
  }
  return s;
}

fvi::v1::Credentials who(int silo) {
  fvi::v1::Credentials c;
  c.set_protocol(fvi::net::kProtocolVersion);
  c.set_model("load");
  c.set_fingerprint(kFingerprint);
  c.set_silo(uint32_t(silo));
  return c;
}

std::unique_ptr<fvi::v1::Federation::Stub> connect(const std::string& target, int connection) {
  grpc::ChannelArguments arguments;
  arguments.SetInt("bench.connection", connection);  // one connection each: channels with equal arguments share one
  return fvi::v1::Federation::NewStub(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
}

std::chrono::system_clock::time_point in_seconds(int s) { return std::chrono::system_clock::now() + std::chrono::seconds(s); }

// The second process: first the machine's limit (Join calls for 2 s from 8 threads, reported
// through `report`), then S silos until the server says the run is over.
int run_silos(const std::string& target, int silos, int report) {
  std::atomic<long> calls{0};
  {
    std::vector<std::thread> hammer;
    const auto until = Clock::now() + std::chrono::seconds(2);
    for (int t = 0; t < 8; ++t)
      hammer.emplace_back([&, t] {
        auto stub = connect(target, 100000 + t);
        fvi::v1::JoinRequest join;
        *join.mutable_who() = who(1);
        while (Clock::now() < until) {
          grpc::ClientContext context;
          context.set_deadline(in_seconds(10));
          fvi::v1::JoinReply reply;
          if (stub->Join(&context, join, &reply).ok()) ++calls;
        }
      });
    for (auto& t : hammer) t.join();
  }
  const double rate = double(calls) / 2.0;
  if (write(report, &rate, sizeof rate) != sizeof rate) return 1;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int k = 1; k <= silos; ++k)
    threads.emplace_back([&, k] {
      auto stub = connect(target, k);
      fvi::v1::JoinRequest join;
      *join.mutable_who() = who(k);
      join.set_ready(true);
      join.set_description("silo " + std::to_string(k));
      grpc::ClientContext joining;
      joining.set_wait_for_ready(true);
      joining.set_deadline(in_seconds(120));
      fvi::v1::JoinReply joined;
      if (!stub->Join(&joining, join, &joined).ok()) return void(++failed);
      for (;;) {
        fvi::v1::TaskRequest ask;
        *ask.mutable_who() = who(k);
        fvi::v1::Task task;
        grpc::ClientContext polling;
        polling.set_deadline(in_seconds(30));
        if (!stub->NextTask(&polling, ask, &task).ok()) return void(++failed);
        if (task.status() == fvi::v1::Task::DONE) return;
        if (task.status() != fvi::v1::Task::WORK) continue;
        fvi::v1::Result result;
        *result.mutable_who() = who(k);
        result.set_exchange(task.exchange());
        result.set_round(task.round());
        result.set_phase(task.phase());
        result.set_count(kValues);
        result.mutable_values()->Resize(kValues, 0.5);
        grpc::ClientContext submitting;
        submitting.set_deadline(in_seconds(30));
        fvi::v1::Ack ack;
        auto writer = stub->Submit(&submitting, &ack);
        writer->Write(result);
        writer->WritesDone();
        if (!writer->Finish().ok() || !ack.accepted()) return void(++failed);
      }
    });
  for (auto& t : threads) t.join();
  if (failed > 0) std::fprintf(stderr, "bench_server_load: %d silos failed\n", failed.load());
  return failed > 0;
}

int measure(int silos, int rounds) {
  int port_pipe[2], report_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(report_pipe) != 0) return 1;
  // Fork before gRPC starts in this process: the silos get a process (and a gRPC) of their own.
  const pid_t child = fork();
  if (child == 0) {
    close(port_pipe[1]);
    close(report_pipe[0]);
    int port = 0;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port) _exit(1);
    _exit(run_silos("127.0.0.1:" + std::to_string(port), silos, report_pipe[1]));
  }
  close(port_pipe[0]);
  close(report_pipe[1]);

  fvi::net::ServerPolicy policy;
  policy.silos = silos;
  policy.model = "load";
  policy.fingerprint = kFingerprint;
  policy.method = "pvi";
  policy.quiet = true;
  policy.deadline = 60;
  policy.give_up = 120;
  fvi::net::ServerTransport transport(policy);
  fvi::net::ServerService service(transport);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  fvi::net::ServerService::configure(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || write(port_pipe[1], &port, sizeof port) != sizeof port) return 1;
  const Status listening = own_status();
  double rate = 0;
  if (read(report_pipe[0], &rate, sizeof rate) != sizeof rate) return 1;

  transport.wait_for_silos(120);
  const Status joined = own_status();
  std::vector<double> seconds;
  Status busiest = joined;
  for (int r = 1; r <= rounds; ++r) {
    fvi::program::Exchange x;
    x.round = uint32_t(r);
    x.phase = fvi::program::Phase::kPviEvaluate;
    x.request = [](int) { return fvi::program::Message(kValues, 1.0); };
    x.reply = [](int, fvi::program::Message& reply) { return fvi::program::check_reply(reply, kValues); };
    const auto start = Clock::now();
    const std::vector<bool> accepted = transport.exchange(x);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    if (std::count(accepted.begin(), accepted.end(), true) != silos) {
      std::fprintf(stderr, "bench_server_load: round %d: not every silo's reply was accepted\n", r);
      return 1;
    }
    const Status now = own_status();
    busiest.threads = std::max(busiest.threads, now.threads);
    busiest.rss_kb = std::max(busiest.rss_kb, now.rss_kb);
  }
  const Status after = own_status();
  transport.finish(30);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  int child_status = 0;
  waitpid(child, &child_status, 0);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double floor = 2.0 * silos / rate;
  std::printf("| %5d | %3ld / %3ld / %3ld | %6.1f / %6.1f / %6.1f | %6.1f | %8.2f ms | %8.2f ms | %5.1f%% |%s\n", silos,
              listening.threads, joined.threads, busiest.threads, listening.rss_kb / 1024.0, joined.rss_kb / 1024.0,
              after.rss_kb / 1024.0, double(busiest.rss_kb - listening.rss_kb) / silos, 1e3 * median, 1e3 * floor,
              100 * floor / median, WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? "" : " (silos failed)");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Each row in a fresh process (this program again, with --row): gRPC does not survive a fork
  // once it has started, and each row forks its silos' process before gRPC starts.
  if (argc == 4 && std::string(argv[1]) == "--row") return measure(std::atoi(argv[3]), std::atoi(argv[2]));
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
  std::vector<int> counts;
  for (int i = 2; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {10, 100, 1000};
  if (rounds < 1 || std::any_of(counts.begin(), counts.end(), [](int s) { return s < 1 || s > 100000; })) {
    std::fprintf(stderr, "usage: bench_server_load [ROUNDS [SILOS ...]] (ROUNDS >= 1, 1 <= SILOS <= 100000)\n");
    return 2;
  }
  std::printf("bench_server_load: %d rounds each; %u cores. Threads and memory are the server process's own;\n"
              "the floor is 2 calls per silo at the machine's rate of trivial unary calls (Join, 8 threads,\n"
              "measured before each row).\n\n",
              rounds, std::thread::hardware_concurrency());
  std::printf("| silos | threads: listening / joined / busiest | RSS MB: listening / joined / after | KB per silo "
              "| round (median) | floor | of floor |\n|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (int s : counts) {
    const pid_t row = fork();
    if (row == 0) {
      const std::string r = std::to_string(rounds), n = std::to_string(s);
      execl("/proc/self/exe", argv[0], "--row", r.c_str(), n.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(row, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "bench_server_load: the row of %d silos failed\n", s);
      return 1;
    }
  }
  return 0;
}
