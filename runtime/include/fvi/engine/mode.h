#pragma once
// The mode of a log density on the unconstrained scale and its curvature there: Newton's method
// with a finite-difference Hessian and Levenberg damping (any log density whose gradient is
// known), for starting a variational fit at its Laplace approximation. A fit started there does
// not have to travel: a regression with unstandardised predictors has its posterior 10^4 of its
// own sds from the origin along a ridge of condition 10^7, which first-order steps cross in
// millions of iterations (posteriordb's earnings, kilpisjarvi).
#include <functional>
#include <stdexcept>
#include <cmath>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"

namespace fvi::engine {

// log p(z), and its gradient into `gradient`.
using LogDensityFn = std::function<double(const Eigen::VectorXd& z, Eigen::VectorXd& gradient)>;
// log p and its gradient at every column of z at once (n x P into P and n x P): a federated log
// density answers a batch in one exchange, so a Newton step's finite-difference curvature (2n
// points) costs one round trip, not 2n. A point where the density is undefined gives a log p that
// is not finite; throwing ModeSearchAborted ends the whole search (a silo gone), any other
// exception only refuses the points asked.
using LogDensityBatchFn =
    std::function<void(const Eigen::MatrixXd& z, Eigen::VectorXd& log_p, Eigen::MatrixXd& gradient)>;
struct ModeSearchAborted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Mode {
  Eigen::VectorXd at;
  Eigen::MatrixXd curvature;  // -Hessian of log p at the mode (positive definite when found)
  bool found = false;         // the gradient vanished (relatively) and the curvature is positive definite
  long evaluations = 0;       // of log p and its gradient
  long batches = 0;           // calls of the batch function (a federated density's exchanges)
  std::string why;            // when not found
  double log_p = -INFINITY;   // log p at `at`
  bool finite_start = true;   // log p and its gradient were finite at the start
  bool ran_to_bound = false;  // stopped at kBoundedCoordinateLimit (find_modes tries no other start)
};

// The modes reached from several starting points: the one of highest log p, and the log p of
// every separate mode found (one entry when the starts agree). Two modes are separate when they
// are more than 3 Laplace sds (of either) apart in some coordinate.
struct Modes {
  Mode best;
  int starts = 0;
  std::vector<double> separate_log_p;  // highest first
};
Modes find_modes(const LogDensityFn& log_p, const std::vector<Eigen::VectorXd>& starts, long max_steps = 200);
Modes find_modes(const LogDensityBatchFn& log_p, const std::vector<Eigen::VectorXd>& starts, long max_steps = 200,
                 const std::vector<Eigen::Index>& bounded = {});

// A search whose accepted point puts a `bounded` coordinate (the unconstrained value of a declared
// bound's parameter) beyond this in absolute value stops there, not found: log p still rising
// within e^-20 of a bound or e^20 from it (a hierarchical scale, whose log joint grows without
// limit as it goes to 0) has no mode a fit could start at, and the steps that creep after it cost
// exchanges.
inline constexpr double kBoundedCoordinateLimit = 20;

// Starts at `start`; at most `max_steps` Newton steps, each costing 2n + 1 evaluations or more
// (two batches or more).
Mode find_mode(const LogDensityFn& log_p, const Eigen::VectorXd& start, long max_steps = 200);
Mode find_mode(const LogDensityBatchFn& log_p, const Eigen::VectorXd& start, long max_steps = 200,
               const std::vector<Eigen::Index>& bounded = {});

// -Hessian of log p at z by central differences of its gradient (steps 1e-5 (1 + |z_i|)),
// symmetrised: the 2n points in one batch.
Eigen::MatrixXd central_curvature(const LogDensityBatchFn& log_p, const Eigen::VectorXd& z);

}  // namespace fvi::engine
