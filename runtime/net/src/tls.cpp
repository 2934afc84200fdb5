#include "fvi/net/tls.h"

#include <stdexcept>

#include "fvi/net/protocol.h"

namespace fvi::net {

std::shared_ptr<grpc::ServerCredentials> server_credentials(const Arguments& args) {
  if (args.flag("insecure")) return grpc::InsecureServerCredentials();
  if (!args.has("cert") || !args.has("key"))
    throw std::runtime_error("TLS is on by default: give --cert FILE and --key FILE (PEM), or --insecure to run "
                             "without TLS on a network you trust");
  grpc::SslServerCredentialsOptions options(args.has("client-ca")
                                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (args.has("client-ca")) options.pem_root_certs = read_file(args.get("client-ca"));
  options.pem_key_cert_pairs.push_back({read_file(args.get("key")), read_file(args.get("cert"))});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const Arguments& args) {
  if (args.flag("insecure")) return grpc::InsecureChannelCredentials();
  if (!args.has("ca"))
    throw std::runtime_error("TLS is on by default: give --ca FILE (the PEM certificate that signed the server's), "
                             "or --insecure to run without TLS on a network you trust");
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = read_file(args.get("ca"));
  if (args.has("cert") != args.has("key")) throw std::runtime_error("--cert and --key go together");
  if (args.has("cert")) {
    options.pem_cert_chain = read_file(args.get("cert"));
    options.pem_private_key = read_file(args.get("key"));
  }
  return grpc::SslCredentials(options);
}

int max_message_bytes(const Arguments& args) {
  const double mb = args.number("max-message", 256);
  if (mb < 1 || mb > 2047) throw std::invalid_argument("--max-message " + args.get("max-message") + ": expected 1..2047 (MB)");
  return int(mb * 1024 * 1024);
}

grpc::ChannelArguments channel_arguments(const Arguments& args) {
  grpc::ChannelArguments channel;
  channel.SetMaxReceiveMessageSize(max_message_bytes(args));
  channel.SetMaxSendMessageSize(-1);
  channel.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  if (args.has("server-name")) channel.SetSslTargetNameOverride(args.get("server-name"));
  return channel;
}

}  // namespace fvi::net
