#pragma once
// What both ends of the wire agree on: the protocol version, the model's fingerprint, and how a
// silo proves who it is (docs/deployment.md).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "fvi/kernel/abi.h"

namespace fvi::net {

constexpr uint32_t kProtocolVersion = 3;

// A reply travels in parts of at most this many values (federation.proto, Submit).
constexpr size_t kReplyPartValues = 65536;
// The largest message either end reads before it knows who sent it: a reply part with its
// credentials, or a Join or NextTask request. Both ends refuse larger messages unread.
constexpr int kMaxUnauthenticatedMessageBytes = 1 << 20;

// A hash of the model's name, parameter groups and factors: a server and a silo built from
// different models (or versions of one) refuse each other.
uint64_t model_fingerprint(const fvi_model& model);

// The SHA-256 of a model's text, 64 hex digits: what a silo audited and what the server runs
// must be the same text (client_main.cpp), not merely the same kernels (model_fingerprint).
std::string model_sha256(const std::string& text);

// A tokens file: one line per silo, "K TOKEN" (blank lines and lines starting with '#' skipped).
// Throws std::runtime_error naming the file and line when it is malformed.
std::map<int, std::string> read_tokens(const std::string& path);
// The first line of a file, without its newline (a client's --token-file).
std::string read_secret(const std::string& path);
// The whole of a file (a PEM certificate or key); throws naming the file if it cannot be read.
std::string read_file(const std::string& path);

// Compares in time that depends only on the lengths (a token check must not leak a prefix).
bool same_secret(const std::string& a, const std::string& b);

}  // namespace fvi::net
