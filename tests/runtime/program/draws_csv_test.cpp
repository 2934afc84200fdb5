// draws.csv: write_draws_csv (output.h) in CmdStan's variational layout, read back by
// read_draws_csv (draws_csv.h).
#include "fvi/program/draws_csv.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/program/output.h"
#include "runtime/data/data_test_util.h"

using Catch::Contains;
using Catch::WithinAbs;
using Catch::WithinRel;
using fvi::program::DrawsFile;
using fvi::program::DrawsTable;
using fvi::program::read_draws_csv;
using fvi::program::VariableLayout;
using fvi::program::write_draws_csv;

namespace {

// beta: vector[2]; W: matrix[2, 3]; tau: real<lower=0> — 9 elements in storage order.
std::vector<VariableLayout> layout() {
  VariableLayout beta{"beta", 0, {2}};
  VariableLayout w{"W", 2, {2, 3}};
  VariableLayout tau{"tau", 8, {}, FVI_LOWER, 0, 0};
  return {beta, w, tau};
}

DrawsFile example(int draws) {
  DrawsFile f;
  f.model = "toy";
  f.layout = layout();
  f.draws.resize(9, draws);
  for (int k = 0; k < 9; ++k)
    for (int s = 0; s < draws; ++s) f.draws(k, s) = 10 * k + s + 0.125;
  f.mean = f.draws.rowwise().mean();
  f.mean[3] = -7.5;  // q's mean need not be the draws' mean
  f.log_p = Eigen::VectorXd::LinSpaced(draws, -100, -90);
  f.log_g = Eigen::VectorXd::LinSpaced(draws, -3, -1);
  f.config = {{"family", "fullrank"}, {"rounds", "40"}, {"lr", "0.05"}, {"seed", "7"}};
  f.fvic = {{"method", "pvi"}, {"iterations", "40"}, {"converged", "1"}, {"khat", "0.42"}};
  return f;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::string& path) {
  try {
    read_draws_csv(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("draws.csv round-trips: header names, the mean row, then the draws", "[program][draws_csv]") {
  fvi_test::TempDir dir;
  const DrawsFile f = example(5);
  write_draws_csv(dir / "draws.csv", f);
  const DrawsTable t = read_draws_csv(dir / "draws.csv");
  // CmdStan's names: matrices column-major, W.row.column.
  CHECK(t.columns == std::vector<std::string>{"lp__", "log_p__", "log_g__", "beta.1", "beta.2", "W.1.1", "W.2.1",
                                               "W.1.2", "W.2.2", "W.1.3", "W.2.3", "tau"});
  REQUIRE(t.mean.size() == 12);
  CHECK(t.mean[0] == 0);
  CHECK(t.mean[1] == 0);
  CHECK(t.mean[2] == 0);
  for (int k = 0; k < 9; ++k) CHECK_THAT(t.mean[size_t(k) + 3], WithinRel(f.mean[k], 1e-9));
  REQUIRE(t.draws() == 5);
  for (int s = 0; s < 5; ++s) {
    CHECK(t.values[0][size_t(s)] == 0);
    CHECK_THAT(t.values[1][size_t(s)], WithinRel(f.log_p[s], 1e-11));
    CHECK_THAT(t.values[2][size_t(s)], WithinRel(f.log_g[s], 1e-11));
    for (int k = 0; k < 9; ++k) CHECK_THAT(t.values[size_t(k) + 3][size_t(s)], WithinRel(f.draws(k, s), 1e-9));
  }
}

TEST_CASE("draws.csv carries CmdStan's variational comment block and fvic's keys", "[program][draws_csv]") {
  fvi_test::TempDir dir;
  write_draws_csv(dir / "draws.csv", example(3));
  const std::string text = text_of(dir / "draws.csv");
  // The block starts as CmdStan's does and ends before the header.
  CHECK(text.rfind("# model = toy\n# method = variational\n#   variational\n#     algorithm = fullrank\n", 0) == 0);
  CHECK_THAT(text, Contains("#     iter = 40\n"));                          // rounds
  CHECK_THAT(text, Contains("#     grad_samples = 1 (Default)\n"));         // mc_samples not set: fvic's default
  CHECK_THAT(text, Contains("#     eta = 0.05\n"));                         // lr
  CHECK_THAT(text, Contains("#       engaged = 0\n"));                      // no step-size adaptation
  CHECK_THAT(text, Contains("#     tol_rel_obj = "));
  CHECK_THAT(text, Contains("#     output_samples = 3\n"));               // the draws written
  CHECK_THAT(text, Contains("#   seed = 7\n"));
  CHECK_THAT(text, Contains("# fvic_method = pvi\n# fvic_iterations = 40\n# fvic_converged = 1\n# fvic_khat = 0.42\n"));
  CHECK_THAT(text, Contains("# fvic_set_lr = 0.05\n"));
  CHECK_THAT(text, Contains("\nlp__,log_p__,log_g__,beta.1,"));
  CHECK(text.find("Stepsize adaptation") == std::string::npos);

  // The reader gives the keys as rstan does: blanks trimmed, "(Default)" dropped.
  const DrawsTable t = read_draws_csv(dir / "draws.csv");
  REQUIRE(t.comment("output_samples"));
  CHECK(*t.comment("output_samples") == "3");
  REQUIRE(t.comment("grad_samples"));
  CHECK(*t.comment("grad_samples") == "1");
  REQUIRE(t.comment("iter"));
  CHECK(*t.comment("iter") == "40");  // the first iter: variational's, not adapt's
  REQUIRE(t.comment("fvic_khat"));
  CHECK(*t.comment("fvic_khat") == "0.42");
  CHECK(t.comment("fvic_nothing") == nullptr);
  CHECK(t.column("tau") == 11);
  CHECK(t.column("alpha") == -1);
}

TEST_CASE("write_draws_csv without a log joint or settings: log_p__ 0, log_g__ as given, CmdStan's defaults",
          "[program][draws_csv]") {
  fvi_test::TempDir dir;
  DrawsFile f = example(4);
  f.mean = f.draws.rowwise().mean();
  f.log_p.resize(0);
  f.config.clear();
  f.fvic.clear();
  write_draws_csv(dir / "draws.csv", f);
  const DrawsTable t = read_draws_csv(dir / "draws.csv");
  REQUIRE(t.draws() == 4);
  for (int k = 0; k < 9; ++k) CHECK_THAT(t.mean[size_t(k) + 3], WithinRel(f.draws.row(k).mean(), 1e-9));
  for (int s = 0; s < 4; ++s) {
    CHECK(t.values[1][size_t(s)] == 0);
    CHECK_THAT(t.values[2][size_t(s)], WithinRel(f.log_g[s], 1e-11));
  }
  // Nothing set: CmdStan's keys carry defaults, marked as CmdStan marks them.
  const std::string text = text_of(dir / "draws.csv");
  CHECK_THAT(text, Contains("#     algorithm = meanfield (Default)\n"));
  CHECK_THAT(text, Contains("#     elbo_samples = 100 (Default)\n"));
}

TEST_CASE("write_draws_csv refuses sizes that do not match", "[program][draws_csv]") {
  fvi_test::TempDir dir;
  DrawsFile f = example(3);
  f.log_p = Eigen::VectorXd::Zero(2);
  CHECK_THROWS_AS(write_draws_csv(dir / "a.csv", f), std::invalid_argument);
  f = example(3);
  f.mean = Eigen::VectorXd::Zero(8);
  CHECK_THROWS_AS(write_draws_csv(dir / "b.csv", f), std::invalid_argument);
  f = example(3);
  f.log_p.resize(0);  // empty: written as 0
  write_draws_csv(dir / "c.csv", f);
  CHECK(read_draws_csv(dir / "c.csv").values[1] == std::vector<double>{0, 0, 0});
}

TEST_CASE("read_draws_csv: any Stan CSV; errors name the file and the line", "[program][draws_csv]") {
  fvi_test::TempDir dir;
  // No output_samples: a sampler's file, every row a draw; blank lines and CRLF are fine.
  const DrawsTable t = read_draws_csv(dir.write("nuts.csv", "# num_samples = 2\r\nlp__,a\r\n\r\n-1,0.5\r\n-2,inf\n"));
  CHECK(t.mean.empty());
  CHECK(t.values == std::vector<std::vector<double>>{{-1, -2}, {0.5, INFINITY}});

  CHECK_THAT(error_of(dir / "absent.csv"), Contains("cannot open") && Contains("absent.csv"));
  CHECK_THAT(error_of(dir.write("ragged.csv", "a,b\n1,2\n3\n")), Contains("ragged.csv:3: 1 field where") &&
                                                                    Contains("2 columns"));
  CHECK_THAT(error_of(dir.write("long.csv", "a,b\n1,2,3\n")), Contains("long.csv:2: more fields"));
  CHECK_THAT(error_of(dir.write("text.csv", "# x = 1\na,b\n1,2\n3,four\n")),
             Contains("text.csv:4:") && Contains("'b'") && Contains("'four', not a number"));
  CHECK_THAT(error_of(dir.write("empty-field.csv", "a,b\n1,\n")), Contains(":2: the field of column 'b' is empty"));
  CHECK_THAT(error_of(dir.write("empty.csv", "")), Contains("no header line"));
  CHECK_THAT(error_of(dir.write("comments.csv", "# a = 1\n")), Contains("every line is a comment"));
  CHECK_THAT(error_of(dir.write("twice.csv", "a,a\n")), Contains(":1: the header names 'a' twice"));
  CHECK_THAT(error_of(dir.write("binary.csv", std::string("a,b\n\x01\xff,2\n", 9))), Contains("'?" "?', not a number"));
  // Too many numbers: refused, not read into memory.
  CHECK_THROWS_WITH(read_draws_csv(dir.write("big.csv", "a,b\n1,2\n3,4\n"), 3), Contains("more than 3 numbers"));
}

TEST_CASE("constrain: a simplex's softmax, and an array of simplexes row by row", "[draws_csv]") {
  // p: simplex[3] at 0; theta: array[2] simplex[3], 2 x 3 column-major at 3.
  VariableLayout p{"p", 0, {3}};
  p.transform = FVI_SOFTMAX_SIMPLEX;
  VariableLayout theta{"theta", 3, {2, 3}};
  theta.transform = FVI_SOFTMAX_SIMPLEX;
  Eigen::MatrixXd u(9, 2);
  u << 0.1, -1, 0.2, 2, -0.3, 0, 1, 0.5, 2, -0.5, 3, 1, -2, 0, 0.4, 0.7, 0, 1;
  const Eigen::MatrixXd x = fvi::program::constrain({p, theta}, u);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const Eigen::VectorXd e = u.col(s).head(3).array().exp();
    for (int i = 0; i < 3; ++i) CHECK_THAT(x(i, s), WithinRel(e[i] / e.sum(), 1e-14));
    for (int m = 0; m < 2; ++m) {  // row m: elements 3 + m, 3 + m + 2, 3 + m + 4
      double total = 0;
      for (int k = 0; k < 3; ++k) total += std::exp(u(3 + m + 2 * k, s));
      for (int k = 0; k < 3; ++k) CHECK_THAT(x(3 + m + 2 * k, s), WithinRel(std::exp(u(3 + m + 2 * k, s)) / total, 1e-14));
    }
  }
}
