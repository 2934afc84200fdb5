#pragma once
// The gRPC face of a ServerTransport: the Federation service on gRPC's callback API, so that no
// call holds a thread while it waits (a parked NextTask is a reactor in a table, answered by the
// transport), and the limits on what a peer can make the server hold before it has proved who
// it is (issue 27 items 5 and 6):
// - every message the server reads is at most kMaxUnauthenticatedMessageBytes (a reply comes in
//   parts; the rest of it is read only after the first part's credentials are checked);
// - at most kUnprovenReplies replies in all whose first part has not arrived (a new one ends the
//   oldest), and kRepliesPerSilo per silo after it is checked (ServerTransport);
// - at most kStreamsPerConnection calls at once on one connection, and kTransportMemory of
//   gRPC's buffers in all (a message larger than the limit is buffered whole before gRPC refuses
//   it; the quota holds what a flood of them can take).
#include <cstddef>
#include <list>
#include <mutex>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "fvi/net/server_transport.h"
#include "fvi/v1/federation.grpc.pb.h"

namespace fvi::net {

constexpr int kStreamsPerConnection = 16;
constexpr int kUnprovenReplies = 64;
constexpr size_t kTransportMemory = size_t(128) << 20;

class ServerService final : public fvi::v1::Federation::CallbackService {
 public:
  explicit ServerService(ServerTransport& transport) : transport_(transport) {}

  // The listening options that go with the service: message size, streams per connection.
  static void configure(grpc::ServerBuilder& builder);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context, const fvi::v1::JoinRequest* request,
                                 fvi::v1::JoinReply* reply) override;
  grpc::ServerUnaryReactor* NextTask(grpc::CallbackServerContext* context, const fvi::v1::TaskRequest* request,
                                     fvi::v1::Task* task) override;
  grpc::ServerReadReactor<fvi::v1::Result>* Submit(grpc::CallbackServerContext* context, fvi::v1::Ack* ack) override;

 private:
  class PollReactor;
  class ReplyReactor;

  ServerTransport& transport_;
  std::mutex unproven_mutex_;
  std::list<ReplyReactor*> unproven_;  // Submit calls whose first part has not arrived, oldest first
};

}  // namespace fvi::net
