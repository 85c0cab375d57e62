// The backward pass over batches and heads, with grouped-query attention: a KV head that
// several query heads share receives the sum of their gradients, since its K and V enter
// each of their outputs.
#pragma once

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/multihead.hpp"

#include <optional>

namespace flashlab::cpu {

template <class T>
struct MultiHeadGradients {
  HeadTensor<T> dQ;  // (batch, heads_q, N_q, d)
  HeadTensor<T> dK;  // (batch, heads_kv, N_k, d)
  HeadTensor<T> dV;  // (batch, heads_kv, N_k, d)
  TileCounts tiles;
};

// Q, O, dO are (batch, heads_q, N_q, d); K, V are (batch, heads_kv, N_k, d); L is
// (batch, heads_q, N_q, 1), as forward_multihead returns it. Each head runs
// backward_kv_outer; query head h of batch entry b replays DropoutMask(*dropout, b, h).
// Work is spread with OpenMP. With at least as many (batch, KV head) pairs as threads, a
// pair per item: its group's query heads run in order on one thread and add into dK and dV
// in that order. With fewer (one sequence of an MQA model, say), over (batch, query head,
// KV tile): an item computes its head's share of dK_j and dV_j, and its dQ contributions
// (dS K_j per query tile) are added after those of KV tile j - 1 (a tile that finishes early
// waits, without holding a thread, until the earlier ones are added); each KV head's dK and
// dV are then its group's shares summed in the group's order. Either way the gradients are bitwise
// those of backward_kv_outer on each head with dK and dV summed over the group in order, whatever
// the number of threads. The tile spread's memory beyond the outputs: each query head's share of dK
// and dV, copies of Q, O, dO, L (and Q * scale, D) per query head and of K, V per KV head, and one
// item's dS tiles (N_q x Bc) per tile that finished ahead of an earlier one of its head.
// Throws InvalidArgument, saying what was wrong and what would be right, unless Q, K, V pass
// check_heads, O and dO have Q's shape, L is (batch, heads_q, N_q, 1) and the dropout (if
// any) is valid for every (batch, head). Every shape check of backward_multihead is here,
// before its parallel loop; what can still throw inside it (a non-finite score, when the
// caller asked for checking) leaves through parallel_for.
template <class T>
void check_multihead_backward(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                              const HeadTensor<T>& V, const HeadTensor<T>& O,
                              const HeadTensor<T>& L, const HeadTensor<T>& dO,
                              const AttentionOptions& options,
                              const std::optional<Dropout>& dropout);

template <class T>
MultiHeadGradients<T> backward_multihead(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                                         const HeadTensor<T>& V, const HeadTensor<T>& O,
                                         const HeadTensor<T>& L, const HeadTensor<T>& dO,
                                         const AttentionOptions& options = {},
                                         const std::optional<Dropout>& dropout = {});

}  // namespace flashlab::cpu
