// fvi/data/validate.h and fvi/data/expression.h on hand-written declaration tables (the tables
// fvic emits for the acceptance models are tested in tests/compiler/emitted/test_data_checks.cpp):
// size and bound expressions, size inference for CSV / .npy data, row vectors, simplexes, empty
// arrays, size equalities, the problem limit.
#include <catch2/catch.hpp>

#include "data_test_util.h"
#include "fvi/data/expression.h"
#include "fvi/data/validate.h"

using namespace fvi::data;
using Catch::Matchers::Contains;
using fvi_test::npy_bytes;
using fvi_test::raw_bytes;
using fvi_test::TempDir;

namespace {

std::optional<Number> eval(const std::string& e) {
  return evaluate(e, [](const std::string& n) -> std::optional<Number> {
    if (n == "N") return Number{7, true};
    if (n == "D") return Number{4, true};
    if (n == "s") return Number{2.5, false};
    return std::nullopt;
  });
}

const char* const kDimsN[] = {"N"};
const char* const kDimsND[] = {"N", "D"};
const char* const kDimsK[] = {"K"};
const char* const kDimsTri[] = {"(D*D + D)/2"};
const char* const kDimsM[] = {"M"};

// data { int<lower=1> D; int<lower=2> K; real<lower=0> sigma; row_vector[D] w; simplex[K] p; }
// silo data { int<lower=0> N; int<lower=0> M; matrix[N, D] x; array[N] int<lower=1, upper=K> y;
//             vector[(D*D + D)/2] tri; vector[M] z; }
// with the size check N == M.
const fvi_data_declaration kDecls[] = {
    {"D", FVI_DATA_PUBLIC, 1, 0, 0, 0, nullptr, "1", "", "int<lower=1> D", 2},
    {"K", FVI_DATA_PUBLIC, 1, 0, 0, 0, nullptr, "2", "", "int<lower=2> K", 3},
    {"sigma", FVI_DATA_PUBLIC, 0, 0, 0, 0, nullptr, "0", "", "real<lower=0> sigma", 4},
    {"w", FVI_DATA_PUBLIC, 0, 1, 0, 1, kDimsND + 1, "", "", "row_vector[D] w", 5},
    {"p", FVI_DATA_PUBLIC, 0, 0, 1, 1, kDimsK, "", "", "simplex[K] p", 6},
    {"N", FVI_DATA_SILO, 1, 0, 0, 0, nullptr, "0", "", "int<lower=0> N", 9},
    {"M", FVI_DATA_SILO, 1, 0, 0, 0, nullptr, "0", "", "int<lower=0> M", 10},
    {"x", FVI_DATA_SILO, 0, 0, 0, 2, kDimsND, "", "", "matrix[N, D] x", 11},
    {"y", FVI_DATA_SILO, 1, 0, 0, 1, kDimsN, "1", "K", "array[N] int<lower=1, upper=K> y", 12},
    {"tri", FVI_DATA_SILO, 0, 0, 0, 1, kDimsTri, "-sigma", "", "vector<lower=-sigma>[(D*D + D)/2] tri", 13},
    {"z", FVI_DATA_SILO, 0, 0, 0, 1, kDimsM, "", "", "vector[M] z", 14},
};
const fvi_size_check kChecks[] = {{"N", "M", "the lengths of y and z in 'y ~ normal(z, 1)'", 20}};
const fvi_data_table kTable = {11, kDecls, 1, kChecks, {nullptr, nullptr, nullptr}};

void good_directory(const TempDir& dir) {
  dir.write("data.json", R"({"D": 2, "K": 3, "sigma": 0.5, "w": [1, 2], "p": [0.25, 0.25, 0.5]})");
  dir.write("silo-1.json", R"({"N": 2, "M": 2, "x": [[1, 2], [3, 4]], "y": [1, 3], "tri": [0, 1, -0.5], "z": [1, 2]})");
}

std::string problems_of(const TempDir& dir) {
  DataDirectory d = load_data_directory(dir.str());
  return validate(kTable, d).text();
}

}  // namespace

