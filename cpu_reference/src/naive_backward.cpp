#include "flashlab/cpu/naive_backward.hpp"

#include "flashlab/cpu/naive.hpp"

#include <sstream>

namespace flashlab::cpu {

template <class T>
NaiveGradients<T> naive_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                 const Matrix<T>& dO, const AttentionOptions& options,
                                 const DropoutMask* dropout) {
  const NaiveResult<T> forward = naive_attention(Q, K, V, options);  // checks Q, K, V
  if (dO.rows() != Q.rows() || dO.cols() != Q.cols()) {
    std::ostringstream why;
    why << "dO is (" << dO.rows() << ", " << dO.cols() << ") but O is (N_q, d) = (" << Q.rows()
        << ", " << Q.cols() << "): dO is the loss's gradient with respect to O and has O's shape";
    throw InvalidArgument(why.str());
  }
  const T scale = static_cast<T>(options.scale_for(Q.cols()));
  const Matrix<T>& P = forward.P;  // (N_q, N_k)
  const Matrix<T> Z = dropout ? dropout->template multipliers<T>(0, Q.rows(), 0, K.rows())
                              : Matrix<T>::Ones(Q.rows(), K.rows());  // (N_q, N_k)

  NaiveGradients<T> out;
  out.P = P;
  out.O = P.cwiseProduct(Z) * V;
  out.dV = P.cwiseProduct(Z).transpose() * dO;
  out.dP = (dO * V.transpose()).cwiseProduct(Z);
  out.D = P.cwiseProduct(out.dP).rowwise().sum();
  const Matrix<T> dS = P.cwiseProduct(out.dP.colwise() - out.D);  // (N_q, N_k)
  out.dQ = (dS * K) * scale;
  out.dK = (dS.transpose() * Q) * scale;
  return out;
}

template NaiveGradients<double> naive_backward(const Matrix<double>&, const Matrix<double>&,
                                               const Matrix<double>&, const Matrix<double>&,
                                               const AttentionOptions&, const DropoutMask*);
template NaiveGradients<float> naive_backward(const Matrix<float>&, const Matrix<float>&,
                                              const Matrix<float>&, const Matrix<float>&,
                                              const AttentionOptions&, const DropoutMask*);

}  // namespace flashlab::cpu
