// The graph backend (compiler/backend/graph/graph_model.h) against the C++ backend, for every
// model whose generated kernels this test binary links: the same ABI table (groups, factors,
// variables and their shapes, quantities, the data table), and through every entry point the
// same values: forward on all rows and on a minibatch, a likelihood's arguments, backward with
// random seeds, the mean-field passes in double and in float, quantities. Both evaluate the same
// kernel operations in the same order, but the generated code fuses elementwise chains into one
// loop, so values agree to a few roundings of the largest, not bit for bit.
#include <catch2/catch.hpp>

#include <functional>
#include <limits>
#include <random>
#include <type_traits>

#include "backend/graph/graph_model.h"
#include "backend/llvm/chain_jit.h"
#include "generated_models.h"
#include "party.h"

extern "C" const fvi_model* fvi_model_conv_classifier(void);
extern "C" const fvi_model* fvi_model_eb_normal_means(void);
extern "C" const fvi_model* fvi_model_hier_intercepts(void);
extern "C" const fvi_model* fvi_model_intercept_products(void);
extern "C" const fvi_model* fvi_model_scaled_intercepts(void);
extern "C" const fvi_model* fvi_model_stan_blocks(void);
extern "C" const fvi_model* fvi_model_vfl_linreg(void);
extern "C" const fvi_model* fvi_model_group_slopes(void);
extern "C" const fvi_model* fvi_model_censored_companions(void);

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace graph_model_test {

namespace {

using Eigen::MatrixXd;
using fvic::ir::RealTensor;

struct Case {
  std::string name;
  const fvi_model* (*generated)();
  std::string path;
};

std::vector<Case> cases() {
  const std::string acceptance = std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/";
  const std::string engine = std::string(FVIC_SOURCE_DIR) + "/tests/compiler/emitted/models/";
#define ENTRY(name) {#name, fvi_model_##name, acceptance + #name ".fvi"},
  std::vector<Case> out = {FVI_MODELS(ENTRY)};
#undef ENTRY
#define ENGINE(name) out.push_back({#name, fvi_model_##name, engine + #name ".fvi"});
  ENGINE(conv_classifier) ENGINE(eb_normal_means) ENGINE(hier_intercepts) ENGINE(intercept_products)
  ENGINE(scaled_intercepts) ENGINE(stan_blocks) ENGINE(vfl_linreg) ENGINE(group_slopes)
  ENGINE(censored_companions)
#undef ENGINE
  return out;
}

using fvic::test::Party;
using fvic::test::view;

RealTensor copy(const fvi_tensor& t) {
  RealTensor out(t.rows, t.cols, t.draws);
  out.m = Eigen::Map<const MatrixXd>(t.data, t.rows, t.cols * t.draws);
  return out;
}

// Equal up to a few roundings (in the given scalar type) of the largest value.
template <class Scalar>
void require_close(const RealTensor& a, const RealTensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  REQUIRE(a.draws == b.draws);
  if (a.m.size() == 0) return;
  const double scale = std::max(1.0, std::max(a.m.cwiseAbs().maxCoeff(), b.m.cwiseAbs().maxCoeff()));
  const double difference = (a.m - b.m).cwiseAbs().maxCoeff();
  INFO("largest difference " << difference << " of values up to " << scale);
  CHECK(difference <= 64 * double(std::numeric_limits<Scalar>::epsilon()) * scale);
}

std::string text(const char* s) { return s ? s : ""; }

void compare_tables(const fvi_model& g, const fvi_model& e, const fvi_data& data) {
  CHECK(g.abi_version == e.abi_version);
  CHECK(text(g.name) == text(e.name));
  REQUIRE(g.group_count == e.group_count);
  for (int i = 0; i < g.group_count; ++i) {
    CHECK(g.group_kinds[i] == e.group_kinds[i]);
    CHECK(g.group_varies[i] == e.group_varies[i]);
    int64_t gs = -2, es = -3;
    fvi_error error{};
    CHECK(g.group_size(i, &data, &gs, &error) == e.group_size(i, &data, &es, &error));
    CHECK(gs == es);
  }
  REQUIRE(g.factor_count == e.factor_count);
  for (int i = 0; i < g.factor_count; ++i) {
    const fvi_factor_info &a = g.factors[i], &b = e.factors[i];
    INFO("factor " << a.name);
    CHECK(text(a.name) == text(b.name));
    CHECK(a.kind == b.kind);
    CHECK(a.owner == b.owner);
    CHECK(text(a.distribution) == text(b.distribution));
    REQUIRE(a.group_count == b.group_count);
    for (int k = 0; k < a.group_count; ++k) CHECK(a.groups[k] == b.groups[k]);
    CHECK(a.seed_count == b.seed_count);
    CHECK(text(a.local_index) == text(b.local_index));
  }
  REQUIRE(g.variable_count == e.variable_count);
  for (int i = 0; i < g.variable_count; ++i) {
    const fvi_variable_info &a = g.variables[i], &b = e.variables[i];
    INFO("variable " << a.name);
    CHECK(text(a.name) == text(b.name));
    CHECK(a.group == b.group);
    CHECK(a.transform == b.transform);
    CHECK(a.lower == b.lower);
    CHECK(a.upper == b.upper);
    CHECK(text(a.lower_data) == text(b.lower_data));
    CHECK(text(a.upper_data) == text(b.upper_data));
    CHECK(a.rank == b.rank);
    CHECK(a.prior_scale == b.prior_scale);
    CHECK(a.class_shift == b.class_shift);
    CHECK(text(a.centring_data) == text(b.centring_data));
    CHECK(a.centring_coefficient == b.centring_coefficient);
    REQUIRE(a.centring_more == b.centring_more);
    for (int j = 0; j < a.centring_more; ++j) {
      CHECK(text(a.centring_more_data[j]) == text(b.centring_more_data[j]));
      CHECK(a.centring_more_coefficients[j] == b.centring_more_coefficients[j]);
    }
    CHECK(text(a.centring_group) == text(b.centring_group));
    int64_t go = -2, eo = -3, gd[8] = {}, ed[8] = {};
    fvi_error error{};
    CHECK(g.variable_shape(i, &data, &go, gd, &error) == e.variable_shape(i, &data, &eo, ed, &error));
    CHECK(go == eo);
    for (int d = 0; d < 8; ++d) CHECK(gd[d] == ed[d]);
  }
  REQUIRE(g.quantity_count == e.quantity_count);
  for (int i = 0; i < g.quantity_count; ++i) {
    const fvi_quantity_info &a = g.quantities[i], &b = e.quantities[i];
    INFO("quantity " << a.name);
    CHECK(text(a.name) == text(b.name));
    CHECK(a.block == b.block);
    CHECK(a.owner == b.owner);
    CHECK(a.factor == b.factor);
    REQUIRE(a.group_count == b.group_count);
    for (int k = 0; k < a.group_count; ++k) CHECK(a.groups[k] == b.groups[k]);
    CHECK(a.rank == b.rank);
    CHECK(a.transform == b.transform);
    CHECK(a.lower == b.lower);
    CHECK(a.upper == b.upper);
    CHECK(text(a.lower_data) == text(b.lower_data));
    CHECK(text(a.upper_data) == text(b.upper_data));
    CHECK(a.aggregate == b.aggregate);
  }
  const fvi_data_table &gt = *g.data_table, &et = *e.data_table;
  REQUIRE(gt.declaration_count == et.declaration_count);
  for (int i = 0; i < gt.declaration_count; ++i) {
    const fvi_data_declaration &a = gt.declarations[i], &b = et.declarations[i];
    INFO("data " << a.name);
    CHECK(text(a.name) == text(b.name));
    CHECK(a.party == b.party);
    CHECK(a.is_int == b.is_int);
    CHECK(a.row_vector == b.row_vector);
    CHECK(a.structure == b.structure);
    REQUIRE(a.rank == b.rank);
    for (int d = 0; d < a.rank; ++d) CHECK(text(a.dims[d]) == text(b.dims[d]));
    CHECK(text(a.lower) == text(b.lower));
    CHECK(text(a.upper) == text(b.upper));
    CHECK(text(a.declaration) == text(b.declaration));
    CHECK(a.line == b.line);
  }
  REQUIRE(gt.size_check_count == et.size_check_count);
  for (int i = 0; i < gt.size_check_count; ++i) {
    CHECK(text(gt.size_checks[i].left) == text(et.size_checks[i].left));
    CHECK(text(gt.size_checks[i].right) == text(et.size_checks[i].right));
    CHECK(text(gt.size_checks[i].what) == text(et.size_checks[i].what));
    CHECK(gt.size_checks[i].line == et.size_checks[i].line);
  }
  for (int p = 0; p < 3; ++p) CHECK(text(gt.transformed_data[p]) == text(et.transformed_data[p]));
  REQUIRE((g.sparse_gp == nullptr) == (e.sparse_gp == nullptr));
}

// A factor bound by both tables to the same data, in double or float.
struct Pair {
  Pair(const fvi_model& graph, const fvi_model& generated, int factor, const fvi_data& data, bool float32)
      : g(graph), e(generated) {
    fvi_error ge{}, ee{};
    gs = float32 ? g.create_float32(factor, &data, &ge) : g.create(factor, &data, &ge);
    es = float32 ? e.create_float32(factor, &data, &ee) : e.create(factor, &data, &ee);
    error = ee.message;
    INFO("graph: " << ge.message << "; generated: " << ee.message);
    REQUIRE((gs == nullptr) == (es == nullptr));
  }
  ~Pair() {
    if (gs) g.destroy(gs);
    if (es) e.destroy(es);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  bool bound() const { return gs != nullptr; }

  const fvi_model &g, &e;
  void* gs = nullptr;
  void* es = nullptr;
  std::string error;  // the generated create()'s, when neither binds
};

// Both states' results of `call` (which fills `out`), as tensors.
RealTensor run(const fvi_model& m, void* state, const std::function<int(const fvi_model&, void*, fvi_tensor*, fvi_error*)>& call) {
  fvi_tensor out{};
  fvi_error error{};
  const int status = call(m, state, &out, &error);
  INFO(error.message);
  REQUIRE(status == 0);
  return copy(out);
}

RealTensor random_like(const RealTensor& t, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  RealTensor out = RealTensor::zeros_like(t);
  for (Eigen::Index i = 0; i < out.m.size(); ++i) out.m.data()[i] = normal(rng);
  return out;
}

template <class Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
template <class Scalar>
using AbiTensor = std::conditional_t<std::is_same_v<Scalar, float>, fvi_tensor_f32, fvi_tensor>;
template <class Scalar>
AbiTensor<Scalar> view_of(Matrix<Scalar>& x) {
  return AbiTensor<Scalar>{x.data(), x.rows(), 1, x.cols()};
}

// The draws passes: forward on all rows (and rows [1, 3) of a likelihood), its arguments, and
// backward with random seeds. Returns the output's rows.
Eigen::Index compare_draws(Pair& p, const fvi_factor_info& info, std::vector<RealTensor>& inputs, bool reads_z_sum,
                   std::mt19937& rng) {
  std::vector<fvi_tensor> in;
  for (RealTensor& t : inputs) in.push_back(view(t));
  auto forward = [&](int64_t begin, int64_t count) {
    return [&, begin, count](const fvi_model& m, void* s, fvi_tensor* out, fvi_error* error) {
      return m.forward(s, begin, count, in.data(), out, error);
    };
  };
  const RealTensor ge = run(p.g, p.gs, forward(0, -1));
  const RealTensor ee = run(p.e, p.es, forward(0, -1));
  require_close<double>(ge, ee, "forward");
  std::vector<RealTensor> seeds{random_like(ee, rng)};
  if (info.kind == FVI_LIKELIHOOD) {
    std::vector<fvi_tensor> ga(size_t(info.seed_count)), ea(size_t(info.seed_count));
    fvi_error error{};
    REQUIRE(p.g.arguments(p.gs, ga.data(), &error) == 0);
    REQUIRE(p.e.arguments(p.es, ea.data(), &error) == 0);
    for (int k = 0; k < info.seed_count; ++k) {
      require_close<double>(copy(ga[size_t(k)]), copy(ea[size_t(k)]), "argument " + std::to_string(k));
      if (k > 0) seeds.push_back(random_like(copy(ea[size_t(k)]), rng));
    }
  }
  std::vector<fvi_tensor> seed_views;
  for (RealTensor& t : seeds) seed_views.push_back(view(t));
  std::vector<const fvi_tensor*> seed_pointers(size_t(info.seed_count), nullptr);
  for (size_t k = 0; k < seed_views.size(); ++k) seed_pointers[k] = &seed_views[k];
  auto gradients = [&](const fvi_model& m, void* s) {
    std::vector<RealTensor> out;
    for (const RealTensor& t : inputs) out.push_back(RealTensor::zeros_like(t));
    std::vector<fvi_tensor> views;
    for (RealTensor& t : out) views.push_back(view(t));
    fvi_error error{};
    const int status = m.backward(s, seed_pointers.data(), views.data(), &error);
    INFO(error.message);
    REQUIRE(status == 0);
    return out;
  };
  const std::vector<RealTensor> gg = gradients(p.g, p.gs), eg = gradients(p.e, p.es);
  for (size_t k = 0; k < gg.size(); ++k) require_close<double>(gg[k], eg[k], "gradient of input " + std::to_string(k));
  // (A coupling likelihood's z_sum holds the batch's rows: these inputs are all of them.)
  if (info.kind == FVI_LIKELIHOOD && !reads_z_sum && ee.rows >= 3)
    require_close<double>(run(p.g, p.gs, forward(1, 2)), run(p.e, p.es, forward(1, 2)), "forward on rows 1 and 2");
  return ee.rows;
}

// The mean-field passes with q in Scalar: output and the gradients of the means and sds.
// On rows [begin, begin + count) (count < 0: all): a minibatch of data is read in place by the
// products and a hoisted square(x) too, as the generated code reads them.
template <class Scalar>
void compare_meanfield(Pair& p, const fvi_model& model, const fvi_factor_info& info,
                       const std::vector<RealTensor>& inputs, std::mt19937& rng, int64_t begin = 0, int64_t count = -1) {
  std::normal_distribution<double> normal;
  std::vector<Matrix<Scalar>> means, sds;
  for (int k = 0; k < info.group_count; ++k) {
    const Eigen::Index size = inputs[size_t(k)].rows;
    means.push_back(Matrix<Scalar>(size, 1));
    sds.push_back(model.group_varies[info.groups[k]] ? Matrix<Scalar>(size, 1) : Matrix<Scalar>());
    for (Eigen::Index i = 0; i < size; ++i) {
      means.back()(i, 0) = Scalar(0.5 * normal(rng));
      if (sds.back().size()) sds.back()(i, 0) = Scalar(0.2 + 0.3 * std::abs(normal(rng)));
    }
  }
  std::vector<AbiTensor<Scalar>> mv, sv;
  for (Matrix<Scalar>& x : means) mv.push_back(view_of(x));
  for (Matrix<Scalar>& x : sds) sv.push_back(x.size() ? view_of(x) : AbiTensor<Scalar>{nullptr, 0, 0, 0});
  const int64_t draws = 4;
  const uint64_t key = 2024;
  auto forward = [&](const fvi_model& m, void* s, fvi_tensor* out, fvi_error* error) {
    if constexpr (std::is_same_v<Scalar, float>)
      return m.forward_meanfield_f32(s, begin, count, mv.data(), sv.data(), draws, key, out, error);
    else
      return m.forward_meanfield(s, begin, count, mv.data(), sv.data(), draws, key, out, error);
  };
  const RealTensor ge = run(p.g, p.gs, forward), ee = run(p.e, p.es, forward);
  require_close<Scalar>(ge, ee, "forward_meanfield on rows from " + std::to_string(begin) + ", " + std::to_string(count));
  RealTensor seed = random_like(ee, rng);
  fvi_tensor seed_view = view(seed);
  std::vector<const fvi_tensor*> seeds(size_t(info.seed_count), nullptr);
  seeds[0] = &seed_view;
  auto gradients = [&](const fvi_model& m, void* s) {
    std::vector<Matrix<Scalar>> dm, ds;
    for (size_t k = 0; k < means.size(); ++k) {
      dm.push_back(Matrix<Scalar>::Zero(means[k].rows(), 1));
      ds.push_back(sds[k].size() ? Matrix<Scalar>::Zero(means[k].rows(), 1) : Matrix<Scalar>());
    }
    std::vector<AbiTensor<Scalar>> dmv, dsv;
    for (Matrix<Scalar>& x : dm) dmv.push_back(view_of(x));
    for (Matrix<Scalar>& x : ds) dsv.push_back(x.size() ? view_of(x) : AbiTensor<Scalar>{nullptr, 0, 0, 0});
    fvi_error error{};
    int status = 0;
    if constexpr (std::is_same_v<Scalar, float>)
      status = m.backward_meanfield_f32(s, seeds.data(), dmv.data(), dsv.data(), &error);
    else
      status = m.backward_meanfield(s, seeds.data(), dmv.data(), dsv.data(), &error);
    INFO(error.message);
    REQUIRE(status == 0);
    std::vector<RealTensor> out;
    for (auto* list : {&dm, &ds})
      for (Matrix<Scalar>& x : *list) {
        RealTensor t(x.rows(), 1, 1);
        t.m = x.template cast<double>();
        out.push_back(t);
      }
    return out;
  };
  const std::vector<RealTensor> gg = gradients(p.g, p.gs), eg = gradients(p.e, p.es);
  for (size_t k = 0; k < gg.size(); ++k)
    require_close<Scalar>(gg[k], eg[k], (k < means.size() ? "d mean " : "d sd ") + std::to_string(k % means.size()));
}

// Every factor and quantity of model `c`, on random data and inputs of 3 draws; with `jit`, the
// graph model's chains compiled by the LLVM backend.
void compare_model(const Case& c, const fvic::backend::graph::ChainCompiler* jit = nullptr) {
  fvic::test::LoadedModel loaded(c.path);
  REQUIRE(loaded.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*loaded.model, module, loaded.diags));
  std::mt19937 rng(11);
  fvic::ir::Bindings b = fvic::test::random_bindings(*loaded.model, module, rng, 3);
  Party party(b.data);
  fvic::backend::graph::GraphModel graph(module, *loaded.model, jit);
  const fvi_model& g = graph.table();
  const fvi_model& e = *c.generated();
  compare_tables(g, e, party.data);
  auto inputs_of = [&](int group_count, const int* groups) {
    std::vector<RealTensor> inputs;
    for (int k = 0; k < group_count; ++k) inputs.push_back(b.inputs.at(fvi_group_name(e.group_kinds[groups[k]])));
    return inputs;
  };
  for (int fi = 0; fi < e.factor_count; ++fi) {
    const fvi_factor_info& info = e.factors[fi];
    INFO("factor " << info.name);
    std::vector<RealTensor> inputs = inputs_of(info.group_count, info.groups);
    bool reads_z_sum = false;
    for (int k = 0; k < info.group_count; ++k) reads_z_sum |= e.group_kinds[info.groups[k]] == FVI_GROUP_Z_SUM;
    bool minibatch = false;  // a likelihood of 3 rows or more: rows [1, 3) too
    {
      Pair p(g, e, fi, party.data, false);
      if (!p.bound()) {
        WARN(c.name << "'s factor " << info.name << " binds to no random data in either backend: " << p.error);
        continue;
      }
      const Eigen::Index rows = compare_draws(p, info, inputs, reads_z_sum, rng);
      minibatch = info.kind == FVI_LIKELIHOOD && !reads_z_sum && rows >= 3;
      compare_meanfield<double>(p, e, info, inputs, rng);
      if (minibatch) compare_meanfield<double>(p, e, info, inputs, rng, 1, 2);
    }
    Pair p(g, e, fi, party.data, true);
    compare_meanfield<float>(p, e, info, inputs, rng);
    if (minibatch) compare_meanfield<float>(p, e, info, inputs, rng, 1, 2);
  }
  for (int qi = 0; qi < e.quantity_count; ++qi) {
    const fvi_quantity_info& info = e.quantities[qi];
    INFO("quantity " << info.name);
    std::vector<RealTensor> inputs = inputs_of(info.group_count, info.groups);
    std::vector<fvi_tensor> in;
    for (RealTensor& t : inputs) in.push_back(view(t));
    Pair p(g, e, info.factor, party.data, false);
    if (!p.bound()) continue;
    auto forward = [&](const fvi_model& m, void* s, fvi_tensor* out, fvi_error* error) {
      return m.forward_quantity(s, in.data(), 3, 99, out, error);  // the inputs' draws
    };
    require_close<double>(run(g, p.gs, forward), run(e, p.es, forward), "forward_quantity");
  }
}

}  // namespace

TEST_CASE("a graph model's table and kernels equal the generated C++'s, every model", "[graph]") {
  for (const Case& c : cases()) {
    INFO("model " << c.name);
    compare_model(c);
  }
}

// The LLVM backend's loops use libm's exp and log where the generated code uses Eigen's
// vectorised ones (each within an ulp or two), so here too values agree to a few roundings of the
// largest.
TEST_CASE("with its chains compiled by LLVM, a graph model's kernels equal the generated C++'s, every model",
          "[llvm]") {
  fvic::backend::llvm_jit::LlvmChainCompiler jit;
  int chains = 0;
  for (const Case& c : cases()) {
    INFO("model " << c.name);
    compare_model(c, &jit);
    chains += jit.statistics().chains;
  }
  CHECK(chains > 0);  // the comparison ran compiled chains, not the interpreter
}

TEST_CASE("a graph model's create() names the data variable that is missing", "[graph]") {
  fvic::test::LoadedModel loaded(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/hier_logreg.fvi");
  REQUIRE(loaded.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*loaded.model, module, loaded.diags));
  fvic::backend::graph::GraphModel graph(module, *loaded.model);
  const fvi_model& g = graph.table();
  RealTensor D = RealTensor::constant(3), N = RealTensor::constant(4), y(4, 1, 1);
  std::vector<const char*> names = {"D", "N", "y"};
  std::vector<fvi_tensor> values = {view(D), view(N), view(y)};
  fvi_data data{3, names.data(), values.data()};
  for (int fi = 0; fi < g.factor_count; ++fi) {
    if (g.factors[fi].kind != FVI_LIKELIHOOD) continue;
    fvi_error error{};
    CHECK(g.create(fi, &data, &error) == nullptr);
    CHECK(std::string(error.message).find("'x' is missing") != std::string::npos);
  }
}

TEST_CASE("a graph factor needs the caller's data only while create() runs", "[graph]") {
  // The ABI lets a caller free or reuse its fvi_data after create(), as generated code reads its
  // sizes there: here the sizes are overwritten after binding, and every call still sees the
  // bound data's.
  fvic::test::LoadedModel loaded(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/hier_logreg.fvi");
  REQUIRE(loaded.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*loaded.model, module, loaded.diags));
  std::mt19937 rng(3);
  fvic::ir::Bindings b = fvic::test::random_bindings(*loaded.model, module, rng, 2);
  fvic::backend::graph::GraphModel graph(module, *loaded.model);
  const fvi_model& g = graph.table();
  const fvi_model& e = *fvi_model_hier_logreg();
  Party party(b.data), same(b.data);
  const int lik = [&] {
    for (int fi = 0; fi < g.factor_count; ++fi)
      if (g.factors[fi].kind == FVI_LIKELIHOOD) return fi;
    return -1;
  }();
  REQUIRE(lik >= 0);
  Pair p(g, e, lik, party.data, false);
  REQUIRE(p.bound());
  for (RealTensor& t : party.copies) t.m.setConstant(1.0);  // N = D = 1, x and y all ones
  std::vector<RealTensor> inputs;
  for (int k = 0; k < g.factors[lik].group_count; ++k)
    inputs.push_back(b.inputs.at(fvi_group_name(g.group_kinds[g.factors[lik].groups[k]])));
  std::vector<fvi_tensor> in;
  for (RealTensor& t : inputs) in.push_back(view(t));
  auto forward = [&](const fvi_model& m, void* s, fvi_tensor* out, fvi_error* error) {
    return m.forward(s, 0, -1, in.data(), out, error);
  };
  Pair fresh(g, e, lik, same.data, false);  // bound to an untouched copy
  const RealTensor got = run(g, p.gs, forward), want = run(e, fresh.es, forward);
  CHECK(got.rows == b.data.at("N").m(0, 0));
  require_close<double>(got, want, "forward after the caller's data changed");
}

TEST_CASE("graph models live side by side, each table evaluating its own model", "[graph]") {
  fvic::test::LoadedModel a(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/hier_logreg.fvi");
  fvic::test::LoadedModel b(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/linreg_conjugate.fvi");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  fvic::ir::Module ma, mb;
  REQUIRE(fvic::build_ir(*a.model, ma, a.diags));
  REQUIRE(fvic::build_ir(*b.model, mb, b.diags));
  auto first = std::make_unique<fvic::backend::graph::GraphModel>(ma, *a.model);
  fvic::backend::graph::GraphModel second(mb, *b.model);
  CHECK(std::string(first->table().name) == "hier_logreg");
  CHECK(std::string(second.table().name) == "linreg_conjugate");
  CHECK(first->table().create != second.table().create);
  // A slot freed by one model is taken by the next.
  first.reset();
  fvic::backend::graph::GraphModel third(ma, *a.model);
  CHECK(std::string(third.table().factors[0].name) == ma.factors[0].name);
}

}  // namespace graph_model_test
