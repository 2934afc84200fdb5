#pragma once
// Sparse GP runs (seed 003; fvi/engine/sparse_gp.h): the server's side and a silo's side of a
// model with `y ~ sparse_gp_normal(x, Z, alpha, rho, sigma)`, under method = pvi.
#include <memory>

#include "fvi/engine/sparse_gp.h"
#include "fvi/program/roles.h"

namespace fvi::program {

// Where Z, alpha, rho and sigma sit in the global parameters, or their values (from `data`, the
// public data merged into the party's), as the model's fvi_sparse_gp names them. Throws
// ModelError when the model's declarations do not fit (fvic check refuses such a model first).
engine::SparseGpLayout sparse_gp_layout(const fvi_model& model, const fvi_data& data);

int serve_sparse_gp(ServerRun& run);
std::unique_ptr<SiloHost> sparse_gp_silo_host(const fvi_model& model, const engine::Settings& settings,
                                              data::DataSet data, int silo, int silos);

}  // namespace fvi::program
