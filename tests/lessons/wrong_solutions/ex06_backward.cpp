// A WRONG exercise 6, for testing the checker: D summed over dO alone, and dS missing P.
#include "exercises.hpp"

namespace flashlab::exercises {

Vector compute_D(const Matrix& dO, const Matrix& O) {
  (void)O;
  return dO.rowwise().sum();
}

Matrix score_gradient(const Matrix& P, const Matrix& dP, const Vector& D) {
  (void)P;
  return dP - D.replicate(1, dP.cols());
}

}  // namespace flashlab::exercises
