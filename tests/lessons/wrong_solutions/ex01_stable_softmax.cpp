// A WRONG exercise 1, for testing the checker: the textbook formula, which overflows.
#include "exercises.hpp"

namespace flashlab::exercises {

Vector stable_softmax(const Vector& x) {
  const Vector w = x.array().exp().matrix();
  return w / w.sum();
}

}  // namespace flashlab::exercises
