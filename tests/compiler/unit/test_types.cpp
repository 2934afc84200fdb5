// Symbolic sizes: the planner's byte counts and the checker's size equalities rest on them.
#include <catch2/catch.hpp>

#include "frontend/types.h"

using fvic::SymSize;

namespace {
std::optional<long long> at(const SymSize& s, long long D, long long K) {
  return s.eval([&](const std::string& n) -> std::optional<long long> {
    if (n == "D") return D;
    if (n == "K") return K;
    return std::nullopt;
  });
}
}  // namespace

TEST_CASE("symbolic sizes add and multiply as polynomials", "[types]") {
  SymSize D = SymSize::atom("D"), K = SymSize::atom("K");
  SymSize s = D * K + D * K + SymSize::constant(3);
  CHECK(s.str() == "2*D*K + 3");
  CHECK(at(s, 5, 7) == 2 * 5 * 7 + 3);
  CHECK((K * D).equals(D * K));
  CHECK((D - D).constant_value() == 0);
}

TEST_CASE("halving a size keeps it exact", "[types]") {
  SymSize D = SymSize::atom("D");
  SymSize tri = (D * (D + SymSize::constant(1))).divided_by(2);
  for (long long d : {1, 2, 3, 10, 784})
    CHECK(at(tri, d, 0) == d * (d + 1) / 2);
  CHECK((tri + tri).equals(D * D + D));
}

TEST_CASE("only constants are provably different", "[types]") {
  CHECK(SymSize::constant(3).provably_different(SymSize::constant(4)));
  CHECK_FALSE(SymSize::atom("N").provably_different(SymSize::atom("M")));
  CHECK_FALSE(SymSize::atom("N").equals(SymSize::atom("M")));
  CHECK_FALSE(SymSize::unknown().equals(SymSize::unknown()));
}

TEST_CASE("a size with an unknown atom does not evaluate", "[types]") {
  SymSize s = SymSize::atom("Q") + SymSize::constant(1);
  CHECK_FALSE(at(s, 1, 1).has_value());
  CHECK(SymSize::unknown().str() == "?");
}
