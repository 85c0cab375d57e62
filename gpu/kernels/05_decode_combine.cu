// Version 5b: split-KV decode, the combine kernel. One warp per query row (b, h, i) folds the
// splits' states (m, l, U) from the workspace left to right with the reference's merge
// (cpu_reference softmax_state.hpp):
//   m = max(m_a, m_b); alpha = exp(m_a - m); beta = exp(m_b - m)
//   l = alpha l_a + beta l_b;  U = alpha U_a + beta U_b
// then normalises once: O = U / l (rounded to the input dtype), LSE = m + log l (fp32,
// natural log). A row that saw no key (l = 0: a zero-length sequence, or a row whose causal
// window is empty) gets O = 0 and LSE = -inf, the reference's convention.
// Bytes: reads splits x (d + 2) x 4 and writes d x 2 + 4 per row.
#include "common.cuh"
#include "decode_problem.hpp"

namespace flashlab::gpu {
namespace {

using namespace decode;

template <class T, int kD>
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(const DecodeProblem p) {
  constexpr int kCols = kD / kWarpSize;  // columns per lane
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * (kCombineThreads / kWarpSize) + warp;
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.n_q;
  if (row >= rows) return;
  const int i = int(row % p.n_q);
  const int h = int(row / p.n_q % p.heads_q);
  const int b = int(row / (int64_t(p.n_q) * p.heads_q));

  const float* state = p.states + row * p.splits * (kD + 2);  // (splits, U (d), m, l)
  float m = -INFINITY, l = 0.0f, rU[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) rU[c] = 0.0f;
  for (int s = 0; s < p.splits; ++s, state += kD + 2) {
    const float m_s = state[kD];
    const float m_new = fmaxf(m, m_s);
    if (m_new == -INFINITY) continue;  // both empty: the empty state is merge's identity
    const float alpha = expf(m - m_new), beta = expf(m_s - m_new);
    l = alpha * l + beta * state[kD + 1];
#pragma unroll
    for (int c = 0; c < kCols; ++c) rU[c] = alpha * rU[c] + beta * state[c * kWarpSize + lane];
    m = m_new;
  }

  T* gO = static_cast<T*>(p.o) + int64_t(b) * p.o_stride.batch + int64_t(h) * p.o_stride.head +
          int64_t(i) * p.o_stride.row;
  const bool empty = l == 0.0f;
  const float inv_l = empty ? 0.0f : 1.0f / l;
#pragma unroll
  for (int c = 0; c < kCols; ++c) gO[c * kWarpSize + lane] = from_float<T>(rU[c] * inv_l);
  if (p.lse != nullptr && lane == 0) p.lse[row] = empty ? -INFINITY : m + logf(l);
}

template <class T, int kD>
void launch(const DecodeProblem& p, cudaStream_t stream) {
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.n_q;
  const int64_t rows_per_block = kCombineThreads / kWarpSize;
  const unsigned blocks = unsigned((rows + rows_per_block - 1) / rows_per_block);
  decode_combine_kernel<T, kD><<<blocks, kCombineThreads, 0, stream>>>(p);
  check_launch("decode_combine");
}

}  // namespace

void launch_decode_combine(const DecodeProblem& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, float>) {
      if (p.d == 64)
        launch<T, 64>(p, stream);
      else
        launch<T, 128>(p, stream);
    }
  });
}

}  // namespace flashlab::gpu
