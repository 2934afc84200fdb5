#include "fvi/program/pvi_rounds.h"

#include "fvi/program/parallel.h"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <thread>

namespace fvi::program {


template <class Q>
PviRounds<Q>::PviRounds(Server& server, std::vector<Client*> clients, std::string schedule)
    : server_(server), clients_(std::move(clients)), schedule_(std::move(schedule)) {
  if (schedule_ != "synchronous" && schedule_ != "sequential" && schedule_ != "asynchronous")
    throw std::invalid_argument("schedule = " + schedule_ + " is not a PVI schedule");
}

template <class Q>
Traffic PviRounds<Q>::run_round(uint32_t round) {
  using Natural = typename Server::Natural;
  const int S = int(clients_.size());
  Traffic traffic;
  std::mutex traffic_mutex;
  // One silo's turn: q_s down, the packed change of its factor back up.
  std::vector<Natural> previous(S);  // each silo's factor before this round's update
  auto exchange = [&](int k, const std::vector<double>& down) {
    Natural q_s;
    engine::unpack(down, q_s);
    previous[k] = clients_[k]->factor();
    const std::vector<double> up = engine::pack(clients_[k]->update(q_s, round).delta);
    std::lock_guard<std::mutex> lock(traffic_mutex);
    traffic.sent += 8LL * (long long)down.size();
    traffic.received += 8LL * (long long)up.size();
    return up;
  };
  // A change the server refuses (it would make q improper) is dropped with a warning and the
  // silo's factor is put back, so that server and silo still agree; the round goes on.
  auto apply = [&](int k, const std::vector<double>& up) {
    Natural delta;
    engine::unpack(up, delta);
    try {
      server_.apply(delta, k + 1);
    } catch (const engine::ModelError& e) {
      std::fprintf(stderr, "round %u: warning: %s; silo %d keeps its previous factor\n", round, e.what(), k + 1);
      clients_[k]->set_factor(previous[k]);
      ++rejected_;
    }
  };
  if (schedule_ == "sequential") {
    for (int k = 0; k < S; ++k) apply(k, exchange(k, engine::pack(server_.posterior())));
  } else if (schedule_ == "asynchronous") {
    for_each_silo_in_parallel(S, [&](int k) {
      std::vector<double> down;
      {
        std::lock_guard<std::mutex> lock(server_mutex_);
        down = engine::pack(server_.posterior());
      }
      const std::vector<double> up = exchange(k, down);
      std::lock_guard<std::mutex> lock(server_mutex_);
      apply(k, up);
    });
  } else {
    const std::vector<double> down = engine::pack(server_.posterior());
    std::vector<std::vector<double>> ups(S);
    for_each_silo_in_parallel(S, [&](int k) { ups[k] = exchange(k, down); });
    for (int k = 0; k < S; ++k) apply(k, ups[k]);  // in silo order: deterministic
  }
  return traffic;
}

template <class Q>
double PviRounds<Q>::elbo(Traffic& traffic) {
  const int S = int(clients_.size());
  std::vector<double> losses(S);
  const typename Server::Natural current = server_.posterior();
  for_each_silo_in_parallel(S, [&](int k) { losses[k] = clients_[k]->evaluate(current, 0); });
  traffic.received += 8LL * S;
  double objective = server_.kl_to_prior();
  for (double l : losses) objective += l;
  return -objective;
}

template class PviRounds<MeanFieldGaussian<double>>;
template class PviRounds<FullRankGaussian<double>>;

}  // namespace fvi::program
