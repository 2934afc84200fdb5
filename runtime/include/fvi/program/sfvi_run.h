#pragma once
// The SFVI simulation (seed 002): one server and S silos in one process, for method = sfvi
// (Algorithm 1, optionally warm-started by `warm_start` rounds of SFVI-Avg), sfvi_avg
// (Algorithm 2) and independent (each silo fits its own data; no communication).
#include "fvi/engine/settings.h"
#include "fvi/program/sim.h"

namespace fvi::program {

int run_sfvi(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
             const SimArguments& args, const std::string& method);

}  // namespace fvi::program
