#pragma once
// PVI / FedGVI runs (spec 000 Algorithms 1-2), and FedAvg and FedVEM (seed 001 Algorithms 1-2),
// which share PVI's silo and differ in the server's aggregation: the server's side and a silo's.
#include <memory>

#include "fvi/program/roles.h"

namespace fvi::program {

// run.method: pvi, fedavg or fedvem.
int serve_pvi(ServerRun& run);
std::unique_ptr<SiloHost> pvi_silo_host(const fvi_model& model, const engine::Settings& settings, data::DataSet data,
                                        int silo, int silos, int threads = 1, const std::string& method = "pvi");

}  // namespace fvi::program
