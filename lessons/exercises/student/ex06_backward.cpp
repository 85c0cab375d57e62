// Exercise 6: D = rowsum(dO o O) and dS = P o (dP - D). Contract:
// lessons/exercises/exercises.hpp. Check with `flashlab check 6`.
#include "exercises.hpp"

namespace flashlab::exercises {

Vector compute_D(const Matrix& dO, const Matrix& O) {
  (void)dO, (void)O;
  throw NotWrittenYet("exercise 6: compute_D is not written yet (lessons/exercises/student/ex06_backward.cpp)");
}

Matrix score_gradient(const Matrix& P, const Matrix& dP, const Vector& D) {
  (void)P, (void)dP, (void)D;
  throw NotWrittenYet("exercise 6: score_gradient is not written yet "
                      "(lessons/exercises/student/ex06_backward.cpp)");
}

}  // namespace flashlab::exercises
