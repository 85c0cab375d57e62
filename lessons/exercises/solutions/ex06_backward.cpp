// Solution to exercise 6: D from dO and O; dS = P o (dP - D).
#include "exercises.hpp"

namespace flashlab::exercises {

Vector compute_D(const Matrix& dO, const Matrix& O) {
  return dO.cwiseProduct(O).rowwise().sum();  // (N): O(N d), no P needed
}

Matrix score_gradient(const Matrix& P, const Matrix& dP, const Vector& D) {
  return P.cwiseProduct(dP - D.replicate(1, dP.cols()));  // (N, N_k)
}

}  // namespace flashlab::exercises
