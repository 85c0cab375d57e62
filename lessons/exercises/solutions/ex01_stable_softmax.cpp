// Solution to exercise 1: subtract the row max before exponentiating.
#include "exercises.hpp"

#include <cmath>
#include <limits>

namespace flashlab::exercises {

Vector stable_softmax(const Vector& x) {
  const double m = x.size() ? x.maxCoeff() : -std::numeric_limits<double>::infinity();
  if (std::isinf(m) && m < 0) return Vector::Zero(x.size());  // no valid key: all zeros
  const Vector w = (x.array() - m).exp().matrix();  // every exponent <= 0: no overflow
  return w / w.sum();                                // the sum is >= 1 (w = 1 at the max)
}

}  // namespace flashlab::exercises
