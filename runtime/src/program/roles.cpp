#include "fvi/program/roles.h"

#include <stdexcept>

#include "fvi/engine/pvi.h"
#include "fvi/program/pvi_run.h"
#include "fvi/program/sfvi_run.h"
#include "fvi/program/sparse_gp_run.h"
#include "fvi/program/vfl_run.h"

namespace fvi::program {

std::string run_method(const engine::Settings& settings, const ModelDescription& description, bool pooled_model) {
  std::string method = settings.name("method", description.method);
  if (method == "auto") method = description.method;
  // The written model was planned, but the command line asks for AXDA's rho or a q(z).
  if (method == "vfl_exact" && !settings.overridden("method") &&
      (settings.overridden("rho") || (settings.overridden("q_z") && settings.name("q_z", "none") != "none")))
    method = "vfl_augmented";
  if (pooled_model && method != "sfvi")
    throw std::invalid_argument("method = " + method + " needs data held by silos; this model declares none and is "
                                "fitted pooled (method = sfvi)");
  for (const char* known :
       {"pvi", "fedavg", "fedvem", "fedavg_fsvi", "fedvem_hsvi", "sfvi", "sfvi_avg", "independent", "vfl_exact",
        "vfl_augmented", "vfl_power"})
    if (method == known) return method;
  throw std::invalid_argument("method = " + method + " is not implemented in the generated programs yet");
}

bool pooled(const fvi_model& model) {
  if (!model.data_table) return false;
  for (int i = 0; i < model.data_table->declaration_count; ++i) {
    const int party = model.data_table->declarations[i].party;
    if (party == FVI_DATA_SILO || party == FVI_DATA_SPLIT) return false;
  }
  return true;
}

namespace {

// A sparse GP's likelihood is not a factor the other methods' engines could see: they would fit
// the prior alone.
void require_pvi_for_sparse_gp(const fvi_model& model, const std::string& method) {
  if (model.sparse_gp && method != "pvi")
    throw std::invalid_argument("method = " + method + " cannot fit a sparse GP; it is fitted by method = pvi (seed 003)");
}

}  // namespace

int serve(ServerRun& run) {
  require_pvi_for_sparse_gp(run.model, run.method);
  if (run.method == "pvi" && run.model.sparse_gp) return serve_sparse_gp(run);
  if (engine::pvi_engine_method(run.method)) return serve_pvi(run);
  if (run.method == "sfvi" || run.method == "sfvi_avg" || run.method == "independent") return serve_sfvi(run);
  return serve_vfl(run);
}

int silo_threads(const std::string& method, int available) {
  return engine::pvi_engine_method(method) ? available : 1;
}

std::unique_ptr<SiloHost> make_silo_host(const fvi_model& model, const engine::Settings& settings,
                                         const std::string& method, data::DataSet data, int silo, int silos,
                                         int threads) {
  require_pvi_for_sparse_gp(model, method);
  if (method == "pvi" && model.sparse_gp) return sparse_gp_silo_host(model, settings, std::move(data), silo, silos);
  if (engine::pvi_engine_method(method))
    return pvi_silo_host(model, settings, std::move(data), silo, silos, threads, method);
  if (method == "sfvi" || method == "sfvi_avg" || method == "independent")
    return sfvi_silo_host(model, settings, method, std::move(data), silo, silos);
  return vfl_silo_host(model, settings, method, std::move(data), silo, silos);
}

}  // namespace fvi::program
