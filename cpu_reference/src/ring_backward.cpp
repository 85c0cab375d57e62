#include "flashlab/cpu/ring_backward.hpp"

#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/parallel.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace flashlab::cpu {

namespace {

// The rows `chunks` of X (a matrix or a vector), stacked in chunk order: what one rank
// holds of X.
template <class X>
X gather_rows(const X& whole, const std::vector<Chunk>& chunks) {
  Index rows = 0;
  for (const Chunk& c : chunks) rows += c.rows;
  X part(rows, whole.cols());
  Index at = 0;
  for (const Chunk& c : chunks) {
    part.middleRows(at, c.rows) = whole.middleRows(c.begin, c.rows);
    at += c.rows;
  }
  return part;
}

// The inverse: a rank's rows put back in their place in the whole.
template <class X>
void scatter_rows(const X& part, const std::vector<Chunk>& chunks, X& whole) {
  Index at = 0;
  for (const Chunk& c : chunks) {
    whole.middleRows(c.begin, c.rows) = part.middleRows(at, c.rows);
    at += c.rows;
  }
}

// What stays on a rank for the whole backward.
template <class T>
struct RankRows {
  std::vector<Chunk> chunks;
  Matrix<T> Q, Q_scaled, dO;  // (rows, d)
  Vector<T> L, D;             // (rows)
  Matrix<T> dQ;               // (rows, d) accumulated over the steps, never sent
  Matrix<T> dK_own, dV_own;   // (its K/V rows, d) its share of its own slice, from step 0
};

// What travels: a K/V slice and the accumulator of its gradients.
template <class T>
struct HeldSlice {
  Index owner = 0;
  std::vector<Chunk> chunks;  // the rows of K and V it carries
  Matrix<T> K, V;             // (rows, d); dropped after the last step that reads them
  Matrix<T> dK, dV;           // (rows, d) shares of the ranks after its owner; none before step 1
};

Index sum_of(const std::vector<Index>& v, Index rank, Index ranks) {
  const auto first = v.begin() + rank * ranks;
  return std::accumulate(first, first + ranks, Index{0});
}

}  // namespace

Index RingSends::kv_rows_sent(Index rank) const { return sum_of(kv_rows, rank, ranks); }
Index RingSends::gradient_rows_sent(Index rank) const { return sum_of(gradient_rows, rank, ranks); }

template <class T>
TileCounts slice_backward(const SliceBackwardInputs<T>& in, const std::vector<Chunk>& q,
                          const std::vector<Chunk>& k, const Mask& mask, T scale,
                          const AttentionOptions& options, Eigen::Ref<Matrix<T>> dQ_r,
                          Eigen::Ref<Matrix<T>> dK_s, Eigen::Ref<Matrix<T>> dV_s) {
  const Index Br = options.tiles.Br, Bc = options.tiles.Bc;
  TileCounts tiles;
  Index qa = 0;  // where chunk qc starts in the rank's rows
  for (const Chunk& qc : q) {
    for (Index i = 0; i < tile_count(qc.rows, Br); ++i) {
      const Index q0 = qc.begin + i * Br, rows = std::min(Br, qc.rows - i * Br);
      const Index qi = qa + i * Br;  // the tile's first row on the rank
      Index ka = 0;
      for (const Chunk& kc : k) {
        for (Index j = 0; j < tile_count(kc.rows, Bc); ++j) {
          const Index k0 = kc.begin + j * Bc, cols = std::min(Bc, kc.rows - j * Bc);
          const Index kj = ka + j * Bc;
          const TileKind kind = mask.classify(q0, rows, k0, cols);  // global rows and keys
          count_tile(tiles, kind);
          if (kind == TileKind::skipped) continue;
          const BackwardTileInputs<T> tile{
              in.Q_r.middleRows(qi, rows), in.K_s.middleRows(kj, cols),
              in.V_s.middleRows(kj, cols), in.dO_r.middleRows(qi, rows),
              in.L_r.segment(qi, rows),    in.D_r.segment(qi, rows)};
          const Matrix<T> S = score_tile<T>(in.Q_scaled_r.middleRows(qi, rows), tile.K_j, q0, k0,
                                            kind, mask, options);  // (rows, cols)
          backward_tile<T>(S, tile, scale, nullptr, dQ_r.middleRows(qi, rows),
                           dK_s.middleRows(kj, cols), dV_s.middleRows(kj, cols));
        }
        ka += kc.rows;
      }
    }
    qa += qc.rows;
  }
  return tiles;
}

