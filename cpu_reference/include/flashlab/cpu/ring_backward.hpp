// Ring attention's backward with P simulated ranks: the gradients dQ, dK, dV of ring.hpp's
// forward, computed where the data lives, with the same schedule (ring_schedule.hpp).
//
// Rank r keeps its rows of Q, dO, O and L (the forward's merged log-sum-exp), and forms
// D_r = rowsum(dO_r o O_r) once: every term it needs is on the rank. The K/V slices travel
// the ring as in the forward: at step s rank r holds the slice that rank (r - s) mod P
// started with, and runs the tiled backward (backward_tile.hpp) of its queries against it:
//   P_ij = exp(S_ij - L_i)                 L is the whole row's log-sum-exp, so P is already
//                                          the final probability: no merge, unlike the forward
//   dQ_r      += dS K_j * scale            dQ belongs to the queries: it stays on rank r
//   dK_j, dV_j += dS^T Q_i * scale, P^T dO_i  dK, dV belong to the keys, which are elsewhere
// So dK and dV travel too, as accumulators that follow their slice round the ring:
//   step 0      rank r computes its own slice's share and keeps it
//   step s >= 1 rank r adds its share into the accumulator of the slice it holds (born
//               empty on rank r + 1 at step 1) and sends it to rank r + 1, which holds that
//               slice at step s + 1; after step P - 1 it arrives at the slice's owner, which
//               adds the share it kept at step 0.
// Every accumulator crosses P - 1 links (from rank src + 1 round to src), as its K and V do;
// the owner's step-0 share never travels. Over the run, per link, with n rows per rank:
//   K, V sent after steps 0 .. P - 2:    (P - 1) 2 n d numbers, the forward's traffic
//   dK, dV sent after steps 1 .. P - 1:  (P - 1) 2 n d numbers (fp32 accumulators on a GPU:
//                                        twice the bytes of bf16 K and V)
// The last send (after step P - 1) has no compute left to hide behind.
#pragma once

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/backward_tile.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/ring.hpp"

namespace flashlab::cpu {

// Whether rank r sends after step s (the same for every rank): the K/V slice it holds while
// a later step needs it; the dK/dV accumulator it holds from step 1 on (its slice's owner
// keeps the share of step 0).
inline bool sends_kv(Index step, Index ranks) { return step + 1 < ranks; }
inline bool sends_gradients(Index step, Index ranks) { return step >= 1 && step < ranks; }

// Rows each rank sent to rank r + 1 after each step: of K (as many of V), and of the dK
// accumulator (as many of dV).
struct RingSends {
  Index ranks = 0;
  std::vector<Index> kv_rows;        // (ranks * ranks) row-major: [rank * ranks + step]
  std::vector<Index> gradient_rows;  // (ranks * ranks) row-major

  Index kv_rows_sent(Index rank) const;        // summed over the steps: the link r -> r + 1
  Index gradient_rows_sent(Index rank) const;  // the same for dK
};

template <class T>
struct RingGradients {
  Matrix<T> dQ;   // (N_q, d), rows in sequence order, gathered from the ranks
  Matrix<T> dK;   // (N_k, d), each slice from its owner
  Matrix<T> dV;   // (N_k, d)
  Vector<T> D;    // (N_q) rowsum(dO o O), each rank's rows
  RingWork work;  // score tiles per (rank, step): the forward's, tile for tile
  RingSends sends;
};

// What one rank's step reads: its own rows (Q_r, Q_r * scale, dO_r, L_r, D_r: the rows of
// `q` in chunk order) and the K/V slice it holds (K_s, V_s: the rows of `k` in chunk order).
template <class T>
struct SliceBackwardInputs {
  MatrixView<T> Q_r;         // (rows of q, d)
  MatrixView<T> Q_scaled_r;  // (rows of q, d) Q_r * scale, as the forward formed the scores
  MatrixView<T> dO_r;        // (rows of q, d)
  VectorView<T> L_r;         // (rows of q)
  VectorView<T> D_r;         // (rows of q)
  MatrixView<T> K_s;         // (rows of k, d)
  MatrixView<T> V_s;         // (rows of k, d)
};

// One rank's step: the tiled backward of the query rows `q` against the keys `k` (lists of
// chunks of the whole sequence), each pair of chunks tiled from its first rows, under the
// whole problem's mask (options.causal over N_q queries and N_k keys). Adds each tile's
// dS K_j * scale into dQ_r (rows of q, d) and its dK_j, dV_j into dK_s, dV_s (rows of k, d).
// Returns the score tiles, counted as pair_tiles() counts them.
template <class T>
TileCounts slice_backward(const SliceBackwardInputs<T>& in, const std::vector<Chunk>& q,
                          const std::vector<Chunk>& k, const Mask& mask, T scale,
                          const AttentionOptions& options, Eigen::Ref<Matrix<T>> dQ_r,
                          Eigen::Ref<Matrix<T>> dK_s, Eigen::Ref<Matrix<T>> dV_s);

// One head: Q, O, dO (N_q, d); K, V (N_k, d); L (N_q) as the forward returned it (ring or
// single device: it is the same log-sum-exp). Throws InvalidArgument for bad shapes
// (check_backward_inputs) and for P outside [1, min(N_q, N_k)] (check_ranks).
template <class T>
RingGradients<T> ring_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                               const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                               const RingOptions& ring, const AttentionOptions& options = {});

template <class T>
struct MultiHeadRingGradients {
  HeadTensor<T> dQ;  // (batch, heads_q, N_q, d)
  HeadTensor<T> dK;  // (batch, heads_kv, N_k, d)
  HeadTensor<T> dV;  // (batch, heads_kv, N_k, d)
  RingWork work;     // summed over batch and query heads
};

// Batches and heads, with GQA/MQA: each query head runs the ring of ring_backward against
// its KV head, and a KV head's dK and dV are the sums over its group's query heads, in the
// group's order (a rank adds its group's shares before it sends an accumulator, so the
// links carry batch x heads_kv heads of dK and dV). Shapes as backward_multihead's.
template <class T>
MultiHeadRingGradients<T> ring_backward_multihead(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                                                  const HeadTensor<T>& V, const HeadTensor<T>& O,
                                                  const HeadTensor<T>& L, const HeadTensor<T>& dO,
                                                  const RingOptions& ring,
                                                  const AttentionOptions& options = {});

}  // namespace flashlab::cpu
