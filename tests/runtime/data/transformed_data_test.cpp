// fvi/data/transformed_data.h on hand-written programs: loops, ifs, element and slice assignments,
// multi-indexing, the functions, and the errors a party's data can cause (each naming the line),
// checked against the values computed here by hand.
#include "fvi/data/transformed_data.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace fvi::data;
using Catch::Matchers::Contains;

namespace {

Variable variable(const std::string& name, std::vector<int64_t> dims, std::vector<double> values) {
  Variable v;
  v.name = name;
  v.values = std::move(values);
  v.set_dims(std::move(dims));
  v.source = "test";
  return v;
}

}  // namespace

TEST_CASE("transformed data: loops, ifs and element assignments (capture histories)", "[data][transformed]") {
  // array[M, T] int y (M = 3, T = 2), column-major: rows {1, 0}, {0, 0}, {1, 1}.
  DataSet data;
  data.add(variable("M", {}, {3}));
  data.add(variable("T", {}, {2}));
  data.add(variable("y", {3, 2}, {1, 0, 1, 0, 0, 1}));
  // array[M] int s; int C = 0; for (i in 1:M) { s[i] = sum(y[i]); if (s[i] > 0) C = C + 1; }
  const std::string program =
      "(program (input M int s 0) (input y int s 2)"
      " (decl 7 s int s 1 1 ((var M)))"
      " (decl 8 C int s 0 1 () (int 0))"
      " (for 9 i (int 1) (var M) (block"
      "   (assign 10 = (index (var s) (at (var i))) (call sum (index (var y) (at (var i)))))"
      "   (if 11 (bin > (index (var s) (at (var i))) (int 0)) (assign 12 = (var C) (bin + (var C) (int 1)))))))";
  compute_transformed_data(program, data, DataSet());
  const Variable* s = data.find("s");
  REQUIRE(s);
  CHECK(s->values == std::vector<double>{1, 0, 2});
  CHECK(s->dims == std::vector<int64_t>{3});
  REQUIRE(data.find("C"));
  CHECK(data.find("C")->values == std::vector<double>{2});
  CHECK(data.find("C")->source == "transformed data");
}

TEST_CASE("transformed data: column slices, means and the public data (brms's centring)", "[data][transformed]") {
  DataSet pub, silo;
  pub.add(variable("K", {}, {3}));
  silo.add(variable("N", {}, {2}));
  silo.add(variable("X", {2, 3}, {1, 1, 2, 4, -1, 5}));  // rows {1, 2, -1}, {1, 4, 5}
  // int Kc = K - 1; matrix[N, Kc] Xc; vector[Kc] means_X;
  // for (i in 2:K) { means_X[i - 1] = mean(X[:, i]); Xc[:, i - 1] = X[:, i] - means_X[i - 1]; }
  const std::string program =
      "(program (input K int s 0) (input N int s 0) (input X real m 0)"
      " (decl 2 Kc int s 0 1 () (bin - (var K) (int 1)))"
      " (decl 3 Xc real m 0 1 ((var N) (var Kc)))"
      " (decl 4 means_X real v 0 1 ((var Kc)))"
      " (for 5 i (int 2) (var K) (block"
      "   (assign 6 = (index (var means_X) (at (bin - (var i) (int 1)))) (call mean (index (var X) (all) (at (var i)))))"
      "   (assign 7 = (index (var Xc) (all) (at (bin - (var i) (int 1))))"
      "     (bin - (index (var X) (all) (at (var i))) (index (var means_X) (at (bin - (var i) (int 1)))))))))";
  compute_transformed_data(program, silo, pub);
  REQUIRE(silo.find("means_X"));
  CHECK(silo.find("means_X")->values == std::vector<double>{3, 2});
  const Variable* xc = silo.find("Xc");
  REQUIRE(xc);
  CHECK(xc->rows == 2);
  CHECK(xc->cols == 2);
  CHECK(xc->values == std::vector<double>{-1, 1, -3, 3});
  CHECK(silo.find("Kc")->values == std::vector<double>{2});
}

TEST_CASE("transformed data: products, multi-indexes, literals, ranges, int division and functions", "[data][transformed]") {
  DataSet data;
  data.add(variable("A", {2, 2}, {1, 3, 2, 4}));  // [[1, 2], [3, 4]]
  data.add(variable("v", {2}, {1, -1}));
  data.add(variable("idx", {3}, {2, 2, 1}));
  const std::string program =
      "(program (input A real m 0) (input v real v 0) (input idx int s 1)"
      " (decl 1 Av real v 0 1 ((int 2)) (bin * (var A) (var v)))"         // [-1, -1]
      " (decl 2 w real v 0 1 ((int 3)) (index (var v) (at (var idx))))"   // [-1, -1, 1]
      " (decl 3 q int s 0 1 () (bin / (int 7) (int 2)))"                 // 3
      " (decl 4 r real s 0 1 () (bin / (real 7) (int 2)))"               // 3.5
      " (decl 5 lit real r 0 1 ((int 3)) (rowvec (int 1) (real 2.5) (int 4)))"
      " (decl 6 head real v 0 1 ((int 2)) (index (var w) (range _ (int 2))))"
      " (decl 7 sd_w real s 0 1 () (call sd (var w)))"
      " (decl 8 cs real v 0 1 ((int 3)) (call cumulative_sum (var w)))"
      " (decl 9 arr int s 2 1 ((int 2) (int 2)) (call rep_array (int 7) (int 2) (int 2)))"
      " (assign 10 += (index (var arr) (at (int 1)) (at (int 2))) (int 1))"
      " (decl 11 m real s 0 1 () (cond (bin && (bin > (var q) (int 2)) (unary ! (int 0))) (call fmax (var r) (int 5)) (int 0))))";
  compute_transformed_data(program, data, DataSet());
  CHECK(data.find("Av")->values == std::vector<double>{-1, -1});
  CHECK(data.find("w")->values == std::vector<double>{-1, -1, 1});
  CHECK(data.find("q")->values == std::vector<double>{3});
  CHECK(data.find("r")->values == std::vector<double>{3.5});
  CHECK(data.find("lit")->values == std::vector<double>{1, 2.5, 4});
  CHECK(data.find("lit")->rows == 1);  // a row_vector is 1 x n, as validation makes data
  CHECK(data.find("head")->values == std::vector<double>{-1, -1});
  CHECK(data.find("sd_w")->values[0] == Approx(std::sqrt(4.0 / 3.0)).epsilon(1e-15));
  CHECK(data.find("cs")->values == std::vector<double>{-1, -2, -1});
  CHECK(data.find("arr")->values == std::vector<double>{7, 7, 8, 7});  // arr[1, 2] is element 0 + 2 * 1
  CHECK(data.find("m")->values == std::vector<double>{5});
}

