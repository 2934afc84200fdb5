// NumPy's .npy format (numpy.lib.format): the magic "\x93NUMPY", a major and minor version, the
// header's length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), the header (a Python dict
// literal: {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }), then the raw elements.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <type_traits>

#include "fvi/data/readers.h"
#include "file_util.h"

namespace fvi::data {

namespace {

enum class Kind { Float, Signed, Unsigned, Bool };

struct Dtype {
  const char* descr;
  Kind kind;
  size_t size;
};

constexpr Dtype kDtypes[] = {
    {"<f8", Kind::Float, 8},    {"<f4", Kind::Float, 4},    {"|u1", Kind::Unsigned, 1}, {"|i1", Kind::Signed, 1},
    {"<i2", Kind::Signed, 2},   {"<u2", Kind::Unsigned, 2}, {"<i4", Kind::Signed, 4},   {"<u4", Kind::Unsigned, 4},
    {"<i8", Kind::Signed, 8},   {"<u8", Kind::Unsigned, 8}, {"|b1", Kind::Bool, 1},
};
constexpr const char* kSupported = "<f8 <f4 |u1 |i1 <i2 <u2 <i4 <u4 <i8 <u8 |b1";

struct Header {
  Dtype dtype{};
  bool fortran = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // where the elements start
  size_t data_bytes = 0;   // how many bytes of elements the shape needs
};

// The header dict, parsed strictly: the three keys numpy writes, each once, nothing else.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  Header run() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string();
      expect(':');
      if (key == "descr") {
        if (peek('[')) fail("has a structured dtype; only plain numeric dtypes are supported (" + std::string(kSupported) + ")");
        dtype(string(), h);
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail("header has an unknown key '" + key + "'");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip();
    if (pos_ != s_.size()) fail("header has text after its closing brace");
    if (!have_descr || !have_order || !have_shape) fail("header lacks 'descr', 'fortran_order' or 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw DataError(source_ + ": " + what); }

  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool peek(char c) {
    skip();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("header is malformed (expected '") + c + "' at byte " + std::to_string(pos_) + ")");
    ++pos_;
  }
  std::string string() {
    skip();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("header is malformed (expected a string)");
    const char q = s_[pos_++];
    const size_t end = s_.find(q, pos_);
    if (end == std::string::npos) fail("header is malformed (an unterminated string)");
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip();
    if (s_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
    if (s_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
    fail("header is malformed (fortran_order is not True or False)");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!peek(')')) {
      skip();
      int64_t v = 0;
      size_t digits = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (int64_t(1) << 50)) fail("header has a dimension too large to be real");
        v = v * 10 + (s_[pos_++] - '0');
        ++digits;
      }
      if (!digits) fail("header is malformed (a shape entry is not a non-negative integer)");
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2's long suffix
      out.push_back(v);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return out;
  }
  void dtype(const std::string& descr, Header& h) {
    for (const Dtype& d : kDtypes)
      if (descr == d.descr) return void(h.dtype = d);
    if (!descr.empty() && descr[0] == '>')
      fail("dtype '" + descr + "' is big-endian, which is not supported: save it little-endian (a.astype('<" +
           descr.substr(1) + "'))");
    fail("dtype '" + descr + "' is not supported (supported: " + kSupported + ")");
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
};

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Reads the prefix and header from the first `size` bytes at `bytes` (all that is available).
Header parse_header(const char* bytes, size_t size, const std::string& source) {
  static const char kMagic[] = "\x93NUMPY";
  if (size < 10 || std::memcmp(bytes, kMagic, 6) != 0)
    throw DataError(source + ": not a NumPy .npy file (it does not start with \\x93NUMPY)");
  const unsigned major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw DataError(source + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not supported (1.0, 2.0 and 3.0 are)");
  size_t header_len, prefix;
  auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(bytes[i])); };
  if (major == 1) {
    header_len = byte(8) | byte(9) << 8;
    prefix = 10;
  } else {
    if (size < 12) throw DataError(source + ": truncated in its header");
    header_len = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    prefix = 12;
  }
  if (header_len > size - prefix)
    throw DataError(source + ": truncated in its header (the header says " + std::to_string(header_len) +
                    " bytes, the file has " + std::to_string(size - prefix) + " after the prefix)");
  Header h = HeaderParser(std::string(bytes + prefix, header_len), source).run();
  h.data_offset = prefix + header_len;
  if (h.shape.size() > 2)
    throw DataError(source + ": a " + std::to_string(h.shape.size()) +
                    "-d array is not supported (0-d, 1-d and 2-d are): reshape it to 2-d, e.g. a.reshape(len(a), -1)");
  // Each d < 2^51 but two of them can wrap 64 bits (2^32 x 2^32 was 0 elements, issue 27 item 2):
  // every product is checked.
  uint64_t elements = 1;
  for (int64_t d : h.shape)
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements) ||
        elements > (uint64_t(1) << 60) / h.dtype.size)
      throw DataError(source + ": the header's shape " + shape_string(h.shape) + " is too large to be real");
  h.data_bytes = static_cast<size_t>(elements) * h.dtype.size;
  return h;
}


