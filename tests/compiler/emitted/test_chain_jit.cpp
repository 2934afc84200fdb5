// The LLVM backend's code for each operation a fused chain can hold (compiler/backend/llvm/
// chain_codegen.cpp) against the runtime's block functions, which the graph backend interprets and
// the generated C++ calls: every inline unary function and derivative, the inline log densities
// and their partials, a member that calls the runtime between inline ones, in double and float,
// on a block whose length is no multiple of a vector's; and a model whose compiler fails runs
// interpreted.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <limits>
#include <random>
#include <type_traits>

#include "backend/graph/graph_model.h"
#include "backend/llvm/chain_jit.h"
#include "fvi/kernel/fused.h"
#include "fvi/kernel/instances.h"
#include "party.h"
#include "test_models.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace chain_jit_test {

namespace {

namespace k = fvi::kernel;
using fvic::backend::graph::Chain;
using fvic::backend::graph::FactorPlan;
using fvic::ir::Node;
using fvic::ir::Op;

constexpr Eigen::Index kLength = 1037;  // a block of 1,024 and a remainder of 13

// A chain of the members after `leaves` data nodes, compiled: members escape as `escaping` says
// (all of them when empty).
struct Compiled {
  Compiled(int leaves, std::vector<Node> members, std::set<int> escaping = {}) {
    for (int l = 0; l < leaves; ++l) factor.nodes.push_back(Node{Op::Data, {}, "x" + std::to_string(l)});
    fvic::backend::FusedChain fused;
    for (int l = 0; l < leaves; ++l) fused.leaves.push_back(l);
    for (Node& m : members) {
      fused.nodes.push_back(int(factor.nodes.size()));
      factor.nodes.push_back(std::move(m));
    }
    fused.escaping = escaping.empty() ? std::set<int>(fused.nodes.begin(), fused.nodes.end()) : escaping;
    plans.resize(1);
    plans[0].draws.forward.chains.emplace_back(factor, fused);
    code = jit.compile(plans);
  }
  const Chain& chain() const { return plans[0].draws.forward.chains[0]; }

  // Runs the block on the leaves' values; returns every member's block (those that do not escape
  // are left as they were: NaN).
  template <class T>
  std::vector<std::vector<T>> run(const std::vector<std::vector<T>>& leaves) const {
    std::vector<const T*> in;
    for (const auto& l : leaves) in.push_back(l.data());
    std::vector<std::vector<T>> out(chain().members.size(), std::vector<T>(size_t(kLength), std::nanf("")));
    std::vector<T*> nodes;
    for (auto& o : out) nodes.push_back(o.data());
    if constexpr (std::is_same_v<T, double>) chain().code_double(kLength, in.data(), nodes.data());
    else chain().code_float(kLength, in.data(), nodes.data());
    return out;
  }

  fvic::ir::Factor factor;
  std::vector<FactorPlan> plans;
  fvic::backend::llvm_jit::LlvmChainCompiler jit;
  std::shared_ptr<void> code;
};

template <class T>
std::vector<T> uniform(double low, double high, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(low, high);
  std::vector<T> v(static_cast<size_t>(kLength));
  for (T& x : v) x = T(u(rng));
  return v;
}

// Equal within `ulps` roundings of T, relative to max(1, |want|), elementwise.
template <class T>
void require_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what, double ulps = 8) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(double(got[i]) - double(want[i])) / std::max(1.0, std::abs(double(want[i])));
    if (!(d <= worst)) worst = d, at = i;  // NaN where want is not: worst
  }
  INFO("worst at " << at << ": got " << got[at] << ", want " << want[at]);
  CHECK(worst <= ulps * double(std::numeric_limits<T>::epsilon()));
}

// The domains the unary functions are tested on: (0, 1) for all, and (-4, 4) with exact zeros
// for those defined on the whole line.
bool whole_line(k::UnaryFn f) {
  using F = k::UnaryFn;
  for (F g : {F::exp, F::expm1, F::inv_logit, F::log_inv_logit, F::log1m_inv_logit, F::log1p_exp, F::tanh, F::sin,
              F::cos, F::square, F::relu, F::fabs, F::abs, F::neg})
    if (f == g) return true;
  return false;
}

