// fvi/kernel/abi_support.h write_gradient: a group's gradient written once into the caller's
// buffer equals the sum, element by element, of its pieces placed at their offsets (summed over
// the piece's draws for a group of one draw, repeated for every draw from a piece of one), with
// zeros where no piece falls; whatever the buffer held before is overwritten.
#include <catch2/catch.hpp>

#include <random>

#include "fvi/kernel/instances.h"

using namespace fvi::kernel;

namespace {

template <class T>
Tensor<T> random_tensor(Eigen::Index rows, Eigen::Index draws, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  Tensor<T> t(rows, 1, draws);
  for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = T(normal(rng));
  return t;
}

// The expected gradient, element by element: out(i, s) = sum over pieces covering i of the
// piece's value there for draw s (its only draw, or the sum of its draws).
template <class T>
Eigen::MatrixXd expected(const std::vector<std::pair<const Tensor<T>*, int64_t>>& pieces, int64_t size, int64_t draws) {
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(size, draws);
  for (const auto& [t, offset] : pieces)
    for (int64_t i = 0; i < t->size(); ++i)
      for (int64_t s = 0; s < draws; ++s) {
        double v = 0;
        if (t->draws == draws) v = double(t->m(i, s));
        else if (draws == 1) for (int64_t k = 0; k < t->draws; ++k) v += double(t->m(i, k));
        else v = double(t->m(i, 0));
        out(offset + i, s) += v;
      }
  return out;
}

template <class T>
void check_case(const std::vector<std::pair<const Tensor<T>*, int64_t>>& pieces, int64_t size, int64_t draws) {
  std::vector<GradientPiece<T>> list;
  for (const auto& [t, offset] : pieces) list.emplace_back(*t, offset);
  Eigen::MatrixXd buffer = Eigen::MatrixXd::Constant(size, draws, 12345.0);  // stale values to overwrite
  fvi_tensor out{buffer.data(), size, 1, draws};
  write_gradient<T>(list, size, draws, out);
  const Eigen::MatrixXd want = expected(pieces, size, draws);
  // One conversion to double and at most a few additions per element.
  const double tolerance = 8 * double(std::numeric_limits<T>::epsilon()) * (1 + want.cwiseAbs().maxCoeff());
  CHECK((buffer - want).cwiseAbs().maxCoeff() <= tolerance);
}

}  // namespace

TEMPLATE_TEST_CASE("write_gradient places, sums and zero-fills the pieces of a group", "[kernel][abi]", double, float) {
  std::mt19937 rng(5);
  const auto a = random_tensor<TestType>(4, 3, rng), b = random_tensor<TestType>(3, 3, rng),
             c = random_tensor<TestType>(2, 1, rng), d = random_tensor<TestType>(5, 3, rng);
  SECTION("out of order, with gaps before, between and after") { check_case<TestType>({{&b, 9}, {&a, 2}}, 14, 3); }
  SECTION("overlapping pieces add") { check_case<TestType>({{&a, 0}, {&b, 2}, {&d, 1}}, 7, 3); }
  SECTION("a piece's draws summed for a group of one draw") { check_case<TestType>({{&a, 1}, {&c, 6}}, 8, 1); }
  SECTION("a piece of one draw repeated for each of the group's") { check_case<TestType>({{&c, 1}, {&b, 3}}, 6, 3); }
  SECTION("no piece at all: zeros") { check_case<TestType>({}, 5, 2); }
  SECTION("bad pieces and buffers are refused") {
    Eigen::MatrixXd buffer(6, 3);
    fvi_tensor out{buffer.data(), 6, 1, 3};
    CHECK_THROWS_AS(write_gradient<TestType>({{a, 3}}, 6, 3, out), ShapeError);   // past the end
    CHECK_THROWS_AS(write_gradient<TestType>({{a, -1}}, 6, 3, out), ShapeError);  // before the start
    CHECK_THROWS_AS(write_gradient<TestType>({{a, 0}}, 5, 3, out), ShapeError);   // buffer of another size
    const auto two = random_tensor<TestType>(2, 2, rng);
    CHECK_THROWS_AS(write_gradient<TestType>({{two, 0}}, 6, 3, out), ShapeError);  // 2 draws for 3
  }
}