template <class T>
RingGradients<T> ring_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                               const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                               const RingOptions& ring, const AttentionOptions& options) {
  check_backward_inputs(Q, K, V, O, L, dO, options);
  const Index P = ring.ranks, n_q = Q.rows(), n_k = K.rows(), d = Q.cols();
  check_ranks(P, n_q, n_k, ring.layout);
  const T scale = static_cast<T>(options.scale_for(d));
  const Mask mask{options.causal, n_q, n_k};

  std::vector<RankRows<T>> rank(static_cast<size_t>(P));
  std::vector<HeldSlice<T>> held(static_cast<size_t>(P));  // [r]: what rank r holds now
  for (Index r = 0; r < P; ++r) {
    RankRows<T>& me = rank[size_t(r)];
    me.chunks = rank_slice(r, P, n_q, ring.layout);
    me.Q = gather_rows(Q, me.chunks);
    me.Q_scaled = me.Q * scale;
    me.dO = gather_rows(dO, me.chunks);
    me.L = gather_rows(L, me.chunks);
    me.D = compute_D<T>(me.dO, gather_rows(O, me.chunks));  // from its own rows alone
    me.dQ = Matrix<T>::Zero(me.Q.rows(), d);
    HeldSlice<T>& slice = held[size_t(r)];
    slice.owner = r;
    slice.chunks = rank_slice(r, P, n_k, ring.layout);
    slice.K = gather_rows(K, slice.chunks);
    slice.V = gather_rows(V, slice.chunks);
  }

  RingGradients<T> out{Matrix<T>(n_q, d),
                       Matrix<T>(n_k, d),
                       Matrix<T>(n_k, d),
                       Vector<T>(n_q),
                       {P, std::vector<TileCounts>(static_cast<size_t>(P * P))},
                       {P, std::vector<Index>(size_t(P * P)), std::vector<Index>(size_t(P * P))}};
  for (Index s = 0; s < P; ++s) {
    parallel_for(P, [&](Index r) {  // the ranks of one step run at the same time
      RankRows<T>& me = rank[size_t(r)];
      HeldSlice<T>& slice = held[size_t(r)];
      Matrix<T> dK_share = Matrix<T>::Zero(slice.K.rows(), d);  // this step's share
      Matrix<T> dV_share = Matrix<T>::Zero(slice.K.rows(), d);
      const SliceBackwardInputs<T> in{me.Q, me.Q_scaled, me.dO, me.L, me.D, slice.K, slice.V};
      out.work.at(r, s) = slice_backward<T>(in, me.chunks, slice.chunks, mask, scale, options,
                                            me.dQ, dK_share, dV_share);
      if (s == 0) {  // its own slice: the share stays home
        me.dK_own = std::move(dK_share);
        me.dV_own = std::move(dV_share);
      } else if (s == 1) {  // the accumulator of this slice is born here
        slice.dK = std::move(dK_share);
        slice.dV = std::move(dV_share);
      } else {
        slice.dK += dK_share;
        slice.dV += dV_share;
      }
    });
    if (!sends_kv(s, P) && !sends_gradients(s, P)) continue;  // P = 1: nothing moves
    std::vector<HeldSlice<T>> arrived(static_cast<size_t>(P));
    for (Index r = 0; r < P; ++r) {  // rank r sends to rank r + 1
      HeldSlice<T>& slice = held[size_t(r)];
      if (sends_kv(s, P)) {
        out.sends.kv_rows[size_t(r * P + s)] = slice.K.rows();
      } else {  // no later step reads this K and V: only the accumulator goes on
        slice.K.resize(0, d);
        slice.V.resize(0, d);
      }
      if (sends_gradients(s, P)) out.sends.gradient_rows[size_t(r * P + s)] = slice.dK.rows();
      arrived[size_t((r + 1) % P)] = std::move(slice);
    }
    held = std::move(arrived);
  }

  for (Index r = 0; r < P; ++r) {  // each accumulator is home: its owner adds its own share
    RankRows<T>& me = rank[size_t(r)];
    const HeldSlice<T>& slice = held[size_t(r)];
    if (slice.owner != r) throw std::logic_error("ring_backward: an accumulator missed its owner");
    if (P > 1) {
      me.dK_own += slice.dK;
      me.dV_own += slice.dV;
    }
    scatter_rows(me.dQ, me.chunks, out.dQ);
    scatter_rows(me.dK_own, slice.chunks, out.dK);  // the rows it started with
    scatter_rows(me.dV_own, slice.chunks, out.dV);
    scatter_rows(me.D, me.chunks, out.D);
  }
  return out;
}

