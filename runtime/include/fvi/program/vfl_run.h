#pragma once
// Vertical runs (seed 004): method = vfl_augmented (Algorithm 1: labels on the server) and
// vfl_power (Algorithm 2: labels public): the server's side and a silo's side.
#include <memory>

#include "fvi/program/roles.h"

namespace fvi::program {

int serve_vfl(ServerRun& run);
std::unique_ptr<SiloHost> vfl_silo_host(const fvi_model& model, const engine::Settings& settings,
                                        const std::string& method, data::DataSet data, int silo, int silos);

}  // namespace fvi::program
