// A peer that speaks the federation protocol dishonestly (issue 27), against a live server;
// check_deploy.py's cases run it and then check the server (its log, its memory and threads,
// that the run still finishes). Modes:
//   hostile_peer HOST:PORT join
//       crafted Join calls (items 1 and 4), one line each with the status the server gave; exit 0
//       when the server refused every one with the expected code.
//   hostile_peer HOST:PORT flood-submit CALLS MB [whole]
//       CALLS concurrent Submit calls with a wrong token, each trying to send MB megabytes (item 5),
//       in parts of 65,536 values, or with `whole` as one message (the version 1 attack); exit 0
//       when every one was refused. Prints how many were refused and how.
//   hostile_peer HOST:PORT idle-submit CALLS SECONDS
//       CALLS Submit calls that send nothing, held SECONDS (item 5: calls that would hold the
//       slots of unchecked replies); prints how the server ended them.
//   hostile_peer HOST:PORT flood-poll CALLS SILO TOKEN MODEL FINGERPRINT SECONDS
//       CALLS concurrent NextTask calls with silo SILO's true credentials, held SECONDS (item 6);
//       prints how many the server parked, answered and refused (by code).
//   hostile_peer HOST:PORT absurd SILO TOKEN MODEL FINGERPRINT
//       joins as silo SILO and answers every PVI update with a change of 1e300s (item 7) until the run is
//       over or the server stops answering; prints how many replies were refused.
// A FINGERPRINT is the hex the server prints at start ("kernels fingerprint ...").
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fvi/net/protocol.h"
#include "fvi/v1/federation.grpc.pb.h"

namespace {

using Stub = fvi::v1::Federation::Stub;

std::chrono::system_clock::time_point in(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds));
}

fvi::v1::Credentials credentials(char** argv) {  // SILO TOKEN MODEL FINGERPRINT
  fvi::v1::Credentials who;
  who.set_protocol(fvi::net::kProtocolVersion);
  who.set_silo(uint32_t(std::strtoul(argv[0], nullptr, 10)));
  who.set_token(argv[1]);
  who.set_model(argv[2]);
  who.set_fingerprint(std::strtoull(argv[3], nullptr, 16));
  return who;
}

struct Call {
  const char* what;
  uint32_t silo;
  std::string model;
  grpc::StatusCode expected;
};

int crafted_joins(Stub& stub) {
  const std::vector<Call> calls = {
      {"silo 2^32 - 1 (was -1 after a conversion to int)", 4294967295u, "x", grpc::StatusCode::PERMISSION_DENIED},
      {"silo 2^31", 2147483648u, "x", grpc::StatusCode::PERMISSION_DENIED},
      {"silo 0", 0, "x", grpc::StatusCode::PERMISSION_DENIED},
      {"a model name that forges a log line and clears the terminal", 1,
       "evil\nserver: silo joined: forged\x1b[2J", grpc::StatusCode::FAILED_PRECONDITION},
      // Under the server's 1 MB limit on a message from an unknown sender: read, then refused.
      {"a 1000 KB model name", 1, std::string(1000 << 10, 'A'), grpc::StatusCode::FAILED_PRECONDITION},
      // Over it: refused by gRPC unread.
      {"a 10 MB model name", 1, std::string(10 << 20, 'A'), grpc::StatusCode::RESOURCE_EXHAUSTED},
  };
  int failures = 0;
  for (const Call& c : calls) {
    fvi::v1::JoinRequest join;
    fvi::v1::Credentials* who = join.mutable_who();
    who->set_protocol(fvi::net::kProtocolVersion);
    who->set_silo(c.silo);
    who->set_model(c.model);  // no fingerprint: never the server's model
    join.set_ready(true);
    join.set_description("hostile\n\x1b[31m");
    grpc::ClientContext context;
    context.set_deadline(in(20));
    fvi::v1::JoinReply reply;
    const grpc::Status status = stub.Join(&context, join, &reply);
    const bool ok = status.error_code() == c.expected;
    failures += !ok;
    std::printf("%s: %s: status %d (expected %d): %.120s\n", ok ? "refused" : "WRONG", c.what, int(status.error_code()),
                int(c.expected), status.error_message().c_str());
  }
  return failures == 0 ? 0 : 1;
}

