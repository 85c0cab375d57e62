#include "flashlab/cpu/forward.hpp"

#include "flashlab/cpu/parallel.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace flashlab::cpu {

namespace {

// The dropout multipliers Z (rows, cols) of one tile; none without dropout.
template <class Acc>
std::optional<Matrix<Acc>> dropout_tile(const DropoutMask* dropout, Index q0, Index rows,
                                        Index k0, Index cols) {
  if (!dropout) return std::nullopt;
  return dropout->multipliers<Acc>(q0, rows, k0, cols);
}

}  // namespace

template <class In>
ForwardResult<accum_t<In>> forward_query_tile(MatrixView<In> Q_i, Index q0, MatrixView<In> K,
                                              MatrixView<In> V, Index n_q,
                                              const AttentionOptions& options, Index tile_number,
                                              const TileObserver<accum_t<In>>& observer,
                                              const DropoutMask* dropout) {
  using Acc = accum_t<In>;
  const Mask mask{options.causal, n_q, K.rows()};
  const Index rows = Q_i.rows(), d = Q_i.cols(), Bc = options.tiles.Bc;
  const Acc scale = static_cast<Acc>(options.scale_for(d));
  const Matrix<Acc> Q_i_scaled = Q_i.template cast<Acc>() * scale;  // (rows, d), on chip

  auto state = SoftmaxState<Acc>::empty(rows, d);  // m = -inf, l = 0, U = 0
  TileCounts counts;
  for (Index j = 0; j < tile_count(K.rows(), Bc); ++j) {
    const Index k0 = j * Bc, cols = std::min(Bc, K.rows() - k0);
    const TileKind kind = mask.classify(q0, rows, k0, cols);
    count_tile(counts, kind);
    if (kind == TileKind::skipped) {  // wholly in the future: never computed
      if (observer) observer({tile_number, j, q0, k0, kind});
      continue;
    }
    const Matrix<Acc> S = score_tile<In>(Q_i_scaled, K.middleRows(k0, cols), q0, k0, kind,
                                         mask, options);
    const auto Z = dropout_tile<Acc>(dropout, q0, rows, k0, cols);
    const TileStep<Acc> step = update<Acc, In>(state, S, V.middleRows(k0, cols), Z ? &*Z : nullptr);
    if (observer) observer({tile_number, j, q0, k0, kind, &S, &step, &state});
  }
  auto [O, L] = finalize(state);  // normalise once, at the end
  return {std::move(O), std::move(L), counts};
}

template <class In>
ForwardResult<accum_t<In>> forward_q_outer(const Matrix<In>& Q, const Matrix<In>& K,
                                           const Matrix<In>& V, const AttentionOptions& options,
                                           const TileObserver<accum_t<In>>& observer,
                                           const DropoutMask* dropout) {
  using Acc = accum_t<In>;
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  const Index n_q = Q.rows(), Br = options.tiles.Br, Tr = tile_count(n_q, Br);
  ForwardResult<Acc> out{Matrix<Acc>(n_q, Q.cols()), Vector<Acc>(n_q), {}};
  std::vector<TileCounts> counts(Tr);

  // Query tiles are independent: each one is a thread block on a GPU, a thread here.
  auto one_tile = [&](Index i) {
    const Index q0 = i * Br, rows = std::min(Br, n_q - q0);
    auto tile = forward_query_tile<In>(Q.middleRows(q0, rows), q0, K, V, n_q, options, i,
                                       observer, dropout);
    out.O.middleRows(q0, rows) = tile.O;
    out.L.segment(q0, rows) = tile.L;
    counts[i] = tile.tiles;
  };
  parallel_for(Tr, one_tile, /*serial=*/bool(observer));  // a trace wants its events in order
  for (const auto& c : counts) out.tiles += c;
  return out;
}

