// The online-softmax state (m, l, U) of a block of query rows: the one piece of algebra
// that every tiled algorithm in flashlab (CPU, simulator, lessons; and the GPU kernels by
// name) is built from.
//
// For query row r, after it has seen some keys j:
//   m[r]     the largest score seen                               (the base)
//   l[r]     sum_j exp(S[r, j] - m[r])                            (the denominator)
//   U.row(r) sum_j exp(S[r, j] - m[r]) * V.row(j)                 (the unnormalised output)
// The output is O = U / l and the log-sum-exp L = m + log l, computed once at the end.
#pragma once

#include "flashlab/cpu/types.hpp"

namespace flashlab::cpu {

template <class Acc>
struct SoftmaxState {
  Vector<Acc> m;  // (rows)
  Vector<Acc> l;  // (rows)
  Matrix<Acc> U;  // (rows, d)

  // The state of rows that have seen nothing yet: m = -inf, l = 0, U = 0.
  static SoftmaxState empty(Index rows, Index d);
  Index rows() const { return m.size(); }
};

// What one update did to each row, for traces and lessons.
template <class Acc>
struct TileStep {
  Vector<Acc> tile_max;  // (rows) rowmax of the score tile; -inf for a wholly masked row
  Vector<Acc> m_new;     // (rows) max(m, tile_max)
  Vector<Acc> alpha;     // (rows) exp(m - m_new): how much the old l and U shrink
  Index rows_skipped = 0;  // rows whose tile was wholly masked: their state is untouched
};

// FlashAttention-2's update with a new tile of scores S (rows, Bc) and values V (Bc, d):
//   m' = max(m, rowmax(S)); alpha = exp(m - m'); W = exp(S - m')
//   l  = alpha * l + rowsum(W);  U = alpha * U + W V;  m = m'
// The new tile is exponentiated against m' directly, so only the old state is rescaled.
// A row whose scores in this tile are all -inf (masked) skips the update: computing
// exp(S - m') there would mean exp(-inf - (-inf)) = NaN for a row that has seen nothing.
// With low-precision V (bf16, fp16), W is rounded to V's type before W V, as a GPU kernel
// must do to feed W to its tensor cores.
// With dropout, Z (rows, Bc) holds 0 for a dropped weight and 1/(1 - p) for a kept one
// (dropout.hpp): W enters l whole, since the softmax normalises over every key, but
// U = alpha * U + (W o Z) V. Without Z (nullptr) the update is the one above, unchanged.
template <class Acc, class In>
TileStep<Acc> update(SoftmaxState<Acc>& state, const Matrix<Acc>& S, MatrixView<In> V,
                     const Matrix<Acc>* Z = nullptr);

// The accumulation that ends every update, whatever chose the base and the weights:
//   l = alpha * l + rowsum(W);  U = alpha * U + W V
// W (rows, Bc) holds weights already exponentiated against the new base. With
// low-precision V, W is rounded to V's type before W V; with dropout multipliers Z, U gets
// (W o Z) V while l still counts every weight. update() and FlashAttention-4's conditional
// update (conditional_rescaling.hpp) both end here.
template <class Acc, class In>
void accumulate(SoftmaxState<Acc>& state, const Vector<Acc>& alpha, Matrix<Acc> W,
                MatrixView<In> V, const Matrix<Acc>* Z = nullptr);

// The state of one tile on its own: update(empty, S, V).
template <class Acc, class In>
SoftmaxState<Acc> tile_state(const Matrix<Acc>& S, MatrixView<In> V);

// The merge of two states of the same rows that saw disjoint sets of keys:
//   m = max(m_a, m_b); alpha = exp(m_a - m); beta = exp(m_b - m)
//   l = alpha l_a + beta l_b;  U = alpha U_a + beta U_b
// Commutative and associative up to rounding; an empty state is its identity.
template <class Acc>
SoftmaxState<Acc> merge(const SoftmaxState<Acc>& a, const SoftmaxState<Acc>& b);

// FlashAttention-1's inner step (the paper's Algorithm 1): rows of memory hold a normalised
// output O = U / l beside its l and m. Undo the normalisation (U = diag(l) O), merge the
// tile's state into it, and store O = U / l, l and m back. Returns the merged state.
template <class Acc>
SoftmaxState<Acc> merge_into_normalised(Eigen::Ref<Matrix<Acc>> O, Eigen::Ref<Vector<Acc>> l,
                                        Eigen::Ref<Vector<Acc>> m, const SoftmaxState<Acc>& tile);

// L = m + log l: each row's log-sum-exp, from its base m and its sum l. A row that saw no
// valid key (l = 0) gets -inf. finalize() ends here, and so does FlashAttention-1, which
// keeps m and l beside an O it has already normalised.
template <class Acc>
Vector<Acc> log_sum_exp(const Vector<Acc>& m, const Vector<Acc>& l);

// O = U / l and L = m + log l. A row that saw no valid key (l = 0) gets flashlab's
// convention instead of 0/0: O row = 0 and L = -inf.
template <class Acc>
struct Normalised {
  Matrix<Acc> O;  // (rows, d)
  Vector<Acc> L;  // (rows)
};

template <class Acc>
Normalised<Acc> finalize(const SoftmaxState<Acc>& state);

}  // namespace flashlab::cpu
