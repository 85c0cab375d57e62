#include "flashlab/cpu/decode.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/parallel.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>

namespace flashlab::cpu {

void check_splits(Index splits, Index n_k) {
  if (splits >= 1 && splits <= n_k) return;
  std::ostringstream why;
  why << "split count n_splits = " << splits << " for a KV of N_k = " << n_k
      << " keys: n_splits must be between 1 and N_k ("
      << (n_k < 1 ? "a KV with no keys cannot be split" : "one segment per key at most")
      << ")";
  throw InvalidArgument(why.str());
}

Segment kv_segment(Index s, Index splits, Index n_k) {
  const Index len = tile_count(n_k, splits);  // ceil(n_k / n_splits)
  const Index k0 = std::min(checked_mul(s, len, "a segment's first key"), n_k);
  return {k0, std::min(len, n_k - k0)};
}

template <class In>
SoftmaxState<accum_t<In>> segment_state(MatrixView<In> Q, MatrixView<In> K, MatrixView<In> V,
                                        Segment segment, const AttentionOptions& options) {
  using Acc = accum_t<In>;
  const Index n_q = Q.rows(), d = Q.cols(), Bc = options.tiles.Bc;
  const Mask mask{options.causal, n_q, K.rows()};
  const Acc scale = static_cast<Acc>(options.scale_for(d));
  const Matrix<Acc> Q_scaled = Q.template cast<Acc>() * scale;  // (N_q, d), on chip

  auto state = SoftmaxState<Acc>::empty(n_q, d);  // stays empty if no key is valid
  // Tile by tile, k0 = k0_segment + j Bc: never k0 + Bc, which overflows for Bc near 2^63.
  for (Index j = 0; j < tile_count(segment.keys, Bc); ++j) {
    const Index k0 = segment.k0 + j * Bc, cols = std::min(Bc, segment.keys - j * Bc);
    const TileKind kind = mask.classify(0, n_q, k0, cols);
    if (kind == TileKind::skipped) continue;  // every query row is before these keys
    const Matrix<Acc> S =
        score_tile<In>(Q_scaled, K.middleRows(k0, cols), 0, k0, kind, mask, options);
    update<Acc, In>(state, S, V.middleRows(k0, cols));
  }
  return state;
}

namespace {
template <class Acc>
bool is_empty(const SoftmaxState<Acc>& state) {
  return (state.m.array() == -std::numeric_limits<Acc>::infinity()).all();
}

template <class Acc>
SoftmaxState<Acc> merge_chain(std::vector<SoftmaxState<Acc>>& states) {
  SoftmaxState<Acc> acc = std::move(states[0]);
  for (size_t i = 1; i < states.size(); ++i) acc = merge(acc, states[i]);
  return acc;
}

template <class Acc>
SoftmaxState<Acc> merge_pairs(std::vector<SoftmaxState<Acc>>& states) {
  while (states.size() > 1) {  // one level of the tree: (0, 1), (2, 3), ...; an odd one waits
    std::vector<SoftmaxState<Acc>> next;
    for (size_t i = 0; i + 1 < states.size(); i += 2) next.push_back(merge(states[i], states[i + 1]));
    if (states.size() % 2 == 1) next.push_back(std::move(states.back()));
    states = std::move(next);
  }
  return std::move(states[0]);
}

template <class Acc>
SoftmaxState<Acc> merge_random(std::vector<SoftmaxState<Acc>>& states, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto take = [&] {  // removes and returns a state drawn uniformly from the pool
    std::uniform_int_distribution<size_t> pick(0, states.size() - 1);
    std::swap(states[pick(rng)], states.back());
    SoftmaxState<Acc> s = std::move(states.back());
    states.pop_back();
    return s;
  };
  while (states.size() > 1) {
    const SoftmaxState<Acc> a = take(), b = take();
    states.push_back(merge(a, b));
  }
  return std::move(states[0]);
}
}  // namespace

template <class Acc>
SoftmaxState<Acc> merge_states(std::vector<SoftmaxState<Acc>> states, MergeOrder order,
                               std::uint64_t order_seed) {
  if (states.empty()) throw InvalidArgument("merge_states needs at least one state to merge");
  switch (order) {
    case MergeOrder::left_to_right: return merge_chain(states);
    case MergeOrder::balanced_tree: return merge_pairs(states);
    case MergeOrder::random_tree: return merge_random(states, order_seed);
  }
  throw InvalidArgument("MergeOrder " + std::to_string(static_cast<int>(order)) +
                        " is not a merge order: use left_to_right, balanced_tree or random_tree");
}

namespace {
// The n_splits segment states of one head, merged and normalised: the combine step.
template <class Acc>
DecodeResult<Acc> combine(std::vector<SoftmaxState<Acc>> states, const DecodeOptions& options) {
  const auto empty = static_cast<Index>(std::count_if(states.begin(), states.end(),
                                                      [](const auto& s) { return is_empty(s); }));
  auto [O, L] = finalize(merge_states(std::move(states), options.order, options.order_seed));
  return {std::move(O), std::move(L), empty};
}
}  // namespace

template <class In>
DecodeResult<accum_t<In>> decode(const Matrix<In>& Q, const Matrix<In>& K, const Matrix<In>& V,
                                 const DecodeOptions& decode_options,
                                 const AttentionOptions& options) {
  using Acc = accum_t<In>;
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  const Index n_splits = decode_options.splits;
  check_splits(n_splits, K.rows());
  std::vector<SoftmaxState<Acc>> states(static_cast<size_t>(n_splits));
  parallel_for(n_splits, [&](Index s) {  // the split step: segments are independent
    states[static_cast<size_t>(s)] =
        segment_state<In>(Q, K, V, kv_segment(s, n_splits, K.rows()), options);
  });
  return combine(std::move(states), decode_options);
}

namespace {
template <class In>
void check_decode_inputs(const HeadTensor<In>& Q, const HeadTensor<In>& K, const HeadTensor<In>& V,
                         const DecodeOptions& decode_options, const AttentionOptions& options,
                         const std::optional<std::vector<Index>>& kv_lengths) {
  check_heads(Q, K, V, options);
  std::ostringstream why;
  if (kv_lengths && static_cast<Index>(kv_lengths->size()) != Q.batch) {
    why << "kv_lengths has " << kv_lengths->size() << " entries for a batch of " << Q.batch
        << ": give one KV length per batch entry";
    throw InvalidArgument(why.str());
  }
  check_splits(decode_options.splits, K.rows);
  for (Index b = 0; kv_lengths && b < Q.batch; ++b) {
    const Index length = (*kv_lengths)[static_cast<size_t>(b)];
    if (length < 0 || length > K.rows) {
      why << "kv_lengths[" << b << "] = " << length << " does not fit a KV cache of "
          << K.rows << " rows: each length must be between 0 and the cache length";
      throw InvalidArgument(why.str());
    }
  }
}
}  // namespace

template <class In>
MultiHeadDecodeResult<accum_t<In>> decode_multihead(
    const HeadTensor<In>& Q, const HeadTensor<In>& K, const HeadTensor<In>& V,
    const DecodeOptions& decode_options, const AttentionOptions& options,
    const std::optional<std::vector<Index>>& kv_lengths) {
  using Acc = accum_t<In>;
  check_decode_inputs(Q, K, V, decode_options, options, kv_lengths);
  const Index B = Q.batch, H = Q.heads, n_splits = decode_options.splits;
  auto length = [&](Index b) { return kv_lengths ? (*kv_lengths)[static_cast<size_t>(b)] : K.rows; };

  // Split step: one work item per (batch, query head, segment).
  const Index items = checked_product({B, H, n_splits}, "(batch, head, segment) items");
  std::vector<SoftmaxState<Acc>> states(static_cast<size_t>(items));
  parallel_for(items, [&](Index item) {
    const Index b = item / (H * n_splits), h = (item / n_splits) % H, s = item % n_splits;
    const Index h_kv = kv_head_for(h, H, K.heads), n_k = length(b);
    states[static_cast<size_t>(item)] =
        segment_state<In>(Q.head(b, h), K.head(b, h_kv).topRows(n_k),
                          V.head(b, h_kv).topRows(n_k), kv_segment(s, n_splits, n_k), options);
  });

  // Combine step: one work item per (batch, query head).
  MultiHeadDecodeResult<Acc> out{HeadTensor<Acc>(B, H, Q.rows, Q.cols),
                                 HeadTensor<Acc>(B, H, Q.rows, 1), 0};
  std::vector<Index> empty(static_cast<size_t>(B * H));
  parallel_for(B * H, [&](Index bh) {
    const auto first = states.begin() + bh * n_splits;
    auto result = combine(std::vector<SoftmaxState<Acc>>(std::make_move_iterator(first),
                                                         std::make_move_iterator(first + n_splits)),
                          decode_options);
    out.O.head(bh / H, bh % H) = result.O;
    out.L.head(bh / H, bh % H) = result.L;
    empty[static_cast<size_t>(bh)] = result.empty_segments;
  });
  for (Index e : empty) out.empty_segments += e;
  return out;
}

#define FLASHLAB_INSTANTIATE(In)                                                               \
  template SoftmaxState<accum_t<In>> segment_state<In>(MatrixView<In>, MatrixView<In>,         \
                                                       MatrixView<In>, Segment,                \
                                                       const AttentionOptions&);               \
  template DecodeResult<accum_t<In>> decode<In>(const Matrix<In>&, const Matrix<In>&,          \
                                                const Matrix<In>&, const DecodeOptions&,       \
                                                const AttentionOptions&);                      \
  template MultiHeadDecodeResult<accum_t<In>> decode_multihead<In>(                            \
      const HeadTensor<In>&, const HeadTensor<In>&, const HeadTensor<In>&,                     \
      const DecodeOptions&, const AttentionOptions&, const std::optional<std::vector<Index>>&);
FLASHLAB_INSTANTIATE(double)
FLASHLAB_INSTANTIATE(float)
FLASHLAB_INSTANTIATE(bf16)
FLASHLAB_INSTANTIATE(fp16)
#undef FLASHLAB_INSTANTIATE

template SoftmaxState<double> merge_states(std::vector<SoftmaxState<double>>, MergeOrder,
                                           std::uint64_t);
template SoftmaxState<float> merge_states(std::vector<SoftmaxState<float>>, MergeOrder,
                                          std::uint64_t);

}  // namespace flashlab::cpu