template <class In>
ForwardResult<accum_t<In>> forward_kv_outer(const Matrix<In>& Q, const Matrix<In>& K,
                                            const Matrix<In>& V, const AttentionOptions& options,
                                            const TileObserver<accum_t<In>>& observer,
                                            const DropoutMask* dropout) {
  using Acc = accum_t<In>;
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  const Index n_q = Q.rows(), n_k = K.rows(), d = Q.cols();
  const Index Br = options.tiles.Br, Bc = options.tiles.Bc;
  const Index Tr = tile_count(n_q, Br), Tc = tile_count(n_k, Bc);
  const Mask mask{options.causal, n_q, n_k};
  const Acc scale = static_cast<Acc>(options.scale_for(d));
  const Matrix<Acc> Q_scaled = Q.template cast<Acc>() * scale;  // (N_q, d)

  // The paper's HBM-resident output and statistics, initialised once: O = 0, l = 0, m = -inf.
  auto hbm = SoftmaxState<Acc>::empty(n_q, d);  // here U holds the normalised O
  std::vector<TileCounts> counts(Tr);

  auto one_step = [&](Index j, Index i) {
    const Index k0 = j * Bc, cols = std::min(Bc, n_k - k0);
    const Index q0 = i * Br, rows = std::min(Br, n_q - q0);
    const TileKind kind = mask.classify(q0, rows, k0, cols);
    count_tile(counts[i], kind);
    if (kind == TileKind::skipped) {
      if (observer) observer({i, j, q0, k0, kind});
      return;
    }
    const Matrix<Acc> S = score_tile<In>(Q_scaled.middleRows(q0, rows), K.middleRows(k0, cols),
                                         q0, k0, kind, mask, options);
    auto tile = SoftmaxState<Acc>::empty(rows, d);
    const auto Z = dropout_tile<Acc>(dropout, q0, rows, k0, cols);
    TileStep<Acc> step = update<Acc, In>(tile, S, V.middleRows(k0, cols), Z ? &*Z : nullptr);

    // Read O_i, l_i, m_i; undo the normalisation (U = l O); merge; write back O = U / l.
    const Vector<Acc> m_old = hbm.m.segment(q0, rows);
    const SoftmaxState<Acc> merged = merge_into_normalised<Acc>(
        hbm.U.middleRows(q0, rows), hbm.l.segment(q0, rows), hbm.m.segment(q0, rows), tile);

    if (observer) {
      step.m_new = merged.m;
      for (Index r = 0; r < rows; ++r)  // how much the stored state shrank at this step
        step.alpha[r] = merged.m[r] == m_old[r] ? Acc(1) : std::exp(m_old[r] - merged.m[r]);
      observer({i, j, q0, k0, kind, &S, &step, &merged});
    }
  };

  for (Index j = 0; j < Tc; ++j)  // outer: KV tiles, each loaded once
    // inner: query tiles, whose rows of O, l, m are disjoint
    parallel_for(Tr, [&](Index i) { one_step(j, i); }, /*serial=*/bool(observer));

  // U holds the normalised O already; only L = m + log l is left to form.
  Vector<Acc> L = log_sum_exp<Acc>(hbm.m, hbm.l);
  ForwardResult<Acc> out{std::move(hbm.U), std::move(L), {}};
  for (const auto& c : counts) out.tiles += c;
  return out;
}

#define FLASHLAB_INSTANTIATE(In)                                                              \
  template ForwardResult<accum_t<In>> forward_query_tile<In>(                                 \
      MatrixView<In>, Index, MatrixView<In>, MatrixView<In>, Index, const AttentionOptions&,  \
      Index, const TileObserver<accum_t<In>>&, const DropoutMask*);                           \
  template ForwardResult<accum_t<In>> forward_q_outer<In>(                                    \
      const Matrix<In>&, const Matrix<In>&, const Matrix<In>&, const AttentionOptions&,       \
      const TileObserver<accum_t<In>>&, const DropoutMask*);                                  \
  template ForwardResult<accum_t<In>> forward_kv_outer<In>(                                   \
      const Matrix<In>&, const Matrix<In>&, const Matrix<In>&, const AttentionOptions&,       \
      const TileObserver<accum_t<In>>&, const DropoutMask*);
FLASHLAB_INSTANTIATE(double)
FLASHLAB_INSTANTIATE(float)
FLASHLAB_INSTANTIATE(bf16)
FLASHLAB_INSTANTIATE(fp16)
#undef FLASHLAB_INSTANTIATE

}  // namespace flashlab::cpu
