#include "fvi/net/protocol.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <openssl/evp.h>
#include <sys/stat.h>

namespace fvi::net {

namespace {

// FNV-1a, 64 bits: a fingerprint, not a defence (tokens and TLS are the defence).
void mix(uint64_t& h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  h = (h ^ 0xff) * 0x100000001b3ULL;  // a separator, so that "ab"+"c" differs from "a"+"bc"
}

}  // namespace

uint64_t model_fingerprint(const fvi_model& model) {
  uint64_t h = 0xcbf29ce484222325ULL;
  mix(h, model.name ? model.name : "");
  mix(h, std::to_string(model.abi_version));
  for (int g = 0; g < model.group_count; ++g) mix(h, fvi_group_name(model.group_kinds[g]));  // the names: the fingerprint ABI 5 peers computed
  for (int f = 0; f < model.factor_count; ++f) {
    const fvi_factor_info& info = model.factors[f];
    mix(h, info.name);
    mix(h, std::to_string(info.kind) + "/" + std::to_string(info.owner) + "/" + info.distribution);
    for (int i = 0; i < info.group_count; ++i) mix(h, std::to_string(info.groups[i]));
  }
  return h;
}

std::string model_sha256(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr) != 1 || length != 32)
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) out += hex[digest[i] >> 4], out += hex[digest[i] & 15];
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {

// A secret others on the machine can read is not one: say so (as ssh does), without refusing,
// since some deployments mount secrets with their own permissions.
void warn_if_readable_by_others(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
    std::fprintf(stderr, "warning: %s is readable by other users of this machine; chmod 600 it\n", path.c_str());
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; }

}  // namespace

std::string read_secret(const std::string& path) {
  std::string text = read_file(path);
  const size_t end = text.find_first_of("\r\n");
  if (end != std::string::npos) text.resize(end);
  if (blank(text)) throw std::runtime_error(path + ": the token is empty (or only spaces)");
  warn_if_readable_by_others(path);
  return text;
}

std::map<int, std::string> read_tokens(const std::string& path) {
  std::istringstream in(read_file(path));
  std::map<int, std::string> tokens;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    int silo = 0;
    std::string token, rest;
    if (!(fields >> silo >> token) || (fields >> rest) || silo < 1)
      throw std::runtime_error(path + ":" + std::to_string(n) + ": expected \"K TOKEN\" (a silo number from 1, a token)");
    if (!tokens.emplace(silo, token).second)
      throw std::runtime_error(path + ":" + std::to_string(n) + ": silo " + std::to_string(silo) + " has a token already");
    // A token two silos share lets either act as the other.
    for (const auto& [other, t] : tokens)
      if (other != silo && t == token)
        throw std::runtime_error(path + ":" + std::to_string(n) + ": silo " + std::to_string(silo) +
                                 " has the token of silo " + std::to_string(other) + "; each silo needs its own");
  }
  warn_if_readable_by_others(path);
  return tokens;
}

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace fvi::net
