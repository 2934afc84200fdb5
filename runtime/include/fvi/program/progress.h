#pragma once
// What the one server loop (server_loop.h) tells an observer as a run goes on: each report (the
// step, the objective, the seconds, each silo's traffic and missing replies) and the closing
// lines. NAME-server's status page (fvi/net/status_page.h) is one; calls come from the loop's
// thread.
#include <string>
#include <utility>
#include <vector>

#include "fvi/program/federation.h"

namespace fvi::program {

struct ProgressReport {
  long step = 0, max_steps = 0;  // the stopping rule may end the run before max_steps
  std::string position;          // "round  3/10", "iteration 200/1000"
  std::string unit;              // "rounds", "iterations"
  double objective = 0, seconds = 0;
  std::vector<SiloTraffic> silos;
};

class ProgressObserver {
 public:
  virtual ~ProgressObserver() = default;
  virtual void report(const ProgressReport& report) = 0;
  // The run's last lines ({"warning" or "info", text}), as posterior.json's notes.
  virtual void finished(const std::vector<std::pair<std::string, std::string>>& notes) = 0;
};

}  // namespace fvi::program
