// A peer that speaks the federation protocol dishonestly (issue 27 items 1 and 4): crafted Join
// calls over an insecure channel, one line each with the status the server gave. Exit 0 when the
// server refused every one with the expected code. check_deploy.py's hostile_join case runs it
// against a live server and then checks the server's log and that the run still finishes.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fvi/net/protocol.h"
#include "fvi/v1/federation.grpc.pb.h"

namespace {

struct Call {
  const char* what;
  uint32_t silo;
  std::string model;
  grpc::StatusCode expected;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hostile_peer HOST:PORT\n");
    return 2;
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(64 << 20);
  auto stub = fvi::v1::Federation::NewStub(
      grpc::CreateCustomChannel(argv[1], grpc::InsecureChannelCredentials(), arguments));
  const std::vector<Call> calls = {
      {"silo 2^32 - 1 (was -1 after a conversion to int)", 4294967295u, "x", grpc::StatusCode::PERMISSION_DENIED},
      {"silo 2^31", 2147483648u, "x", grpc::StatusCode::PERMISSION_DENIED},
      {"silo 0", 0, "x", grpc::StatusCode::PERMISSION_DENIED},
      {"a model name that forges a log line and clears the terminal", 1,
       "evil\nserver: silo joined: forged\x1b[2J", grpc::StatusCode::FAILED_PRECONDITION},
      {"a 10 MB model name", 1, std::string(10 << 20, 'A'), grpc::StatusCode::FAILED_PRECONDITION},
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
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    fvi::v1::JoinReply reply;
    const grpc::Status status = stub->Join(&context, join, &reply);
    const bool ok = status.error_code() == c.expected;
    failures += !ok;
    std::printf("%s: %s: status %d (expected %d): %.120s\n", ok ? "refused" : "WRONG", c.what, int(status.error_code()),
                int(c.expected), status.error_message().c_str());
  }
  return failures == 0 ? 0 : 1;
}
