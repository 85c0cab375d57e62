// FlashAttention-4's conditional rescaling: keep the base r of a row until the running
// max outgrows it by more than a threshold, so that most tiles rescale nothing.
//
// The standard update (softmax_state.hpp) moves the base to the running max m after every
// tile whose max is larger, and pays for it by multiplying l and U by alpha = exp(m - m').
// Nothing in the algebra asks for the base to be the max. For any base r, over the keys A
// a row has seen,
//   l(r) = sum_{j in A} exp(S_j - r),    U(r) = sum_{j in A} exp(S_j - r) V_j,
// and both carry the common factor exp(-r), so O = U(r) / l(r) and L = r + log l(r) do
// not depend on r. The base only has to keep exp(S_j - r) inside the accumulator's range.
// Keeping r while S_j - r <= tau ln 2 bounds every weight by 2^tau (256 for FA4's tau = 8),
// far from fp32's limit of 2^128, so the rescale of U, a (Br, d) multiply per tile, can be
// skipped until the max has grown by more than tau ln 2.
//
// What may never happen is to move r without moving l and U with it: they would then hold
// sums at two different bases, and O = U / l would silently be wrong. RescaleVariant
// offers that mistake on purpose, and invariant_error() catches it.
#pragma once

#include "flashlab/cpu/options.hpp"
#include "flashlab/cpu/rescale_rule.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <string>
#include <vector>

namespace flashlab::cpu {

enum class RescaleVariant {
  correct,             // moving the base rescales l and U by exp(r_old - r_new)
  base_without_rescale // WRONG on purpose: moves r but leaves l and U at the old base
};

// Throws InvalidArgument naming the value unless variant is one of the two above (an int cast
// to the enum would otherwise run as the wrong variant without a word).
void check_rescale_variant(RescaleVariant variant);

struct RescaleOptions {
  double tau_log2 = kFa4RescaleThresholdLog2;  // tau; 0 gives the standard algorithm
  RescaleVariant variant = RescaleVariant::correct;
  // Check the invariant l = l(r), U = U(r) after every tile (slow: it keeps every score a
  // row has seen, Theta(Br N) per query tile, and recomputes the sums in fp64).
  bool verify_invariant = false;
};

// What one (row, tile) update did, for a row whose tile holds at least one valid score.
// The standard algorithm rescales exactly when the tile's max exceeds the max of every
// score the row saw before (its running max): such an update is either `rescaled` here or
// `skipped`. A row's first valid tile only sets the base; there is nothing to rescale.
enum class RescaleAction {
  masked,    // every score of the row in this tile is masked: the row is not updated
  first,     // the row's first valid tile: r = rowmax(S), alpha = 0 on an empty state
  rescaled,  // rowmax(S) - r > tau ln 2: r moves to rowmax(S), l and U scale by alpha < 1
  skipped,   // running max < rowmax(S) <= r + tau ln 2: the max grew, the base is kept
  kept       // rowmax(S) <= running max: neither algorithm rescales
};

// Counts of RescaleAction over every (row, tile) update, masked rows excluded.
// rescaled + skipped is the number of rescales the standard algorithm would perform;
// skipped_fraction() is the share of those that conditional rescaling saved. (A branch-free
// kernel multiplies U by alpha on every update, alpha = 1 or not: against it the saving is
// every update but the `rescaled` ones.) On N(0, 1) scores the max grows at only a few
// tiles per row, and by far less than 8 ln 2, so nearly every such growth is skipped.
struct RescaleCounts {
  Index first = 0, rescaled = 0, skipped = 0, kept = 0;