template <class T>
void check_unary(const std::string& name, std::mt19937& rng) {
  const k::UnaryFn f = k::unary_fn(name);
  std::vector<std::vector<T>> domains = {uniform<T>(0.02, 0.98, rng)};
  if (whole_line(f)) {
    domains.push_back(uniform<T>(-4, 4, rng));
    for (size_t i = 0; i < 20; ++i) domains.back()[i * 37] = T(0);
  }
  // value: one member; derivative: from x and y = f(x)
  Compiled value(1, {Node{Op::Unary, {0}, name}});
  Compiled derivative(2, {Node{Op::UnaryDerivative, {0, 1}, name}});
  for (const std::vector<T>& x : domains) {
    std::vector<T> y(x.size()), dy(x.size());
    k::unary_block<T>(f, x.data(), kLength, y.data());
    k::unary_derivative_block<T>(f, x.data(), y.data(), kLength, dy.data());
    require_close<T>(value.run<T>({x})[0], y, name);
    require_close<T>(derivative.run<T>({x, y})[0], dy, name + "'");
  }
}

// Every log density's value and each operand's g .* partial, against lpdf_block and lpdf_vjp_block.
template <class T>
void check_distribution(const std::string& name, const std::vector<std::vector<T>>& operands, std::mt19937& rng) {
  const int count = int(operands.size());
  std::vector<const T*> xs;
  for (const auto& x : operands) xs.push_back(x.data());
  std::vector<int> args;
  for (int a = 0; a < count; ++a) args.push_back(a);
  Compiled lpdf(count, {Node{Op::Lpdf, args, name}});
  std::vector<T> want(static_cast<size_t>(kLength));
  k::lpdf_block<T>(name, xs, kLength, want.data());
  require_close<T>(lpdf.run<T>(operands)[0], want, name);
  const std::vector<T> g = uniform<T>(-2, 2, rng);
  std::vector<std::vector<T>> with_seed = {g};
  with_seed.insert(with_seed.end(), operands.begin(), operands.end());
  std::vector<int> vjp_args = {0};
  for (int a = 0; a < count; ++a) vjp_args.push_back(a + 1);
  for (int operand = 0; operand < count; ++operand) {
    Node vjp{Op::LpdfVjp, vjp_args, name};
    vjp.k = operand;
    Compiled partial(count + 1, {vjp});
    k::lpdf_vjp_block<T>(name, size_t(operand), g.data(), xs, kLength, want.data());
    require_close<T>(partial.run<T>(with_seed)[0], want, name + " partial " + std::to_string(operand));
  }
}

template <class T>
void check_all(std::mt19937& rng) {
  for (const char* f : {"exp", "log", "log1p", "expm1", "log1m", "inv_logit", "logit", "log_inv_logit",
                        "log1m_inv_logit", "log1p_exp", "tanh", "sin", "cos", "sqrt", "safe_sqrt", "square", "inv",
                        "inv_sqrt", "relu", "fabs", "abs", "neg", "lgamma", "erf", "erfc", "Phi"})
    check_unary<T>(f, rng);
  std::vector<T> y01(static_cast<size_t>(kLength));
  for (T& y : y01) y = T(rng() % 2);
  check_distribution<T>("normal", {uniform<T>(-3, 3, rng), uniform<T>(-1, 1, rng), uniform<T>(0.3, 2, rng)}, rng);
  check_distribution<T>("bernoulli_logit", {y01, uniform<T>(-6, 6, rng)}, rng);
  // through the runtime's block functions
  check_distribution<T>("student_t",
                        {uniform<T>(-3, 3, rng), uniform<T>(1, 6, rng), uniform<T>(-1, 1, rng), uniform<T>(0.3, 2, rng)},
                        rng);
}

}  // namespace

TEST_CASE("each operation the LLVM backend compiles equals the runtime's block function", "[llvm]") {
  std::mt19937 rng(5);
  SECTION("double") { check_all<double>(rng); }
  SECTION("float") { check_all<float>(rng); }
}

