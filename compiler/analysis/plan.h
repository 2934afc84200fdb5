#pragma once
// The decomposition planner (DESIGN.md §3): reads the plate and ownership structure of a
// checked model, chooses PVI/FedGVI, SFVI (or SFVI-Avg, independent), or the vertical AXDA
// augmented / power-likelihood model, and lists the messages each party sends each iteration —
// the privacy audit a data owner signs off.
#include <optional>
#include <string>
#include <vector>

#include "analysis/conjugacy.h"
#include "analysis/data_sizes.h"
#include "analysis/sparse_gp.h"
#include "frontend/semantic.h"

namespace fvic {

enum class Method {
  PVI, FedAvg, FedVEM, FedAvgFSVI, FedVEMHSVI, SFVI, SFVIAvg, Independent, VFLExact, VFLAugmented, VFLPower
};
inline bool is_vertical(Method m) { return m == Method::VFLExact || m == Method::VFLAugmented || m == Method::VFLPower; }
// Seed 001's server aggregations: FedAvg's pseudo-gradient (Algorithms 1 and 3) and FedVEM's
// moment matching (Algorithms 2 and 5); the FSVI and HSVI methods put the linearised
// function-space KL at context points in the local objective (fvi/engine/function_space.h).
inline bool fedavg_aggregation(Method m) { return m == Method::FedAvg || m == Method::FedAvgFSVI; }
inline bool fedvem_aggregation(Method m) { return m == Method::FedVEM || m == Method::FedVEMHSVI; }
inline bool averaged(Method m) { return fedavg_aggregation(m) || fedvem_aggregation(m); }
inline bool function_space(Method m) { return m == Method::FedAvgFSVI || m == Method::FedVEMHSVI; }
// The methods PVI's engine runs: the same silos, another server aggregation for seed 001's.
inline bool pvi_engine(Method m) { return m == Method::PVI || averaged(m); }
const char* method_key(Method m);    // "pvi", "sfvi", ...
const char* method_title(Method m);  // "PVI (partitioned variational inference)"

struct Message {
  std::string from;     // "server", "silo k"
  std::string to;
  std::string content;  // what is sent, in words
  SymSize doubles;      // how many numbers, symbolic in data sizes
  int phase = 1;        // messages of one phase are sent together; VFL power has two
};

struct Plan {
  std::string model;
  Method method = Method::PVI;
  // No data is held by silos (every data block public or the server's): one party fits the model
  // with SFVI's engine and one silo that holds nothing, in one process; nothing is sent.
  bool pooled = false;
  std::vector<std::string> reasons;  // why this method, each with a line reference
  std::string family;
  Conjugacy conjugacy;               // meaningful for PVI
  // Once, before the first iteration: SFVI's centring of the silos' data (analysis/centring.h).
  std::vector<Message> opening;
  std::vector<Message> messages;     // one iteration
  // Once, after the last iteration: Pareto k-hat scores q's draws by the written model's log
  // joint, each party evaluating its own terms (issue 26).
  std::vector<Message> closing;
  // Now and then, for the stopping rule (fvi/optim/convergence.h): the silos' step size and
  // average when they change, and (SFVI with locals) each silo's judgement of its locals.
  std::vector<Message> rule;
  std::vector<std::string> never_leaves;  // what stays inside each silo
  std::vector<std::string> server_keeps;  // what stays on the server
  std::vector<std::string> notes;         // settings that have no effect with this method, ...
  // Of the notes, the settings given that this method ignores: `fvic run` warns of them too.
  std::vector<std::string> ignored_settings;
  // A split model: each vertical method that could fit it, what it fits and reveals, and its
  // numbers per silo per iteration (from add_messages, as the chosen method's), side by side.
  struct Option {
    std::string method, fits;
    SymSize doubles;
  };
  std::vector<Option> vertical_options;
  // A sparse GP (`y ~ sparse_gp_normal(...)`, seed 003): PVI over the globals with each silo's
  // pseudo-observations over the inducing outputs (analysis/sparse_gp.h).
  std::optional<SparseGpModel> sparse_gp;
};

// Chooses the method; an explicit `method =` that cannot handle the model is an error that says
// why and what would work. Returns false if it reported an error.
bool make_plan(const SemanticModel& model, Diagnostics& diags, Plan& plan);

// `fvic plan` output. With sizes, each message also shows its doubles and bytes per silo.
std::string plan_text(const Plan& plan, const SemanticModel& model, const DataSizes* sizes);
std::string plan_json(const Plan& plan, const SemanticModel& model, const DataSizes* sizes);

}  // namespace fvic
