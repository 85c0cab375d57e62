#include "flashlab/cpu/backward_multihead.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/parallel.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

namespace flashlab::cpu {

namespace {

template <class T>
void check_same_shape(const char* name, const HeadTensor<T>& X, const HeadTensor<T>& like,
                      Index cols, const char* what) {
  if (X.batch == like.batch && X.heads == like.heads && X.rows == like.rows && X.cols == cols &&
      X.data.size() ==
          static_cast<size_t>(checked_product({X.batch, X.heads, X.rows, X.cols}, name)))
    return;
  std::ostringstream why;
  why << name << " is (" << X.batch << ", " << X.heads << ", " << X.rows << ", " << X.cols
      << ") with " << X.data.size() << " entries; it must be (" << like.batch << ", " << like.heads
      << ", " << like.rows << ", " << cols << "), " << what;
  throw InvalidArgument(why.str());
}

// Every query head's inputs as backward_kv_outer would see them (its own copies of Q, O,
// dO and L, the KV head's K and V), prepared once: Q * scale and D are computed here, the
// same way and from the same copies as a single head's backward computes them.
template <class T>
class HeadInputs {
 public:
  explicit HeadInputs(Index heads) : heads_(heads) {}

  const BackwardHead<T>& head(Index b, Index h) const {
    return *prepared[static_cast<size_t>(b * heads_ + h)];
  }

  std::vector<Matrix<T>> Q, O, dO, K, V;  // per (b, h) and per (b, h_kv)
  std::vector<Vector<T>> L;
  std::vector<std::optional<DropoutMask>> masks;
  std::vector<std::optional<BackwardHead<T>>> prepared;  // refers to the members above

 private:
  Index heads_;
};

template <class T>
HeadInputs<T> prepare_heads(const HeadTensor<T>& Q, const HeadTensor<T>& K, const HeadTensor<T>& V,
                            const HeadTensor<T>& O, const HeadTensor<T>& L, const HeadTensor<T>& dO,
                            const AttentionOptions& options,
                            const std::optional<Dropout>& dropout) {
  HeadInputs<T> in(Q.heads);
  const Index heads = Q.batch * Q.heads, kv_heads = K.batch * K.heads;
  in.Q.resize(size_t(heads));
  in.O.resize(size_t(heads));
  in.dO.resize(size_t(heads));
  in.L.resize(size_t(heads));
  in.masks.resize(size_t(heads));
  in.K.resize(size_t(kv_heads));
  in.V.resize(size_t(kv_heads));
  parallel_for(kv_heads, [&](Index i) {
    in.K[size_t(i)] = K.head(i / K.heads, i % K.heads);
    in.V[size_t(i)] = V.head(i / K.heads, i % K.heads);
  });
  parallel_for(heads, [&](Index i) {
    const Index b = i / Q.heads, h = i % Q.heads;
    in.Q[size_t(i)] = Q.head(b, h);
    in.O[size_t(i)] = O.head(b, h);
    in.dO[size_t(i)] = dO.head(b, h);
    in.L[size_t(i)] = L.head(b, h).col(0);
    if (dropout) in.masks[size_t(i)].emplace(*dropout, b, h);
  });
  const Index group = Q.heads / K.heads;
  in.prepared.resize(size_t(heads));
  parallel_for(heads, [&](Index i) {
    const Index kv = (i / Q.heads) * K.heads + (i % Q.heads) / group;
    const auto& mask = in.masks[size_t(i)];
    in.prepared[size_t(i)].emplace(
        prepare_backward<T>(in.Q[size_t(i)], in.K[size_t(kv)], in.V[size_t(kv)], in.O[size_t(i)],
                            in.L[size_t(i)], in.dO[size_t(i)], options, mask ? &*mask : nullptr));
  });
  return in;
}

// One (batch, KV head) per item: its group's query heads run backward_kv_outer in order on
// one thread, and add into dK and dV in that order.
template <class T>
void backward_per_kv_head(const HeadTensor<T>& Q, const HeadTensor<T>& K, const HeadTensor<T>& V,
                          const HeadTensor<T>& O, const HeadTensor<T>& L, const HeadTensor<T>& dO,
                          const AttentionOptions& options, const std::optional<Dropout>& dropout,
                          MultiHeadGradients<T>& out) {
  const Index group = Q.heads / K.heads;  // query heads per KV head
  const Index items = checked_mul(Q.batch, K.heads, "(batch, KV head) items");
  std::vector<TileCounts> counts(static_cast<size_t>(items));
  parallel_for(items, [&](Index item) {
    const Index b = item / K.heads, h_kv = item % K.heads;
    const Matrix<T> K_h = K.head(b, h_kv), V_h = V.head(b, h_kv);  // (N_k, d)
    auto dK = out.dK.head(b, h_kv), dV = out.dV.head(b, h_kv);     // (N_k, d)
    dK.setZero();
    dV.setZero();
    for (Index h = h_kv * group; h < (h_kv + 1) * group; ++h) {
      const std::optional<DropoutMask> mask =
          dropout ? std::optional<DropoutMask>(DropoutMask(*dropout, b, h)) : std::nullopt;
      const Vector<T> L_h = L.head(b, h).col(0);
      const Gradients<T> g = backward_kv_outer<T>(Q.head(b, h), K_h, V_h, O.head(b, h), L_h,
                                                  dO.head(b, h), options, mask ? &*mask : nullptr);
      out.dQ.head(b, h) = g.dQ;
      dK += g.dK;  // the group's query heads all read this KV head
      dV += g.dV;
      counts[static_cast<size_t>(item)] += g.tiles;
    }
  });
  for (const auto& c : counts) out.tiles += c;
}

// One head's dQ contributions, added in the order of the KV tiles j = 0, 1, ... whatever
// the order the tiles finish in: a finished tile's dS waits here until every earlier tile's
// has been added. No thread waits for another: the thread that finds the next tile ready
// adds it, and every ready tile after it, while later ones keep arriving. Held dS: the tiles
// that finished ahead of an earlier one (at worst the head's N_q x N_k, when a thread stalls).
template <class T>
class DqInOrder {
 public:
  template <class Add>  // add(j, dS): dQ += KV tile j's dS K_j * scale
  void submit(Index j, std::vector<ScoreGradient<T>> dS, Add&& add) {
    std::unique_lock lock(mutex_);
    ready_.emplace(j, std::move(dS));
    if (adding_) return;  // the thread that is adding will find it
    adding_ = true;
    for (auto it = ready_.find(next_); it != ready_.end(); it = ready_.find(next_)) {
      const std::vector<ScoreGradient<T>> tile = std::move(it->second);
      ready_.erase(it);
      const Index tile_j = next_++;
      lock.unlock();  // the add runs while other tiles arrive
      add(tile_j, tile);
      lock.lock();
    }
    adding_ = false;
  }