TEST_CASE("an LLVM chain keeps inline members in registers and stores what a runtime call reads", "[llvm]") {
  // a = exp(x) inline; b = lgamma(a) through the runtime, which reads a from memory; c = a * b
  // inline after it; only c escapes.
  Compiled c(1, {Node{Op::Unary, {0}, "exp"}, Node{Op::Unary, {1}, "lgamma"}, Node{Op::Mul, {1, 2}}}, {3});
  CHECK(c.jit.statistics().inline_members == 2);
  CHECK(c.jit.statistics().runtime_members == 1);
  std::mt19937 rng(7);
  const std::vector<double> x = uniform<double>(-2, 2, rng);
  const std::vector<std::vector<double>> out = c.run<double>({x});
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::exp(x[i]) * std::lgamma(std::exp(x[i]));
  require_close<double>(out[2], want, "exp(x) * lgamma(exp(x))", 16);
  CHECK(!std::isnan(out[0][0]));  // a was stored: the call read it
}

TEST_CASE("a model with no fused chains compiles nothing", "[llvm]") {
  std::vector<FactorPlan> plans(2);
  fvic::backend::llvm_jit::LlvmChainCompiler jit;
  CHECK(jit.compile(plans) == nullptr);
  CHECK(jit.statistics().chains == 0);
}

}  // namespace chain_jit_test

namespace chain_jit_test {

namespace {

// A compiler that sets one chain's code, then fails, as a JIT that cannot finish might.
class FailingCompiler final : public fvic::backend::graph::ChainCompiler {
 public:
  std::shared_ptr<void> compile(std::vector<FactorPlan>& plans) const override {
    for (FactorPlan& p : plans)
      for (Chain& c : p.draws.forward.chains) c.code_double = reinterpret_cast<Chain::BlockDouble>(&abort_block);
    throw std::runtime_error("no machine code today");
  }
  static void abort_block(long long, const double* const*, double* const*) { std::abort(); }
};

}  // namespace

TEST_CASE("a graph model whose chain compiler fails runs its chains interpreted and says why", "[llvm]") {
  fvic::test::LoadedModel loaded(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/hier_logreg.fvi");
  REQUIRE(loaded.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*loaded.model, module, loaded.diags));
  std::mt19937 rng(3);
  fvic::ir::Bindings b = fvic::test::random_bindings(*loaded.model, module, rng, 2);
  FailingCompiler failing;
  fvic::backend::graph::GraphModel failed(module, *loaded.model, &failing);
  fvic::backend::graph::GraphModel interpreted(module, *loaded.model);
  CHECK(failed.jit_error() == "no machine code today");
  CHECK(interpreted.jit_error().empty());
  int chains = 0;
  for (const FactorPlan& p : failed.shapes().plans)
    for (const Chain& c : p.draws.forward.chains) {
      ++chains;
      CHECK(c.code_double == nullptr);
    }
  REQUIRE(chains > 0);  // the model has chains the failing compiler touched
  // Every factor's forward on all rows: the same values as the interpreted model's (abort_block
  // would end the test if a chain still pointed at it).
  const fvic::test::Party party(b.data);
  for (int fi = 0; fi < failed.table().factor_count; ++fi) {
    const fvi_factor_info& info = failed.table().factors[fi];
    std::vector<fvi_tensor> in;
    for (int k = 0; k < info.group_count; ++k)
      in.push_back(fvic::test::view(b.inputs.at(fvi_group_name(failed.table().group_kinds[info.groups[k]]))));
    fvi_error error{};
    void* a = failed.table().create(fi, &party.data, &error);
    void* c = interpreted.table().create(fi, &party.data, &error);
    REQUIRE(a != nullptr);
    REQUIRE(c != nullptr);
    fvi_tensor out_a{}, out_c{};
    REQUIRE(failed.table().forward(a, 0, -1, in.data(), &out_a, &error) == 0);
    REQUIRE(interpreted.table().forward(c, 0, -1, in.data(), &out_c, &error) == 0);
    REQUIRE(out_a.rows * out_a.cols * out_a.draws == out_c.rows * out_c.cols * out_c.draws);
    for (int64_t i = 0; i < out_a.rows * out_a.cols * out_a.draws; ++i) CHECK(out_a.data[i] == out_c.data[i]);
    failed.table().destroy(a);
    interpreted.table().destroy(c);
  }
}

}  // namespace chain_jit_test
