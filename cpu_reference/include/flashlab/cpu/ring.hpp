// Ring attention with P simulated ranks: the sequence is split into P slices of Q, K and V
// (ring_schedule.hpp), and each rank computes attention for its own queries while the K/V
// slices travel around the ring.
//
//   running_r = empty state                                  (m = -inf, l = 0, U = 0)
//   for step s = 0 .. P - 1:
//     (O_s, L_s) = tiled forward of Q_r against the K/V slice rank r holds now
//     running_r  = merge(running_r, state_of(O_s, L_s))        (lesson 2's merge)
//     pass the K/V slice to rank r + 1, take rank r - 1's
//   O_r = U / l,  L_r = m + log l                             (finalize, once)
//
// Each step returns what a GPU kernel returns, the normalised (O, L), not the raw (m, l, U):
// (O, L) is the state with base m = L, sum l = 1 and U = O, since exp(L) = l exp(m). The
// merge of two such states is the familiar log-sum-exp merge of partial outputs.
// Every score a rank computes is one that single-device attention computes, so the result
// equals it up to the rounding of a different summation order.
#pragma once

#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/ring_schedule.hpp"

namespace flashlab::cpu {

struct RingOptions {
  Index ranks = 1;  // P, 1 <= P <= min(N_q, N_k)
  RingLayout layout = RingLayout::contiguous;
};

template <class Acc>
struct RingResult {
  Matrix<Acc> O;  // (N_q, d), rows in sequence order, gathered from the ranks
  Vector<Acc> L;  // (N_q)
  RingWork work;  // score tiles per (rank, step)
};

// (O, L) as a state: m = L, l = 1, U = O. A row with L = -inf (no valid key) is empty.
template <class Acc>
SoftmaxState<Acc> state_of(const Matrix<Acc>& O, const Vector<Acc>& L);

// One rank's step: the tiled forward (FlashAttention-2 order) of the query rows `q` against
// the keys `k`, each a list of chunks of the whole sequence; the mask is the whole
// problem's (options.causal over all N_q queries and N_k keys). O and L hold the rows of
// `q` in chunk order; a row that no key of `k` may see gets O = 0, L = -inf.
template <class In>
ForwardResult<accum_t<In>> slice_forward(const Matrix<In>& Q, const Matrix<In>& K,
                                         const Matrix<In>& V, const std::vector<Chunk>& q,
                                         const std::vector<Chunk>& k,
                                         const AttentionOptions& options);

// One head: Q (N_q, d), K and V (N_k, d). Throws InvalidArgument for bad shapes or options
// (check_shapes) and for P outside [1, min(N_q, N_k)] (check_ranks).
template <class In>
RingResult<accum_t<In>> ring_attention(const Matrix<In>& Q, const Matrix<In>& K,
                                       const Matrix<In>& V, const RingOptions& ring,
                                       const AttentionOptions& options = {});

template <class Acc>
struct MultiHeadRingResult {
  HeadTensor<Acc> O;  // (batch, heads_q, N_q, d)
  HeadTensor<Acc> L;  // (batch, heads_q, N_q, 1)
  RingWork work;      // summed over batch and heads
};

// Batches and heads, with GQA/MQA: query head h reads KV head kv_head_for(h, ...). Every
// rank holds its slice of every head, so each (batch, head) runs the same ring.
template <class In>
MultiHeadRingResult<accum_t<In>> ring_attention_multihead(const HeadTensor<In>& Q,
                                                          const HeadTensor<In>& K,
                                                          const HeadTensor<In>& V,
                                                          const RingOptions& ring,
                                                          const AttentionOptions& options = {});

}  // namespace flashlab::cpu
