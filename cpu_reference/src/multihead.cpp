#include "flashlab/cpu/multihead.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/parallel.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>

namespace flashlab::cpu {

namespace {

// The entries of a (batch, heads, rows, cols) tensor, checked: no extent negative, no
// partial product past 2^63 - 1.
Index entries(Index batch, Index heads, Index rows, Index cols) {
  for (const auto& [name, extent] : {std::pair{"batch", batch}, {"heads", heads},
                                     {"rows", rows}, {"cols", cols}})
    check_nonnegative(extent, std::string("a HeadTensor's ") + name);
  return checked_product({batch, heads, rows, cols}, "a HeadTensor's batch x heads x rows x cols");
}

template <class T>
Index head_offset(const HeadTensor<T>& X, Index b, Index h) {
  if (b < 0 || b >= X.batch || h < 0 || h >= X.heads) {
    std::ostringstream why;
    why << "head(" << b << ", " << h << ") of a tensor of " << X.batch << " batch entries and "
        << X.heads << " heads: b must be in [0, batch) and h in [0, heads)";
    throw InvalidArgument(why.str());
  }
  return (b * X.heads + h) * X.rows * X.cols;  // below the entries checked at construction
}

}  // namespace

template <class T>
HeadTensor<T>::HeadTensor(Index batch, Index heads, Index rows, Index cols)
    : batch(batch), heads(heads), rows(rows), cols(cols),
      data(static_cast<size_t>(entries(batch, heads, rows, cols))) {}

template <class T>
Eigen::Map<Matrix<T>> HeadTensor<T>::head(Index b, Index h) {
  return {data.data() + head_offset(*this, b, h), rows, cols};
}

template <class T>
Eigen::Map<const Matrix<T>> HeadTensor<T>::head(Index b, Index h) const {
  return {data.data() + head_offset(*this, b, h), rows, cols};
}

Index kv_head_for(Index h, Index heads_q, Index heads_kv) {
  if (heads_q < 1 || heads_kv < 1 || heads_q % heads_kv != 0) {
    std::ostringstream why;
    why << heads_q << " query heads cannot share " << heads_kv
        << " KV heads: the number of query heads must be a positive multiple of the number "
           "of KV heads (equal for multi-head, 1 KV head for MQA, a divisor for GQA)";
    throw InvalidArgument(why.str());
  }
  return h / (heads_q / heads_kv);
}

template <class In>
void check_heads(const HeadTensor<In>& Q, const HeadTensor<In>& K, const HeadTensor<In>& V,
                 const AttentionOptions& options) {
  std::ostringstream why;
  for (const auto* X : {&Q, &K, &V})
    if (X->data.size() != static_cast<size_t>(entries(X->batch, X->heads, X->rows, X->cols))) {
      why << (X == &Q ? "Q" : X == &K ? "K" : "V") << " claims the shape (" << X->batch << ", "
          << X->heads << ", " << X->rows << ", " << X->cols << ") but holds " << X->data.size()
          << " entries: a HeadTensor must hold batch * heads * rows * cols of them";
      throw InvalidArgument(why.str());
    }
  if (K.batch != Q.batch || V.batch != Q.batch) {
    why << "batch sizes differ: Q has " << Q.batch << ", K " << K.batch << ", V " << V.batch
        << "; Q, K and V must have the same batch size";
  } else if (K.heads != V.heads) {
    why << "K has " << K.heads << " heads but V has " << V.heads
        << ": K and V must have the same number of (KV) heads";
  }
  if (!why.str().empty()) throw InvalidArgument(why.str());
  kv_head_for(0, Q.heads, K.heads);
  check_shapes(Q.rows, Q.cols, K.rows, K.cols, V.rows, V.cols, options);
}

template <class In>
MultiHeadResult<accum_t<In>> forward_multihead(const HeadTensor<In>& Q, const HeadTensor<In>& K,
                                               const HeadTensor<In>& V,
                                               const AttentionOptions& options,
                                               const std::optional<Dropout>& dropout) {
  using Acc = accum_t<In>;
  check_heads(Q, K, V, options);
  if (dropout) check_dropout(*dropout);
  const Index Br = options.tiles.Br, Tr = tile_count(Q.rows, Br);
  MultiHeadResult<Acc> out{HeadTensor<Acc>(Q.batch, Q.heads, Q.rows, Q.cols),
                           HeadTensor<Acc>(Q.batch, Q.heads, Q.rows, 1), {}};

  // One flat list of independent work items: (batch, query head, query tile).
  const Index items = checked_product({Q.batch, Q.heads, Tr}, "(batch, head, query tile) items");
  std::vector<TileCounts> counts(static_cast<size_t>(items));
  parallel_for(items, [&](Index item) {
    const Index b = item / (Q.heads * Tr), h = (item / Tr) % Q.heads, i = item % Tr;
    const Index h_kv = kv_head_for(h, Q.heads, K.heads);
    const Index q0 = i * Br, rows = std::min(Br, Q.rows - q0);
    const std::optional<DropoutMask> mask =
        dropout ? std::optional<DropoutMask>(std::in_place, *dropout, b, h) : std::nullopt;
    auto tile = forward_query_tile<In>(Q.head(b, h).middleRows(q0, rows), q0, K.head(b, h_kv),
                                       V.head(b, h_kv), Q.rows, options, i, {},
                                       mask ? &*mask : nullptr);
    out.O.head(b, h).middleRows(q0, rows) = tile.O;
    out.L.head(b, h).middleRows(q0, rows) = tile.L;
    counts[item] = tile.tiles;
  });
  for (const auto& c : counts) out.tiles += c;
  return out;
}

template void check_heads(const HeadTensor<double>&, const HeadTensor<double>&,
                          const HeadTensor<double>&, const AttentionOptions&);
template void check_heads(const HeadTensor<float>&, const HeadTensor<float>&,
                          const HeadTensor<float>&, const AttentionOptions&);
template void check_heads(const HeadTensor<bf16>&, const HeadTensor<bf16>&,
                          const HeadTensor<bf16>&, const AttentionOptions&);
template void check_heads(const HeadTensor<fp16>&, const HeadTensor<fp16>&,
                          const HeadTensor<fp16>&, const AttentionOptions&);
template struct HeadTensor<double>;
template struct HeadTensor<float>;
template struct HeadTensor<bf16>;
template struct HeadTensor<fp16>;
template MultiHeadResult<double> forward_multihead(const HeadTensor<double>&,
                                                   const HeadTensor<double>&,
                                                   const HeadTensor<double>&,
                                                   const AttentionOptions&, const std::optional<Dropout>&);
template MultiHeadResult<float> forward_multihead(const HeadTensor<float>&,
                                                  const HeadTensor<float>&,
                                                  const HeadTensor<float>&,
                                                  const AttentionOptions&, const std::optional<Dropout>&);
template MultiHeadResult<float> forward_multihead(const HeadTensor<bf16>&, const HeadTensor<bf16>&,
                                                  const HeadTensor<bf16>&,
                                                  const AttentionOptions&, const std::optional<Dropout>&);
template MultiHeadResult<float> forward_multihead(const HeadTensor<fp16>&, const HeadTensor<fp16>&,
                                                  const HeadTensor<fp16>&,
                                                  const AttentionOptions&, const std::optional<Dropout>&);

}  // namespace flashlab::cpu
