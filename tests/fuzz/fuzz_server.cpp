// Fuzz target for the server's message handling (issue 27): the input is a script of calls, as
// a hostile peer could make them, played against a ServerTransport (the protocol's state, without
// gRPC's plumbing) with an exchange open. The first byte picks the server's policy (bit 0:
// tokens, bit 1: client certificates). Then each record is a kind byte, a 16-bit little-endian
// length, and that many bytes: a serialised JoinRequest (kind 0), TaskRequest (1) or Result (2,
// a whole Submit: first-part checks, then the reply; exchange 0 stands for the exchange the
// server last handed out, whose number it draws at random), or a control (3: cancel the last
// parked NextTask; 4: end the exchange and open the next; 5: the next calls come with a client
// certificate named by the record's bytes). The harness checks what must hold for any input:
// no crash or sanitizer report, every NextTask answered at most once, and nothing accepted that
// the exchange's own check refused.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fvi/net/protocol.h"
#include "fvi/net/server_transport.h"

namespace {

constexpr size_t kReplySize = 4;

fvi::net::ServerPolicy policy(uint8_t variant) {
  fvi::net::ServerPolicy p;
  p.silos = 3;
  if (variant & 1) p.tokens = {{1, "token-one"}, {2, "token-two"}, {3, "token-three"}};
  p.client_certificates = variant & 2;
  p.model = "fuzz";
  p.fingerprint = 0x1234;
  p.method = "pvi";
  p.max_reply_values = 1 << 12;
  p.quiet = true;
  return p;
}

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_server: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<int> answers;  // per NextTask: how many times it was answered (outlives the server)
  std::atomic<uint64_t> handed_out{0};  // the exchange number of the last WORK answer
  fvi::net::ServerTransport server(policy(data[0]));
  uint32_t round = 1;
  auto make_exchange = [&] {
    fvi::program::Exchange x;
    x.round = round;
    x.phase = fvi::program::Phase::kPviUpdate;
    x.request = [](int k) { return fvi::program::Message{double(k), 1.0, 2.0}; };
    x.reply = [](int, fvi::program::Message& reply) { return fvi::program::check_reply(reply, kReplySize); };
    return x;
  };
  fvi::program::Exchange exchange = make_exchange();
  server.publish(exchange);

  fvi::net::Peer peer{"ipv4:127.0.0.1:1", {}};
  uint64_t last_poll = 0;
  size_t at = 1;
  while (size - at >= 3) {
    const uint8_t kind = data[at];
    const size_t length = std::min<size_t>(data[at + 1] | (size_t(data[at + 2]) << 8), size - at - 3);
    const uint8_t* body = data + at + 3;
    at += 3 + length;
    switch (kind % 6) {
      case 0: {
        fvi::v1::JoinRequest request;
        fvi::v1::JoinReply reply;
        if (request.ParseFromArray(body, int(length))) server.join(peer, request, reply);
        break;
      }
      case 1: {
        fvi::v1::TaskRequest request;
        if (!request.ParseFromArray(body, int(length))) break;
        answers.push_back(0);
        const size_t slot = answers.size() - 1;
        last_poll = server.next_task(peer, request, fvi::net::ServerTransport::Clock::now() + std::chrono::hours(1),
                                     [&answers, &handed_out, slot](const grpc::Status&, const fvi::v1::Task& task) {
                                       if (++answers[slot] > 1) fail("a NextTask answered twice");
                                       if (task.status() == fvi::v1::Task::WORK) handed_out = task.exchange();
                                     });
        break;
      }
      case 2: {
        fvi::v1::Result result;
        if (!result.ParseFromArray(body, int(length))) break;
        if (result.exchange() == 0) result.set_exchange(handed_out);
        int k = -1;
        if (!server.open_reply(peer, result, k).ok()) break;
        if (k < 0 || k >= 3) fail("open_reply accepted a silo outside the run");
        if (uint64_t(result.values_size()) == result.count()) {
          fvi::v1::Ack ack;
          server.take_reply(peer, k, result, ack);
          if (ack.accepted() && !fvi::program::check_reply({result.values().begin(), result.values().end()},
                                                           kReplySize).empty())
            fail("a reply the exchange refuses was accepted");
        }
        server.close_reply(k);
        break;
      }
      case 3:
        server.cancel_poll(last_poll);
        break;
      case 4:
        try {
          server.collect(exchange);
        } catch (const fvi::net::QuorumLost&) {
          // no valid reply: what a real server stops on
        }
        ++round;
        exchange = make_exchange();
        server.publish(exchange);
        break;
      case 5:
        peer.common_names = {std::string(reinterpret_cast<const char*>(body), length)};
        break;
    }
  }
  try {
    server.collect(exchange);
  } catch (const fvi::net::QuorumLost&) {
  }
  return 0;  // the destructor answers every parked poll: each at most once (checked above)
}
