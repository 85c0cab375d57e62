// The backward pass of the three-operator baseline: S, P and dP materialised, N_q x N_k
// each. The reference that the tiled backward is checked against.
#pragma once

#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/options.hpp"

namespace flashlab::cpu {

template <class T>
struct NaiveGradients {
  Matrix<T> P;   // (N_q, N_k) softmax(S), masked entries 0
  Matrix<T> O;   // (N_q, d) (P o Z) V, the output being differentiated (Z = 1 without dropout)
  Matrix<T> dP;  // (N_q, N_k) the loss's gradient with respect to P: (dO V^T) o Z
  Vector<T> D;   // (N_q) rowsum(P o dP), formed the long way, from all of P
  Matrix<T> dQ;  // (N_q, d)
  Matrix<T> dK;  // (N_k, d)
  Matrix<T> dV;  // (N_k, d)
};

// Runs the naive forward (naive_attention), then
//   dV = (P o Z)^T dO;  dP = (dO V^T) o Z;  dS = P o (dP - rowsum(P o dP));
//   dQ = dS K * scale;  dK = dS^T Q * scale.
// In fp64 and fp32 everything is computed in that type. With bf16 or fp16 inputs each
// operator (P o Z, O, dV, dP, D, dS, dQ, dK) accumulates in fp32 and rounds its output to the
// input type, as naive_attention does for the forward: the "naive backward in the same
// precision" whose error sets the bound (3x) that a fused kernel's gradients must meet.
// Throws InvalidArgument for bad shapes of Q, K, V (check_shapes) or dO (not (N_q, d)).
template <class T>
NaiveGradients<T> naive_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                 const Matrix<T>& dO, const AttentionOptions& options = {},
                                 const DropoutMask* dropout = nullptr);

}  // namespace flashlab::cpu