TEST_CASE("expressions: arithmetic, int division, names, malformed", "[data][validate]") {
  CHECK(eval("N")->value == 7);
  CHECK(eval("N")->integer);
  CHECK(eval("2*D + 1")->value == 9);
  CHECK(eval("(D*D + D)/2")->value == 10);
  CHECK(eval("N/2")->value == 3);  // int division truncates, as in Stan
  CHECK(eval("-N/2")->value == -3);
  CHECK(eval("N/2.0")->value == 3.5);
  CHECK_FALSE(eval("N/2.0")->integer);
  CHECK(eval("-1.5")->value == -1.5);
  CHECK(eval("1e-3")->value == 0.001);
  CHECK(eval("s * 2")->value == 5);
  CHECK(eval(" - ( N - D ) * 2 ")->value == -6);
  for (const char* bad : {"", "Q", "N +", "(N", "N)", "2 3", "N/0", "1e", "N $ D", "((((((((((("})
    CHECK_FALSE(eval(bad).has_value());
  CHECK_FALSE(eval(std::string(5000, '-') + "1").has_value());  // nesting limit, no stack overflow
  CHECK(expression_names("(D*D + D)/2 - N1 + 1e-3") == std::vector<std::string>{"D", "N1"});
}

TEST_CASE("validate: good data passes and is laid out for the kernels", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  DataDirectory d = load_data_directory(dir.str());
  const Problems p = validate(kTable, d);
  CHECK(p.text() == "");
  CHECK(p.empty());
  const Variable& w = *d.public_data.find("w");
  CHECK(w.rows == 1);  // a row_vector is 1 x n
  CHECK(w.cols == 2);
  const fvi_data& view = d.public_data.view();
  for (int i = 0; i < view.count; ++i)
    if (std::string(view.names[i]) == "w") CHECK((view.values[i].rows == 1 && view.values[i].cols == 2));
}

