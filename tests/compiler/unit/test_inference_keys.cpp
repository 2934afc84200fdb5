// Inference key values: the same parser and validator serve the inference block and --set.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "inference_keys.h"

using namespace fvic::stdlib;

namespace {
std::string check(const std::string& key, const std::string& value) {
  std::string error;
  auto v = parse_key_value(value, &error);
  if (!v) return "parse: " + error;
  return validate_key_value(*find_key(key), *v);
}
}  // namespace

TEST_CASE("calls, names and numbers parse", "[keys]") {
  std::string error;
  auto v = parse_key_value("score_matching(imq, 1.5)", &error);
  REQUIRE(v);
  CHECK(v->text == "score_matching");
  REQUIRE(v->args.size() == 2);
  CHECK(v->args[0].text == "imq");
  CHECK(v->args[1].number == 1.5);
  CHECK(v->str() == "score_matching(imq, 1.5)");
  auto n = parse_key_value("-3", &error);
  REQUIRE(n);
  CHECK(n->is_integer);
  CHECK(n->number == -3);
  CHECK_FALSE(parse_key_value("gce(0.8", &error));
  CHECK_FALSE(parse_key_value("", &error));
}

TEST_CASE("valid values pass", "[keys]") {
  CHECK(check("loss", "gce(0.8)") == "");
  CHECK(check("loss", "density_power(0.5)") == "");
  CHECK(check("loss", "score_matching(se, 2)") == "");
  CHECK(check("divergence", "alpha_renyi(2.5)") == "");
  CHECK(check("damping", "1") == "");
  CHECK(check("method", "vfl_power") == "");
  CHECK(check("rounds", "25") == "");
}

TEST_CASE("invalid values name what is accepted", "[keys]") {
  CHECK_THAT(check("damping", "1.5"), Catch::Contains("(0, 1]"));
  CHECK_THAT(check("damping", "0"), Catch::Contains("(0, 1]"));
  CHECK_THAT(check("rounds", "2.5"), Catch::Contains("integer"));
  CHECK_THAT(check("loss", "gce(0.8, 1)"), Catch::Contains("takes 1 argument"));
  CHECK_THAT(check("loss", "gce(1.5)"), Catch::Contains("(0, 1]"));
  CHECK_THAT(check("loss", "huber"), Catch::Contains("unknown loss"));
  CHECK_THAT(check("loss", "score_matching(rbf, 1)"), Catch::Contains("se|imq"));
  CHECK_THAT(check("family", "fullrnk"), Catch::Contains("meanfield"));
  CHECK_THAT(check("divergence", "kl(1)"), Catch::Contains("no arguments"));
}

TEST_CASE("numbers are decimal and integer keys fit an int (issue 27 item 8)", "[keys]") {
  std::string error;
  // strtod alone reads these; none is a number as Stan writes one.
  for (const char* text : {"0x10", "1abc", "1e", "-", ".", "1.5e+"}) {
    INFO(text);
    CHECK_FALSE(parse_key_value(text, &error));
  }
  for (const char* text : {"inf", "nan"}) CHECK(parse_key_value(text, &error)->kind != KeyValue::Kind::Number);
  CHECK(parse_key_value(".5", &error)->number == 0.5);
  CHECK(parse_key_value("-2.5e-3", &error)->number == -2.5e-3);
  // Past an int, 2^63 and 2^64: refused, not wrapped to 0 rounds.
  for (const char* text : {"2147483648", "9223372036854775808", "18446744073709551616", "99999999999999999999"}) {
    INFO(text);
    CHECK_THAT(check("rounds", text), Catch::Contains("at most 2147483647"));
    CHECK_THAT(check("seed", text), Catch::Contains("at most 2147483647"));
  }
  CHECK(check("rounds", "2147483647") == "");
  CHECK(check("seed", "0") == "");
  CHECK_THAT(check("rounds", "1e3"), Catch::Contains("integer"));
}

// The full dynamic programme, for comparison with the banded one.
static size_t full_edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
  return d[a.size()][b.size()];
}

TEST_CASE("the banded edit distance is the full one, capped at its limit (issue 27 item 9)", "[keys]") {
  std::mt19937 rng(27);
  const std::string alphabet = "abc_";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string a(rng() % 14, 'a'), b(rng() % 14, 'a');
    for (char& c : a) c = alphabet[rng() % alphabet.size()];
    for (char& c : b) c = alphabet[rng() % alphabet.size()];
    const size_t limit = 1 + rng() % 9;
    INFO(a << " / " << b << " limit " << limit);
    REQUIRE(edit_distance(a, b, limit) == std::min(full_edit_distance(a, b), limit));
  }
  CHECK(edit_distance("", "", 3) == 0);
  CHECK(edit_distance("mc_sample", "mc_samples") == 1);
  // A 500 KB name against another: the band stops at the limit (the full table would be 2.5e11).
  const std::string long_a(500000, 'x'), long_b = std::string(499999, 'x') + "y";
  CHECK(edit_distance(long_a, long_b, 8) == 1);
  CHECK(edit_distance(long_a, std::string(500000, 'y'), 8) == 8);
}

TEST_CASE("misspelt keys get a suggestion", "[keys]") {
  CHECK(suggest_key("dampng") == "damping");
  CHECK(suggest_key("mc_sample") == "mc_samples");
  CHECK(suggest_key("completely_different") == "");
}
