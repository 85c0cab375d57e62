// Split-KV decode: a few query rows (often one new token) against a long KV cache.
//
// With N_q = 1 a query tile has one row, so the Q-outer loop has almost no parallel work:
// one (batch, head) is one long, serial sweep over the KV. Split-KV decoding cuts the KV
// into n_splits segments, computes each segment's state (m, l, U) independently (on a GPU, one
// thread block each), merges the n_splits states, and normalises once:
//   state_s = the tiles of segment s through update()         (independent, in parallel)
//   state   = merge(state_0, merge(state_1, ...))              (any tree, any order)
//   O = U / l,  L = m + log l                                   (finalize, once)
// merge() is exact in real arithmetic for any tree, because every state carries its own
// base m; in floating point, different trees round differently, by a few ulps.
#pragma once

#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace flashlab::cpu {

// The shape of the merge tree over the n_splits segment states.
enum class MergeOrder {
  left_to_right,  // ((s0 + s1) + s2) + ...: a chain, as one thread would fold them
  balanced_tree,  // pairs, then pairs of pairs: log2(n_splits) levels, as a parallel reduction
  random_tree     // two states drawn at random from the pool, merged, put back; repeat
};

struct DecodeOptions {
  Index splits = 1;  // n_splits, the number of KV segments: 1 <= n_splits <= N_k
  MergeOrder order = MergeOrder::balanced_tree;
  std::uint64_t order_seed = 0;  // picks the tree of MergeOrder::random_tree
};

template <class Acc>
struct DecodeResult {
  Matrix<Acc> O;  // (N_q, d)
  Vector<Acc> L;  // (N_q)
  Index empty_segments = 0;  // segments whose state stayed empty for every row
};

// Segment s of a KV of n_k keys split n_splits ways covers keys [s len, min((s + 1) len, n_k))
// with len = ceil(n_k / n_splits): equal fixed-size segments, as a kernel's blocks would cut them.
// The last segments are empty when n_splits len overshoots n_k (n_k = 5, n_splits = 4:
// 2, 2, 1, 0 keys).
struct Segment {
  Index k0 = 0, keys = 0;
};
Segment kv_segment(Index s, Index splits, Index n_k);

// The state of one segment of keys [k0, k0 + keys), swept in tiles of Bc keys with
// update(). Masked keys (options.causal over n_q query rows and all n_k keys) weigh 0;
// wholly masked tiles are skipped; a segment with no valid key returns the empty state.
template <class In>
SoftmaxState<accum_t<In>> segment_state(MatrixView<In> Q, MatrixView<In> K, MatrixView<In> V,
                                        Segment segment, const AttentionOptions& options);

// Merges states in the given tree shape. The empty state is merge's identity, so empty
// segments need no special case. `states` must not be empty.
template <class Acc>
SoftmaxState<Acc> merge_states(std::vector<SoftmaxState<Acc>> states, MergeOrder order,
                               std::uint64_t order_seed = 0);

// One head: Q (N_q, d) against K, V (N_k, d). With several query rows, options.causal
// says how they align with the keys (bottom_right: the last query row is the newest
// token and sees every key). Throws InvalidArgument for n_splits = 0 or n_splits > N_k.
template <class In>
DecodeResult<accum_t<In>> decode(const Matrix<In>& Q, const Matrix<In>& K, const Matrix<In>& V,
                                 const DecodeOptions& decode_options,
                                 const AttentionOptions& options = {});

template <class Acc>
struct MultiHeadDecodeResult {
  HeadTensor<Acc> O;  // (batch, heads_q, N_q, d)
  HeadTensor<Acc> L;  // (batch, heads_q, N_q, 1)
  Index empty_segments = 0;
};

// A batch against a KV cache: Q (batch, heads_q, N_q, d); K, V (batch, heads_kv, N_cache, d).
// Query head h reads KV head kv_head_for(h, heads_q, heads_kv) (GQA, MQA). Entry b of the
// cache holds kv_lengths[b] valid keys, its first rows; without kv_lengths every entry is
// full. Work is spread over (batch, head, segment), then the states of each (batch, head)
// are merged, as a split kernel and a combine kernel would do. Throws InvalidArgument for
// n_splits = 0, n_splits > N_cache, a length outside [0, N_cache], or kv_lengths not of size batch.
template <class In>
MultiHeadDecodeResult<accum_t<In>> decode_multihead(
    const HeadTensor<In>& Q, const HeadTensor<In>& K, const HeadTensor<In>& V,
    const DecodeOptions& decode_options, const AttentionOptions& options = {},
    const std::optional<std::vector<Index>>& kv_lengths = std::nullopt);

// Throws InvalidArgument unless 1 <= splits <= n_k.
void check_splits(Index splits, Index n_k);

}  // namespace flashlab::cpu
