#pragma once
// The priors a model states with numbers: model-block statements `x ~ dist(literals)` on a
// whole parameter (not a simplex or an ordered vector), with the parameter's literal bounds. The
// plan carries them (plan.json's "stated_priors") so that a run's report draws each marginal's
// prior beside it (fvi/report/report_data.h); nothing else reads them.
#include <nlohmann/json.hpp>

#include "frontend/ast.h"

namespace fvic {

// [{"variable", "distribution", "arguments": [...], "lower": x or null, "upper": x or null}, ...]
nlohmann::ordered_json stated_priors_json(const Program& program);

}  // namespace fvic
