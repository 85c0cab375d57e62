#include "flashlab/cpu/naive.hpp"

#include "flashlab/cpu/softmax.hpp"

namespace flashlab::cpu {

namespace {
// What a low-precision operator does when it writes its output to memory.
template <class In, class Acc>
Matrix<Acc> stored(const Matrix<Acc>& X) {
  if constexpr (is_low_precision<In>) return X.template cast<In>().template cast<Acc>();
  else return X;
}
}  // namespace

template <class In>
NaiveResult<In> naive_attention(const Matrix<In>& Q, const Matrix<In>& K, const Matrix<In>& V,
                                const AttentionOptions& options, SoftmaxKind softmax,
                                const DropoutMask* dropout) {
  using Acc = accum_t<In>;
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  const Mask mask{options.causal, Q.rows(), K.rows()};
  const Acc scale = static_cast<Acc>(options.scale_for(Q.cols()));

  // Operator 1: S = Q K^T * scale, written out whole: (N_q, N_k).
  // (Written as a plain product, then scaled: Eigen evaluates `(A B) * s` far more slowly.)
  Matrix<Acc> S(Q.rows(), K.rows());
  S.noalias() = Q.template cast<Acc>() * K.template cast<Acc>().transpose();
  S *= scale;
  S = stored<In>(S);
  mask.apply(S, 0, 0);
  if (options.check_finite) check_scores_finite(S, 0, 0, mask);

  // Operator 2: P = softmax(S), row by row, read back and written out: (N_q, N_k).
  Matrix<Acc> P(S.rows(), S.cols());
  Vector<Acc> L(S.rows());
  for (Index r = 0; r < S.rows(); ++r) {
    const Vector<Acc> row = S.row(r).transpose();
    P.row(r) = (softmax == SoftmaxKind::stable ? stable_softmax(row) : unstable_softmax(row))
                   .transpose();
    L[r] = log_sum_exp(row);  // -inf for a row with no valid key
  }
  P = stored<In>(P);

  // With dropout, operator 2b: P o Z, read back and written out: (N_q, N_k).
  Matrix<Acc> PZ;
  if (dropout)
    PZ = stored<In>(
        Matrix<Acc>(P.cwiseProduct(dropout->multipliers<Acc>(0, P.rows(), 0, P.cols()))));

  // Operator 3: O = P V (or (P o Z) V), read back: (N_q, d).
  const Matrix<Acc> O = (dropout ? PZ : P) * V.template cast<Acc>();
  return {S.template cast<In>(), P.template cast<In>(), stored<In>(O).template cast<In>(),
          L.template cast<In>()};
}

template NaiveResult<double> naive_attention(const Matrix<double>&, const Matrix<double>&,
                                             const Matrix<double>&, const AttentionOptions&,
                                             SoftmaxKind, const DropoutMask*);
template NaiveResult<float> naive_attention(const Matrix<float>&, const Matrix<float>&,
                                            const Matrix<float>&, const AttentionOptions&,
                                            SoftmaxKind, const DropoutMask*);
template NaiveResult<bf16> naive_attention(const Matrix<bf16>&, const Matrix<bf16>&,
                                           const Matrix<bf16>&, const AttentionOptions&,
                                           SoftmaxKind, const DropoutMask*);
template NaiveResult<fp16> naive_attention(const Matrix<fp16>&, const Matrix<fp16>&,
                                           const Matrix<fp16>&, const AttentionOptions&,
                                           SoftmaxKind, const DropoutMask*);

}  // namespace flashlab::cpu
