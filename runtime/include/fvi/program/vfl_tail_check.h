#pragma once
// The tail check (tail_check.h) of a vertical model fitted by vfl_exact. q is one Gaussian over
// the server's globals and every silo's split block, and no party holds all of it: the parties
// draw the heavier-tailed proposal together, each its own block of every draw
// z_s = m + w a_s L eps_s, from the shared key as they draw q's output draws (the joint family's
// noise, or each party's own under mean-field), a_s = tail_scales(key, S)[s], the width w 1 (or 2
// where the first check's own k-hat exceeds 0.7: the check again, as tail_check.h makes it). Two
// exchanges at the end, after q's output draws:
//   kVflTailDraws   [key, S, w] -> silo k's partial predictor eta_k at each of its draws, log p
//                   of its split priors, the squared norm of its rows of a_s eps_s, its rows' log
//                   det of w L and its block's size: the server adds its own terms and has the
//                   ratios p / g, their PSIS k-hat and weights.
//   kVflTailMoments [key, S, w, the weights] -> the largest move of a mean and change of an sd
//                   over silo k's block (the weighted moments of its draws against q's own), and
//                   whose: the server merges them with its globals' and words the verdict.
// No silo's draws leave it; where a silo's split block is a funnel about its own scale (its
// coefficients' prior sd a split parameter), a Gaussian q misses it and this check says so.
#include <cstdint>

#include "fvi/engine/vfl.h"
#include "fvi/program/federation.h"
#include "fvi/program/server_loop.h"
#include "fvi/program/tail_check.h"

namespace fvi::program {

// The server's side: the check of q's output draws `d` (their layout and q's moments) with key
// `key`, exchanges in `round` (the wider retry's in round + 1), the proposal's draws of the
// globals sent with each draws request where `prior_globals` (split priors read them:
// engine::split_priors_read_globals); out is left empty where it is not made (more than
// kTailCheckMaxParameters parameters in q, fewer than 20 draws each within the rows' limit on a
// request, a likelihood the server cannot evaluate).
void vfl_tail_check(engine::VflServer& server, Transport& transport, const fvi_model& model, bool prior_globals,
                    const ServerDraws& d, uint64_t key, uint32_t round, TailCheck& out);

// A silo's sides of the two exchanges (throw std::invalid_argument on a malformed request).
// q_key and q_draws: its output draws (write_split_posterior's), whose moments q's are.
Message vfl_tail_draws(engine::VflSilo& silo, const Message& request);
Message vfl_tail_moments(const engine::VflSilo& silo, const fvi_model& model, const fvi_data& data,
                         const Message& request, uint64_t q_key, long q_draws);

constexpr size_t kVflTailMomentsSize = 10;

}  // namespace fvi::program
