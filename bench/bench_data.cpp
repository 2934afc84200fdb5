// Loading and validating a FashionMNIST-sized silo (the paper's Table 2 setting: 20,000 x 784
// float32 images and int64 labels per silo, as examples/fashion_bnn/generate.py writes them),
// beside the machine's memory bandwidth measured in the same run. The files are written first,
// so they are read from the page cache: this is the readers' own cost, not the disk's.
//   bench_data [ROWS]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>

#include "bench_util.h"
#include "fvi/data/readers.h"
#include "fvi/data/validate.h"

extern "C" const fvi_model* fvi_model_bnn_classifier(void);

namespace {

std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict += std::string(total - 10 - dict.size() - 1, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\0';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

}  // namespace

int main(int argc, char** argv) {
  const long rows = argc > 1 ? std::atol(argv[1]) : 20000, cols = 784, K = 10;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fvi-bench-data-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "silo-1");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(0, 1);
  {
    std::vector<float> x(size_t(rows) * cols);
    for (float& v : x) v = pixel(rng);
    std::ofstream f(dir / "silo-1" / "x.npy", std::ios::binary);
    f << npy_header("<f4", "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
    f.write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * sizeof(float)));
    std::vector<int64_t> y(rows);
    for (int64_t& v : y) v = 1 + int64_t(rng() % K);
    std::ofstream g(dir / "silo-1" / "y.npy", std::ios::binary);
    g << npy_header("<i8", "(" + std::to_string(rows) + ",)");
    g.write(reinterpret_cast<const char*>(y.data()), std::streamsize(y.size() * sizeof(int64_t)));
    std::ofstream(dir / "silo-1.json") << "{\"N\": " << rows << "}";
    std::ofstream(dir / "data.json") << "{\"D\": " << cols << ", \"H\": 200, \"K\": " << K << "}";
    // The same images as JSON, a tenth of the rows (Stan JSON is the slow path).
    std::ofstream j(dir / "x.json");
    j << "{\"x\": [";
    for (long i = 0; i < rows / 10; ++i) {
      j << (i ? ",[" : "[");
      for (long c = 0; c < cols; ++c) j << (c ? "," : "") << x[size_t(i) * cols + c];
      j << "]";
    }
    j << "]}";
  }
  const double elements = double(rows) * cols;
  const double npy_s = bench::best_seconds(3, [&] { fvi::data::read_npy((dir / "silo-1" / "x.npy").string(), "x"); });
  fvi::data::DataDirectory d = fvi::data::load_data_directory(dir.string());
  const double validate_s = bench::best_seconds(3, [&] {
    fvi::data::Problems p = fvi::data::validate(*fvi_model_bnn_classifier()->data_table, d);
    if (!p.empty()) std::printf("unexpected problems:\n%s\n", p.text().c_str());
  });
  const double json_s = bench::best_seconds(1, [&] { fvi::data::read_json((dir / "x.json").string()); });
  const double triad = bench::triad_gbs(1);
  // Any loader must write its output into fresh memory: the cost of first touching as many bytes
  // of newly allocated memory as the doubles of x (page faults and zeroing by the kernel).
  const size_t out_bytes = size_t(elements) * 8;
  const double touch_s = bench::best_seconds(3, [&] {
    std::unique_ptr<char[]> p(new char[out_bytes]);
    std::memset(p.get(), 1, out_bytes);
    volatile char sink = p[out_bytes / 2];
    (void)sink;
  });
  std::filesystem::remove_all(dir);

  // Bytes the npy reader must move at least: the file's floats in, the doubles out.
  const double npy_bytes = elements * (4 + 8);
  std::printf("data loading, one silo of %ld x %ld float32 images (FashionMNIST, Table 2 setting)\n", rows, cols);
  std::printf("  read_npy x.npy (C order -> column-major double): %7.1f ms  %5.2f GB/s moved (4 B in + 8 B out per element)\n",
              npy_s * 1e3, npy_bytes / npy_s / 1e9);
  std::printf("  validate (bnn_classifier's table, every value):  %7.1f ms  %5.2f GB/s read\n", validate_s * 1e3,
              elements * 8 / validate_s / 1e9);
  std::printf("  read_json, %ld rows of the same images:           %7.1f ms  %5.1f M values/s\n", rows / 10,
              json_s * 1e3, elements / 10 / json_s / 1e6);
  std::printf("  machine: first touch of %4.0f MB of fresh memory:   %7.1f ms  %5.2f GB/s\n", out_bytes / 1e6,
              touch_s * 1e3, out_bytes / touch_s / 1e9);
  std::printf("  machine: STREAM triad, 1 thread                  %7s     %5.2f GB/s\n", "", triad);
  return 0;
}
