#include "flashlab/cpu/naive_backward.hpp"

#include "flashlab/cpu/naive.hpp"

#include <sstream>

namespace flashlab::cpu {

namespace {
// What a low-precision operator does when it writes its output to memory: round it to In.
template <class In, class Acc>
Matrix<Acc> stored(const Matrix<Acc>& X) {
  if constexpr (is_low_precision<In>)
    return X.template cast<In>().template cast<Acc>();
  else
    return X;
}
}  // namespace

template <class In>
NaiveGradients<In> naive_backward(const Matrix<In>& Q, const Matrix<In>& K, const Matrix<In>& V,
                                  const Matrix<In>& dO, const AttentionOptions& options,
                                  const DropoutMask* dropout) {
  using Acc = accum_t<In>;
  const NaiveResult<In> forward = naive_attention(Q, K, V, options);  // checks Q, K, V
  if (dO.rows() != Q.rows() || dO.cols() != Q.cols()) {
    std::ostringstream why;
    why << "dO is (" << dO.rows() << ", " << dO.cols() << ") but O is (N_q, d) = (" << Q.rows()
        << ", " << Q.cols() << "): dO is the loss's gradient with respect to O and has O's shape";
    throw InvalidArgument(why.str());
  }
  const Acc scale = static_cast<Acc>(options.scale_for(Q.cols()));
  const Matrix<Acc> P = forward.P.template cast<Acc>();  // (N_q, N_k), as stored by the forward
  const Matrix<Acc> Z = dropout ? dropout->template multipliers<Acc>(0, Q.rows(), 0, K.rows())
                                : Matrix<Acc>::Ones(Q.rows(), K.rows());  // (N_q, N_k)
  const Matrix<Acc> Qa = Q.template cast<Acc>(), Ka = K.template cast<Acc>(),
                    Va = V.template cast<Acc>(), dOa = dO.template cast<Acc>();

  // One operator per line, each accumulating in Acc and writing its output rounded to In.
  const Matrix<Acc> PZ = stored<In>(Matrix<Acc>(P.cwiseProduct(Z)));
  const Matrix<Acc> O = stored<In>(Matrix<Acc>(PZ * Va));
  const Matrix<Acc> dV = stored<In>(Matrix<Acc>(PZ.transpose() * dOa));
  const Matrix<Acc> dP = stored<In>(Matrix<Acc>((dOa * Va.transpose()).cwiseProduct(Z)));
  const Matrix<Acc> D = stored<In>(Matrix<Acc>(P.cwiseProduct(dP).rowwise().sum()));
  const Matrix<Acc> dS = stored<In>(Matrix<Acc>(P.cwiseProduct(dP.colwise() - D.col(0))));
  const Matrix<Acc> dQ = stored<In>(Matrix<Acc>((dS * Ka) * scale));
  const Matrix<Acc> dK = stored<In>(Matrix<Acc>((dS.transpose() * Qa) * scale));

  NaiveGradients<In> out;
  out.P = forward.P;
  out.O = O.template cast<In>();
  out.dP = dP.template cast<In>();
  out.D = D.col(0).template cast<In>();
  out.dQ = dQ.template cast<In>();
  out.dK = dK.template cast<In>();
  out.dV = dV.template cast<In>();
  return out;
}

#define FLASHLAB_NAIVE_BACKWARD(In)                                                \
  template NaiveGradients<In> naive_backward(const Matrix<In>&, const Matrix<In>&, \
                                             const Matrix<In>&, const Matrix<In>&, \
                                             const AttentionOptions&, const DropoutMask*);
FLASHLAB_NAIVE_BACKWARD(double)
FLASHLAB_NAIVE_BACKWARD(float)
FLASHLAB_NAIVE_BACKWARD(bf16)
FLASHLAB_NAIVE_BACKWARD(fp16)
#undef FLASHLAB_NAIVE_BACKWARD

}  // namespace flashlab::cpu
