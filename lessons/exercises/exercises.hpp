// The classroom exercises: the functions a student writes, each with its contract.
// The skeletons are in student/ (edit those), the checker in checker.hpp (`flashlab check N`
// runs it against your code), the instructor's solutions in solutions/.
// Everything is fp64, so that only a wrong formula, never rounding, can fail a check.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace flashlab::exercises {

using cpu::Index;
using Matrix = cpu::Matrix<double>;
using Vector = cpu::Vector<double>;

// Thrown by a skeleton whose function has not been written yet.
struct NotWrittenYet : std::logic_error {
  using std::logic_error::logic_error;
};

// Exercise 1 (lesson 1). The softmax of one row of scores x, computed stably:
// p_j = exp(x_j - m) / sum_k exp(x_k - m) with m = max_j x_j.
//   - no entry of the result may be inf or NaN, however large the scores (x_j up to 1e300);
//   - entries of x may be -inf (masked keys): their p_j is 0;
//   - a row whose entries are all -inf (no valid key) returns all zeros.
Vector stable_softmax(const Vector& x);

// Exercise 2 (lesson 2). The online-softmax state of one query row over some set of keys:
//   m = the largest score, l = sum exp(x_j - m), U = sum exp(x_j - m) V_j (a d-vector: the
//   output not yet divided by l, one row of the lessons' U).
// The empty state (no keys yet) is m = -inf, l = 0, U = 0.
struct RowState {
  double m = 0;
  double l = 0;
  std::vector<double> U;  // (d)
};

// The state of the union of two disjoint sets of keys, from the states a and b of each.
//   - a and b have the same d; the result is exact up to rounding (no score is available);
//   - either or both may be empty (m = -inf): merging with an empty state changes nothing,
//     and two empty states give an empty state (not NaN);
//   - m_a and m_b may differ by 1000 or more: nothing may overflow.
RowState merge(const RowState& a, const RowState& b);

// Exercise 3 (lesson 3). One query tile of the FlashAttention-2 forward pass:
// Q_i (Br, d) against all keys K (N, d) and values V (N, d), visited in KV tiles of Bc rows
// (the last one ragged when Bc does not divide N), softmax scale 1 / sqrt(d), no mask.
//   - keep (m, l, U) per row and update it tile by tile: m' = max(m, rowmax S),
//     alpha = exp(m - m'), W = exp(S - m'), l = alpha l + rowsum W, U = alpha U + W V_j;
//   - never form more than one (Br, Bc) tile of scores;
//   - return O_i = U / l (Br, d) and L_i = m + log l (Br).
struct QueryTileOutput {
  Matrix O;  // (Br, d)
  Vector L;  // (Br)
};
QueryTileOutput forward_query_tile(const Matrix& Q_i, const Matrix& K, const Matrix& V, Index Bc);

// Exercise 6 (lesson 6). Two pieces of the backward pass.
// D = rowsum(dO o O): one number per query row, from dO (N, d) and O (N, d) alone; it
// equals rowsum(P o dP) without needing P.
Vector compute_D(const Matrix& dO, const Matrix& O);
// The gradient of the scores from the probabilities P (N, N_k), their gradient dP (N, N_k)
// and D (N): dS = P o (dP - D), D subtracted from every entry of its row.
Matrix score_gradient(const Matrix& P, const Matrix& dP, const Vector& D);

// Exercise 10 (lesson 10). Decode with split-KV: one query q (d) against K, V (N, d), scale
// 1 / sqrt(d). Cut the keys into `splits` contiguous segments of ceil(N / splits) keys (the
// last ones shorter or empty), compute each segment's state (m, l, U) on its own, merge the
// states, and return o = U / l (d).
//   - 1 <= splits <= N; an empty segment has the empty state;
//   - the result must equal attention over all N keys, for every number of splits.
Vector decode_split_kv(const Vector& q, const Matrix& K, const Matrix& V, Index splits);

}  // namespace flashlab::exercises
