#pragma once
// The server rounds of a PVI / FedGVI simulation (spec 000 Algorithm 1): every silo updates its
// factor once per round under the schedule, and the server applies each damped change. Every
// message crosses as it would cross the network, packed into a flat vector of doubles (an
// in-process transport), and its bytes are counted. NAME-sim and the benchmarks run this.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "fvi/engine/pvi.h"

namespace fvi::program {

struct Traffic {
  long long sent = 0, received = 0;  // bytes, as the server counts them
};

template <class Q>
class PviRounds {
 public:
  using Server = engine::PviServer<Q>;
  using Client = engine::PviClient<Q>;

  // schedule: synchronous (silos in parallel on the same q_s, changes applied in silo order),
  // sequential (one silo after another, each on the latest q_s), or asynchronous (in parallel,
  // each change applied as it arrives: the order depends on timing, seed 000 §2.1).
  PviRounds(Server& server, std::vector<Client*> clients, std::string schedule);

  // One server round. Returns the bytes the server sent (q_s to each silo) and received (the
  // silos' factor changes).
  Traffic run_round(uint32_t round);

  // Minus the objective of the current global posterior: each silo's expected loss (one number
  // sent by each) plus the server's KL to the prior. With the NLL and KL this is the ELBO.
  double elbo(Traffic& traffic);

  // Silo updates the server refused so far (each is reported on stderr as it happens).
  long rejected() const { return rejected_; }

 private:
  std::vector<double> receive(const std::vector<double>& message, int silo, uint32_t round);

  Server& server_;
  std::vector<Client*> clients_;
  std::string schedule_;
  std::mutex server_mutex_;
  long rejected_ = 0;
};

}  // namespace fvi::program
