#pragma once
// PVI / FedGVI runs (spec 000 Algorithms 1-2): the server's side and a silo's side.
#include <memory>

#include "fvi/program/roles.h"

namespace fvi::program {

int serve_pvi(ServerRun& run);
std::unique_ptr<SiloHost> pvi_silo_host(const fvi_model& model, const engine::Settings& settings, data::DataSet data,
                                        int silo, int silos, int threads = 1);

}  // namespace fvi::program
