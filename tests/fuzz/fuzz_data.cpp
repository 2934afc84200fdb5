// One fuzz input through the data readers and the validator: the first byte picks the format
// (Stan JSON, CSV, .npy), the rest is the file. Any input may be rejected with a DataError; none
// may crash, hang, or trip a sanitizer. What is read is then validated against a small table
// (sizes, bounds that are data values, a matrix, a row vector, a size equality).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fvi/data/readers.h"
#include "fvi/data/validate.h"

namespace {

const char* const kDimsN[] = {"N"};
const char* const kDimsND[] = {"N", "D"};
const char* const kDimsTri[] = {"(D*D + D)/2"};
const fvi_data_declaration kDecls[] = {
    {"D", FVI_DATA_PUBLIC, 1, 0, 0, 0, nullptr, "1", "", "int<lower=1> D", 1},
    {"K", FVI_DATA_PUBLIC, 1, 0, 0, 0, nullptr, "2", "", "int<lower=2> K", 2},
    {"N", FVI_DATA_SILO, 1, 0, 0, 0, nullptr, "0", "", "int<lower=0> N", 3},
    {"M", FVI_DATA_SILO, 1, 0, 0, 0, nullptr, "0", "", "int<lower=0> M", 4},
    {"x", FVI_DATA_SILO, 0, 0, 0, 2, kDimsND, "", "", "matrix[N, D] x", 5},
    {"y", FVI_DATA_SILO, 1, 0, 0, 1, kDimsN, "1", "K", "array[N] int<lower=1, upper=K> y", 6},
    {"w", FVI_DATA_SILO, 0, 1, 0, 1, kDimsND + 1, "-K/2", "K*1.5", "row_vector<lower=-K/2, upper=K*1.5>[D] w", 7},
    {"p", FVI_DATA_SILO, 0, 0, 1, 1, kDimsTri, "", "", "simplex[(D*D + D)/2] p", 8},
};
const fvi_size_check kChecks[] = {{"N", "M", "fuzz", 9}};
const fvi_data_table kTable = {8, kDecls, 1, kChecks, {nullptr, nullptr, nullptr}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    fvi::data::DataSet own;
    switch (data[0] % 3) {
      case 0: own = fvi::data::parse_json(text, "fuzz.json"); break;
      case 1: own = fvi::data::parse_csv(text, "fuzz.csv"); break;
      default: own.add(fvi::data::parse_npy(text.data(), text.size(), "x", "fuzz.npy")); break;
    }
    fvi::data::DataSet pub;
    fvi::data::Variable D{"D", {}, {2}, 1, 1, "data.json"}, K{"K", {}, {3}, 1, 1, "data.json"};
    pub.add(D);
    pub.add(K);
    fvi::data::Problems problems;
    fvi::data::validate_party(kTable, fvi::data::Party::Silo, own, pub, problems);
    (void)problems.text();
    (void)own.view();
  } catch (const fvi::data::DataError&) {
  }
  return 0;
}