TEST_CASE("validate: one message per mistake, naming file, variable and declaration", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  const std::string silo = dir / "silo-1.json", pub = dir / "data.json";
  auto with_silo = [&](const std::string& json) {
    dir.write("silo-1.json", json);
    return problems_of(dir);
  };
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2], [3, 4]], "y": [1, 4], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": y[2] = 4 is outside its declared bounds [1, K = 3] (array[N] int<lower=1, upper=K> y)"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2], [3, 4]], "y": [1, 2], "tri": [0, -1, 2], "z": [1, 2]})"),
             Contains(silo + ": tri[2] = -1 is below its declared lower bound -sigma = -0.5"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2], [3, 4]], "y": [1.5, 2], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": y[1] = 1.5 is not an integer"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2], [3, "NaN"]], "y": [1, 2], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": x[2, 2] is NaN; data must be finite (matrix[N, D] x)"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2, 3], [3, 4, 5]], "y": [1, 2], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": x is of shape [2, 3], but matrix[N, D] x is of shape [N, D] = [2, 2]"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2], [3, 4]], "y": [1, 2], "tri": [0, 1], "z": [1, 2]})"),
             Contains("tri is of shape [2], but vector<lower=-sigma>[(D*D + D)/2] tri is of shape [(D*D + D)/2] = [3]"));
  CHECK_THAT(with_silo(R"({"N": [2], "M": 2, "x": [[1, 2], [3, 4]], "y": [1, 2], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": N is of shape [1], but int<lower=0> N is a scalar"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 2, "x": [[1, 2], [3, 4]], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": y is missing (array[N] int<lower=1, upper=K> y, declared in the `silo data` block at line 12)"));
  CHECK_THAT(with_silo(R"({"N": 2, "M": 3, "x": [[1, 2], [3, 4]], "y": [1, 2], "tri": [0, 1, 2], "z": [1, 2, 3]})"),
             Contains(silo + ": N = 2 and M = 3 must be equal: the lengths of y and z in 'y ~ normal(z, 1)' (line 20 of the model)"));
  CHECK_THAT(with_silo(R"({"D": 2, "N": 2, "M": 2, "x": [[1, 2], [3, 4]], "y": [1, 2], "tri": [0, 1, 2], "z": [1, 2]})"),
             Contains(silo + ": D is declared in the `data` block (line 2): give it in data.json, not here"));
  // Several mistakes: all reported, in declaration order; a bad size does not cascade.
  const std::string many = with_silo(R"({"N": -1, "M": 2, "x": [[1, 2]], "y": [0, 9, 9, 9], "tri": [0, 1, 2], "z": [1, 2]})");
  CHECK_THAT(many, Contains("N = -1 is below its declared lower bound 0"));
  CHECK_THAT(many, Contains("y[1] = 0 is outside its declared bounds [1, K = 3] (array[N] int<lower=1, upper=K> y); so are 3 more of its values"));
  CHECK_THAT(many, !Contains("x is of shape"));  // its size N is itself wrong
  good_directory(dir);

  dir.write("data.json", R"({"D": 2, "K": 3, "sigma": 0.5, "w": [1, 2], "p": [0.25, 0.25, 0.25]})");
  CHECK_THAT(problems_of(dir), Contains(pub + ": p sums to 0.75, but a simplex sums to 1 (within 1e-8) (simplex[K] p)"));
  dir.write("data.json", R"({"D": 2, "K": 3, "sigma": 0.5, "w": [1, 2], "p": [1.25, -0.25, 0]})");
  CHECK_THAT(problems_of(dir), Contains(pub + ": p[1] = 1.25 is outside its declared bounds [0, 1] (simplex[K] p)"));
  dir.write("data.json", R"({"D": 2, "K": 3, "sigma": "-Inf", "w": [1, 2], "p": [0.25, 0.25, 0.5]})");
  CHECK_THAT(problems_of(dir), Contains(pub + ": sigma is -inf; data must be finite (real<lower=0> sigma)"));
  std::filesystem::remove(pub);
  CHECK_THAT(problems_of(dir), Contains(pub + " (not found): D is missing (int<lower=1> D, declared in the `data` block at line 2)"));
}

TEST_CASE("validate: an empty list stands for any empty array", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  dir.write("silo-1.json", R"({"N": 0, "M": 0, "x": [], "y": [], "tri": [0, 1, 2], "z": []})");
  DataDirectory d = load_data_directory(dir.str());
  CHECK(validate(kTable, d).text() == "");
  CHECK(d.silos[0].find("x")->dims == std::vector<int64_t>{0, 2});
  CHECK(d.silos[0].find("x")->cols == 2);
}

// Issue 27 item 2: N x D = 2^32 x 2^32 wrapped to 0, so an empty list passed for the matrix and
// the kernels would have walked 2^64 elements of nothing.
TEST_CASE("validate: sizes whose product wraps 64 bits are not empty", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  dir.write("data.json", R"({"D": 4294967296, "K": 3, "sigma": 0.5, "w": [1, 2], "p": [0.25, 0.25, 0.5]})");
  dir.write("silo-1.json", R"({"N": 4294967296, "M": 4294967296, "x": [], "y": [], "tri": [0, 1, 2], "z": []})");
  const std::string problems = problems_of(dir);
  CHECK_THAT(problems, Catch::Contains("silo-1.json: x is of shape [0], but matrix[N, D] x is of shape [N, D] = [4294967296, 4294967296]"));
}

TEST_CASE("validate: sizes left out of CSV and npy files are inferred from the arrays", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  std::filesystem::remove(dir / "silo-1.json");
  dir.write("silo-1.csv", "y,x.1,x.2,z\n1,0.5,1,2\n2,3,4,5\n3,6,7,8\n");
  dir.write("silo-1/tri.npy", npy_bytes("<f8", false, {3}, raw_bytes(std::vector<double>{0, 1, 2})));
  DataDirectory d = load_data_directory(dir.str());
  CHECK(validate(kTable, d).text() == "");
  REQUIRE(d.silos[0].find("N"));
  CHECK(d.silos[0].find("N")->values == std::vector<double>{3});
  CHECK(d.silos[0].find("N")->source == dir / "silo-1.csv");
  CHECK(d.silos[0].find("M")->values == std::vector<double>{3});

  // A JSON file states its sizes: nothing is inferred from it.
  dir.write("silo-2.json", R"({"x": [[1, 2]], "y": [1], "tri": [0, 1, 2], "z": [1]})");
  DataDirectory d2 = load_data_directory(dir.str());
  const std::string text = validate(kTable, d2).text();
  CHECK_THAT(text, Contains(dir / "silo-2.json: N is missing"));
  CHECK_THAT(text, Contains(dir / "silo-2.json: M is missing"));
  std::filesystem::remove(dir / "silo-2.json");

  // Arrays that disagree on N: reported, not guessed.
  dir.write("silo-1/x.npy", npy_bytes("<f8", false, {2, 2}, raw_bytes(std::vector<double>{1, 2, 3, 4})));
  std::filesystem::remove(dir / "silo-1.csv");
  dir.write("silo-1.csv", "y,z\n1,2\n2,3\n3,4\n");
  DataDirectory d3 = load_data_directory(dir.str());
  CHECK_THAT(validate(kTable, d3).text(),
             Contains("N is missing, and the arrays that would give it disagree: dimension 1 of x in " +
                      (dir / "silo-1/x.npy") + " is 2, dimension 1 of y in " + (dir / "silo-1.csv") + " is 3"));
}

TEST_CASE("validate: the number of messages is limited, the count is not", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  for (int k = 2; k <= 30; ++k) dir.write("silo-" + std::to_string(k) + ".json", R"({"N": 1})");
  DataDirectory d = load_data_directory(dir.str());
  const Problems p = validate(kTable, d, 10);
  CHECK(p.messages.size() == 10);
  CHECK(p.total == 29 * 5);  // M, x, y, tri, z missing in each of silos 2..30
  CHECK_THAT(p.text(), Contains("... and 135 more problems (the first 10 are shown)"));
  CHECK_THROWS_AS(validate_or_throw(kTable, d), DataError);
}

TEST_CASE("validate_party: held-out data as one silo", "[data][validate]") {
  TempDir dir;
  good_directory(dir);
  DataDirectory d = load_data_directory(dir.str());
  dir.write("test.json", R"({"N": 1, "M": 1, "x": [[1, 2]], "y": [7], "tri": [0, 1, 2], "z": [1]})");
  DataSet test = load_test_data(dir / "test.json");
  Problems p;
  validate_party(kTable, Party::Silo, test, d.public_data, p);
  CHECK_THAT(p.text(), Contains(dir / "test.json: y[1] = 7 is outside its declared bounds [1, K = 3]"));
  CHECK(p.total == 1);
}

// data { int<lower=1> K; ordered[K] cuts; positive_ordered[K] scales; }: Stan's check_ordered
// (strictly increasing) and check_positive_ordered (also starting at 0 or above).
TEST_CASE("validate: ordered and positive_ordered data increase strictly", "[data][validate]") {
  const fvi_data_declaration decls[] = {
      {"K", FVI_DATA_PUBLIC, 1, 0, FVI_PLAIN, 0, nullptr, "1", "", "int<lower=1> K", 2},
      {"cuts", FVI_DATA_PUBLIC, 0, 0, FVI_ORDERED_VECTOR, 1, kDimsK, "", "", "ordered[K] cuts", 3},
      {"scales", FVI_DATA_PUBLIC, 0, 0, FVI_POSITIVE_ORDERED_VECTOR, 1, kDimsK, "", "", "positive_ordered[K] scales", 4},
  };
  const fvi_data_table table = {3, decls, 0, nullptr, {nullptr, nullptr, nullptr}};
  TempDir dir;
  dir.write("silo-1.json", "{}");
  const std::string pub = dir / "data.json";
  auto problems = [&](const std::string& json) {
    dir.write("data.json", json);
    DataDirectory d = load_data_directory(dir.str());
    return validate(table, d).text();
  };
  CHECK(problems(R"({"K": 3, "cuts": [-1, 0.5, 2], "scales": [0, 0.1, 4]})").empty());
  CHECK_THAT(problems(R"({"K": 3, "cuts": [-1, 0.5, 0.5], "scales": [0, 0.1, 4]})"),
             Contains(pub + ": cuts[3] = 0.5 is not above cuts[2] = 0.5, but an ordered vector increases strictly (ordered[K] cuts)"));
  CHECK_THAT(problems(R"({"K": 3, "cuts": [-1, 0.5, 2], "scales": [-0.1, 0.1, 4]})"),
             Contains(pub + ": scales[1] = -0.1 is negative, but a positive_ordered vector starts at 0 or above"));
  CHECK_THAT(problems(R"({"K": 3, "cuts": [-1, 0.5, 2], "scales": [0, 3, 2]})"),
             Contains(pub + ": scales[3] = 2 is not above scales[2] = 3"));
}
