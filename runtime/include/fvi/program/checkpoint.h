#pragma once
// Checkpoints of a server or a silo: written every round atomically (a temporary file, then a
// rename, so a kill at any instant leaves either the previous checkpoint or the new one, never a
// torn file) and read back by --resume.
#include <cstdint>
#include <string>
#include <vector>

namespace fvi::program {

struct CheckpointRecord {
  std::string kind;            // what wrote it: "pvi-server", "sfvi-silo", ... (checked on load)
  uint32_t round = 0;          // the last round completed
  std::vector<double> state;   // the coordinator's or the endpoint's state
  std::vector<double> extra;   // the run's own bookkeeping (progress, cached replies)
  std::vector<double> traffic; // the server's byte counters (Transport::traffic_counts)
};

// Writes `record` to `path` atomically. Throws std::runtime_error naming the file if it cannot.
void save_checkpoint(const std::string& path, const CheckpointRecord& record);

// Reads `path` into `record`: false if there is no such file; throws std::runtime_error naming
// the file if it is not a checkpoint, is truncated, or was written by another kind of party.
bool load_checkpoint(const std::string& path, const std::string& kind, CheckpointRecord& record);

}  // namespace fvi::program
