// fvi/data/readers.h: Stan JSON and CSV data files, the data directory (silo numbering, a party
// spread over .json + .csv + an .npy directory, duplicates), held-out data, and the ABI view.
// Good input is read back element by element against what the test wrote; hostile input gives
// a DataError naming the file.
#include <catch2/catch.hpp>

#include <cmath>

#include <sys/stat.h>

#include "data_test_util.h"
#include "fvi/data/readers.h"

using namespace fvi::data;
using Catch::Matchers::Contains;
using fvi_test::npy_bytes;
using fvi_test::raw_bytes;
using fvi_test::error_of;
using fvi_test::TempDir;

TEST_CASE("json: scalars, vectors, matrices, nested arrays, special values", "[data][json]") {
  const DataSet d = parse_json(R"({
    "N": 3, "sigma": 0.25, "y": [0, 1, 1],
    "x": [[1.5, 2, -3], [4, 5e-3, 6], [7, 8, 9.75]],
    "a": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]],
    "e": [], "special": ["NaN", "Inf", "-Inf", "+Infinity", 18446744073709551615]
  })", "d.json");
  REQUIRE(d.find("N"));
  CHECK(d.find("N")->dims.empty());
  CHECK(d.find("N")->values == std::vector<double>{3});
  CHECK(d.find("sigma")->values == std::vector<double>{0.25});
  CHECK(d.find("y")->dims == std::vector<int64_t>{3});
  CHECK(d.find("y")->values == std::vector<double>{0, 1, 1});
  const Variable& x = *d.find("x");
  CHECK(x.dims == std::vector<int64_t>{3, 3});
  CHECK(x.rows == 3);
  CHECK(x.cols == 3);
  const double rows[3][3] = {{1.5, 2, -3}, {4, 5e-3, 6}, {7, 8, 9.75}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(x.values[j * 3 + i] == rows[i][j]);  // the same double literal
  const Variable& a = *d.find("a");  // a[i][j][k] = 6 i + 2 j + k + 1, column-major over (2, 3, 2)
  CHECK(a.dims == std::vector<int64_t>{2, 3, 2});
  CHECK(a.rows == 2);
  CHECK(a.cols == 6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) CHECK(a.values[i + 2 * (j + 3 * k)] == 6 * i + 2 * j + k + 1);
  CHECK(d.find("e")->dims == std::vector<int64_t>{0});
  const Variable& s = *d.find("special");
  CHECK(std::isnan(s.values[0]));
  CHECK(s.values[1] == HUGE_VAL);
  CHECK(s.values[2] == -HUGE_VAL);
  CHECK(s.values[3] == HUGE_VAL);
  CHECK(s.values[4] == 18446744073709551615.0);
  CHECK(d.names() == std::vector<std::string>{"N", "a", "e", "sigma", "special", "x", "y"});  // nlohmann sorts keys
}

TEST_CASE("json: malformed and ragged input is rejected, naming file and variable", "[data][json]") {
  auto err = [](const std::string& text) { return error_of([&] { parse_json(text, "data/silo-1.json"); }); };
  CHECK_THAT(err("{\"N\": 3,"), Contains("data/silo-1.json: not valid JSON") && Contains("line 1"));
  CHECK_THAT(err(""), Contains("data/silo-1.json: not valid JSON"));
  CHECK_THAT(err("[1, 2]"), Contains("expected a JSON object"));
  CHECK_THAT(err(R"({"x": [[1, 2, 3], [4, 5]]})"), Contains("x[2] has 2 values") && Contains("ragged"));
  CHECK_THAT(err(R"({"x": [[1, 2], 3]})"), Contains("x[2] is a number where a list"));
  CHECK_THAT(err(R"({"x": [1, [2, 3]]})"), Contains("x[2] is a list where a number"));
  CHECK_THAT(err(R"({"y": [1, "one"]})"), Contains("y[2] is the string \"one\""));
  CHECK_THAT(err(R"({"y": [1, null]})"), Contains("y[2] is null"));
  CHECK_THAT(err(R"({"y": true})"), Contains("y is a boolean"));
  CHECK_THAT(err(R"({"y": {"a": 1}})"), Contains("y is an object"));
  CHECK_THAT(err(R"({"y": 1, "x": 3, "y": 2})"), Contains("data/silo-1.json: y is defined twice in this file"));
  // First elements claiming more values than the text holds (a product of sizes beyond it).
  std::string deep = "{\"z\": ";
  for (int i = 0; i < 12; ++i) deep += "[[0,0,0,0,0,0,0,0,0,0],";
  deep += "0";
  for (int i = 0; i < 12; ++i) deep += "]";
  CHECK_THAT(err(deep + "}"), Contains("z"));
  std::string nested(10000, '[');
  CHECK_THAT(err("{\"w\": " + nested + std::string(10000, ']') + "}"), Contains("data/silo-1.json"));
}

