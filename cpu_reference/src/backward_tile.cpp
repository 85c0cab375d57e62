#include "flashlab/cpu/backward_tile.hpp"

#include <cmath>
#include <limits>

namespace flashlab::cpu {

template <class T>
Matrix<T> probabilities(const Matrix<T>& S, VectorView<T> L) {
  Matrix<T> P = Matrix<T>::Zero(S.rows(), S.cols());  // (rows, cols)
  for (Index r = 0; r < S.rows(); ++r)
    if (L[r] != -std::numeric_limits<T>::infinity()) P.row(r) = (S.row(r).array() - L[r]).exp();
  return P;
}

template <class T>
Matrix<T> backward_tile_kv(const Matrix<T>& S, const BackwardTileInputs<T>& in, T scale,
                           const Matrix<T>* Z, Eigen::Ref<Matrix<T>> dK_j,
                           Eigen::Ref<Matrix<T>> dV_j) {
  const Matrix<T> P = probabilities<T>(S, in.L_i);  // (rows, cols)
  Matrix<T> dP = in.dO_i * in.V_j.transpose();      // (rows, cols)
  if (Z) {  // the forward multiplied V by P o Z: so do the gradients
    dV_j.noalias() += P.cwiseProduct(*Z).transpose() * in.dO_i;
    dP = dP.cwiseProduct(*Z);
  } else {
    dV_j.noalias() += P.transpose() * in.dO_i;
  }
  // dS = P o (dP - D): the softmax's backward, row by row.
  Matrix<T> dS = P.cwiseProduct(dP.colwise() - in.D_i);  // (rows, cols)
  dK_j.noalias() += (dS.transpose() * in.Q_i) * scale;
  return dS;
}

template <class T>
void add_tile_dQ(const Matrix<T>& dS, MatrixView<T> K_j, T scale, Eigen::Ref<Matrix<T>> dQ_i) {
  dQ_i.noalias() += (dS * K_j) * scale;
}

template <class T>
void backward_tile(const Matrix<T>& S, const BackwardTileInputs<T>& in, T scale, const Matrix<T>* Z,
                   Eigen::Ref<Matrix<T>> dQ_i, Eigen::Ref<Matrix<T>> dK_j,
                   Eigen::Ref<Matrix<T>> dV_j) {
  const Matrix<T> dS = backward_tile_kv<T>(S, in, scale, Z, dK_j, dV_j);  // (rows, cols)
  add_tile_dQ<T>(dS, in.K_j, scale, dQ_i);
}

#define FLASHLAB_INSTANTIATE(T)                                                                    \
  template Matrix<T> probabilities(const Matrix<T>&, VectorView<T>);                               \
  template void backward_tile(const Matrix<T>&, const BackwardTileInputs<T>&, T, const Matrix<T>*, \
                              Eigen::Ref<Matrix<T>>, Eigen::Ref<Matrix<T>>,                        \
                              Eigen::Ref<Matrix<T>>);                                              \
  template Matrix<T> backward_tile_kv(const Matrix<T>&, const BackwardTileInputs<T>&, T,           \
                                      const Matrix<T>*, Eigen::Ref<Matrix<T>>,                     \
                                      Eigen::Ref<Matrix<T>>);                                      \
  template void add_tile_dQ(const Matrix<T>&, MatrixView<T>, T, Eigen::Ref<Matrix<T>>);
FLASHLAB_INSTANTIATE(double)
FLASHLAB_INSTANTIATE(float)
#undef FLASHLAB_INSTANTIATE

}  // namespace flashlab::cpu
