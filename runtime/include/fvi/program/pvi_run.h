#pragma once
// The PVI / FedGVI simulation: one server and S silos in one process (spec 000 Algorithms 1-2).
#include "fvi/engine/settings.h"
#include "fvi/program/sim.h"

namespace fvi::program {

int run_pvi(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
            const SimArguments& args);

}  // namespace fvi::program