void check_size(const Header& h, uint64_t available, const std::string& source) {
  if (available == h.data_bytes) return;
  throw DataError(source + ": " + (available < h.data_bytes ? "truncated" : "longer than its header says") +
                  ": the header's shape " + shape_string(h.shape) + " of " + h.dtype.descr + " needs " +
                  std::to_string(h.data_bytes) + " bytes of data, the file has " + std::to_string(available));
}

template <class T>
void convert(const char* raw, const Header& h, std::vector<double>& out, const std::string& source) {
  const size_t n = out.size();
  const bool transpose = h.shape.size() == 2 && !h.fortran && h.shape[0] > 1 && h.shape[1] > 1;
  const size_t rows = h.shape.size() == 2 ? static_cast<size_t>(h.shape[0]) : n;
  const size_t cols = h.shape.size() == 2 ? static_cast<size_t>(h.shape[1]) : 1;
  auto value = [&](size_t k) {
    T x;
    std::memcpy(&x, raw + k * sizeof(T), sizeof(T));
    if constexpr (sizeof(T) == 8 && std::is_integral_v<T>) {
      constexpr T limit = T(1) << 53;
      if (x > limit || (std::is_signed_v<T> && x < -limit))
        throw DataError(source + ": element " + std::to_string(k) + " = " + std::to_string(x) +
                        " is beyond 2^53 and cannot be held exactly as a double");
    }
    return static_cast<double>(x);
  };
  if (!transpose) {
    for (size_t k = 0; k < n; ++k) out[k] = value(k);
    return;
  }
  // C order: element (i, j) at i * cols + j; ours is column-major, j * rows + i. Tiles of
  // kTile x kTile keep both the reads and the writes within a few cache lines.
  constexpr size_t kTile = 32;
  for (size_t i0 = 0; i0 < rows; i0 += kTile) {
    const size_t i1 = std::min(rows, i0 + kTile);
    for (size_t j0 = 0; j0 < cols; j0 += kTile) {
      const size_t j1 = std::min(cols, j0 + kTile);
      for (size_t j = j0; j < j1; ++j)
        for (size_t i = i0; i < i1; ++i) out[j * rows + i] = value(i * cols + j);
    }
  }
}

