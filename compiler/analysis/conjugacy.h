#pragma once
// Conjugacy detection (DESIGN.md §3): a PVI client's local problem has a closed form when every
// global has a Gaussian prior with fixed arguments and the one likelihood is Gaussian, linear in
// the globals, with known noise — and the loss is the NLL (or weighted score matching) and the
// divergence KL. The generated client then solves the update exactly.
#include <string>

#include "frontend/semantic.h"

namespace fvic {

struct Conjugacy {
  bool closed_form = false;
  std::string reason;  // why it holds, or the first thing that rules it out
};

// `family`: the plan's (written or default) PVI family.
// divergence_applies: false where the method sets the divergence itself (fedavg, fedvem: a KL).
Conjugacy detect_conjugacy(const SemanticModel& model, const std::string& family, bool divergence_applies = true);

// True when `e` is affine in the parameters named by `is_param`, with data coefficients.
bool is_affine_in_parameters(const Expr& e, const SemanticModel& model);

}  // namespace fvic
