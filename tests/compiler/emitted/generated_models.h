#pragma once
// The acceptance models whose generated kernels are compiled into emitted_kernels_test, and a
// loader giving each one's IR, random data and inputs (unit/test_models.h) for the ABI tests.
#include <random>
#include <string>

#include "fvi/kernel/abi.h"
#include "test_models.h"
#include "pipeline.h"

#define FVI_MODELS(X)                                                                                   \
  X(bnn_classifier) X(clutter) X(glmm_sixcities) X(hier_logreg) X(linreg_conjugate) X(multinomial_eb) \
  X(robust_logreg) X(split_nn) X(vfl_logreg) X(vfl_logreg_power) X(vfl_poisson_multilevel)

#define FVI_DECLARE_MODEL(name) extern "C" const fvi_model* fvi_model_##name(void);
FVI_MODELS(FVI_DECLARE_MODEL)
#undef FVI_DECLARE_MODEL

namespace fvic::test {

// An acceptance model checked and lowered, with random data and inputs (`draws` draws).
struct ModelCase {
  ModelCase(const std::string& name, unsigned seed, long long draws)
      : loaded(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/" + name + ".fvi") {
    REQUIRE(loaded.ok());
    REQUIRE(build_ir(*loaded.model, module, loaded.diags));
    std::mt19937 rng(seed);
    bindings = random_bindings(*loaded.model, module, rng, draws);
  }
  LoadedModel loaded;
  ir::Module module;
  ir::Bindings bindings;
};

}  // namespace fvic::test