Variable make_variable(const char* raw, const Header& h, const std::string& name, const std::string& source) {
  Variable v;
  v.name = name;
  v.source = source;
  v.values.resize(h.data_bytes / h.dtype.size);
  switch (h.dtype.kind) {
    case Kind::Float:
      if (h.dtype.size == 8) convert<double>(raw, h, v.values, source);
      else convert<float>(raw, h, v.values, source);
      break;
    case Kind::Signed:
      if (h.dtype.size == 1) convert<int8_t>(raw, h, v.values, source);
      else if (h.dtype.size == 2) convert<int16_t>(raw, h, v.values, source);
      else if (h.dtype.size == 4) convert<int32_t>(raw, h, v.values, source);
      else convert<int64_t>(raw, h, v.values, source);
      break;
    case Kind::Unsigned:
      if (h.dtype.size == 1) convert<uint8_t>(raw, h, v.values, source);
      else if (h.dtype.size == 2) convert<uint16_t>(raw, h, v.values, source);
      else if (h.dtype.size == 4) convert<uint32_t>(raw, h, v.values, source);
      else convert<uint64_t>(raw, h, v.values, source);
      break;
    case Kind::Bool:
      convert<uint8_t>(raw, h, v.values, source);
      for (double& x : v.values) x = x != 0 ? 1.0 : 0.0;
      break;
  }
  v.set_dims(h.shape);
  return v;
}

static_assert(sizeof(double) == 8 && sizeof(float) == 4, "IEEE floats");

bool little_endian_host() {
  const uint16_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

}  // namespace

Variable parse_npy(const char* bytes, size_t size, const std::string& name, const std::string& source) {
  if (!little_endian_host()) throw DataError(source + ": .npy files are read on little-endian machines only");
  const Header h = parse_header(bytes, size, source);
  check_size(h, size - h.data_offset, source);
  return make_variable(bytes + h.data_offset, h, name, source);
}

Variable read_npy(const std::string& path, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require_regular_file(path);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw DataError(path + ": cannot be opened (" + std::strerror(errno) + ")");
  const uintmax_t file_size = fs::file_size(path, ec);
  if (ec) throw DataError(path + ": cannot be read (" + ec.message() + ")");
  // The prefix and header: at most 12 + 2^32 bytes by the format, in practice a few hundred.
  std::string head(static_cast<size_t>(std::min<uintmax_t>(file_size, 12)), '\0');
  if (std::fread(head.data(), 1, head.size(), f.get()) != head.size()) throw DataError(path + ": cannot be read");
  if (!little_endian_host()) throw DataError(path + ": .npy files are read on little-endian machines only");
  if (head.size() >= 10 && std::memcmp(head.data(), "\x93NUMPY", 6) == 0) {
    const unsigned major = static_cast<unsigned char>(head[6]);
    auto byte = [&](size_t i) { return static_cast<uintmax_t>(static_cast<unsigned char>(head[i])); };
    const uintmax_t len = major == 1 ? (byte(8) | byte(9) << 8)
                                     : head.size() >= 12 ? (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24)
                                                         : 0;
    const uintmax_t end = std::min<uintmax_t>(file_size, (major == 1 ? 10 : 12) + len);
    if (end > head.size()) {
      const size_t had = head.size();
      head.resize(static_cast<size_t>(end));
      if (std::fread(head.data() + had, 1, head.size() - had, f.get()) != head.size() - had)
        throw DataError(path + ": cannot be read");
    }
  }
  const Header h = parse_header(head.data(), head.size(), path);
  if (h.data_offset > head.size()) throw DataError(path + ": truncated in its header");
  // The prefix read may have taken a few data bytes (a header shorter than 2 bytes of v2+).
  const size_t extra = head.size() - h.data_offset;
  check_size(h, file_size - h.data_offset, path);
  // The elements in one read, into memory that is not zeroed first.
  const std::unique_ptr<char[]> raw(new char[std::max<size_t>(1, h.data_bytes)]);
  std::memcpy(raw.get(), head.data() + h.data_offset, std::min(extra, h.data_bytes));
  if (h.data_bytes > extra && std::fread(raw.get() + extra, 1, h.data_bytes - extra, f.get()) != h.data_bytes - extra)
    throw DataError(path + ": cannot be read (it shrank while being read?)");
  return make_variable(raw.get(), h, name, path);
}

DataSet read_npy_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw DataError(dir + ": not a directory");
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".npy") files.push_back(e.path());
  if (ec) throw DataError(dir + ": cannot be listed (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  DataSet out;
  for (const fs::path& p : files) out.add(read_npy(p.string(), p.stem().string()));
  out.add_file(dir);
  return out;
}

}  // namespace fvi::data
