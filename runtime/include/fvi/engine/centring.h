#pragma once
// A global intercept fitted at the silos' centred data (fvi_variable_info.centring_data;
// compiler/analysis/centring.h).
//
// The model reads silo data x only as `x * W + b`. The fit's coordinates are (W, b_c) with
// b_c = b + xbar W, xbar x's pooled column means: every silo scores its rows at x - xbar with b_c
// in b's place (the same value, (x - xbar) W + b_c = x W + b), and every other term (the priors,
// on the server) is evaluated at the written b = b_c - xbar W. The map has unit Jacobian, so q
// over (W, b_c) fits the written model's posterior exactly; what a raw x far from 0 makes a ridge
// (b and W trading off) is then nearly independent. Outputs are mapped back to b.
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "fvi/family/structured_gaussian.h"
#include "fvi/kernel/abi.h"

namespace fvi::engine {

// One intercept b (K values) and its coefficient W (D x K, column-major), within the globals; or a
// hierarchy's intercepts of G groups (a vector[G] read as a[g]), each shifted by the same xbar W
// (K = 1, W a real or vector[D]).
struct CentringBlock {
  std::string data;               // x's name: N x D silo data (N x 1 with D = 1 when W is a real)
  // Further x read with the same W in other sums of the intercept (`u + beta * age_obs`, `u + beta *
  // age_cen`: FVI_ABI_VERSION 16), each of D columns: every part is centred at the pooled means of
  // them all (their rows stacked), one shift of the intercept. `data` names the exchange.
  std::vector<std::string> companions;
  std::string intercept_name, coefficient_name;  // b's and W's
  Eigen::Index intercept = 0;     // b's offset in the global group
  Eigen::Index coefficient = 0;   // W's offset
  Eigen::Index columns = 0;       // D
  Eigen::Index classes = 0;       // K
  Eigen::VectorXd means;          // xbar (D): empty until the silos' sums are in
  Eigen::VectorXd scales;         // pooled_scales of x (D), the server's alone: empty, none (to_step_coordinates)
  Eigen::Index groups = 1;        // G: the values intercept .. intercept + G - 1 of each class (then K = 1)
  // A silo's groups' intercepts each at its own mean of x (local_slope_blocks): g's name, each row's
  // group; then `means` holds G values, D = K = 1, and group c's slope is coefficient + c
  // (slope_per_group, `b[g] .* x`) or coefficient (one local real slope, `b * x`). "" otherwise.
  std::string group_data;
  bool slope_per_group = false;
  // The intercept's values (K * G) and the one of class k and group g.
  Eigen::Index intercepts() const { return classes * groups; }
  Eigen::Index intercept_at(Eigen::Index k, Eigen::Index g) const { return intercept + k * groups + g; }
  bool group_means() const { return !group_data.empty(); }
  // x and its companions, and whether `name` is one of them.
  std::vector<std::string> parts() const;
  bool centres(const std::string& name) const;
  // "x", "x and v" (conjunction " or ": "x or v"): the parts, for what a run prints.
  std::string data_text(const char* conjunction = " and ") const;
  // Group g's slope, where group_means().
  Eigen::Index slope_at(Eigen::Index g) const { return coefficient + (slope_per_group ? g : 0); }
};

// The blocks of `model` given its data (the server's or a silo's: the shapes come from the
// parameters' declarations); nothing from a model older than FVI_ABI_VERSION 13, and no block
// whose place or shape is not as the compiler's analysis promises.
std::vector<CentringBlock> centring_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index global_dim);

// The blocks that centre each x, one per x, first seen first: what the exchange of sums and means
// runs over (a global vector of groups' intercepts and its location are two blocks of one x).
std::vector<const CentringBlock*> one_block_per_data(const std::vector<CentringBlock>& blocks);
// Every block of x takes `means` (and `scales`, when given).
void set_data_means(std::vector<CentringBlock>& blocks, const std::string& x, const Eigen::VectorXd& means);
void set_data_scales(std::vector<CentringBlock>& blocks, const std::string& x, const Eigen::VectorXd& scales);

// x's column sums in `data` (D values) and its rows, its companions' added: a silo's part of the
// pooled means. Throws std::invalid_argument, naming x, when `data` holds no x of D columns.
Eigen::VectorXd column_sums(const CentringBlock& block, const fvi_data& data, int64_t& rows);

// x - xbar in place: `values` is x's tensor, rows x D column-major.
void centre_columns(const CentringBlock& block, double* values, int64_t rows);

// The column sums of squares of x (and its companions) in `data` (D values), a silo's part of the pooled variances once
// x is centred (two passes: no cancellation at a column's mean far from 0, as age in years).
Eigen::VectorXd column_sums_of_squares(const CentringBlock& block, const fvi_data& data);

// Each column's step scale from the silos' summed squares of x - xbar and their rows: its pooled
// sd where that exceeds 1, else 1. Only a wide column's coefficient is walked in smaller steps: a
// narrow one's (pixels in [0, 1]) is slow to move, never unstable, and its prior, on the written
// coefficient, is what bounds it (a constant column, sd 0, and no rows keep 1 too).
Eigen::VectorXd pooled_scales(const Eigen::VectorXd& sums_of_squares, double rows);

