#pragma once
// The files a run writes (DESIGN.md §5): posterior.json (means and sds of the declared variables
// on their constrained scale, elements row-major), draws.csv (CmdStan's variational layout, so
// rstan::read_stan_csv, CmdStanPy, ArviZ and R's posterior and loo packages read it) and
// metrics.csv (one row per round).
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/engine/settings.h"
#include "fvi/kernel/abi.h"
#include "fvi/program/federation.h"

namespace fvi::program {

// One declared variable of a group, resolved against the data's sizes.
struct VariableLayout {
  std::string name;
  int64_t offset = 0;
  std::vector<int64_t> dims;  // as declared: [] scalar, [n] vector, [r, c] matrix
  int transform = FVI_IDENTITY;
  double lower = 0, upper = 0;
  int64_t elements() const;
};

// A declared bound as fvi_variable_info and fvi_quantity_info give it: `literal`, or when
// `data_name` is not empty that data scalar's value. Throws std::runtime_error naming `variable`
// when the data has no such scalar.
double bound_value(const char* data_name, double literal, const fvi_data& data, const std::string& variable);

// The CSV column names of v's elements in storage order, as CmdStan writes them: beta.1, W.2.3;
// matrices column-major.
std::vector<std::string> element_names(const VariableLayout& v);

// Coordinate i of the unconstrained vector `layout` lays out, by name, with the series the
// stopping rule judged: "beta.3.2's mean", "sigma's sd" ("" where i is no variable's, or one
// whose unconstrained values are not its elements).
std::string coordinate_name(const std::vector<VariableLayout>& layout, int64_t i, bool sd);

// The variables of `group` (FVI_GROUP_GLOBAL, ...) in declaration order.
std::vector<VariableLayout> variable_layout(const fvi_model& model, fvi_group group, const fvi_data& data);

// Unconstrained draws (size x S) to the declared supports.
Eigen::MatrixXd constrain(const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& unconstrained);

struct PosteriorSummary {
  std::string model, method;
  int silos = 0, rounds = 0;
  std::vector<double> elbo;
  // The stopping rule's verdict (written when `iterations` > 0) and the quality diagnostic
  // (written when finite): the server's posterior.json carries them.
  long iterations = 0;
  bool converged = false;
  double relative_change = -1, drift = -1, precision = -1;
  double tol = -1, tol_param = -1;  // the rule's tolerances (written beside its figures)
  double khat = std::numeric_limits<double>::quiet_NaN();
  // k-hat's reading for the report ("" to read it by its value alone): where the tail check finds
  // q's moments close despite a k-hat over 0.7, it says so rather than "poor".
  std::string khat_reading = {};
  // q is the ELBO's q moved to the posterior's moments (fvi/program/moment_correction.h).
  bool moments_corrected = false;
  // A silo's posterior.json: k-hat of q(Z_L | Z_G) against its locals' posterior given the globals
  // (SfviSilo::locals_khat), written when finite.
  double locals_khat = std::numeric_limits<double>::quiet_NaN();
  long locals_poor = 0;  // the elements whose k-hat exceeds 0.7 (written with locals_khat)
  // The lines the run ended with ({"warning" or "info", text}): the verdict, k-hat, the
  // reweighted moments, the warnings.
  std::vector<std::pair<std::string, std::string>> notes = {};
};

// Writes posterior.json with each variable's mean and sd computed from `draws` (constrained,
// size x S); for identity transforms the exact `mean` and `sd` of q are used instead.
void write_posterior_json(const std::string& path, const PosteriorSummary& summary,
                          const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& draws,
                          const Eigen::VectorXd& mean, const Eigen::VectorXd& sd);

// draws.csv in the layout CmdStan writes for method = variational: its comment block (fvic's
// settings mapped onto CmdStan's keys, fvic's own figures as `# fvic_<key> = value`, every
// setting as `# fvic_set_<key> = value`), the header, a first row holding q's mean (lp__,
// log_p__, log_g__ = 0), then one row per draw. A `data` entry of `fvic` names the data directory
// (CmdStan's data file). Written in draws_csv.cpp, beside its reader (draws_csv.h).
struct DrawsFile {
  std::string model;
  std::vector<VariableLayout> layout;
  Eigen::VectorXd mean;          // q's mean mapped to the constrained scale (CmdStan's first row)
  Eigen::MatrixXd draws;         // constrained draws, layout size x S
  Eigen::VectorXd log_p, log_g;  // per draw, unconstrained scale; empty -> written as 0
  std::vector<std::pair<std::string, std::string>> config;  // the run's settings (key = value)
  std::vector<std::pair<std::string, std::string>> fvic;    // fvic's own: method, iterations, converged, khat, ...
};
void write_draws_csv(const std::string& path, const DrawsFile& file);

// OUT/model.fvi and OUT/plan.json, for `fvic report`: each written when not null.
void write_model_files(const std::string& dir, const char* source, const char* plan_json);

// Removes the results a previous run left in `dir` (posterior.json, draws.csv), and in its
// silo-K folders when `silo_folders`, before a run starts: a run that fails must not leave
// another run's posterior beside its own metrics (issue 27 item 10).
void clear_previous_results(const std::string& dir, bool silo_folders);

// "812 B", "7453.6 kB", "12.3 MB".
std::string human_bytes(long long bytes);

// A progress line's note that its figure lacks some silos' part: " (2 silo replies missing)",
// or "" when `count` is 0. `what` names what is missing ("silo terms", "silo replies").
std::string missing_note(long count, const char* what);

// Draws written to draws.csv: output_draws, or by default 1000 (CmdStan's) but no more than keep
// the file near 10 million values, and at least 10.
long output_draws(const engine::Settings& settings, Eigen::Index parameters);

class MetricsWriter {
 public:
  // append: continue a resumed run's file (its header is already there).
  explicit MetricsWriter(const std::string& path, bool append = false);
  void row(int round, double elbo, double seconds, long long bytes_sent, long long bytes_received,
           const std::vector<std::pair<std::string, double>>& extra = {});

 private:
  std::ofstream out_;
  bool header_written_ = false;
};

// silos.csv, beside metrics.csv: at each of its rows, one row per silo with what the transport
// counted so far (round, silo, bytes_sent, bytes_received, missing_replies, refused_replies) and
// the silo's mean term of the objective since the last row (objective_term; NaN where the method
// has none), so a report shows each silo's traffic, the rounds that went on without it, the
// replies refused and what it adds to the objective.
class SiloMetricsWriter {
 public:
  explicit SiloMetricsWriter(const std::string& path, bool append = false);
  // terms: each silo's mean term of the objective since the last report (empty: none, written NaN).
  void rows(int round, const std::vector<SiloTraffic>& traffic, const std::vector<double>& terms);

 private:
  std::ofstream out_;
};

}  // namespace fvi::program