template <class T>
MultiHeadRingGradients<T> ring_backward_multihead(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                                                  const HeadTensor<T>& V, const HeadTensor<T>& O,
                                                  const HeadTensor<T>& L, const HeadTensor<T>& dO,
                                                  const RingOptions& ring,
                                                  const AttentionOptions& options) {
  check_multihead_backward(Q, K, V, O, L, dO, options, std::nullopt);
  MultiHeadRingGradients<T> out{HeadTensor<T>(Q.batch, Q.heads, Q.rows, Q.cols),
                                HeadTensor<T>(K.batch, K.heads, K.rows, K.cols),
                                HeadTensor<T>(K.batch, K.heads, K.rows, K.cols),
                                {}};
  std::fill(out.dK.data.begin(), out.dK.data.end(), T(0));
  std::fill(out.dV.data.begin(), out.dV.data.end(), T(0));
  for (Index b = 0; b < Q.batch; ++b) {
    for (Index h = 0; h < Q.heads; ++h) {  // a group's query heads in order
      const Index h_kv = kv_head_for(h, Q.heads, K.heads);
      const Vector<T> L_h = L.head(b, h).col(0);
      const RingGradients<T> g = ring_backward<T>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv),
                                                  O.head(b, h), L_h, dO.head(b, h), ring, options);
      out.dQ.head(b, h) = g.dQ;
      out.dK.head(b, h_kv) += g.dK;  // every query head of the group reads this KV head
      out.dV.head(b, h_kv) += g.dV;
      out.work += g.work;
    }
  }
  return out;
}

#define FLASHLAB_INSTANTIATE_RING_BACKWARD(T)                                                      \
  template TileCounts slice_backward<T>(const SliceBackwardInputs<T>&, const std::vector<Chunk>&,  \
                                        const std::vector<Chunk>&, const Mask&, T,                 \
                                        const AttentionOptions&, Eigen::Ref<Matrix<T>>,            \
                                        Eigen::Ref<Matrix<T>>, Eigen::Ref<Matrix<T>>);             \
  template RingGradients<T> ring_backward<T>(const Matrix<T>&, const Matrix<T>&, const Matrix<T>&, \
                                             const Matrix<T>&, const Vector<T>&, const Matrix<T>&, \
                                             const RingOptions&, const AttentionOptions&);         \
  template MultiHeadRingGradients<T> ring_backward_multihead<T>(                                   \
      const HeadTensor<T>&, const HeadTensor<T>&, const HeadTensor<T>&, const HeadTensor<T>&,      \
      const HeadTensor<T>&, const HeadTensor<T>&, const RingOptions&, const AttentionOptions&);
FLASHLAB_INSTANTIATE_RING_BACKWARD(double)
FLASHLAB_INSTANTIATE_RING_BACKWARD(float)
#undef FLASHLAB_INSTANTIATE_RING_BACKWARD

}  // namespace flashlab::cpu