// ---- the optimiser's steps at the data's scale -------------------------------------------------
//
// Adam steps every coordinate by about its learning rate whatever the gradient's size, so the
// coefficient of a column with sd s (age in years: s = 10) is walked in steps s times too large for
// its posterior and its q sd starts s times too wide: x * W moves by s times what a standardised
// column's would (brms and rstanarm standardise for the same reason). In step coordinates q's mean
// of each W_jk is s_j W_jk (s_j from pooled_scales: the sd of a column wider than 1): the
// coefficient of the standardised column, in which Adam takes its steps (and the mean's step
// limit, half q's sd, is scaled with it); log-sds and the unit-lower factor are unchanged by a
// scaling, so nothing else moves. The objective, its optimum and q are the same: only the
// coordinates Adam walks in. `params` is the optimiser's vector with q's means first, `limit`
// Adam's per-coordinate step limit (empty: none).
void to_step_coordinates(const std::vector<CentringBlock>& blocks, Eigen::VectorXd& params, Eigen::VectorXd& gradient,
                         Eigen::VectorXd& limit);
void from_step_coordinates(const std::vector<CentringBlock>& blocks, Eigen::VectorXd& params);
// q's starting log-sds of the coefficients, init_sd in step coordinates: log(init_sd / s_j) at each
// W_jk of a block with scales (set, not shifted: a second call leaves them as the first did).
void set_starting_sds(const std::vector<CentringBlock>& blocks, double init_sd, Eigen::Ref<Eigen::VectorXd> log_sd);

// Draws (or means) of the globals, one per column, from the fit's coordinates to the written
// model's (b = b_c - xbar W) and back. Blocks without means are left alone.
void to_written(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> z);
void to_fit(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> z);
// A gradient with respect to the written globals, one per column, made the gradient with respect
// to the fit's (the transpose of the map: dW_c = dW - xbar db, db_c = db).
void pull_back(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> gradient);
// The marginal sds of q's written globals (q over the fit's coordinates).
Eigen::VectorXd written_sd(const std::vector<CentringBlock>& blocks, const StructuredGlobalGaussian<double>& q);

// ---- a hierarchy's local intercept (compiler/analysis/centring.h local_centring_of) -----------
//
// `a ~ normal(mu, tau)`, `a + x * W`, a a silo's local: mu is a centred global (mu_c = mu + xbar
// W) and a is shifted with it, a_c = a + xbar W, so that the silo's factors at the centred x read
// a_c - mu_c = a - mu and a_c + (x - xbar) W = a + x W: the written model's, with no map at all.
// Only the silo's outputs map a_c back. Here a CentringBlock's `intercept` is a's offset among
// the locals, `coefficient` W's among the globals.

// The silo's blocks, each with the means of the global block (`pooled`, means set) of its x and W;
// a local block without one is left out (its data was not centred).
std::vector<CentringBlock> local_centring_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index global_dim,
                                                 Eigen::Index local_dim, const std::vector<CentringBlock>& pooled);
// Local draws (m x KS, K per column of z_global's n x S) from the fit's coordinates to the written.
void locals_to_written(const std::vector<CentringBlock>& blocks, const Eigen::MatrixXd& z_global,
                       Eigen::Ref<Eigen::MatrixXd> z_local);
// The written locals' coupling to the globals' offsets (m x n): q's C_j (empty: none) less xbar
// at each a's coefficient, so a - E a = T u + (the locals' own noise).
Eigen::MatrixXd written_local_coupling(const std::vector<CentringBlock>& blocks, const Eigen::MatrixXd& coupling,
                                       Eigen::Index local_dim, Eigen::Index global_dim);

// ---- a silo's local intercept of its own local slopes (local_slope_centring_of) -------------
//
// `a + b * x`, a and b a silo's locals: the silo fits a_c = a + xbar b, xbar its own column means
// of x (from its own data: nothing is sent, and the data is not changed), and its terms are
// evaluated at the written a = a_c - xbar b (LogDensity::set_local_map, the gradient pulled back
// to the fit's coordinates), so any prior on a is the written one. Here `intercept` is a's
// offset among the locals and `coefficient` b's, also among the locals: to_written, to_fit and
// pull_back apply to a matrix of local draws as they do to the globals'.
//
// A vector of groups' intercepts (`a[g] + b[g] .* x`, fvi_variable_info.centring_group) is fitted
// at a_c[c] = a[c] + xbar_c b[c], xbar_c the mean of x over the silo's rows of group c (0 for a
// group without rows: no shift), each group's own ridge taken away.

// The silo's blocks of `model` given its own `data` (means set); a block of a silo without rows
// and a chain (one block's slope another's intercept, which the compiler does not mark) are left
// out. Throws std::invalid_argument, naming g and the row, for a group index outside 1..G.
std::vector<CentringBlock> local_slope_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index local_dim);
// "a + x * b at the silo's own column means" ("a[g] + x * b[g] at each group's own mean") for each
// local intercept of local slopes the model marks: the server's header names them (it holds no
// silo's data; each silo finds its blocks with local_slope_blocks).
std::vector<std::string> local_slope_sums(const fvi_model& model);

}  // namespace fvi::engine
