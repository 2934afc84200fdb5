#pragma once
// TLS for both ends (on unless --insecure): the server presents its certificate, and with
// --client-ca it requires every silo to present one signed by that CA (mutual TLS).
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "fvi/net/arguments.h"

namespace fvi::net {

// From --cert, --key, --client-ca, --insecure; throws std::runtime_error saying what is missing.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const Arguments& args);
// From --ca, --cert, --key, --insecure.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const Arguments& args);
// The largest message a party accepts, in bytes, from --max-message MB (default 256: a BNN's q_s
// is megabytes, a VFL z message N x S doubles): gRPC refuses a larger one before it is parsed, so
// a hostile peer cannot make a party allocate what it likes.
int max_message_bytes(const Arguments& args);
// Channel arguments: the receive limit above, --server-name for the certificate's name when it
// is not the address dialled, and a reconnect backoff of at most 2 s.
grpc::ChannelArguments channel_arguments(const Arguments& args);

}  // namespace fvi::net
