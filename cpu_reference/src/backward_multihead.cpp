#include "flashlab/cpu/backward_multihead.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/parallel.hpp"

#include <algorithm>
#include <sstream>

namespace flashlab::cpu {

namespace {

template <class T>
void check_same_shape(const char* name, const HeadTensor<T>& X, const HeadTensor<T>& like,
                      Index cols, const char* what) {
  if (X.batch == like.batch && X.heads == like.heads && X.rows == like.rows && X.cols == cols &&
      X.data.size() == static_cast<size_t>(checked_product({X.batch, X.heads, X.rows, X.cols},
                                                              name)))
    return;
  std::ostringstream why;
  why << name << " is (" << X.batch << ", " << X.heads << ", " << X.rows << ", " << X.cols
      << ") with " << X.data.size() << " entries; it must be (" << like.batch << ", "
      << like.heads << ", " << like.rows << ", " << cols << "), " << what;
  throw InvalidArgument(why.str());
}

// Every shape check happens here, before the parallel loop. What can still throw inside it
// (a non-finite score, when the caller asked for checking) leaves through parallel_for.
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
    throw InvalidArgument("L is missing (it has no entries): the backward recomputes "
                          "P = exp(S - L) from the log-sum-exp that the forward returned");
  check_same_shape("L", L, Q, 1, "one log-sum-exp per query row");
  if (dropout) {  // p in [0, 1), and the last (batch, head) fits the Philox counter
    [[maybe_unused]] const DropoutMask last(*dropout, std::max<Index>(Q.batch - 1, 0),
                                            std::max<Index>(Q.heads - 1, 0));
  }
}

}  // namespace

template <class T>
MultiHeadGradients<T> backward_multihead(const HeadTensor<T>& Q, const HeadTensor<T>& K,
                                         const HeadTensor<T>& V, const HeadTensor<T>& O,
                                         const HeadTensor<T>& L, const HeadTensor<T>& dO,
                                         const AttentionOptions& options,
                                         const std::optional<Dropout>& dropout) {
  check_multihead_backward(Q, K, V, O, L, dO, options, dropout);
  MultiHeadGradients<T> out{HeadTensor<T>(Q.batch, Q.heads, Q.rows, Q.cols),
                            HeadTensor<T>(K.batch, K.heads, K.rows, K.cols),
                            HeadTensor<T>(V.batch, V.heads, V.rows, V.cols), {}};
  const Index group = K.heads > 0 ? Q.heads / K.heads : 0;  // query heads per KV head
  const Index items = checked_mul(Q.batch, K.heads, "(batch, KV head) items");
  std::vector<TileCounts> counts(static_cast<size_t>(items));

  parallel_for(items, [&](Index item) {  // one (batch, KV head) per item
    const Index b = item / K.heads, h_kv = item % K.heads;
    const Matrix<T> K_h = K.head(b, h_kv), V_h = V.head(b, h_kv);  // (N_k, d)
    auto dK = out.dK.head(b, h_kv), dV = out.dV.head(b, h_kv);      // (N_k, d), zero
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
      counts[item] += g.tiles;
    }
  });
  for (const auto& c : counts) out.tiles += c;
  return out;
}

#define FLASHLAB_INSTANTIATE(T)                                                              \
  template MultiHeadGradients<T> backward_multihead(                                         \
      const HeadTensor<T>&, const HeadTensor<T>&, const HeadTensor<T>&, const HeadTensor<T>&, \
      const HeadTensor<T>&, const HeadTensor<T>&, const AttentionOptions&,                   \
      const std::optional<Dropout>&);
FLASHLAB_INSTANTIATE(double)
FLASHLAB_INSTANTIATE(float)
#undef FLASHLAB_INSTANTIATE

}  // namespace flashlab::cpu
