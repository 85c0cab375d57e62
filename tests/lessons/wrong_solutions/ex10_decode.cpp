// A WRONG exercise 10, for testing the checker: the segments' outputs are averaged instead
// of their states merged.
#include "exercises.hpp"

#include <algorithm>
#include <cmath>

namespace flashlab::exercises {

Vector decode_split_kv(const Vector& q, const Matrix& K, const Matrix& V, Index splits) {
  const Index N = K.rows(), len = (N + splits - 1) / splits;
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size()));
  Vector sum = Vector::Zero(V.cols());
  Index used = 0;
  for (Index k0 = 0; k0 < N; k0 += len, ++used) {
    const Index keys = std::min(len, N - k0);
    const Vector x = K.middleRows(k0, keys) * q * scale;
    const Vector w = (x.array() - x.maxCoeff()).exp().matrix();
    sum += V.middleRows(k0, keys).transpose() * w / w.sum();
  }
  return sum / static_cast<double>(used);
}

}  // namespace flashlab::exercises
