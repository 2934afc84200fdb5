#include "fvi/program/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

namespace fvi::program {

namespace {

constexpr char kMagic[8] = {'F', 'V', 'I', 'C', 'K', 'P', 'T', '2'};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_doubles(std::string& out, const std::vector<double>& v) {
  put_u64(out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

struct Reader {
  const std::string& bytes;
  size_t at = 0;
  const std::string& path;
  void need(size_t n) {
    if (bytes.size() - at < n) throw std::runtime_error(path + ": truncated checkpoint");
  }
  uint64_t u64() {
    need(8);
    uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    at += 8;
    return v;
  }
  std::vector<double> doubles() {
    const uint64_t n = u64();
    if (n > (bytes.size() - at) / sizeof(double)) throw std::runtime_error(path + ": truncated checkpoint");
    std::vector<double> v(n);
    // An empty vector's data() may be null, and memcpy from or to null is undefined even for
    // 0 bytes (UBSan: "null pointer passed as argument 1").
    if (n > 0) std::memcpy(v.data(), bytes.data() + at, n * sizeof(double));
    at += n * sizeof(double);
    return v;
  }
};

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointRecord& r) {
  std::string bytes(kMagic, sizeof kMagic);
  put_u64(bytes, r.kind.size());
  bytes += r.kind;
  put_u64(bytes, r.round);
  put_doubles(bytes, r.state);
  put_doubles(bytes, r.extra);
  put_doubles(bytes, r.traffic);
  // A fresh name beside the checkpoint, created exclusively (mkstemp: O_CREAT | O_EXCL, mode 0600):
  // a fixed name such as PATH.tmp could be a symlink someone planted, which open() would follow
  // and the checkpoint overwrite its target (issue 27 item 11).
  std::string name = path + ".XXXXXX";
  const int fd = ::mkstemp(name.data());
  const std::string tmp = name;
  if (fd < 0) throw std::runtime_error("cannot write the checkpoint beside " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write the checkpoint " + tmp);
    }
    done += size_t(n);
  }
  // On disk before the rename: a crash after it must not find an empty file under the real name.
  ::fsync(fd);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
}

bool load_checkpoint(const std::string& path, const std::string& kind, CheckpointRecord& r) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw std::runtime_error(path + ": not an fvi checkpoint");
  Reader reader{bytes, sizeof kMagic, path};
  const uint64_t kind_size = reader.u64();
  reader.need(kind_size);
  r.kind = bytes.substr(reader.at, kind_size);
  reader.at += kind_size;
  if (r.kind != kind) throw std::runtime_error(path + ": a checkpoint of a " + r.kind + ", not of a " + kind);
  r.round = uint32_t(reader.u64());
  r.state = reader.doubles();
  r.extra = reader.doubles();
  r.traffic = reader.doubles();
  if (reader.at != bytes.size()) throw std::runtime_error(path + ": trailing bytes after the checkpoint");
  return true;
}

}  // namespace fvi::program
