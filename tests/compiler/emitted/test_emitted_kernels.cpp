// The generated C++ of every acceptance model, through the C ABI: each factor's output and each
// input group's gradient equal the IR interpreter's (same kernel calls, so to rounding), and the
// sum of the factors equals the hand-written log joint of unit/reference_models.h.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "generated_models.h"
#include "ir/interpret.h"
#include "reference_models.h"
#include "pipeline.h"

extern "C" const fvi_model* fvi_model_conv_classifier(void);
extern "C" const fvi_model* fvi_model_ordinal_regression(void);

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace emitted_kernels_test {

namespace {

using fvic::ir::RealTensor;
namespace ref = fvic::test::reference;

struct Generated {
  const char* name;
  const fvi_model* (*model)();
  std::function<ref::LogJoint(const ref::Values&, const ref::Values&, Eigen::Index)> reference;
};

std::vector<Generated> generated() {
#define ENTRY(name) {#name, fvi_model_##name, ref::name},
  return {FVI_MODELS(ENTRY)};
#undef ENTRY
}

fvi_tensor view(RealTensor& t) { return fvi_tensor{t.m.data(), t.rows, t.cols, t.draws}; }

void require_close(const RealTensor& a, const RealTensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  REQUIRE(a.draws == b.draws);
  // The same kernel calls in the same order: equal up to a few roundings of the largest value.
  double scale = std::max(1.0, std::max(a.m.cwiseAbs().maxCoeff(), b.m.cwiseAbs().maxCoeff()));
  CHECK((a.m - b.m).cwiseAbs().maxCoeff() <= 64 * std::numeric_limits<double>::epsilon() * scale);
}

// Every factor of the model at `path`, generated as `abi`, on random data and 3 draws: its output
// (full data, then rows [1, 3) of a likelihood) and each input group's gradient equal the
// interpreter's. Returns the bindings and each draw's sum of the factors.
struct Checked {
  fvic::ir::Bindings bindings;
  Eigen::VectorXd total = Eigen::VectorXd::Zero(3);
};

Checked check_against_interpreter(const fvi_model* abi, const std::string& path) {
  Checked result;
  fvic::test::LoadedModel m(path);
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  REQUIRE(abi->abi_version == FVI_ABI_VERSION);
  REQUIRE(abi->factor_count == static_cast<int>(module.factors.size()));

  std::mt19937 rng(5);
  fvic::ir::Bindings& b = result.bindings;
  b = fvic::test::random_bindings(*m.model, module, rng, 3);
  std::vector<std::string> names;
  std::vector<fvi_tensor> values;
  std::vector<RealTensor> data_copies;
  for (const auto& [name, value] : b.data) {
    names.push_back(name);
    data_copies.push_back(value);
  }
  std::vector<const char*> name_ptrs;
  for (size_t i = 0; i < names.size(); ++i) {
    name_ptrs.push_back(names[i].c_str());
    values.push_back(view(data_copies[i]));
  }
  fvi_data data{static_cast<int>(names.size()), name_ptrs.data(), values.data()};

  // Group sizes from the ABI agree with the bindings the interpreter uses.
  for (int gi = 0; gi < abi->group_count; ++gi) {
    int64_t size = -1;
    fvi_error error{};
    REQUIRE(abi->group_size(gi, &data, &size, &error) == 0);
    CHECK(size == b.inputs.at(fvi_group_name(abi->group_kinds[gi])).rows);
  }

  std::map<std::string, RealTensor> contributions;
  // Contributions first: the coupling likelihood reads their sum as z_sum.
  std::vector<int> order;
  for (int fi = 0; fi < abi->factor_count; ++fi)
    if (abi->factors[fi].kind == FVI_CONTRIBUTION) order.push_back(fi);
  for (int fi = 0; fi < abi->factor_count; ++fi)
    if (abi->factors[fi].kind != FVI_CONTRIBUTION) order.push_back(fi);

  for (int fi : order) {
    const fvi_factor_info& info = abi->factors[fi];
    const fvic::ir::Factor& f = module.factors[fi];
    INFO("factor " << info.name);
    REQUIRE(std::string(info.name) == f.name);
    if (info.kind == FVI_LIKELIHOOD && b.inputs.count("z_sum") && !contributions.empty())
      b.inputs["z_sum"] = contributions.begin()->second;

    fvi_error error{};
    void* state = abi->create(fi, &data, &error);
    INFO(error.message);
    REQUIRE(state != nullptr);
    std::vector<RealTensor> inputs;
    for (int k = 0; k < info.group_count; ++k) inputs.push_back(b.inputs.at(fvi_group_name(abi->group_kinds[info.groups[k]])));
    std::vector<fvi_tensor> input_views;
    for (RealTensor& t : inputs) input_views.push_back(view(t));
    fvi_tensor out{};
    fvic::ir::Interpreter interp(module, f);
    REQUIRE(abi->forward(state, 0, -1, input_views.data(), &out, &error) == 0);
    RealTensor compiled(out.rows, out.cols, out.draws);
    compiled.m = Eigen::Map<Eigen::MatrixXd>(out.data, out.rows, out.cols * out.draws);

    require_close(compiled, interp.forward(b), "forward");
    if (info.kind == FVI_CONTRIBUTION) {
      contributions[info.name] = compiled;
    } else {
      for (Eigen::Index s = 0; s < 3; ++s) result.total[s] += compiled.draw(s).sum();
    }

    // Backward with random seeds, through the ABI and through the interpreter.
    std::normal_distribution<double> normal;
    std::vector<RealTensor> seeds;
    for (int k = 0; k < info.seed_count; ++k) {
      int target = k == 0 ? f.output : f.arguments[k - 1];
      RealTensor t = RealTensor::zeros_like(interp.value(target));
      for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = normal(rng);
      seeds.push_back(t);
    }
    std::vector<fvi_tensor> seed_views;
    for (RealTensor& t : seeds) seed_views.push_back(view(t));
    std::vector<const fvi_tensor*> seed_ptrs;
    for (fvi_tensor& t : seed_views) seed_ptrs.push_back(&t);
    std::vector<RealTensor> grads;
    for (const RealTensor& t : inputs) grads.push_back(RealTensor::zeros_like(t));
    std::vector<fvi_tensor> grad_views;
    for (RealTensor& t : grads) grad_views.push_back(view(t));
    REQUIRE(abi->backward(state, seed_ptrs.data(), grad_views.data(), &error) == 0);
    auto expected = interp.backward(b, seeds);
    for (int k = 0; k < info.group_count; ++k) {
      std::string group = fvi_group_name(abi->group_kinds[info.groups[k]]);
      require_close(grads[k], expected.at(group), "gradient w.r.t. " + group);
    }
    // A minibatch of a likelihood's rows (its data copied or read in place as rows).
    if (info.kind == FVI_LIKELIHOOD && !b.inputs.count("z_sum") && compiled.rows >= 3) {
      const int status = abi->forward(state, 1, 2, input_views.data(), &out, &error);
      INFO(error.message);
      REQUIRE(status == 0);
      RealTensor batch(out.rows, out.cols, out.draws);
      batch.m = Eigen::Map<Eigen::MatrixXd>(out.data, out.rows, out.cols * out.draws);
      fvic::ir::Bindings part = b;
      part.batch_begin = 1, part.batch_count = 2;
      require_close(batch, interp.forward(part), "forward on rows 1 and 2");
    }
    abi->destroy(state);
  }
  return result;
}

}  // namespace

TEST_CASE("every acceptance model has generated kernels", "[emitted]") {
  CHECK(generated().size() == fvic::test::acceptance_models().size());
}

TEST_CASE("generated kernels equal the interpreter and the hand-written log joint", "[emitted]") {
  for (const Generated& g : generated()) {
    INFO("model " << g.name);
    const Checked checked =
        check_against_interpreter(g.model(), std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/" + g.name + ".fvi");
    for (Eigen::Index s = 0; s < 3; ++s) {
      ref::LogJoint expected = g.reference(checked.bindings.data, checked.bindings.inputs, s);
      INFO("draw " << s << ": generated " << checked.total[s] << ", hand-written " << expected.value);
      CHECK(std::abs(checked.total[s] - expected.value) <= 1e-12 * expected.scale);
    }
  }
}

TEST_CASE("generated convolution and pooling kernels equal the interpreter", "[emitted][conv]") {
  check_against_interpreter(fvi_model_conv_classifier(),
                            std::string(FVIC_SOURCE_DIR) + "/tests/compiler/emitted/models/conv_classifier.fvi");
}

TEST_CASE("generated ordered_logistic and ordered kernels equal the interpreter and a hand-written log joint",
          "[emitted]") {
  // tests/compiler/emitted/models/ordinal_regression.fvi, written out from its text: beta ~ N(0,
  // 2.5); c = (u_1, u_1 + exp(u_2), ...) with log-Jacobian sum_{k>1} u_k, c ~ N(0, 5); y ~
  // ordered_logistic(x beta, c), P(y = k) = inv_logit(eta - c_{k-1}) - inv_logit(eta - c_k) taken
  // directly (the random data keep every eta within a few units of the cutpoints).
  const Checked checked = check_against_interpreter(
      fvi_model_ordinal_regression(), std::string(FVIC_SOURCE_DIR) + "/tests/compiler/emitted/models/ordinal_regression.fvi");
  for (Eigen::Index s = 0; s < 3; ++s) {
    const ref::Draw v(checked.bindings.data, checked.bindings.inputs, s);
    const long long D = v.n("D"), K = v.n("K"), N = v.n("N");
    ref::LogJoint lp;
    std::vector<double> beta(static_cast<size_t>(D)), c(static_cast<size_t>(K - 1));
    for (long long j = 0; j < D; ++j) {
      beta[size_t(j)] = v.u("global", j);
      ref::normal(lp, beta[size_t(j)], 0, 2.5);
    }
    for (long long k = 0; k < K - 1; ++k) {
      const double u = v.u("global", D + k);
      c[size_t(k)] = k == 0 ? u : c[size_t(k - 1)] + std::exp(u);
      if (k > 0) lp.add(u);
      ref::normal(lp, c[size_t(k)], 0, 5);
    }
    auto inv_logit = [](double x) { return 1 / (1 + std::exp(-x)); };
    for (long long i = 0; i < N; ++i) {
      double eta = 0;
      for (long long j = 0; j < D; ++j) eta += v.d("x", i, j) * beta[size_t(j)];
      const long long k = v.n("y", i);
      const double upper = k == 1 ? 1.0 : inv_logit(eta - c[size_t(k - 2)]);
      const double lower = k == K ? 0.0 : inv_logit(eta - c[size_t(k - 1)]);
      lp.add(std::log(upper - lower));
    }
    INFO("draw " << s << ": generated " << checked.total[s] << ", hand-written " << lp.value);
    CHECK(std::abs(checked.total[s] - lp.value) <= 1e-10 * lp.scale);
  }
}

TEST_CASE("a data variable of the wrong shape is refused with its name", "[emitted]") {
  const fvi_model* abi = fvi_model_hier_logreg();
  RealTensor D = RealTensor::constant(3), N = RealTensor::constant(4);
  RealTensor x(4, 2, 1), y(4, 1, 1);  // x should be 4 x 3
  std::vector<const char*> names = {"D", "N", "x", "y"};
  std::vector<fvi_tensor> values = {view(D), view(N), view(x), view(y)};
  fvi_data data{4, names.data(), values.data()};
  int likelihood = -1;
  for (int fi = 0; fi < abi->factor_count; ++fi)
    if (abi->factors[fi].kind == FVI_LIKELIHOOD) likelihood = fi;
  fvi_error error{};
  CHECK(abi->create(likelihood, &data, &error) == nullptr);
  CHECK_THAT(std::string(error.message), Catch::Contains("'x'"));
}

TEST_CASE("a likelihood exposes its outcome and distribution arguments after forward", "[emitted]") {
  // robust_logreg: y ~ bernoulli_logit(x * w + b), so argument 1 must be x * w + b for each draw.
  const fvi_model* abi = fvi_model_robust_logreg();
  const int n = 5, d = 2, draws = 3;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  RealTensor D = RealTensor::constant(d), N = RealTensor::constant(n);
  RealTensor x(n, d, 1), y(n, 1, 1), theta(d + 1, 1, draws);
  for (Eigen::Index i = 0; i < x.m.size(); ++i) x.m.data()[i] = normal(rng);
  for (int i = 0; i < n; ++i) y.m(i, 0) = i % 2;
  for (Eigen::Index i = 0; i < theta.m.size(); ++i) theta.m.data()[i] = normal(rng);
  std::vector<const char*> names = {"D", "N", "x", "y"};
  std::vector<fvi_tensor> values = {view(D), view(N), view(x), view(y)};
  fvi_data data{4, names.data(), values.data()};
  int likelihood = -1;
  for (int fi = 0; fi < abi->factor_count; ++fi)
    if (abi->factors[fi].kind == FVI_LIKELIHOOD) likelihood = fi;
  REQUIRE(abi->factors[likelihood].seed_count == 2);
  fvi_error error{};
  void* state = abi->create(likelihood, &data, &error);
  REQUIRE(state != nullptr);
  fvi_tensor input = view(theta), output{};
  REQUIRE(abi->forward(state, 1, 3, &input, &output, &error) == 0);  // rows 1..3
  fvi_tensor args[2]{};
  REQUIRE(abi->arguments(state, args, &error) == 0);
  CHECK(args[0].rows == 3);
  for (int r = 0; r < 3; ++r) CHECK(args[0].data[r] == y.m(r + 1, 0));
  REQUIRE(args[1].rows == 3);
  REQUIRE(args[1].draws == draws);
  for (int s = 0; s < draws; ++s)
    for (int r = 0; r < 3; ++r) {
      double eta = theta.m(d, s);
      for (int j = 0; j < d; ++j) eta += x.m(r + 1, j) * theta.m(j, s);
      CHECK(args[1].data[s * 3 + r] == Approx(eta).epsilon(1e-14));
    }
  abi->destroy(state);
}

TEST_CASE("the variable table gives each parameter's group, offset, shape and transform", "[emitted]") {
  // hier_logreg declares: global vector[D] beta; global real<lower=0> tau; local real alpha.
  const fvi_model* abi = fvi_model_hier_logreg();
  REQUIRE(abi->variable_count == 3);
  RealTensor D = RealTensor::constant(4);
  std::vector<const char*> names = {"D"};
  std::vector<fvi_tensor> values = {view(D)};
  fvi_data data{1, names.data(), values.data()};
  const char* expected_names[] = {"beta", "tau", "alpha"};
  const int expected_groups[] = {FVI_GROUP_GLOBAL, FVI_GROUP_GLOBAL, FVI_GROUP_LOCAL};
  const int expected_transform[] = {FVI_IDENTITY, FVI_LOWER, FVI_IDENTITY};
  const int64_t expected_offset[] = {0, 4, 0};
  const int expected_rank[] = {1, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const fvi_variable_info& v = abi->variables[i];
    CHECK(std::string(v.name) == expected_names[i]);
    CHECK(abi->group_kinds[v.group] == expected_groups[i]);
    CHECK(v.transform == expected_transform[i]);
    CHECK(v.rank == expected_rank[i]);
    int64_t offset = -1, dims[4] = {-1, -1, -1, -1};
    fvi_error error{};
    REQUIRE(abi->variable_shape(i, &data, &offset, dims, &error) == 0);
    CHECK(offset == expected_offset[i]);
    if (i == 0) CHECK(dims[0] == 4);
  }
  CHECK(abi->variables[1].lower == 0.0);
}

}  // namespace emitted_kernels_test