  RescaleCounts& operator+=(const RescaleCounts& o);
  void add(RescaleAction action);
  Index standard_rescales() const { return rescaled + skipped; }
  double skipped_fraction() const;  // skipped / standard_rescales(); 0 when there were none
};

// Whether another executor's counts on the same inputs and tiles (the fa3 kernel's, whose
// scores are bf16 or fp16 products summed in another order) agree with the reference's.
// Which rows start and how many later updates there are follows from the shape alone, so
// `first` and rescaled + skipped + kept must be equal. Whether a max grew, and by more than
// tau, is decided on scores rounded differently: a decision within rounding of its
// threshold may go the other way, rarely. So each of rescaled, skipped and kept may differ
// by 1% of the reference's growths (rescaled + skipped), and by at least 2.
struct RescaleAgreement {
  bool agree = false;
  Index slack = 0;     // the largest difference allowed in rescaled, skipped and kept
  std::string reason;  // why they disagree; "" when they agree
};
RescaleAgreement compare_rescale_counts(const RescaleCounts& other, const RescaleCounts& reference);

// A row block's state under conditional rescaling. state.m holds the base r, which may
// trail the running max by up to tau ln 2; max_seen holds the running max itself, used
// only to tell a skipped rescale from an update where the max did not grow.
template <class Acc>
struct ConditionalState {
  SoftmaxState<Acc> state;  // (r, l, U) with l = l(r), U = U(r)
  Vector<Acc> max_seen;     // (rows)

  static ConditionalState empty(Index rows, Index d);
};

// What one conditional update did to each row, for traces and lessons.
template <class Acc>
struct RescaleStep {
  Vector<Acc> tile_max;  // (rows) rowmax(S); -inf for a wholly masked row
  Vector<Acc> alpha;     // (rows) the factor l and U were multiplied by; 1 when kept
  Acc max_weight = 0;    // the largest weight exp(S - r) of the tile: <= 2^tau
  std::vector<RescaleAction> actions;  // (rows)
};

// The conditional update with a tile of scores S (rows, Bc) and values V (Bc, d):
//   if rowmax(S) - r > tau ln 2:  r' = rowmax(S), alpha = exp(r - r')    (rescale)
//   else                          r' = r,         alpha = 1              (keep the base)
//   W = exp(S - r');  l = alpha l + rowsum(W);  U = alpha U + W V;  r = r'
// tau = 0 makes it the standard update(), bit for bit: the base then moves to the same
// max, and a kept row multiplies by alpha = 1 where update() multiplies by exp(0) = 1.
// threshold_nat is tau ln 2, the threshold in the units of S. Wholly masked rows skip the
// update, as in update().
template <class Acc, class In>
RescaleStep<Acc> conditional_update(ConditionalState<Acc>& cs, const Matrix<Acc>& S,
                                    MatrixView<In> V, Acc threshold_nat,
                                    RescaleVariant variant = RescaleVariant::correct);

// How far a state is from the invariant l = l(r), U = U(r) at its own base r, given every
// score the rows have seen, S_seen (rows, n), and the matching values V_seen (n, d).
// The sums are recomputed in fp64. Errors are relative: |l - l(r)| / l(r) and
// max|U - U(r)| / (l(r) max|V_seen|), the scale of U(r) since |U(r)| <= l(r) max|V|.
// A row that has seen no valid score must have l = 0 and U = 0, or its error is +inf.
struct InvariantError {
  double l = 0;
  double U = 0;
  double worst() const { return l > U ? l : U; }
};

template <class Acc, class In>
InvariantError invariant_error(const SoftmaxState<Acc>& state, const Matrix<Acc>& S_seen,
                               MatrixView<In> V_seen);

template <class Acc>
struct ConditionalResult {
  Matrix<Acc> O;  // (N_q, d)
  Vector<Acc> L;  // (N_q)
  TileCounts tiles;
  RescaleCounts rescales;
  Acc max_weight = 0;            // the largest exp(S - r) of any tile: <= 2^tau
  double invariant_error = 0;    // the worst InvariantError over every tile, when verified
};

// The FlashAttention-2 order (Q-outer, one state per query tile, normalised once at the
// end) with conditional_update in place of update(); the same AttentionOptions (causal,
// scale, tile sizes, check_finite) as forward_q_outer. Throws InvalidArgument when tau is
// negative, not finite, or so large that N_k weights of 2^tau could overflow l.
template <class In>
ConditionalResult<accum_t<In>> forward_conditional(const Matrix<In>& Q, const Matrix<In>& K,
                                                   const Matrix<In>& V,
                                                   const AttentionOptions& options = {},
                                                   const RescaleOptions& rescale = {});

// Throws InvalidArgument unless 0 <= tau, tau is finite, and n_k * 2^tau stays below the
// largest finite value of Acc (so l, a sum of n_k weights of at most 2^tau, cannot overflow).
template <class Acc>
void check_rescale_threshold(double tau_log2, Index n_k);

}  // namespace flashlab::cpu
