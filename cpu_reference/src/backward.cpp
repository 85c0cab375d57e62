#include "flashlab/cpu/backward.hpp"

#include "flashlab/cpu/backward_tile.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <sstream>

namespace flashlab::cpu {

namespace {

// Recomputes the scores of the tile (query rows [q0, q0 + rows), keys [k0, k0 + cols))
// exactly as the forward formed them, and adds the tile's contributions to dQ_i (rows, d),
// dK_j and dV_j (cols, d).
template <class T>
void tile_gradients(const BackwardHead<T>& in, Index q0, Index rows, Index k0, Index cols,
                    TileKind kind, Eigen::Ref<Matrix<T>> dQ_i, Eigen::Ref<Matrix<T>> dK_j,
                    Eigen::Ref<Matrix<T>> dV_j) {
  const BackwardTileInputs<T> tile{in.Q.middleRows(q0, rows), in.K.middleRows(k0, cols),
                                   in.V.middleRows(k0, cols), in.dO.middleRows(q0, rows),
                                   in.L.segment(q0, rows),    in.D.segment(q0, rows)};
  const Matrix<T> S = score_tile<T>(in.Q_scaled.middleRows(q0, rows), tile.K_j, q0, k0, kind,
                                    in.mask, in.options);  // (rows, cols)
  if (in.dropout) {                                        // replay the forward's mask
    const Matrix<T> Z = in.dropout->template multipliers<T>(q0, rows, k0, cols);
    backward_tile<T>(S, tile, in.scale, &Z, dQ_i, dK_j, dV_j);
  } else {
    backward_tile<T>(S, tile, in.scale, nullptr, dQ_i, dK_j, dV_j);
  }
}

template <class T>
Gradients<T> zero_gradients(const BackwardHead<T>& in) {
  const Index d = in.Q.cols();
  return {Matrix<T>::Zero(in.Q.rows(), d),
          Matrix<T>::Zero(in.K.rows(), d),
          Matrix<T>::Zero(in.K.rows(), d),
          in.D,
          {}};
}

}  // namespace

template <class T>
Vector<T> compute_D(const Matrix<T>& dO, const Matrix<T>& O) {
  return dO.cwiseProduct(O).rowwise().sum();
}

template <class T>
void check_backward_inputs(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                           const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                           const AttentionOptions& options) {
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  const Index n_q = Q.rows(), d = Q.cols();
  std::ostringstream why;
  if (O.rows() != n_q || O.cols() != d) {
    why << "O is (" << O.rows() << ", " << O.cols() << ") but Q is (N_q, d) = (" << n_q << ", " << d
        << "): pass the output that the forward returned for this Q";
  } else if (dO.rows() != n_q || dO.cols() != d) {
    why << "dO is (" << dO.rows() << ", " << dO.cols() << ") but O is (N_q, d) = (" << n_q << ", "
        << d << "): dO is the loss's gradient with respect to O and has O's shape";
  } else if (L.size() == 0 && n_q > 0) {
    why << "L is missing (it has no entries): the backward recomputes P = exp(S - L) from "
           "the log-sum-exp that the forward returned, one entry per query row (N_q = "
        << n_q << ")";
  } else if (L.size() != n_q) {
    why << "L has " << L.size() << " entries but Q has N_q = " << n_q
        << " rows: L is the forward's log-sum-exp, one entry per query row";
  }
  if (!why.str().empty()) throw InvalidArgument(why.str());
}

template <class T>
BackwardHead<T> prepare_backward(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                                 const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                                 const AttentionOptions& options, const DropoutMask* dropout) {
  check_backward_inputs(Q, K, V, O, L, dO, options);
  const T scale = static_cast<T>(options.scale_for(Q.cols()));
  return {Q,
          Q * scale,
          K,
          V,
          dO,
          L,
          compute_D(dO, O),
          Mask{options.causal, Q.rows(), K.rows()},
          options,
          scale,
          dropout};
}

template <class T>
std::vector<ScoreGradient<T>> backward_kv_tile(const BackwardHead<T>& in, Index j, Matrix<T>& dK_j,
                                               Matrix<T>& dV_j, TileCounts& tiles) {
  const Index n_q = in.Q.rows(), n_k = in.K.rows(), d = in.Q.cols();
  const Index Br = in.options.tiles.Br, Bc = in.options.tiles.Bc;
  const Index k0 = j * Bc, cols = std::min(Bc, n_k - k0);
  dK_j = Matrix<T>::Zero(cols, d);  // on chip
  dV_j = Matrix<T>::Zero(cols, d);
  std::vector<ScoreGradient<T>> dS;
  for (Index i = 0; i < tile_count(n_q, Br); ++i) {  // query tiles
    const Index q0 = i * Br, rows = std::min(Br, n_q - q0);
    const TileKind kind = in.mask.classify(q0, rows, k0, cols);
    count_tile(tiles, kind);
    if (kind == TileKind::skipped) continue;  // wholly in the future: P = 0 there
    const BackwardTileInputs<T> tile{in.Q.middleRows(q0, rows), in.K.middleRows(k0, cols),
                                     in.V.middleRows(k0, cols), in.dO.middleRows(q0, rows),
                                     in.L.segment(q0, rows),    in.D.segment(q0, rows)};
    const Matrix<T> S = score_tile<T>(in.Q_scaled.middleRows(q0, rows), tile.K_j, q0, k0, kind,
                                      in.mask, in.options);  // (rows, cols)
    if (in.dropout) {                                        // replay the forward's mask
      const Matrix<T> Z = in.dropout->template multipliers<T>(q0, rows, k0, cols);
      dS.push_back({q0, backward_tile_kv<T>(S, tile, in.scale, &Z, dK_j, dV_j)});
    } else {
      dS.push_back({q0, backward_tile_kv<T>(S, tile, in.scale, nullptr, dK_j, dV_j)});
    }
  }
  return dS;
}

template <class T>
void add_dQ(const BackwardHead<T>& in, Index j, const std::vector<ScoreGradient<T>>& dS,
            Eigen::Ref<Matrix<T>> dQ) {
  const Index Bc = in.options.tiles.Bc, k0 = j * Bc, cols = std::min(Bc, in.K.rows() - k0);
  for (const ScoreGradient<T>& g : dS)
    add_tile_dQ<T>(g.dS, in.K.middleRows(k0, cols), in.scale, dQ.middleRows(g.q0, g.dS.rows()));
}

// The tiles run one after another, so every accumulation happens in a fixed order and the
// gradients are bitwise reproducible. (A GPU runs the outer loop's tiles as parallel thread
// blocks that add into the shared gradient with atomics, in an order that varies.)
template <class T>
Gradients<T> backward_kv_outer(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                               const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                               const AttentionOptions& options, const DropoutMask* dropout) {
  const BackwardHead<T> in = prepare_backward(Q, K, V, O, L, dO, options, dropout);
  const Index Bc = options.tiles.Bc;
  Gradients<T> out = zero_gradients(in);
  Matrix<T> dK_j, dV_j;  // (cols, d) on chip

  for (Index j = 0; j < tile_count(K.rows(), Bc); ++j) {  // outer: KV tiles
    const std::vector<ScoreGradient<T>> dS = backward_kv_tile<T>(in, j, dK_j, dV_j, out.tiles);
    add_dQ<T>(in, j, dS, out.dQ);  // dQ_i += dS K_j * scale, for each query tile i in order
    out.dK.middleRows(j * Bc, dK_j.rows()) = dK_j;  // finished: written once
    out.dV.middleRows(j * Bc, dV_j.rows()) = dV_j;
  }
  return out;
}

template <class T>
Gradients<T> backward_q_outer(const Matrix<T>& Q, const Matrix<T>& K, const Matrix<T>& V,
                              const Matrix<T>& O, const Vector<T>& L, const Matrix<T>& dO,
                              const AttentionOptions& options, const DropoutMask* dropout) {
  const BackwardHead<T> in = prepare_backward(Q, K, V, O, L, dO, options, dropout);
  const Index n_q = Q.rows(), n_k = K.rows(), d = Q.cols();
  const Index Br = options.tiles.Br, Bc = options.tiles.Bc;
  Gradients<T> out = zero_gradients(in);

  for (Index i = 0; i < tile_count(n_q, Br); ++i) {  // outer: query tiles
    const Index q0 = i * Br, rows = std::min(Br, n_q - q0);
    Matrix<T> dQ_i = Matrix<T>::Zero(rows, d);         // on chip
    for (Index j = 0; j < tile_count(n_k, Bc); ++j) {  // inner: KV tiles
      const Index k0 = j * Bc, cols = std::min(Bc, n_k - k0);
      const TileKind kind = in.mask.classify(q0, rows, k0, cols);
      count_tile(out.tiles, kind);
      if (kind == TileKind::skipped) continue;
      tile_gradients<T>(in, q0, rows, k0, cols, kind, dQ_i, out.dK.middleRows(k0, cols),
                        out.dV.middleRows(k0, cols));
    }
    out.dQ.middleRows(q0, rows) = dQ_i;  // finished: written once
  }
  return out;
}

#define FLASHLAB_INSTANTIATE(T)                                                                   \
  template Vector<T> compute_D(const Matrix<T>&, const Matrix<T>&);                               \
  template void check_backward_inputs(const Matrix<T>&, const Matrix<T>&, const Matrix<T>&,       \
                                      const Matrix<T>&, const Vector<T>&, const Matrix<T>&,       \
                                      const AttentionOptions&);                                   \
  template BackwardHead<T> prepare_backward(const Matrix<T>&, const Matrix<T>&, const Matrix<T>&, \
                                            const Matrix<T>&, const Vector<T>&, const Matrix<T>&, \
                                            const AttentionOptions&, const DropoutMask*);         \
  template std::vector<ScoreGradient<T>> backward_kv_tile(const BackwardHead<T>&, Index,          \
                                                          Matrix<T>&, Matrix<T>&, TileCounts&);   \
  template void add_dQ(const BackwardHead<T>&, Index, const std::vector<ScoreGradient<T>>&,       \
                       Eigen::Ref<Matrix<T>>);                                                    \
  template Gradients<T> backward_kv_outer(const Matrix<T>&, const Matrix<T>&, const Matrix<T>&,   \
                                          const Matrix<T>&, const Vector<T>&, const Matrix<T>&,   \
                                          const AttentionOptions&, const DropoutMask*);           \
  template Gradients<T> backward_q_outer(const Matrix<T>&, const Matrix<T>&, const Matrix<T>&,    \
                                         const Matrix<T>&, const Vector<T>&, const Matrix<T>&,    \
                                         const AttentionOptions&, const DropoutMask*);
FLASHLAB_INSTANTIATE(double)
FLASHLAB_INSTANTIATE(float)
#undef FLASHLAB_INSTANTIATE

}  // namespace flashlab::cpu
