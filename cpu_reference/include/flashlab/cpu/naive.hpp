// The three-operator baseline: S and P are materialised, N x N each.
#pragma once

#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/options.hpp"

namespace flashlab::cpu {

enum class SoftmaxKind { stable, unstable };

template <class T>
struct NaiveResult {
  Matrix<T> S;  // (N_q, N_k) scores, masked entries -inf
  Matrix<T> P;  // (N_q, N_k) probabilities, before dropout
  Matrix<T> O;  // (N_q, d)
  Vector<T> L;  // (N_q) log-sum-exp of each row of S
};

// S = Q K^T * scale, P = softmax(S) row by row, O = P V: three operators, as a framework
// runs them, each reading its input from memory and writing its output back.
// In fp64 and fp32 everything is computed in that type. With bf16 or fp16 inputs each
// operator accumulates in fp32 and rounds its output (S, P, O) to the input type, exactly
// like three low-precision kernels: this is the "naive attention in the same precision"
// that the correctness rule of ANCHORS.md compares a fused kernel against.
// SoftmaxKind::unstable omits the max subtraction, to show the overflow it prevents.
// With a dropout mask a fourth operator runs between the softmax and the product with V, as
// in a framework: P o Z, with Z = dropout->multipliers (0 or 1/(1 - p)), rounded to the
// input type like every other operator's output; then O = (P o Z) V. P and L stay those of
// the softmax: dropout does not change which weights the normalisation counted.
template <class In>
NaiveResult<In> naive_attention(const Matrix<In>& Q, const Matrix<In>& K, const Matrix<In>& V,
                                const AttentionOptions& options = {},
                                SoftmaxKind softmax = SoftmaxKind::stable,
                                const DropoutMask* dropout = nullptr);

}  // namespace flashlab::cpu
