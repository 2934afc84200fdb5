#pragma once
// Test support: load a model from a file, and make random data and variables that satisfy its
// declarations (small sizes, ints inside their bounds, positive values where constrained).
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fvi/data/dataset.h"
#include "frontend/parser.h"
#include "frontend/semantic.h"
#include "ir/interpret.h"

#ifndef FVIC_SOURCE_DIR
#error "FVIC_SOURCE_DIR must name the source tree"
#endif

namespace fvic::test {

// A data variable as a reader would make it: `values` column-major over `dims`.
inline fvi::data::Variable data_variable(const std::string& name, std::vector<int64_t> dims, std::vector<double> values) {
  fvi::data::Variable v;
  v.name = name;
  v.values = std::move(values);
  v.set_dims(std::move(dims));
  v.source = "test";
  return v;
}

// A data variable's values as the interpreter binds data (one draw).
inline ir::RealTensor tensor_of(const fvi::data::Variable& v) {
  ir::RealTensor t(v.rows, v.cols, 1);
  for (size_t i = 0; i < v.values.size(); ++i) t.m.data()[i] = v.values[i];
  return t;
}

inline std::vector<std::string> acceptance_models() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance"))
    if (e.path().extension() == ".fvi") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct LoadedModel {
  SourceFile source;
  Diagnostics diags;
  std::unique_ptr<Program> program;
  std::unique_ptr<SemanticModel> model;
  explicit LoadedModel(const std::string& path) : source(SourceFile::read(path)), diags(&source) {
    program = parse_program(source, diags);
    if (program) {
      program->name = std::filesystem::path(path).stem().string();
      model = check_program(*program, diags);
    }
  }
  bool ok() const { return model && !diags.has_errors(); }
  std::string errors() const {
    std::ostringstream s;
    diags.print(s);
    return s.str();
  }
};

// A model written out by a test: saved as NAME.fvi in the temporary directory, then loaded.
inline LoadedModel load_text(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / (name + ".fvi")).string();
  std::ofstream(path) << text;
  return LoadedModel(path);
}

// The factor or quantity of `m` named `name`.
inline const ir::Factor& factor_named(const ir::Module& m, const std::string& name) {
  for (const auto& f : m.factors)
    if (f.name == name) return f;
  for (const auto& f : m.quantities)
    if (f.name == name) return f;
  throw std::invalid_argument("no factor " + name);
}

// The slot of variable `name` in `m`'s groups.
inline const ir::Slot& slot_named(const ir::Module& m, const std::string& name) {
  for (const ir::Group& g : m.groups)
    for (const ir::Slot& s : g.slots)
      if (s.variable == name) return s;
  throw std::invalid_argument("no variable " + name);
}

// A model through Stan's forms (log_sum_exp, mean, variance, sd, the GLM), softmax and
// log_softmax, reductions, cumulative sums, pow, append_row, a loop's locals and a
// hyperparameter: the adjoint and tangent tests' second case.
inline const char* kFormsModel = R"(data {
  int<lower=1> D;
}
silo data {
  int<lower=0> N;
  matrix[N, D] x;
  array[N] int<lower=0, upper=1> b;
  vector[N] y;
}
hyperparameters {
  real<lower=0> tau;
}
parameters {
  global real alpha;
  global vector[D] beta;
  global real<lower=0> sigma;
}
model {
  vector[N] mu;
  vector[3] c = append_row(beta[1:2], alpha);
  alpha ~ std_normal();
  beta ~ normal(0, tau);
  target += log_sum_exp(alpha, 2 * alpha - 1) + mean(beta) - variance(beta) + sd(beta);
  target += sum(log_softmax(c) .* softmax(c)) + max(beta) - min(c) + prod(exp(beta) ./ (1 + beta .* beta));
  target += cumulative_sum(beta)[D] + pow(sigma, alpha / 4) + dot_self(append_row(tau, beta));
  sigma ~ normal(0, 2);
  b ~ bernoulli_logit_glm(x, alpha, beta);
  for (n in 1:N) {
    mu[n] = alpha + x[n] * beta;
    y[n] ~ normal(mu[n], sigma);
  }
}
)";

// The adjoint, tangent and generated-kernel tests' convolution and pooling model.
inline std::string conv_model_path() {
  return std::string(FVIC_SOURCE_DIR) + "/tests/compiler/emitted/models/conv_classifier.fvi";
}

// Random data for every data declaration, in order, so sizes are known when needed.
// Every factor of `m`, lowered, differentiated and interpreted on random data and variables:
// each input group's gradient against finite differences (test_adjoint.cpp).
void check_adjoints(LoadedModel& m);

inline ir::Bindings random_bindings(const SemanticModel& m, const ir::Module& module, std::mt19937& rng,
                                    long long draws) {
  ir::Bindings b;
  std::normal_distribution<double> normal;
  auto size = [&](const SymSize& s) {
    return *s.eval([&](const std::string& n) -> std::optional<long long> {
      auto it = b.data.find(n);
      if (it == b.data.end()) return std::nullopt;
      return static_cast<long long>(it->second.m(0, 0));
    });
  };
  auto bound = [&](const ExprPtr& e, double fallback) -> double {
    if (!e) return fallback;
    if (e->kind == ExprKind::IntLit) return static_cast<double>(e->int_value);
    if (e->kind == ExprKind::RealLit) return e->real_value;
    if (e->kind == ExprKind::Var) return b.data.at(e->name).m(0, 0);
    return fallback;
  };
  // Small sizes, one per int data scalar, chosen so products stay small but shapes differ.
  std::vector<long long> sizes = {5, 3, 4, 2, 3};
  size_t next_size = 0;
  for (const Symbol& s : m.symbols) {
    // Transformed data computed when the data is read is data to the kernels.
    if (s.kind != SymbolKind::Data && !computed_at_load(s)) continue;
    const TypeDecl& t = s.decl->type;
    if (s.type.is_int()) {
      double lo = bound(t.lower, 0);
      long long v = std::max<long long>(static_cast<long long>(lo) + 1, sizes[next_size++ % sizes.size()]);
      if (t.upper) v = std::min<long long>(v, static_cast<long long>(bound(t.upper, v)));
      b.data[s.name] = ir::RealTensor::constant(static_cast<double>(v));
      continue;
    }
    long long rows = 1, cols = 1;
    if (!s.shape.dims.empty()) rows = size(s.shape.dims[0]);
    if (s.shape.dims.size() > 1) cols = size(s.shape.dims[1]);
    if (s.type.base == Base::RowVector) std::swap(rows, cols);
    ir::RealTensor v(rows, cols, 1);
    if (s.type.base == Base::Int) {
      double lo = bound(t.lower, 0), hi = bound(t.upper, lo + 4);
      std::uniform_int_distribution<long long> pick(static_cast<long long>(lo), static_cast<long long>(hi));
      for (Eigen::Index i = 0; i < v.m.size(); ++i) v.m.data()[i] = static_cast<double>(pick(rng));
    } else {
      for (Eigen::Index i = 0; i < v.m.size(); ++i)
        v.m.data()[i] = t.lower ? bound(t.lower, 0) + std::abs(normal(rng)) + 0.1 : normal(rng);
    }
    b.data[s.name] = v;
  }
  for (const ir::Group& g : module.groups) {
    long long n = size(g.size);
    ir::RealTensor x(n, 1, g.varies ? draws : 1);
    for (Eigen::Index i = 0; i < x.m.size(); ++i) x.m.data()[i] = 0.5 * normal(rng);
    b.inputs[fvi_group_name(g.kind)] = x;
  }
  return b;
}

}  // namespace fvic::test
