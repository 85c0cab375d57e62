#include "flashlab/cpu/softmax_state.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

namespace flashlab::cpu {

namespace {
template <class Acc>
constexpr Acc minus_inf = -std::numeric_limits<Acc>::infinity();
}

template <class Acc>
SoftmaxState<Acc> SoftmaxState<Acc>::empty(Index rows, Index d) {
  return {Vector<Acc>::Constant(rows, minus_inf<Acc>), Vector<Acc>::Zero(rows),
          Matrix<Acc>::Zero(rows, d)};
}

template <class Acc, class In>
TileStep<Acc> update(SoftmaxState<Acc>& state, const Matrix<Acc>& S, MatrixView<In> V,
                     const Matrix<Acc>* Z) {
  const Index rows = S.rows();
  TileStep<Acc> step{S.rowwise().maxCoeff(), state.m, Vector<Acc>::Ones(rows)};
  Matrix<Acc> W = Matrix<Acc>::Zero(rows, S.cols());  // (rows, Bc) weights exp(S - m')

  for (Index r = 0; r < rows; ++r) {
    if (step.tile_max[r] == minus_inf<Acc>) {  // wholly masked in this tile: skip the row
      ++step.rows_skipped;
      continue;
    }
    const Acc m_new = std::max(state.m[r], step.tile_max[r]);
    step.m_new[r] = m_new;
    step.alpha[r] = std::exp(state.m[r] - m_new);  // 0 for a row that had seen nothing
    W.row(r) = (S.row(r).array() - m_new).exp();
  }

  accumulate<Acc, In>(state, step.alpha, std::move(W), V, Z);
  state.m = step.m_new;
  return step;
}

template <class Acc, class In>
void accumulate(SoftmaxState<Acc>& state, const Vector<Acc>& alpha, Matrix<Acc> W,
                MatrixView<In> V, const Matrix<Acc>* Z) {
  state.l = alpha.cwiseProduct(state.l) + W.rowwise().sum();
  if (Z) W = W.cwiseProduct(*Z);  // dropout acts on the weights after l has counted them
  state.U = alpha.asDiagonal() * state.U;
  if constexpr (is_low_precision<In>) {
    // A tensor core multiplies W V in the input precision: round W to it first.
    state.U.noalias() += W.template cast<In>().template cast<Acc>() * V.template cast<Acc>();
  } else {
    state.U.noalias() += W * V;
  }
}

template <class Acc, class In>
SoftmaxState<Acc> tile_state(const Matrix<Acc>& S, MatrixView<In> V) {
  auto state = SoftmaxState<Acc>::empty(S.rows(), V.cols());
  update(state, S, V);
  return state;
}

template <class Acc>
SoftmaxState<Acc> merge(const SoftmaxState<Acc>& a, const SoftmaxState<Acc>& b) {
  if (a.rows() != b.rows() || a.U.cols() != b.U.cols()) {
    std::ostringstream why;
    why << "cannot merge a state of " << a.rows() << " rows and d = " << a.U.cols()
        << " with one of " << b.rows() << " rows and d = " << b.U.cols()
        << ": merge combines two states of the same query rows, so both shapes must match";
    throw InvalidArgument(why.str());
  }
  const Index rows = a.rows();
  SoftmaxState<Acc> out{a.m.cwiseMax(b.m), Vector<Acc>(rows), Matrix<Acc>(rows, a.U.cols())};
  for (Index r = 0; r < rows; ++r) {
    if (out.m[r] == minus_inf<Acc>) {  // neither side saw a valid key: stay empty
      out.l[r] = 0;
      out.U.row(r).setZero();
      continue;
    }
    const Acc alpha = std::exp(a.m[r] - out.m[r]);  // moves a to the common base
    const Acc beta = std::exp(b.m[r] - out.m[r]);   // moves b to the common base
    out.l[r] = alpha * a.l[r] + beta * b.l[r];
    out.U.row(r) = alpha * a.U.row(r) + beta * b.U.row(r);
  }
  return out;
}

template <class Acc>
SoftmaxState<Acc> merge_into_normalised(Eigen::Ref<Matrix<Acc>> O, Eigen::Ref<Vector<Acc>> l,
                                        Eigen::Ref<Vector<Acc>> m, const SoftmaxState<Acc>& tile) {
  const SoftmaxState<Acc> stored{m, l, l.asDiagonal() * O};  // U = diag(l) O
  SoftmaxState<Acc> merged = merge(stored, tile);
  O = finalize(merged).O;
  l = merged.l;
  m = merged.m;
  return merged;
}

template <class Acc>
Vector<Acc> log_sum_exp(const Vector<Acc>& m, const Vector<Acc>& l) {
  Vector<Acc> L(m.size());
  for (Index r = 0; r < m.size(); ++r)  // no valid key: log 0 = -inf, whatever m holds
    L[r] = l[r] == Acc(0) ? minus_inf<Acc> : m[r] + std::log(l[r]);
  return L;
}

template <class Acc>
Normalised<Acc> finalize(const SoftmaxState<Acc>& state) {
  Normalised<Acc> out{Matrix<Acc>(state.U.rows(), state.U.cols()),
                      log_sum_exp<Acc>(state.m, state.l)};
  for (Index r = 0; r < state.rows(); ++r) {
    if (state.l[r] == Acc(0)) out.O.row(r).setZero();  // no valid key for this query: O = 0
    else out.O.row(r) = state.U.row(r) / state.l[r];
  }
  return out;
}

#define FLASHLAB_INSTANTIATE(Acc, In)                                                      \
  template void accumulate(SoftmaxState<Acc>&, const Vector<Acc>&, Matrix<Acc>, MatrixView<In>, \
                           const Matrix<Acc>*);                                            \
  template TileStep<Acc> update(SoftmaxState<Acc>&, const Matrix<Acc>&, MatrixView<In>,  \
                                const Matrix<Acc>*);                                     \
  template SoftmaxState<Acc> tile_state(const Matrix<Acc>&, MatrixView<In>);
FLASHLAB_INSTANTIATE(double, double)
FLASHLAB_INSTANTIATE(float, float)
FLASHLAB_INSTANTIATE(float, bf16)
FLASHLAB_INSTANTIATE(float, fp16)
#undef FLASHLAB_INSTANTIATE

template struct SoftmaxState<double>;
template struct SoftmaxState<float>;
template SoftmaxState<double> merge(const SoftmaxState<double>&, const SoftmaxState<double>&);
template SoftmaxState<float> merge(const SoftmaxState<float>&, const SoftmaxState<float>&);
template SoftmaxState<double> merge_into_normalised(Eigen::Ref<Matrix<double>>,
                                                    Eigen::Ref<Vector<double>>,
                                                    Eigen::Ref<Vector<double>>,
                                                    const SoftmaxState<double>&);
template SoftmaxState<float> merge_into_normalised(Eigen::Ref<Matrix<float>>,
                                                   Eigen::Ref<Vector<float>>,
                                                   Eigen::Ref<Vector<float>>,
                                                   const SoftmaxState<float>&);
template Vector<double> log_sum_exp(const Vector<double>&, const Vector<double>&);
template Vector<float> log_sum_exp(const Vector<float>&, const Vector<float>&);
template Normalised<double> finalize(const SoftmaxState<double>&);
template Normalised<float> finalize(const SoftmaxState<float>&);

}  // namespace flashlab::cpu
