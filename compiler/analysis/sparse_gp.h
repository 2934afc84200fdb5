#pragma once
// A sparse GP regression, `y ~ sparse_gp_normal(x, Z, alpha, rho, sigma)` (seed 003): found in a
// checked model and checked against what the runtime's sparse-GP PVI fits (fvi/engine/sparse_gp.h).
// Where Z is declared says which of the paper's algorithms runs: a global parameter is random
// with its own factors (the hierarchical variational model, Algorithm 2), a hyperparameter is one
// point estimate the server averages (FedAvg, Algorithm 1), data fixes it.
#include <optional>
#include <string>

#include "frontend/diagnostics.h"
#include "frontend/semantic.h"

namespace fvic {

struct SparseGpArgument {
  enum class Kind { Parameter, Hyperparameter, Data, Number };
  Kind kind = Kind::Number;
  std::string name;  // the variable's ("" for a number)
  double value = 0;  // a number's
};

struct SparseGpModel {
  std::string outcome, inputs;                           // silo data y, x
  SparseGpArgument inducing, scale, lengthscale, noise;  // Z, alpha, rho, sigma
  int line = 0;
  SymSize rows, dimensions, inducing_points;             // N, D, M
  const Term* term = nullptr;
};

bool is_sparse_gp_term(const Term& t);

// The model's sparse GP; nullopt when it has none, or (with errors in diags and *ok false) when
// its sparse_gp_normal statement breaks a rule.
std::optional<SparseGpModel> find_sparse_gp(const SemanticModel& model, Diagnostics& diags, bool* ok);

}  // namespace fvic