TEST_CASE("csv: vectors and matrix columns, quoting, comments", "[data][csv]") {
  const DataSet d = parse_csv(
      "# written by a test\n"
      "y,\"x.2\",x.1,z.1.1,z.2.1,z.1.2,z.2.2\r\n"
      "1, 0.5, -1, 1, 2, 3, 4\n"
      "\n"
      "0, +2.5e1, 3, 5, 6, 7, 8\r\n"
      "1, nan, inf, 9, 10, 11, 12\n",
      "silo-1.csv");
  const Variable& y = *d.find("y");
  CHECK(y.dims == std::vector<int64_t>{3});
  CHECK(y.values == std::vector<double>{1, 0, 1});
  const Variable& x = *d.find("x");
  CHECK(x.dims == std::vector<int64_t>{3, 2});
  CHECK(x.values[0] == -1);  // x[1, 1]: column x.1
  CHECK(x.values[1] == 3);
  CHECK(x.values[2] == HUGE_VAL);
  CHECK(x.values[3] == 0.5);  // x[1, 2]: column x.2
  CHECK(x.values[4] == 25);
  CHECK(std::isnan(x.values[5]));
  const Variable& z = *d.find("z");  // z[r, j, k] in column z.j.k
  CHECK(z.dims == std::vector<int64_t>{3, 2, 2});
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) CHECK(z.values[r + 3 * (j + 2 * k)] == 4 * r + 2 * k + j + 1);
  CHECK(d.names() == std::vector<std::string>{"y", "x", "z"});
  CHECK(parse_csv("y,x.1\n", "e.csv").find("x")->dims == std::vector<int64_t>{0, 1});
}

TEST_CASE("csv: missing columns, ragged rows and non-numbers are rejected", "[data][csv]") {
  auto err = [](const std::string& text) { return error_of([&] { parse_csv(text, "data/silo-2.csv"); }); };
  CHECK_THAT(err("y,x.1,x.3\n1,2,3\n"), Contains("data/silo-2.csv: column 'x.2' is missing") && Contains("x.3"));
  CHECK_THAT(err("z.1.1,z.2.2\n1,2\n"), Contains("column 'z.2.1' is missing"));
  CHECK_THAT(err("y,x.1\n1,2\n3\n"), Contains("line 3 has 1 fields, the header has 2"));
  CHECK_THAT(err("y,x.1\n1,2,4\n"), Contains("line 2 has 3 fields"));
  CHECK_THAT(err("y,x\n1,abc\n"), Contains("line 2, column x: 'abc' is not a number"));
  CHECK_THAT(err("y,x\n1,NA\n"), Contains("'NA' is not a number"));
  CHECK_THAT(err("y,x\n1,\n"), Contains("line 2, column x is empty"));
  CHECK_THAT(err("y,y\n1,2\n"), Contains("column 'y' appears twice"));
  CHECK_THAT(err("x,x.1\n1,2\n"), Contains("do not agree on how many indices"));
  CHECK_THAT(err("x.0\n1\n"), Contains("column 'x.0' is not a variable's name"));
  CHECK_THAT(err("x.a\n1\n"), Contains("column 'x.a'"));
  CHECK_THAT(err(",y\n1,2\n"), Contains("column ''"));
  CHECK_THAT(err("\"y,x\n1,2\n"), Contains("unterminated quote"));
  CHECK_THAT(err(""), Contains("data/silo-2.csv: empty"));
  CHECK_THAT(err("# only a comment\n\n"), Contains("empty"));
  CHECK_THAT(err("x.99999.99999.99999.99999\n1\n"), Contains("is missing"));
}

