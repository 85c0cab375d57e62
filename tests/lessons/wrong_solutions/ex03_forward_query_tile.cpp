// A WRONG exercise 3, for testing the checker: l is rescaled by alpha but U is not.
#include "exercises.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashlab::exercises {

QueryTileOutput forward_query_tile(const Matrix& Q_i, const Matrix& K, const Matrix& V, Index Bc) {
  const Index Br = Q_i.rows(), d = Q_i.cols(), N = K.rows();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Vector m = Vector::Constant(Br, -std::numeric_limits<double>::infinity());
  Vector l = Vector::Zero(Br);
  Matrix U = Matrix::Zero(Br, d);
  for (Index k0 = 0; k0 < N; k0 += Bc) {
    const Index cols = std::min(Bc, N - k0);
    const Matrix S = Q_i * K.middleRows(k0, cols).transpose() * scale;
    const Vector m_new = m.cwiseMax(S.rowwise().maxCoeff());
    const Vector alpha = (m - m_new).array().exp().matrix();
    const Matrix W = (S.colwise() - m_new).array().exp().matrix();
    l = alpha.cwiseProduct(l) + W.rowwise().sum();
    U = U + W * V.middleRows(k0, cols);
    m = m_new;
  }
  return {l.cwiseInverse().asDiagonal() * U, (m.array() + l.array().log()).matrix()};
}

}  // namespace flashlab::exercises