TEST_CASE("transformed data: every elementwise function of the language", "[data][transformed]") {
  // Each against its definition (digamma against psi(1) = -gamma and psi(1/2) = -gamma - 2 log 2,
  // DLMF 5.4.12 and 5.4.13); every elementwise function the kernels have is available here too.
  DataSet data;
  const std::string program =
      "(program (decl 1 a real s 0 1 () (call log1p_exp (real 800)))"
      " (decl 2 b real s 0 1 () (call log_inv_logit (real -3)))"
      " (decl 3 c real s 0 1 () (call log1m_inv_logit (real 2)))"
      " (decl 4 d real s 0 1 () (call relu (real -1.5)))"
      " (decl 5 e real s 0 1 () (call digamma (int 1)))"
      " (decl 6 f real s 0 1 () (call digamma (real 0.5)))"
      " (decl 7 g real s 0 1 () (call lbeta (real 2.5) (int 3)))"
      " (decl 8 h real s 0 1 () (call lchoose (int 10) (int 3))))";
  compute_transformed_data(program, data, DataSet());
  const double euler = 0.57721566490153286;
  auto value = [&](const char* name) { return data.find(name)->values[0]; };
  CHECK(value("a") == Approx(800.0).epsilon(1e-15));
  CHECK(value("b") == Approx(std::log(1 / (1 + std::exp(3.0)))).epsilon(1e-14));
  CHECK(value("c") == Approx(std::log(1 - 1 / (1 + std::exp(-2.0)))).epsilon(1e-14));
  CHECK(value("d") == 0);
  CHECK(value("e") == Approx(-euler).epsilon(1e-13));
  CHECK(value("f") == Approx(-euler - 2 * std::log(2.0)).epsilon(1e-13));
  CHECK(value("g") == Approx(std::lgamma(2.5) + std::lgamma(3.0) - std::lgamma(5.5)).epsilon(1e-14));
  CHECK(value("h") == Approx(std::log(120.0)).epsilon(1e-14));
}

TEST_CASE("transformed data: the data's errors name the line; a broken program is refused", "[data][transformed]") {
  auto error_of = [](const std::string& program) {
    DataSet data;
    data.add(variable("N", {}, {3}));
    data.add(variable("v", {3}, {1, 2, 3}));
    try {
      compute_transformed_data(program, data, DataSet());
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "(program (input N int s 0) (input v real v 0) (decl 4 x real v 0 1 ((var N)))";
  CHECK_THAT(error_of(head + " (for 5 i (int 1) (bin + (var N) (int 1)) (assign 6 = (index (var x) (at (var i))) (int 0))))"),
             Contains("transformed data, line 6: index 4 is outside 1..3"));
  CHECK_THAT(error_of(head + " (assign 7 = (var x) (call rep_vector (int 0) (int 2))))"),
             Contains("line 7: 'x' is [3], the value assigned [2]"));
  CHECK_THAT(error_of(head + " (decl 8 k int s 0 1 () (real 2.5)))"), Contains("line 8: 'k' is an int, the value assigned is 2.5"));
  CHECK_THAT(error_of(head + " (decl 9 k int s 0 1 () (bin / (int 1) (int 0))))"), Contains("line 9: an int divided by zero"));
  CHECK_THAT(error_of(head + " (decl 10 y real v 0 1 ((unary - (int 2)))))"), Contains("line 10: the size of 'y' is negative"));
  CHECK_THAT(error_of(head + " (assign 5 = (var x) (var v)) (bounds 4 x (int 0) (real 2.5)))"),
             Contains("line 4: 'x' element 3 (column-major) = 3.000000 is outside its declared bounds [0.000000, 2.500000]"));
  CHECK(error_of(head + " (assign 5 = (var x) (var v)) (bounds 4 x (int 1) _))") == "no error");
  CHECK_THAT(error_of("(program (decl 1 x real s 0 1 ()"), Contains("malformed"));
  CHECK_THAT(error_of("(program (input w real v 0))"), Contains("'w' is not in this party's data"));
  CHECK_THAT(error_of(std::string(2000, '(')), Contains("nesting deeper than 512"));
  CHECK(error_of(head + ")") == "no error");
}