TEST_CASE("data directory: silos, formats combined, duplicates, gaps", "[data][directory]") {
  TempDir dir;
  dir.write("data.json", R"({"D": 2})");
  dir.write("silo-1.json", R"({"N": 2, "x": [[1, 2], [3, 4]], "y": [0, 1]})");
  dir.write("silo-2.csv", "y,x.1,x.2\n1,5,6\n0,7,8\n1,9,10\n");
  dir.write("silo-2.json", R"({"N": 3})");
  dir.write("silo-3.json", R"({"N": 1})");
  dir.write("silo-3/x.npy", npy_bytes("<f4", false, {1, 2}, raw_bytes(std::vector<float>{11, 12})));
  dir.write("silo-3/y.npy", npy_bytes("|u1", false, {1}, raw_bytes(std::vector<uint8_t>{1})));
  dir.write("silo-3/notes.txt", "ignored");
  dir.write("README.md", "ignored");

  CHECK(count_silos(dir.str()) == 3);
  DataDirectory d = load_data_directory(dir.str());
  REQUIRE(d.silos.size() == 3);
  CHECK(d.public_data.find("D")->values == std::vector<double>{2});
  CHECK(d.public_data.files() == std::vector<std::string>{dir / "data.json"});
  CHECK(d.server.empty());
  CHECK_FALSE(d.server.found());
  CHECK(d.server.where() == dir / "server.json" + " (not found)");
  CHECK(d.silos[1].find("x")->values == std::vector<double>{5, 7, 9, 6, 8, 10});
  CHECK(d.silos[1].find("N")->source == dir / "silo-2.json");
  CHECK(d.silos[1].find("x")->source == dir / "silo-2.csv");
  CHECK(d.silos[2].find("x")->values == std::vector<double>{11, 12});
  CHECK(d.silos[2].find("x")->source == dir / "silo-3/x.npy");
  CHECK(d.silos[2].find("y")->values == std::vector<double>{1});
  CHECK(d.silos[2].names().size() == 3);

  // The ABI view of a silo merged with the public data: names and column-major tensors.
  const DataSet silo = std::move(d.silos[0]).merged(d.public_data);
  const fvi_data& view = silo.view();
  REQUIRE(view.count == 4);
  CHECK(std::string(view.names[3]) == "D");
  CHECK(std::string(view.names[1]) == "x");
  CHECK(view.values[1].rows == 2);
  CHECK(view.values[1].cols == 2);
  CHECK(view.values[1].draws == 1);
  CHECK(view.values[1].data[1] == 3);  // x[2, 1]
  CHECK(view.values[1].data[2] == 2);  // x[1, 2]
  const DataSet copy = silo;  // a copy's view points into the copy
  CHECK(copy.view().values[1].data != view.values[1].data);
  CHECK(copy.view().values[1].data[2] == 2);
  CHECK(std::string(copy.view().names[0]) == "N");

  dir.write("silo-1.csv", "y\n1\n0\n");
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }),
             Contains("y is defined twice for this party") && Contains(dir / "silo-1.json") &&
                 Contains(dir / "silo-1.csv"));
  std::filesystem::remove(dir / "silo-1.csv");

  dir.write("silo-5.json", "{}");
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }),
             Contains(dir / "silo-4") && Contains("is missing") && Contains("silo-5.json"));
  std::filesystem::remove(dir / "silo-5.json");
  dir.write("silo-04.json", "{}");
  CHECK_THAT(error_of([&] { count_silos(dir.str()); }), Contains("silo-04.json") && Contains("leading zeros"));
  std::filesystem::remove(dir / "silo-04.json");

  std::filesystem::remove(dir / "silo-2.json");  // then a directory where a file belongs
  std::filesystem::remove(dir / "silo-2.csv");
  std::filesystem::create_directories(dir / "silo-2.json");
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }), Contains(dir / "silo-2.json") && Contains("is a directory"));
  std::filesystem::remove(dir / "silo-2.json");
  dir.write("silo-2", "a file where a directory of .npy files belongs");
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }), Contains("expected a directory of .npy files"));
  std::filesystem::remove(dir / "silo-2");
  dir.write("silo-2.json", "");
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }), Contains(dir / "silo-2.json") && Contains("not valid JSON"));
  dir.write("silo-2.json", "{}");
  dir.write("silo-3/bad.npy", "");
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }), Contains(dir / "silo-3/bad.npy"));
}

