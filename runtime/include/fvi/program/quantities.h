#pragma once
// Transformed parameters and generated quantities (kernel ABI "Quantities"): each evaluated at
// the posterior's output draws by the party that may read what it reads. The server computes
// those of the globals (and public or server data) and writes them beside the parameters in
// posterior.json, draws.csv and the summary; each silo those of its locals and its data, into its
// own silo-K/posterior.json, never sent.
#include <map>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/kernel/abi.h"
#include "fvi/program/output.h"

namespace fvi::program {

struct QuantityDraws {
  std::vector<VariableLayout> layout;  // offsets into `values`, from `first_offset`
  Eigen::MatrixXd values;              // elements x S
  // A declared bound a value broke: "tau2 = -0.31 at draw 12 (global: mu = 0.2, tau = 1.3) is
  // below its lower bound 0"; one line per quantity, with how many draws broke it.
  std::vector<std::string> violations;
};

// Each group's values at the draws, unconstrained: FVI_GROUP_GLOBAL -> size x S, FVI_GROUP_LOCAL
// -> size x S, a point-estimated group (FVI_GROUP_HYPER) -> size x 1.
using GroupDraws = std::map<fvi_group, Eigen::MatrixXd>;

// The quantities `owner` (FVI_SERVER, FVI_SILO) computes, at the draws in `groups`, with that
// party's data. `named` and `named_values` (a layout and its constrained values, size x S) name a
// violating draw's parameters. A quantity reading a group `groups` lacks is listed in `skipped`
// with why. Layout offsets start at `first_offset`. Random draws (`dist_rng`) come from
// `noise_key` (each quantity its own key derived from it). Throws ModelError when a call fails.
QuantityDraws evaluate_quantities(const fvi_model& model, int owner, const fvi_data& data, const GroupDraws& groups,
                                  const std::vector<VariableLayout>& named, const Eigen::MatrixXd& named_values,
                                  int64_t first_offset, uint64_t noise_key, std::vector<std::string>& skipped,
                                  bool silo_sum_parts = false);

// The generated quantities `t = silo_sum(e)` (fvi_quantity_info.aggregate): each silo computes
// its part e at the server's closing draws and sends it with its log likelihood there (the plan's
// closing messages); the server writes the sum beside its own quantities.
int silo_sum_count(const fvi_model& model);

// What one draw's matrix breaks of a declared structure (transform FVI_CHOLESKY_CORR,
// FVI_CHOLESKY_COV, FVI_CORR_MATRIX or FVI_COV_MATRIX), as "is not a corr_matrix: ...", or "".
std::string structure_violation(int transform, const Eigen::MatrixXd& m);

// Silo `silo`'s parts at the draws in `groups`: one row per silo_sum quantity, in declaration
// order, `draws` columns; a part the silo cannot compute (it reads a group `groups` lacks) is NaN.
Eigen::MatrixXd silo_sum_parts(const fvi_model& model, const fvi_data& data, int silo, const GroupDraws& groups,
                               uint64_t seed, Eigen::Index draws);

// A silo's parts on the wire: appended to its closing reply row by row, and added from a reply
// (at `parts`, rows x S of `sums`) into the server's sums.
void append_parts(const Eigen::MatrixXd& parts, std::vector<double>& reply);
void add_parts(const double* parts, Eigen::MatrixXd& sums);

// The server's silo_sum quantities from the sum of the silos' parts (one row each), laid out
// from `first_offset`, their declared bounds checked with the server's data.
QuantityDraws silo_sums(const fvi_model& model, const fvi_data& data, const Eigen::MatrixXd& sums,
                        const std::vector<VariableLayout>& named, const Eigen::MatrixXd& named_values,
                        int64_t first_offset);

// Silo `silo`'s own quantities at the draws in `groups`, appended to its outputs' `layout` and
// `values` (constrained, size x S); random draws from the silo's own key (the run's seed and the
// silo: its replicates differ from the server's and the other silos'). A broken bound is reported
// on stderr as an error naming the silo, a quantity it cannot compute as a note. `owner` is
// FVI_SILO (a horizontal silo's) or FVI_SPLIT_SILO (a vertical silo's, of its split block).
void add_silo_quantities(const fvi_model& model, const fvi_data& data, int silo, const GroupDraws& groups,
                         uint64_t seed, std::vector<VariableLayout>& layout, Eigen::MatrixXd& values,
                         int owner = FVI_SILO);

// `layout` and `values` (constrained, size x S) with `q`'s quantities appended after them.
void append_quantities(const QuantityDraws& q, std::vector<VariableLayout>& layout, Eigen::MatrixXd& values);

}  // namespace fvi::program