 private:
  std::mutex mutex_;
  std::map<Index, std::vector<ScoreGradient<T>>> ready_;  // finished ahead of next_
  Index next_ = 0;
  bool adding_ = false;
};

// One (batch, query head, KV tile) per item, for when there are fewer (batch, KV head)
// pairs than threads: the header's ordered spread.
template <class T>
void backward_per_kv_tile(const HeadTensor<T>& Q, const HeadTensor<T>& K, const HeadTensor<T>& V,
                          const HeadTensor<T>& O, const HeadTensor<T>& L, const HeadTensor<T>& dO,
                          const AttentionOptions& options, const std::optional<Dropout>& dropout,
                          MultiHeadGradients<T>& out) {
  const Index group = K.heads > 0 ? Q.heads / K.heads : 0;  // query heads per KV head
  const Index Bc = options.tiles.Bc, Tc = tile_count(K.rows, Bc);
  const Index heads = checked_mul(Q.batch, Q.heads, "(batch, head) pairs");
  const Index items = checked_mul(heads, Tc, "(batch, head, KV tile) items");
  for (Index b = 0; b < Q.batch; ++b)
    for (Index h = 0; h < Q.heads; ++h) out.dQ.head(b, h).setZero();

  // Each query head's own dK and dV (its share of its KV head's), summed over the group
  // below; consecutive items are one head's consecutive KV tiles, as in a single head's loop.
  HeadTensor<T> dK_of_head(Q.batch, Q.heads, K.rows, K.cols);
  HeadTensor<T> dV_of_head(Q.batch, Q.heads, V.rows, V.cols);
  const HeadInputs<T> in = prepare_heads(Q, K, V, O, L, dO, options, dropout);
  std::vector<TileCounts> counts(static_cast<size_t>(items));
  std::vector<DqInOrder<T>> dQ_order(static_cast<size_t>(heads));
  parallel_for(items, [&](Index item) {  // dK_j, dV_j of one head, and its dQ in order
    const Index b = item / Tc / Q.heads, h = item / Tc % Q.heads, j = item % Tc;
    Matrix<T> dK_j, dV_j;  // (cols, d)
    auto dS = backward_kv_tile<T>(in.head(b, h), j, dK_j, dV_j, counts[static_cast<size_t>(item)]);
    dK_of_head.head(b, h).middleRows(j * Bc, dK_j.rows()) = dK_j;
    dV_of_head.head(b, h).middleRows(j * Bc, dV_j.rows()) = dV_j;
    dQ_order[static_cast<size_t>(b * Q.heads + h)].submit(
        j, std::move(dS),
        [&](Index jj, const auto& g) { add_dQ<T>(in.head(b, h), jj, g, out.dQ.head(b, h)); });
  });
  parallel_for(checked_mul(Q.batch, K.heads, "(batch, KV head) pairs"), [&](Index item) {
    const Index b = item / K.heads, h_kv = item % K.heads;
    auto dK = out.dK.head(b, h_kv), dV = out.dV.head(b, h_kv);  // (N_k, d)
    dK.setZero();
    dV.setZero();
    for (Index h = h_kv * group; h < (h_kv + 1) * group; ++h) {  // the group, in order
      dK += dK_of_head.head(b, h);
      dV += dV_of_head.head(b, h);
    }
  });
  for (const auto& c : counts) out.tiles += c;
}

}  // namespace

template <class T>
void check_multihead_backward(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                              const HeadTensor<T>& V, const HeadTensor<T>& O,
                              const HeadTensor<T>& L, const HeadTensor<T>& dO,
                              const AttentionOptions& options,
                              const std::optional<Dropout>& dropout) {
  check_heads(Q, K, V, options);
  check_same_shape("O", O, Q, Q.cols, "the output the forward returned");
  check_same_shape("dO", dO, Q, Q.cols, "the loss's gradient with respect to O, O's shape");
  if (L.data.empty() && Q.rows > 0)
    throw InvalidArgument(
        "L is missing (it has no entries): the backward recomputes "
        "P = exp(S - L) from the log-sum-exp that the forward returned");
  check_same_shape("L", L, Q, 1, "one log-sum-exp per query row");
  if (dropout) {  // p in [0, 1), and the last (batch, head) fits the Philox counter
    [[maybe_unused]] const DropoutMask last(*dropout, std::max<Index>(Q.batch - 1, 0),
                                            std::max<Index>(Q.heads - 1, 0));
  }
}

template <class T>
MultiHeadGradients<T> backward_multihead(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                                         const HeadTensor<T>& V, const HeadTensor<T>& O,
                                         const HeadTensor<T>& L, const HeadTensor<T>& dO,
                                         const AttentionOptions& options,
                                         const std::optional<Dropout>& dropout) {
  check_multihead_backward(Q, K, V, O, L, dO, options, dropout);
  MultiHeadGradients<T> out{HeadTensor<T>(Q.batch, Q.heads, Q.rows, Q.cols),
                            HeadTensor<T>(K.batch, K.heads, K.rows, K.cols),
                            HeadTensor<T>(V.batch, V.heads, V.rows, V.cols),
                            {}};
  if (Q.batch * K.heads >= worker_threads())
    backward_per_kv_head(Q, K, V, O, L, dO, options, dropout, out);
  else
    backward_per_kv_tile(Q, K, V, O, L, dO, options, dropout, out);
  return out;
}

#define FLASHLAB_INSTANTIATE(T)                                                                   \
  template void check_multihead_backward(const HeadTensor<T>&, const HeadTensor<T>&,              \
                                         const HeadTensor<T>&, const HeadTensor<T>&,              \
                                         const HeadTensor<T>&, const HeadTensor<T>&,              \
                                         const AttentionOptions&, const std::optional<Dropout>&); \
  template MultiHeadGradients<T> backward_multihead(                                              \
      const HeadTensor<T>&, const HeadTensor<T>&, const HeadTensor<T>&, const HeadTensor<T>&,     \
      const HeadTensor<T>&, const HeadTensor<T>&, const AttentionOptions&,                        \
      const std::optional<Dropout>&);
FLASHLAB_INSTANTIATE(double)
FLASHLAB_INSTANTIATE(float)
#undef FLASHLAB_INSTANTIATE

}  // namespace flashlab::cpu