// Each call on its own thread, sending parts of 65,536 values as fast as the server reads them.
int flood_submit(const std::string& target, int calls, double megabytes, bool whole) {
  std::atomic<int> refused{0}, accepted{0};
  std::map<int, int> codes;
  std::mutex codes_mutex;
  std::vector<std::thread> threads;
  for (int c = 0; c < calls; ++c)
    threads.emplace_back([&, c] {
      // A channel per 16 calls: several connections, as an attacker would open.
      grpc::ChannelArguments arguments;
      arguments.SetInt("fvi.connection", c / 16);
      arguments.SetMaxSendMessageSize(-1);
      auto stub = fvi::v1::Federation::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
      grpc::ClientContext context;
      context.set_deadline(in(60));
      fvi::v1::Ack ack;
      auto writer = stub->Submit(&context, &ack);
      const size_t total = size_t(megabytes * (1 << 20) / 8);
      fvi::v1::Result part;
      part.mutable_who()->set_protocol(fvi::net::kProtocolVersion);
      part.mutable_who()->set_silo(1);
      part.mutable_who()->set_token("not the token");
      part.set_count(total);
      for (size_t sent = 0; sent < total;) {
        const size_t n = whole ? total : std::min(fvi::net::kReplyPartValues, total - sent);
        part.mutable_values()->Resize(int(n), 0.5);
        if (!writer->Write(part)) break;
        part.clear_who();
        part.clear_count();
        sent += n;
      }
      writer->WritesDone();
      const grpc::Status status = writer->Finish();
      (status.ok() ? accepted : refused)++;
      std::lock_guard<std::mutex> lock(codes_mutex);
      ++codes[int(status.error_code())];
    });
  for (auto& t : threads) t.join();
  std::printf("flood-submit: %d calls of %.0f MB (%s) with a wrong token: %d refused, %d accepted; codes:", calls,
              megabytes, whole ? "one message each" : "in parts", refused.load(), accepted.load());
  for (const auto& [code, n] : codes) std::printf(" %d x%d", code, n);
  std::printf("\n");
  return accepted == 0 ? 0 : 1;
}

// Each call on its own thread, waiting for the server's status.
int idle_submit(const std::string& target, int calls, double seconds) {
  std::map<int, int> codes;
  std::mutex codes_mutex;
  std::vector<std::thread> threads;
  for (int c = 0; c < calls; ++c)
    threads.emplace_back([&, c] {
      grpc::ChannelArguments arguments;  // a connection per 8 calls: under the 16 a connection may carry
      arguments.SetInt("fvi.connection", c / 8);
      auto stub = fvi::v1::Federation::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
      grpc::ClientContext context;
      context.set_deadline(in(seconds));
      fvi::v1::Ack ack;
      auto writer = stub->Submit(&context, &ack);
      const grpc::Status status = writer->Finish();
      std::lock_guard<std::mutex> lock(codes_mutex);
      ++codes[int(status.error_code())];
    });
  for (auto& t : threads) t.join();
  std::printf("idle-submit: %d calls sending nothing for %.0f s:", calls, seconds);
  for (const auto& [code, n] : codes) std::printf(" status %d x%d", code, n);
  std::printf("\n");
  return 0;
}

