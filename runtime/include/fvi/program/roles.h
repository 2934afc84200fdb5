#pragma once
// The two sides of every federated run, apart from the transport: the server's run (rounds,
// progress, metrics.csv, posterior.json, checkpoints) and a silo host (a silo's data, its engine
// and the endpoint that answers for it). NAME-sim puts both in one process; NAME-server and
// NAME-client (runtime/net/) put them in different processes. Only the transport differs.
#include <memory>
#include <string>
#include <vector>

#include "fvi/data/dataset.h"
#include "fvi/engine/settings.h"
#include "fvi/program/federation.h"
#include "fvi/program/progress.h"
#include "fvi/program/sim.h"

namespace fvi::program {

struct ServerRun {
  const fvi_model& model;
  const ModelDescription& description;
  const engine::Settings& settings;
  const SimArguments& args;            // --output, --test, --quiet
  const std::string& method;           // pvi, sfvi, sfvi_avg, independent, vfl_exact, vfl_augmented, vfl_power
  const data::DataSet& public_data;
  const data::DataSet& server_data;    // the server's data merged with the public data
  Transport& transport;
  std::vector<std::string> silo_lines;  // one line per silo for the config echo (from the silos)
  std::string checkpoint;               // where to save the server's state each round ("" = never)
  bool resume = false;                  // start from `checkpoint` if it exists
  ProgressObserver* observer = nullptr; // told of each report and of the end (a status page)
  bool report_after_silos = false;      // NAME-sim writes report.html once its silos' folders exist
};

// A silo's side of a run.
class SiloHost {
 public:
  virtual ~SiloHost() = default;
  virtual SiloEndpoint& endpoint() = 0;
  // One line for the config echo: what the silo holds (sizes only; never values).
  virtual std::string describe() const = 0;
  // After the run: the silo's own outputs (local or split posteriors) under `dir`.
  virtual void finish(const std::string& dir) { (void)dir; }
  // The silo's columns of held-out rows (a vertical model's --test; merged with the public data).
  virtual void set_test_data(data::DataSet data) { (void)data; }
};

// The server's run of `method`; returns the program's exit status.
int serve(ServerRun& run);

// Silo `silo` (1-based) of `silos` for `method`; `data` is the silo's data merged with the
// public data (the host keeps it). `threads`: how many threads the silo's client may use (PVI
// splits each minibatch's rows between them; the other methods use one).
std::unique_ptr<SiloHost> make_silo_host(const fvi_model& model, const engine::Settings& settings,
                                         const std::string& method, data::DataSet data, int silo, int silos,
                                         int threads = 1);

// How many of `available` threads a silo of `method` uses: PVI's client splits its minibatches'
// rows between them (fvi/engine/row_parallel.h); the other methods run on one.
int silo_threads(const std::string& method, int available);

// The method a run uses: the `method` key, `auto` meaning the planned one; throws if unknown, or
// if a pooled model asks for one other than sfvi.
std::string run_method(const engine::Settings& settings, const ModelDescription& description, bool pooled_model);

// A model that declares no silo or split data: fitted pooled, by SFVI's engine with one silo
// that holds nothing (`fvic plan`: "pooled VI"), in NAME-sim alone.
bool pooled(const fvi_model& model);

}  // namespace fvi::program
