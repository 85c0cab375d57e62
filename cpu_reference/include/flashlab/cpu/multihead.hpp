// Batches and heads: tensors of shape (batch, heads, N, d), with grouped-query attention
// (GQA) when K and V have fewer heads than Q, and multi-query attention (MQA) when one.
#pragma once

#include "flashlab/cpu/forward.hpp"

#include <optional>
#include <vector>

namespace flashlab::cpu {

// A (batch, heads, rows, cols) tensor stored contiguously in that order (BHSD), so that
// each (batch, head) is a row-major (rows, cols) matrix.
template <class T>
struct HeadTensor {
  Index batch = 0, heads = 0, rows = 0, cols = 0;
  std::vector<T> data;

  HeadTensor() = default;
  // Throws InvalidArgument for a negative extent or more entries than 2^63 - 1.
  HeadTensor(Index batch, Index heads, Index rows, Index cols);

  // The (rows, cols) matrix of batch entry b, head h; InvalidArgument outside the tensor.
  Eigen::Map<Matrix<T>> head(Index b, Index h);
  Eigen::Map<const Matrix<T>> head(Index b, Index h) const;
};

template <class Acc>
struct MultiHeadResult {
  HeadTensor<Acc> O;  // (batch, heads_q, N_q, d)
  HeadTensor<Acc> L;  // (batch, heads_q, N_q, 1)
  TileCounts tiles;
};

// Query head h reads KV head h / (heads_q / heads_kv): consecutive query heads share one
// KV head, as in GQA. Work is spread with OpenMP over (batch, head, query tile). With
// dropout, each (batch, query head) draws its own mask, DropoutMask(dropout, b, h), exactly
// as the backward pass replays it.
template <class In>
MultiHeadResult<accum_t<In>> forward_multihead(const HeadTensor<In>& Q, const HeadTensor<In>& K,
                                               const HeadTensor<In>& V,
                                               const AttentionOptions& options = {},
                                               const std::optional<Dropout>& dropout = {});

// Throws InvalidArgument unless Q, K, V share the batch size, K and V the number of KV
// heads, heads_q is a multiple of heads_kv, and each head's shapes pass check_shapes.
// Every multi-head entry point (forward, backward, decode) starts with it.
template <class In>
void check_heads(const HeadTensor<In>& Q, const HeadTensor<In>& K, const HeadTensor<In>& V,
                 const AttentionOptions& options);

// The KV head that query head h reads, checked: heads_q must be a multiple of heads_kv.
Index kv_head_for(Index h, Index heads_q, Index heads_kv);

}  // namespace flashlab::cpu
