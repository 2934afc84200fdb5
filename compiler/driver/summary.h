#pragma once
// `fvic summary OUT [--silo K]`: the posterior table of a run's draws.csv (OUT/draws.csv, or silo
// K's OUT/silo-K/draws.csv) as R's posterior::summarise_draws() prints it, with what the run
// recorded about itself: iterations, convergence and Pareto k̂ with its reading.
#include <optional>
#include <string>

namespace fvic::driver {

// Prints the summary to stdout; errors (a missing or malformed file, named with its line) go to
// stderr. Returns the exit status: 0, or 1 when the file cannot be read.
int summary_command(const std::string& out, const std::optional<long>& silo);

}  // namespace fvic::driver
