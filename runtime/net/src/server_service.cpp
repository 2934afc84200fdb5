#include "fvi/net/server_service.h"

#include <atomic>
#include <chrono>
#include <iterator>
#include <string>

#include <grpcpp/resource_quota.h>

#include "fvi/net/protocol.h"

namespace fvi::net {

namespace {

using Clock = ServerTransport::Clock;

Peer peer_of(const grpc::CallbackServerContext* context) {
  Peer peer;
  peer.address = context->peer();
  if (const auto auth = context->auth_context())
    for (const auto& name : auth->FindPropertyValues("x509_common_name"))
      peer.common_names.emplace_back(name.data(), name.size());
  return peer;
}

// The client's deadline on the steady clock (gRPC gives it on the system clock, and the far
// future when the client set none).
Clock::time_point steady_deadline(const grpc::CallbackServerContext* context) {
  const auto left = context->deadline() - std::chrono::system_clock::now();
  if (left > std::chrono::hours(1)) return Clock::now() + std::chrono::hours(1);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
}

}  // namespace

void ServerService::configure(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxUnauthenticatedMessageBytes);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kStreamsPerConnection);
  // gRPC 1.51 buffers a whole message before it checks its size: without a quota, four 200 MB
  // messages from nobody held 784 MB. Its buffers in all are held to kTransportMemory (past it
  // the transport reads more slowly; no call fails for it).
  static grpc::ResourceQuota quota("fvi-server");
  quota.Resize(kTransportMemory);
  builder.SetResourceQuota(quota);
}

grpc::ServerUnaryReactor* ServerService::Join(grpc::CallbackServerContext* context,
                                              const fvi::v1::JoinRequest* request, fvi::v1::JoinReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(transport_.join(peer_of(context), *request, *reply));
  return reactor;
}

// A NextTask call: answered at once, or parked in the transport (which answers it from whichever
// thread publishes work, or from its timer) without holding a thread.
class ServerService::PollReactor final : public grpc::ServerUnaryReactor {
 public:
  PollReactor(ServerTransport& transport, grpc::CallbackServerContext* context, const fvi::v1::TaskRequest* request,
              fvi::v1::Task* task)
      : transport_(transport), task_(task) {
    // The answer may come from another thread before this constructor returns: gRPC keeps a
    // Finish that precedes the reactor's start until it starts.
    id_ = transport_.next_task(peer_of(context), *request, steady_deadline(context),
                               [this](const grpc::Status& status, const fvi::v1::Task& answer) {
                                 *task_ = answer;
                                 Finish(status);
                               });
  }
  void OnCancel() override {
    if (transport_.cancel_poll(id_)) Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override { delete this; }

 private:
  ServerTransport& transport_;
  fvi::v1::Task* task_;
  uint64_t id_ = 0;
};

grpc::ServerUnaryReactor* ServerService::NextTask(grpc::CallbackServerContext* context,
                                                  const fvi::v1::TaskRequest* request, fvi::v1::Task* task) {
  return new PollReactor(transport_, context, request, task);
}

// A Submit call: the reply's parts, read one at a time. The first part's credentials and
// declared size are checked before the second is read. Until its first part has arrived a call
// is "unproven": at most kUnprovenReplies are, and a new one ends the oldest (a peer that opens
// calls and sends nothing cannot hold the slots that the silos' replies need).
class ServerService::ReplyReactor final : public grpc::ServerReadReactor<fvi::v1::Result> {
 public:
  ReplyReactor(ServerService& service, grpc::CallbackServerContext* context, fvi::v1::Ack* ack)
      : service_(service), peer_(peer_of(context)), ack_(ack) {
    ReplyReactor* oldest = nullptr;
    {
      std::lock_guard<std::mutex> lock(service_.unproven_mutex_);
      service_.unproven_.push_back(this);
      place_ = std::prev(service_.unproven_.end());
      listed_ = true;
      if (service_.unproven_.size() > size_t(kUnprovenReplies)) {
        oldest = service_.unproven_.front();
        service_.unproven_.pop_front();
        oldest->listed_ = false;
      }
    }
    // Ended only if its first part has not arrived meanwhile (claim() decides, once); it is not
    // deleted before it is finished, so the pointer holds.
    if (oldest && oldest->claim(kEvicted))
      oldest->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "the server reads at most " + std::to_string(kUnprovenReplies) +
                                      " replies whose first part has not arrived; this one waited longest"));
    StartRead(&part_);
  }

  void OnReadDone(bool ok) override {
    if (silo_ == -1) {  // the first part, or the end of a call that sent none
      if (!claim(kReading)) return;  // ended to make room: whoever ended it finished it
      unlist();
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a reply with no parts"));
      return first();
    }
    if (!ok) return end();
    if (size_t(part_.values_size()) > kReplyPartValues ||
        uint64_t(whole_.values_size()) + uint64_t(part_.values_size()) > whole_.count())
      return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "a reply part of " + std::to_string(part_.values_size()) +
                                     " values: more than a part holds, or than the reply declared"));
    whole_.mutable_values()->Add(part_.values().begin(), part_.values().end());
    StartRead(&part_);
  }

  void OnDone() override {
    unlist();
    release_silo();
    delete this;
  }

 private:
  enum Stage { kAwaitingFirst, kReading, kEvicted };

  // Moves the call out of kAwaitingFirst; true for the one caller that does.
  bool claim(Stage to) {
    int expected = kAwaitingFirst;
    return stage_.compare_exchange_strong(expected, to);
  }

  void unlist() {
    std::lock_guard<std::mutex> lock(service_.unproven_mutex_);
    if (listed_) service_.unproven_.erase(place_);
    listed_ = false;
  }

  void first() {
    int k = -1;
    const grpc::Status status = service_.transport_.open_reply(peer_, part_, k);
    if (!status.ok()) return Finish(status);
    silo_ = k;
    if (size_t(part_.values_size()) > kReplyPartValues)
      return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a reply part of more than " +
                                                                         std::to_string(kReplyPartValues) + " values"));
    whole_ = std::move(part_);
    part_.Clear();
    StartRead(&part_);
  }

  void end() {
    if (uint64_t(whole_.values_size()) != whole_.count())
      return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "the reply ended after " + std::to_string(whole_.values_size()) + " of the " +
                                     std::to_string(whole_.count()) + " values it declared"));
    finish(service_.transport_.take_reply(peer_, silo_, whole_, *ack_));
  }

  // Ends a call past its first part. The silo's reply slot is free before its status leaves: a
  // client that sends its next reply as soon as it hears must find it free (OnDone comes later).
  void finish(const grpc::Status& status) {
    release_silo();
    Finish(status);
  }

  void release_silo() {
    if (silo_ >= 0) service_.transport_.close_reply(silo_);
    silo_ = kReleased;
  }

  ServerService& service_;
  const Peer peer_;
  fvi::v1::Ack* ack_;
  fvi::v1::Result part_, whole_;
  static constexpr int kReleased = -2;
  int silo_ = -1;  // set once the first part is accepted: the silo holds a reply slot until finish()
  std::atomic<int> stage_{kAwaitingFirst};
  std::list<ReplyReactor*>::iterator place_;  // in service_.unproven_ while listed_ (under its mutex)
  bool listed_ = false;
};

grpc::ServerReadReactor<fvi::v1::Result>* ServerService::Submit(grpc::CallbackServerContext* context,
                                                                fvi::v1::Ack* ack) {
  return new ReplyReactor(*this, context, ack);
}

}  // namespace fvi::net
