// Version 5b: split-KV decode, the combine kernel. One warp per query row (b, h, i) merges the
// splits' states (m, l, U) from the workspace: the reference's merge (cpu_reference
// softmax_state.hpp), m = max(m_a, m_b), l = exp(m_a - m) l_a + exp(m_b - m) l_b, U likewise, taken
// kCombineSplitsInFlight splits at a time: the group's states are loaded together, m' = the largest
// of m and the group's m_s, l and U rescaled by exp(m - m'), then for every split s of the group
// beta_s = exp(m_s - m'), l += beta_s l_s, U += beta_s U_s. No split's loads wait on the one before
// (a left-to-right fold, split by split, needs the previous m first: one memory latency per split):
// ceil(splits / kCombineSplitsInFlight) latencies per row (1 up to 16 splits, which the automatic
// rule keeps to where it can; 9 when a first pass read every m and the second took 4 splits at a
// time); a group's slots past the last split load nothing. Then it normalises once: O = U / l
// (rounded to the input dtype), LSE = m + log l (fp32, natural log; decode_problem.hpp's row_inv_l
// and row_lse, which a lone split's merge also ends its rows with: with one split the call has no
// combine); a block's warps leave their rows' LSE in SRAM and one instruction stores the block's
// kCombineRowsPerBlock consecutive floats, a whole sector (store_block_rows). A row
// that saw no key (l = 0: a zero-length sequence, or a row whose causal window is empty)
// gets O = 0 and LSE = -inf, the reference's convention.
// Bytes per row: reads the splits' states, (d + 2) x 4 bytes of data each, as the
// state_floats(d) x 4 bytes of their whole sectors (U's, and the one of m and l); writes
// d x 2 + 4.
// The kernel is launched as a programmatic dependent of the split kernel: its blocks become
// resident while the splits still run and wait (cudaGridDependencySynchronize) until the
// split kernel's grid has ended and its states are visible, instead of being launched only
// after it has ended.
#include "common.cuh"
#include "decode_problem.hpp"

namespace flashlab::gpu {
namespace {

using namespace decode;

// kCombineSplitsInFlight (kernel_info.hpp, which the split rule also reads): the splits whose
// states a group loads together before it folds them in, 16 x (d / 32 + 2) registers a lane
// (96 at d = 128). A row's latencies, not its bytes, set the combine's time: one round trip
// a group.

// Merges the splits' states of query row `row` (b, h, i) into its O, written here, and
// returns its LSE.
template <class T, int kD>
__device__ __forceinline__ float merge_row(const DecodeProblem& p, int64_t row, int lane) {
  constexpr int kCols = kD / kWarpSize;  // columns per lane
  const int i = int(row % p.n_q);
  const int h = int(row / p.n_q % p.heads_q);
  const int b = int(row / (int64_t(p.n_q) * p.heads_q));

  constexpr int64_t stride = state_floats(kD);  // (splits, U (d), m, l, padding)
  const float* state = p.states + row * p.splits * stride;
  // The splits in groups of kCombineSplitsInFlight, every load of a group issued before any
  // is used; m is the running maximum over the groups so far, l and U rescaled by alpha when
  // a group raises it (the reference's merge, a group at a time). An empty split (m_s = -inf,
  // l_s = 0, U_s = 0) adds nothing; if every split is empty, so is the row.
  float m = -INFINITY, l = 0.0f, rU[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) rU[c] = 0.0f;
  for (int s0 = 0; s0 < p.splits; s0 += kCombineSplitsInFlight) {
    float m_s[kCombineSplitsInFlight], l_s[kCombineSplitsInFlight];
    float U_s[kCombineSplitsInFlight][kCols];
#pragma unroll
    for (int j = 0; j < kCombineSplitsInFlight; ++j) {
      // Past the last split: the empty state, and nothing loaded.
      m_s[j] = -INFINITY;
      l_s[j] = 0.0f;
#pragma unroll
      for (int c = 0; c < kCols; ++c) U_s[j][c] = 0.0f;
      if (s0 + j < p.splits) {
        const float* split = state + (s0 + j) * stride;
        const float2 ml = *reinterpret_cast<const float2*>(split + kD);  // one 8-byte load
        m_s[j] = ml.x;
        l_s[j] = ml.y;
#pragma unroll
        for (int c = 0; c < kCols; ++c) U_s[j][c] = split[c * kWarpSize + lane];
      }
    }
    float m_new = m;
#pragma unroll
    for (int j = 0; j < kCombineSplitsInFlight; ++j) m_new = fmaxf(m_new, m_s[j]);
    if (m_new == -INFINITY) continue;  // every split so far is empty
    // alpha = exp(m - m'): 0 before the first group with a key (l and U are 0 then), 1 where
    // the group leaves the maximum. With splits <= kCombineSplitsInFlight there is one group,
    // m' is the largest m_s, and l and U are the sums of beta_s l_s and beta_s U_s alone.
    const float alpha = expf(m - m_new);
    m = m_new;
    l *= alpha;
#pragma unroll
    for (int c = 0; c < kCols; ++c) rU[c] *= alpha;
#pragma unroll
    for (int j = 0; j < kCombineSplitsInFlight; ++j) {
      const float beta = expf(m_s[j] - m);
      l += beta * l_s[j];
#pragma unroll
      for (int c = 0; c < kCols; ++c) rU[c] += beta * U_s[j][c];
    }
  }

  T* gO = static_cast<T*>(p.o) + int64_t(b) * p.o_stride.batch + int64_t(h) * p.o_stride.head +
          int64_t(i) * p.o_stride.row;
  const float inv_l = row_inv_l(l);
#pragma unroll
  for (int c = 0; c < kCols; ++c) gO[c * kWarpSize + lane] = from_float<T>(rU[c] * inv_l);
  return row_lse(m, l);
}

// The bound's second argument (at least one block an SM) is what lets ptxas keep a group's
// loads in registers (144 a thread at d = 128): with the block size alone it held the kernel
// to 32 registers (enough for the 2048 threads an SM can hold), and so to about four splits'
// loads at once.
template <class T, int kD>
__global__ void __launch_bounds__(kCombineThreads, 1) decode_combine_kernel(const DecodeProblem p) {
  __shared__ float sLse[kCombineRowsPerBlock];
  cudaGridDependencySynchronize();  // the split kernel has ended; its states are visible
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t first_row = int64_t(blockIdx.x) * kCombineRowsPerBlock;
  const int64_t row = first_row + warp;
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.n_q;
  if (row < rows) sLse[warp] = merge_row<T, kD>(p, row, lane);
  __syncthreads();
  if (p.lse != nullptr) store_block_rows<kCombineRowsPerBlock>(p.lse, first_row, rows, sLse);
}

template <class T, int kD>
void launch(const DecodeProblem& p, cudaStream_t stream) {
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.n_q;
  const unsigned blocks = unsigned((rows + kCombineRowsPerBlock - 1) / kCombineRowsPerBlock);
  cudaLaunchAttribute dependent{};
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kCombineThreads);
  config.stream = stream;
  config.attrs = &dependent;
  config.numAttrs = 1;
  throw_if_cuda_error(cudaLaunchKernelEx(&config, decode_combine_kernel<T, kD>, p),
                      "cudaLaunchKernelEx(decode_combine)");
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
