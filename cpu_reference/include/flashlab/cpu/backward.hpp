// The backward pass with recomputation (FlashAttention's Algorithm 4; FlashAttention-2's
// backward). The forward kept only O and the log-sum-exp L, never P: here every tile of
// the scores is computed again and turned into probabilities with one subtraction,
//   S_ij = Q_i K_j^T * scale,   P_ij = exp(S_ij - L_i)       (no max, no sum: L has both)
// and the gradients of a loss with upstream gradient dO follow tile by tile:
//   dV_j += P_ij^T dO_i                   dP_ij = dO_i V_j^T
//   dS_ij = P_ij o (dP_ij - D_i)          with D = rowsum(dO o O), computed once up front
//   dQ_i += dS_ij K_j * scale             dK_j += dS_ij^T Q_i * scale
// (o is the elementwise product.) D stands in for rowsum(P o dP), the softmax's own
// backward term, without ever forming a row of P: rowsum(P o (dO V^T)) = rowsum(dO o (P V)).
//
// With dropout the forward multiplied V by P o Z, where Z holds 0 or 1/(1 - p) (see
// dropout.hpp); the backward draws the same Z again: dV_j += (P o Z)^T dO_i and
// dP_ij = (dO_i V_j^T) o Z, and D = rowsum(dO o O) still holds.
//
// A query row with no valid key (L = -inf) has P = 0: it contributes nothing anywhere.
// The algebra of one tile lives in backward_tile.hpp; this file holds the two loops over it.
#pragma once

#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/options.hpp"

namespace flashlab::cpu {

template <class T>
struct Gradients {
  Matrix<T> dQ;  // (N_q, d)
  Matrix<T> dK;  // (N_k, d)
  Matrix<T> dV;  // (N_k, d)
  Vector<T> D;   // (N_q) rowsum(dO o O)
  TileCounts tiles;
};

// D = rowsum(dO o O): (N_q). O(N_q d) work, where rowsum(P o dP) would need all of P.
template <class T>
Vector<T> compute_D(const Matrix<T>& dO, const Matrix<T>& O);

// Throws InvalidArgument, naming what was wrong and what would be right, unless Q, K, V
// pass check_shapes, O and dO are (N_q, d) and L has one entry per query row.
template <class T>
void check_backward_inputs(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                           const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                           const AttentionOptions& options);

// FlashAttention-2's order: the outer loop runs over KV tiles. Each keeps dK_j and dV_j on
// chip while it sweeps every query tile, and writes them once, finished; dQ is shared by
// all KV tiles and is accumulated in memory (on a GPU, with atomic adds).
template <class T>
Gradients<T> backward_kv_outer(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                               const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                               const AttentionOptions& options = {},
                               const DropoutMask* dropout = nullptr);

// The other order: the outer loop runs over query tiles. Each keeps dQ_i on chip and
// writes it once, finished; dK and dV are accumulated in memory across query tiles.
template <class T>
Gradients<T> backward_q_outer(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                              const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                              const AttentionOptions& options = {},
                              const DropoutMask* dropout = nullptr);

}  // namespace flashlab::cpu