TEST_CASE("data directory: no silos, not a directory", "[data][directory]") {
  TempDir dir;
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }), Contains("silo-1.json") && Contains("not found"));
  dir.write("data.json", "{}");
  CHECK_THAT(error_of([&] { load_data_directory(dir / "data.json"); }), Contains("not a directory"));
  CHECK_THAT(error_of([&] { load_data_directory(dir / "absent"); }), Contains("no such data directory"));
}

TEST_CASE("held-out data: a json, a csv with its json, an npy directory", "[data][directory]") {
  TempDir dir;
  dir.write("test.csv", "y,x.1\n1,2\n0,3\n");
  dir.write("test.json", R"({"N": 2})");
  const DataSet t = load_test_data(dir / "test.csv");
  CHECK(t.names() == std::vector<std::string>{"N", "y", "x"});
  CHECK(load_test_data(dir / "test.json").names().size() == 3);
  dir.write("held/x.npy", npy_bytes("<f8", true, {2, 2}, raw_bytes(std::vector<double>{1, 2, 3, 4})));
  const DataSet h = load_test_data(dir / "held/");
  REQUIRE(h.find("x"));
  CHECK(h.find("x")->values == std::vector<double>{1, 2, 3, 4});  // Fortran order: as stored
  CHECK(load_test_data(dir / "held").names() == std::vector<std::string>{"x"});
  CHECK_THAT(error_of([&] { load_test_data(dir / "absent.json"); }), Contains("absent.json: no such file"));
  dir.write("test.txt", "");
  CHECK_THAT(error_of([&] { load_test_data(dir / "test.txt"); }), Contains("must be a .json or .csv file"));
}

// Issue 27 item 12: opening a FIFO for reading blocks until a writer comes (for ever), and
// /dev/zero never ends (std::bad_alloc without a name). Both are refused, named, at once.
TEST_CASE("readers: a FIFO or a device where a data file belongs is refused, named", "[data]") {
  TempDir dir;
  const std::string fifo = dir / "silo-1.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(error_of([&] { read_json(fifo); }), Contains(fifo) && Contains("not a regular file"));
  CHECK_THAT(error_of([&] { read_csv(fifo); }), Contains(fifo) && Contains("not a regular file"));
  CHECK_THAT(error_of([&] { read_npy(fifo, "x"); }), Contains(fifo) && Contains("not a regular file"));
  CHECK_THAT(error_of([&] { load_data_directory(dir.str()); }), Contains(fifo) && Contains("not a regular file"));
  CHECK_THAT(error_of([&] { read_json("/dev/zero"); }), Contains("/dev/zero") && Contains("not a regular file"));
  CHECK_THAT(error_of([&] { read_npy("/dev/zero", "x"); }), Contains("/dev/zero") && Contains("not a regular file"));
}
