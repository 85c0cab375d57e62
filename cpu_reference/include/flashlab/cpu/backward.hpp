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
#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"

#include <vector>

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

// backward_kv_outer in pieces, for a caller that spreads its KV tiles over threads
// (backward_multihead.cpp). BackwardHead is one head's inputs, prepared once: checked, Q
// scaled, D = rowsum(dO o O) computed; it refers to Q, K, V, L and dO, which must outlive it.
template <class T>
struct BackwardHead {
  const Matrix<T>& Q;   // (N_q, d)
  Matrix<T> Q_scaled;   // (N_q, d) Q * scale, exactly as the forward formed the scores
  const Matrix<T>& K;   // (N_k, d)
  const Matrix<T>& V;   // (N_k, d)
  const Matrix<T>& dO;  // (N_q, d)
  const Vector<T>& L;   // (N_q)
  Vector<T> D;          // (N_q)
  Mask mask;
  const AttentionOptions& options;
  T scale;
  const DropoutMask* dropout;
};
template <class T>
BackwardHead<T> prepare_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                 const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                                 const AttentionOptions& options, const DropoutMask* dropout);

// The dS tile (rows, cols) of the query tile starting at row q0, against one KV tile.
template <class T>
struct ScoreGradient {
  Index q0 = 0;
  Matrix<T> dS;
};

// The outer loop's step j: sets dK_j, dV_j (cols, d) to their sums over the query tiles that
// see KV tile j, in order, counts the tiles, and returns those tiles' dS for add_dQ.
template <class T>
std::vector<ScoreGradient<T>> backward_kv_tile(const BackwardHead<T>& in, Index j, Matrix<T>& dK_j,
                                               Matrix<T>& dV_j, TileCounts& tiles);

// dQ_i += dS K_j * scale for each of KV tile j's dS tiles, in order; dQ is (N_q, d). Called
// for j = 0, 1, ... in turn, it sums dQ exactly as backward_kv_outer does.
template <class T>
void add_dQ(const BackwardHead<T>& in, Index j, const std::vector<ScoreGradient<T>>& dS,
            Eigen::Ref<Matrix<T>> dQ);

// The other order: the outer loop runs over query tiles. Each keeps dQ_i on chip and
// writes it once, finished; dK and dV are accumulated in memory across query tiles.
template <class T>
Gradients<T> backward_q_outer(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                              const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                              const AttentionOptions& options = {},
                              const DropoutMask* dropout = nullptr);

}  // namespace flashlab::cpu
