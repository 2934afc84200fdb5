#pragma once
// How many values each message between the server and a silo holds, as functions of the model's
// sizes: written once, used by the runtime to check every message and reply, and by `fvic plan`
// to print them (compiler/analysis/plan.cpp instantiates these with its symbolic sizes, e.g.
// "2*D + 1"). `Size` is int64_t here; a symbolic size type provides, found by argument-dependent
// lookup, `size_constant(like, v)` and `half(x)` (an exact halving).
#include <cstdint>
#include <string>

namespace fvi::message {

inline int64_t size_constant(int64_t, long long v) { return v; }
inline int64_t half(int64_t x) { return x / 2; }

// A Gaussian over n values in natural parameters (PVI's q and factors; family/natural_gaussian.h):
// eta1 (n) and eta2's diagonal (mean-field) or lower triangle with its diagonal (full-rank).
template <class Size>
Size gaussian_natural_size(const Size& n, bool full_rank) {
  return full_rank ? n + half(n * (n + size_constant(n, 1))) : n + n;
}

// A Gaussian's variational parameters over n values (SFVI's global block; family/): means and
// log-scales (meanfield), with a unit lower-triangular L (structured), or means and a Cholesky
// factor's lower triangle (fullrank).
template <class Size>
Size gaussian_params_size(const std::string& family, const Size& n) {
  if (family == "fullrank") return n + half(n * (n + size_constant(n, 1)));
  if (family == "structured") return n + n + half(n * (n - size_constant(n, 1)));
  return n + n;
}

// PVI (seed 000 Alg. 1), natural parameters of size P = gaussian_natural_size(...):
// the server's update request [first update?, q_s, t_k] and the silo's damped change of t_k.
template <class Size>
Size pvi_update_request_size(const Size& P) { return size_constant(P, 1) + P + P; }
template <class Size>
Size pvi_update_reply_size(const Size& P) { return P; }
// FedAvg (seed 001 Alg. 1): the change of q and the silo's number of rows, its weight.
template <class Size>
Size fedavg_update_reply_size(const Size& P) { return P + size_constant(P, 1); }

// SFVI (seed 002 Alg. 1 and 2), global variational parameters Q and hyperparameters H: the
// broadcast (eta_G, theta, round), a contribution (g_eta, g_theta, ELBO term) and a local fit
// (eta_G, theta, ELBO term): two vectors and one number each. The shared draws eps_G are not sent:
// every party makes them from the seed and the round.
template <class Size>
Size sfvi_message_size(const Size& Q, const Size& H) { return Q + H + size_constant(Q, 1); }
// An SFVI iteration's request opens with the stopping rule's schedule (program/silo_settling.h):
// [step scale, averaging epoch, draws per gradient, broadcast]. A vertical silo's propose request
// is the schedule alone.
template <class Size>
Size silo_schedule_size(const Size& like) { return size_constant(like, 3); }
template <class Size>
Size sfvi_contribute_request_size(const Size& Q, const Size& H) { return silo_schedule_size(Q) + sfvi_message_size(Q, H); }
// SFVI-Avg and the independent fit ask for local steps: [steps, scale, independent?, broadcast].
template <class Size>
Size sfvi_fit_locally_request_size(const Size& Q, const Size& H) { return size_constant(Q, 3) + sfvi_message_size(Q, H); }

// Vertical models (seed 004 Alg. 1 and 2), N rows, S draws, G global values: z_k (or eta_k), the
// likelihood's adjoint and H_k are one value per row and draw; the power model's request holds the
// globals' draws and the sum of the other silos' z, its reply H_k and the globals' gradient; a
// silo's update returns its ELBO term.
template <class Size>
Size vfl_rows_size(const Size& N, const Size& S) { return N * S; }
template <class Size>
Size vfl_power_size(const Size& N, const Size& G, const Size& S) { return (N + G) * S; }
template <class Size>
Size vfl_update_reply_size(const Size& N) { return size_constant(N, 1); }

// A sparse GP (seed 003 Alg. 2; fvi/engine/sparse_gp.h): q and t_k over the G global values in
// mean-field natural parameters (2G each); a silo's factor over u as [its size, its numbers]: P_k =
// M_k (D + 2) for DPO (pseudo-inputs, targets, log pseudo-noise), M + M (M + 1) / 2 for CPO; the
// others' factors as [count, each factor]; Z (M D) when it is a point estimate shared by all.
template <class Size>
Size sgp_factor_size(bool dpo, const Size& rows, const Size& D, const Size& M) {
  return size_constant(D, 1) + (dpo ? rows * (D + size_constant(D, 2)) : M + half(M * (M + size_constant(M, 1))));
}
template <class Size>
Size sgp_update_request_size(const Size& G, const Size& own, const Size& others, const Size& z) {
  return size_constant(G, 4) * G + size_constant(G, 1) + own + size_constant(G, 1) + others + z;
}
template <class Size>
Size sgp_update_reply_size(const Size& G, const Size& own, const Size& z) {
  return size_constant(G, 2) * G + own + z + size_constant(G, 1);
}
template <class Size>
Size sgp_evaluate_request_size(const Size& G, const Size& all, const Size& z) {
  return size_constant(G, 2) * G + size_constant(G, 1) + all + z;
}

}  // namespace fvi::message
