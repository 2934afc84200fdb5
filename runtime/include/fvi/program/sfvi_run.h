#pragma once
// SFVI runs (seed 002): method = sfvi (Algorithm 1, optionally warm-started by `warm_start`
// rounds of SFVI-Avg), sfvi_avg (Algorithm 2) and independent (each silo fits its own data and
// sends only its progress): the server's side and a silo's side.
#include <memory>

#include "fvi/program/roles.h"

namespace fvi::program {

int serve_sfvi(ServerRun& run);
std::unique_ptr<SiloHost> sfvi_silo_host(const fvi_model& model, const engine::Settings& settings,
                                         const std::string& method, data::DataSet data, int silo, int silos);

}  // namespace fvi::program
