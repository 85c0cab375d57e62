#include "flashlab/cpu/ring.hpp"

#include "flashlab/cpu/parallel.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace flashlab::cpu {

template <class Acc>
SoftmaxState<Acc> state_of(const Matrix<Acc>& O, const Vector<Acc>& L) {
  auto state = SoftmaxState<Acc>::empty(O.rows(), O.cols());
  for (Index r = 0; r < O.rows(); ++r) {
    if (L[r] == -std::numeric_limits<Acc>::infinity()) continue;  // saw no key: stays empty
    state.m[r] = L[r];  // exp(L) = l exp(m): the same weights on the base L sum to 1
    state.l[r] = 1;
    state.U.row(r) = O.row(r);
  }
  return state;
}

namespace {
Index rows_of(const std::vector<Chunk>& chunks) {
  Index rows = 0;
  for (const Chunk& c : chunks) rows += c.rows;
  return rows;
}
}  // namespace

template <class In>
ForwardResult<accum_t<In>> slice_forward(const Matrix<In>& Q, const Matrix<In>& K,
                                         const Matrix<In>& V, const std::vector<Chunk>& q,
                                         const std::vector<Chunk>& k,
                                         const AttentionOptions& options) {
  using Acc = accum_t<In>;
  const Index d = Q.cols(), Br = options.tiles.Br, Bc = options.tiles.Bc;
  const Mask mask{options.causal, Q.rows(), K.rows()};
  const Acc scale = static_cast<Acc>(options.scale_for(d));
  ForwardResult<Acc> out{Matrix<Acc>(rows_of(q), V.cols()), Vector<Acc>(rows_of(q)), {}};
  Index row = 0;  // where the next query tile goes in O and L
  for (const Chunk& qc : q) {
    for (Index i = 0; i < tile_count(qc.rows, Br); ++i) {
      const Index q0 = qc.begin + i * Br, rows = std::min(Br, qc.rows - i * Br);
      const Matrix<Acc> Q_scaled = Q.middleRows(q0, rows).template cast<Acc>() * scale;
      auto state = SoftmaxState<Acc>::empty(rows, V.cols());  // (m, l, U) of Q_i, on chip
      for (const Chunk& kc : k) {
        for (Index j = 0; j < tile_count(kc.rows, Bc); ++j) {
          const Index k0 = kc.begin + j * Bc, cols = std::min(Bc, kc.rows - j * Bc);
          const TileKind kind = mask.classify(q0, rows, k0, cols);
          count_tile(out.tiles, kind);
          if (kind == TileKind::skipped) continue;
          const Matrix<Acc> S =
              score_tile<In>(Q_scaled, K.middleRows(k0, cols), q0, k0, kind, mask, options);
          update<Acc, In>(state, S, V.middleRows(k0, cols));
        }
      }
      auto [O_i, L_i] = finalize(state);
      out.O.middleRows(row, rows) = O_i;
      out.L.segment(row, rows) = L_i;
      row += rows;
    }
  }
  return out;
}

template <class In>
RingResult<accum_t<In>> ring_attention(const Matrix<In>& Q, const Matrix<In>& K,
                                       const Matrix<In>& V, const RingOptions& ring,
                                       const AttentionOptions& options) {
  using Acc = accum_t<In>;
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  const Index P = ring.ranks, n_q = Q.rows(), n_k = K.rows();
  check_ranks(P, n_q, n_k, ring.layout);

  std::vector<std::vector<Chunk>> q_slice, kv_slice;  // what each rank starts with
  std::vector<SoftmaxState<Acc>> running;             // each rank's state (m, l, U)
  for (Index r = 0; r < P; ++r) {
    q_slice.push_back(rank_slice(r, P, n_q, ring.layout));
    kv_slice.push_back(rank_slice(r, P, n_k, ring.layout));
    running.push_back(SoftmaxState<Acc>::empty(rows_of(q_slice.back()), V.cols()));
  }
  RingResult<Acc> out{Matrix<Acc>(n_q, V.cols()),
                      Vector<Acc>(n_q),
                      {P, std::vector<TileCounts>(static_cast<size_t>(P * P))}};
  for (Index s = 0; s < P; ++s) {
    parallel_for(P, [&](Index r) {  // the ranks of one step run at the same time
      const auto held = static_cast<size_t>(kv_source(r, s, P));
      const auto [O_s, L_s, tiles] =
          slice_forward<In>(Q, K, V, q_slice[r], kv_slice[held], options);
      running[r] = merge(running[r], state_of(O_s, L_s));
      out.work.at(r, s) = tiles;
    });
    // Here each rank would send the K/V slice it holds to rank r + 1: kv_source() of the
    // next step names the slice that arrives.
  }
  for (Index r = 0; r < P; ++r) {  // gather: each rank's rows back to their place
    const auto [O_r, L_r] = finalize(running[r]);
    Index row = 0;
    for (const Chunk& c : q_slice[r]) {
      out.O.middleRows(c.begin, c.rows) = O_r.middleRows(row, c.rows);
      out.L.segment(c.begin, c.rows) = L_r.segment(row, c.rows);
      row += c.rows;
    }
  }
  return out;
}

template <class In>
MultiHeadRingResult<accum_t<In>> ring_attention_multihead(const HeadTensor<In>& Q,
                                                          const HeadTensor<In>& K,
                                                          const HeadTensor<In>& V,
                                                          const RingOptions& ring,
                                                          const AttentionOptions& options) {
  using Acc = accum_t<In>;
  check_heads(Q, K, V, options);
  MultiHeadRingResult<Acc> out{HeadTensor<Acc>(Q.batch, Q.heads, Q.rows, V.cols),
                               HeadTensor<Acc>(Q.batch, Q.heads, Q.rows, 1),
                               {}};
  for (Index b = 0; b < Q.batch; ++b) {
    for (Index h = 0; h < Q.heads; ++h) {
      const Index h_kv = kv_head_for(h, Q.heads, K.heads);
      const auto result =
          ring_attention<In>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv), ring, options);
      out.O.head(b, h) = result.O;
      out.L.head(b, h) = result.L;
      out.work += result.work;
    }
  }
  return out;
}

#define FLASHLAB_INSTANTIATE_RING(In)                                                          \
  template ForwardResult<accum_t<In>> slice_forward<In>(                                       \
      const Matrix<In>&, const Matrix<In>&, const Matrix<In>&, const std::vector<Chunk>&,      \
      const std::vector<Chunk>&, const AttentionOptions&);                                     \
  template RingResult<accum_t<In>> ring_attention<In>(const Matrix<In>&, const Matrix<In>&,    \
                                                      const Matrix<In>&, const RingOptions&,   \
                                                      const AttentionOptions&);                \
  template MultiHeadRingResult<accum_t<In>> ring_attention_multihead<In>(                      \
      const HeadTensor<In>&, const HeadTensor<In>&, const HeadTensor<In>&, const RingOptions&, \
      const AttentionOptions&);
FLASHLAB_INSTANTIATE_RING(double)
FLASHLAB_INSTANTIATE_RING(float)
FLASHLAB_INSTANTIATE_RING(bf16)
#undef FLASHLAB_INSTANTIATE_RING

template SoftmaxState<double> state_of(const Matrix<double>&, const Vector<double>&);
template SoftmaxState<float> state_of(const Matrix<float>&, const Vector<float>&);

}  // namespace flashlab::cpu
