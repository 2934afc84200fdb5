#pragma once
// The vertical simulation (seed 004): one server and S silos in one process for method =
// vfl_augmented (Algorithm 1: labels on the server) and vfl_power (Algorithm 2: labels public).
// Every message is counted as the bytes it would be on the network.
#include "fvi/engine/settings.h"
#include "fvi/program/sim.h"

namespace fvi::program {

int run_vfl(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
            const SimArguments& args, const std::string& method);

}  // namespace fvi::program