// All calls at once on one channel, with the completion-queue API: a thread for them all.
int flood_poll(const std::string& target, int calls, const fvi::v1::Credentials& who, double seconds) {
  auto stub = fvi::v1::Federation::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue queue;
  struct Pending {
    grpc::ClientContext context;
    fvi::v1::Task task;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<fvi::v1::Task>> reader;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  fvi::v1::TaskRequest request;
  *request.mutable_who() = who;
  for (int c = 0; c < calls; ++c) {
    auto p = std::make_unique<Pending>();
    p->context.set_deadline(in(seconds));
    p->reader = stub->AsyncNextTask(&p->context, request, &queue);
    p->reader->Finish(&p->task, &p->status, p.get());
    pending.push_back(std::move(p));
  }
  std::map<int, int> codes;
  int answered = 0;
  void* tag = nullptr;
  bool ok = false;
  for (int c = 0; c < calls && queue.Next(&tag, &ok); ++c) {
    auto* p = static_cast<Pending*>(tag);
    ++codes[int(p->status.error_code())];
    answered += p->status.ok();
  }
  std::printf("flood-poll: %d NextTask calls as silo %u: %d answered;", calls, who.silo(), answered);
  for (const auto& [code, n] : codes) std::printf(" status %d x%d", code, n);
  std::printf("\n");
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return 0;
}

// Answers every PVI update with values of 1e300 (finite, absurd).
int absurd(Stub& stub, const fvi::v1::Credentials& who) {
  {
    fvi::v1::JoinRequest join;
    *join.mutable_who() = who;
    join.set_ready(true);
    join.set_description("silo " + std::to_string(who.silo()) + ": absurd");
    fvi::v1::JoinReply reply;
    grpc::ClientContext context;
    context.set_deadline(in(20));
    const grpc::Status status = stub.Join(&context, join, &reply);
    if (!status.ok()) {
      std::printf("absurd: join refused: %s\n", status.error_message().c_str());
      return 1;
    }
  }
  int sent = 0, refused = 0;
  for (;;) {
    fvi::v1::TaskRequest ask;
    *ask.mutable_who() = who;
    fvi::v1::Task task;
    grpc::ClientContext context;
    context.set_deadline(in(20));
    if (!stub.NextTask(&context, ask, &task).ok() || task.status() == fvi::v1::Task::DONE) break;
    if (task.status() != fvi::v1::Task::WORK) continue;
    // A PVI update's request is [first?, q_s, t_k], the reply a change as long as q_s; any
    // other phase's reply: one value.
    const int n = task.phase() == 1 ? (task.values_size() - 1) / 2 : 1;
    fvi::v1::Result part;
    *part.mutable_who() = who;
    part.set_exchange(task.exchange());
    part.set_round(task.round());
    part.set_phase(task.phase());
    part.set_count(uint64_t(n));
    // A mean-field change [eta1, eta2]: 1e300 and -1e300, a proper Gaussian of absurd precision.
    part.mutable_values()->Resize(n, 1e300);
    for (int i = n / 2; i < n && task.phase() == 1; ++i) part.set_values(i, -1e300);
    grpc::ClientContext submit_context;
    submit_context.set_deadline(in(20));
    fvi::v1::Ack ack;
    auto writer = stub.Submit(&submit_context, &ack);
    writer->Write(part);
    writer->WritesDone();
    const bool heard = writer->Finish().ok();  // a refusal by status, or by the Ack
    ++sent;
    refused += !heard || !ack.accepted();
  }
  std::printf("absurd: %d replies of 1e300 sent, %d refused\n", sent, refused);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[2] : "";
  const std::string target = argc > 1 ? argv[1] : "";
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(64 << 20);
  auto stub = fvi::v1::Federation::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
  if (mode == "join" && argc == 3) return crafted_joins(*stub);
  if (mode == "flood-submit" && (argc == 5 || (argc == 6 && std::string(argv[5]) == "whole")))
    return flood_submit(target, std::atoi(argv[3]), std::atof(argv[4]), argc == 6);
  if (mode == "idle-submit" && argc == 5) return idle_submit(target, std::atoi(argv[3]), std::atof(argv[4]));
  if (mode == "flood-poll" && argc == 9) return flood_poll(target, std::atoi(argv[3]), credentials(argv + 4), std::atof(argv[8]));
  if (mode == "absurd" && argc == 7) return absurd(*stub, credentials(argv + 3));
  std::fprintf(stderr,
               "usage: hostile_peer HOST:PORT join\n"
               "       hostile_peer HOST:PORT flood-submit CALLS MB [whole]\n"
               "       hostile_peer HOST:PORT idle-submit CALLS SECONDS\n"
               "       hostile_peer HOST:PORT flood-poll CALLS SILO TOKEN MODEL FINGERPRINT SECONDS\n"
               "       hostile_peer HOST:PORT absurd SILO TOKEN MODEL FINGERPRINT\n");
  return 2;
}
