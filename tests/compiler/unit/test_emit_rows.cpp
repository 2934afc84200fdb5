// The C++ emitter reads a minibatch of a data matrix in place (fvi::kernel::row_block) when the
// matrix only feeds products, and copies its rows otherwise; an elementwise function of such a
// matrix that only feeds products is computed once, when the data are bound, and read likewise. What the in-place products compute
// is checked in tests/compiler/emitted/test_meanfield.cpp ("a minibatch's rows and gradients are
// the rows and partial sums of the full evaluation", which starts its batch at row 1) and
// tests/runtime/kernel/row_block_test.cpp.
#include <catch2/catch.hpp>

#include "backend/cpp/emit.h"
#include "test_models.h"
#include "pipeline.h"

namespace {

std::string emitted(const std::string& model) {
  fvic::test::LoadedModel m(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/" + model + ".fvi");
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  std::string cpp;
  REQUIRE(fvic::backend::emit_cpp(module, *m.model, cpp, m.diags));
  return cpp;
}

// The text of the member function `name` of the likelihood's class, up to the next one.
std::string function_body(const std::string& cpp, const std::string& name) {
  const size_t likelihood = cpp.find("class Factor_likelihood_y");
  REQUIRE(likelihood != std::string::npos);
  const size_t at = cpp.find("  void " + name + "(", likelihood);
  REQUIRE(at != std::string::npos);
  return cpp.substr(at, cpp.find("\n  }\n", at) - at);
}

}  // namespace

TEST_CASE("a batched data matrix that only feeds products is read in place, not copied", "[emit]") {
  const std::string cpp = emitted("robust_logreg");
  const std::string forward = function_body(cpp, "forward"), backward = function_body(cpp, "backward");
  CHECK(forward.find("matmul(row_block(data_x, begin_, count_), ") != std::string::npos);
  CHECK(forward.find("batch_rows_into(data_x") == std::string::npos);
  CHECK(backward.find("matmul_grad_right(row_block(data_x, begin_, count_), ") != std::string::npos);
  // y is the outcome, read by the fused log density: its batch is still copied.
  CHECK(forward.find("batch_rows_into(data_y, begin, count, ") != std::string::npos);
}

TEST_CASE("an elementwise function of a batched data matrix is computed once, when the data are bound",
          "[emit]") {
  // The mean-field pass squares x (local reparameterisation). x^2 is a function of the data alone:
  // the constructor computes it for every row, and each minibatch reads rows of it in place, as it
  // reads x, since both only feed products.
  for (const std::string model : {"robust_logreg", "bnn_classifier"}) {
    INFO(model);
    const std::string cpp = emitted(model);
    const size_t constructor = cpp.find("explicit Factor_likelihood_y(");
    REQUIRE(constructor != std::string::npos);
    const std::string bind = cpp.substr(constructor, cpp.find("\n  }\n", constructor) - constructor);
    CHECK(bind.find("hoisted_square_x_ = unary(\"square\", data_x);") != std::string::npos);
    CHECK(cpp.find("  Tensor<Real> hoisted_square_x_;") != std::string::npos);
    const std::string forward = function_body(cpp, "forward_meanfield");
    const std::string backward = function_body(cpp, "backward_meanfield");
    CHECK(forward.find("matmul(row_block(data_x, begin_, count_), ") != std::string::npos);
    CHECK(forward.find("matmul(row_block(hoisted_square_x_, begin_, count_), ") != std::string::npos);
    CHECK(backward.find("matmul_grad_right(row_block(hoisted_square_x_, begin_, count_), ") != std::string::npos);
    CHECK(forward.find("unary(\"square\", (full_ ? data_x") == std::string::npos);  // not squared per call
    CHECK(forward.find("batch_rows_into(data_x") == std::string::npos);
    CHECK(forward.find("batch_rows_into(hoisted_") == std::string::npos);
  }
}
