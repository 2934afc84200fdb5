// The class shift of multinomial_eb's softmax (compiler: analysis/class_shift.h; engine:
// fvi/engine/class_shift.h): the compiled likelihood really is unchanged by it, removing q's class
// means raises the server's term to its best along the shift, and the server's step leaves them 0.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "abi_data.h"
#include "fvi/engine/class_shift.h"
#include "fvi/engine/sfvi.h"

extern "C" const fvi_model* fvi_model_multinomial_eb(void);

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace class_shift_test {

using fvi::engine::SfviContribution;
using fvi::engine::SfviOptions;
using fvi::engine::SfviServer;
using fvi::engine::SfviSilo;
using fvic::test::Data;
using fvic::test::scalar;
using Global = fvi::StructuredGlobalGaussian<double>;

TEST_CASE("class shift: multinomial_eb's likelihood does not see it; the server puts q's means at the prior's "
          "optimum along it",
          "[class_shift]") {
  const fvi_model& model = *fvi_model_multinomial_eb();
  REQUIRE(model.variable_count >= 2);
  REQUIRE(std::string(model.variables[0].name) == "W");
  REQUIRE(std::string(model.variables[1].name) == "b");
  CHECK(model.variables[0].class_shift == 1);  // W's rows
  CHECK(model.variables[1].class_shift == 2);  // all of b

  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  const int D = 3, K = 4, N = 12, S = 4, P = D * K + K;
  Data silo_data, public_data;
  Eigen::MatrixXd x(N, D), y(N, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (int i = 0; i < N; ++i) y(i, 0) = 1 + i % K;
  for (Data* d : {&silo_data, &public_data}) {
    d->add("D", scalar(D));
    d->add("K", scalar(K));
  }
  silo_data.add("N", scalar(N));
  silo_data.add("x", x);
  silo_data.add("y", y);

  SfviOptions options;  // mean-field
  SfviServer server(model, public_data.abi(), options);
  REQUIRE(server.global_dim() == P);
  const std::vector<fvi::engine::ClassShiftBlock> blocks =
      fvi::engine::class_shift_blocks(model, public_data.abi(), server.global_dim());
  REQUIRE(blocks.size() == 2);
  SfviSilo silo(model, silo_data.abi(), 1, options, false);
  Eigen::VectorXd params(2 * P), hyper(2);
  for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.5 * normal(rng);
  hyper << -0.2, 0.4;
  // Antithetic draws (e, -e): the priors' estimate at them is then exactly quadratic in q's means
  // with no cross term, so its best along the shift is where the expectation's is.
  Eigen::MatrixXd eps(P, S);
  for (Eigen::Index i = 0; i < P * S / 2; ++i) eps.data()[i] = normal(rng);
  eps.rightCols(S / 2) = -eps.leftCols(S / 2);

  // The silo's term (its expected log likelihood at these draws) and the server's (the priors
  // and the entropy) at q's parameters p.
  auto silo_term = [&](const Eigen::VectorXd& p) {
    return silo.gradient(Global::from_params(p, P, false), hyper, eps, Eigen::MatrixXd(0, S), 1, nullptr).elbo_term;
  };
  auto server_term = [&](const Eigen::VectorXd& p) {
    server.set(p, hyper);
    return server.server_term(eps).elbo_term;
  };
  // Shift every row of W's means by its own number and b's by one: the likelihood's value at each
  // draw moves by nothing (within rounding); the priors' does.
  Eigen::VectorXd shifted = params;
  for (int d = 0; d < D; ++d) {
    const double c = 2 * normal(rng);
    for (int k = 0; k < K; ++k) shifted[d + D * k] += c;
  }
  shifted.segment(D * K, K).array() += 1.5;
  const double at_params = silo_term(params);
  CHECK(std::abs(silo_term(shifted) - at_params) < 1e-10 * std::abs(at_params));
  CHECK(std::abs(server_term(shifted) - server_term(params)) > 1e-2);

  // Removing the class means: each row of W and b then sums to 0 across the classes, the
  // likelihood is where it was, and the server's term is at its best along every row's shift
  // (a small shift either way lowers it).
  Eigen::VectorXd projected = shifted;
  fvi::engine::remove_class_means(blocks, projected.head(P));
  for (int d = 0; d < D; ++d) {
    double row = 0;
    for (int k = 0; k < K; ++k) row += projected[d + D * k];
    CHECK(std::abs(row) < 1e-12);
  }
  CHECK(std::abs(projected.segment(D * K, K).sum()) < 1e-12);
  CHECK(std::abs(silo_term(projected) - at_params) < 1e-10 * std::abs(at_params));
  const double best = server_term(projected);
  CHECK(best > server_term(shifted));
  for (int d = 0; d <= D; ++d)
    for (double h : {-1e-3, 1e-3}) {
      Eigen::VectorXd moved = projected;
      for (int k = 0; k < K; ++k) moved[d < D ? d + D * k : D * K + k] += h;
      CHECK(server_term(moved) < best);
    }

  // The server's step leaves q's means with no class means, wherever Adam took them.
  server.set(shifted, hyper);
  for (uint32_t t = 1; t <= 3; ++t) {
    const SfviContribution c = silo.contribute(server.broadcast(t), t);
    server.step({c}, t);
    const Eigen::VectorXd mean = server.q().mean();
    for (int d = 0; d < D; ++d) CHECK(std::abs(mean(Eigen::seqN(d, K, D)).sum()) < 1e-12);
    CHECK(std::abs(mean.segment(D * K, K).sum()) < 1e-12);
  }
}

}  // namespace class_shift_test
