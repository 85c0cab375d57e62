// 02_tiled_scalar: the FlashAttention algorithm with nothing else in the way.
// What it adds over 01_naive: S and P never exist in HBM. Each block takes Br query rows,
// one thread per row; it sweeps the keys in tiles of Bc rows that the block stages in shared
// memory (SRAM), and every thread keeps its row's online-softmax state in registers:
//   m  the largest score seen so far         l  sum of exp(S - m)         U  sum of exp(S - m) V
// The functions below are cut where the CPU reference cuts them (softmax_state.hpp), so the
// two read side by side:
//   update:     m' = max(m, rowmax S); alpha = exp(m - m'); W = exp(S - m'); accumulate; m = m'
//   accumulate: l = alpha l + rowsum W; U = alpha U + W V
//   finalize:   O = U / l, L = m + log l
// The tile's scores wait in SRAM (sS) between the passes over them (max, exp, sum, W V).
// fp32 arithmetic on CUDA cores, scalar loops, no tensor cores, uncoalesced row-per-thread
// output stores: slow on purpose, so the algorithm stays visible. W stays fp32 (the CPU
// reference rounds W to a 16-bit input's type, as a tensor core needs; no tensor core here).
// Its Br, Bc, SRAM layout and the head dimensions and dtypes it takes: scalar:: in
// flashlab/gpu/kernel_info.hpp.
#include "block_log.cuh"
#include "common.cuh"
#include "launch.hpp"

namespace flashlab::gpu {
namespace {

using scalar::kBc;
using scalar::kBr;
using scalar::kRowPad;

// One thread's row of the online-softmax state, in registers (the CPU's SoftmaxState).
template <int D>
struct SoftmaxState {
  float m = -INFINITY;  // the base: the largest score seen
  float l = 0.0f;       // sum of exp(S - m)
  float rU[D];          // (D) sum of exp(S - m) V, not yet divided by l
};

// How the tiles come in: loads cached in the L2 only (ld.global.cg), as fa2's cp.async.cg
// and fa3's TMA copies are, so every tile a block needs crosses from the L2 into its SM and
// the bytes are the kernel's to count. bench_scalar_block_log builds it with plain loads
// instead (FLASHLAB_SCALAR_PLAIN_LOADS), which the L1 caches: there a block can find a tile
// that another block of its head on the SM read moments before, as often as the two happen
// to run in step (docs/IO-LEVELS.md, "The L1: plain loads").
#ifdef FLASHLAB_SCALAR_PLAIN_LOADS
constexpr bool kKvThroughL1 = true;
#else
constexpr bool kKvThroughL1 = false;
#endif

// Copies rows [row0, row0 + rows) of a (n_rows, D) matrix in HBM with the given row stride
// into SRAM as fp32, `ld` floats apart; rows past n_rows become zeros so they add nothing.
template <class T, int D>
__device__ void load_tile(float* sX, int ld, const T* gX, int64_t row_stride, int row0,
                          int rows, int n_rows) {
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, c = idx % D;
    if (row0 + r >= n_rows) {
      sX[r * ld + c] = 0.0f;
      continue;
    }
    const T* x = gX + (row0 + r) * row_stride + c;
    sX[r * ld + c] = to_float(kKvThroughL1 ? *x : __ldcg(x));
  }
}

// S = q K_j^T * scale for this thread's query row: (Bc) into its row of sS. Keys that are
// masked or past N_k get -inf.
template <int D>
__device__ __forceinline__ void compute_scores(float* sS_row, const float* sQ_row,
                                               const float* sK, int row, int k0,
                                               const Problem& p) {
#pragma unroll 1
  for (int c = 0; c < kBc; ++c) {
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < D; ++k) dot += sQ_row[k] * sK[c * D + k];
    sS_row[c] = is_masked(p, row, k0 + c) ? -INFINITY : dot * p.scale;
  }
}

// l = alpha l + rowsum W;  U = alpha U + W V   (flashlab::cpu::accumulate)
template <int D>
__device__ __forceinline__ void accumulate(SoftmaxState<D>& state, float alpha,
                                           const float* sW_row, const float* sV) {
  float row_sum = 0.0f;
#pragma unroll 1
  for (int c = 0; c < kBc; ++c) row_sum += sW_row[c];
  state.l = alpha * state.l + row_sum;
#pragma unroll
  for (int k = 0; k < D; ++k) state.rU[k] *= alpha;
#pragma unroll 1
  for (int c = 0; c < kBc; ++c) {
    const float W = sW_row[c];  // 0 for masked keys
#pragma unroll
    for (int k = 0; k < D; ++k) state.rU[k] += W * sV[c * D + k];
  }
}

// m' = max(m, rowmax S); alpha = exp(m - m'); W = exp(S - m'); accumulate; m = m'
// (flashlab::cpu::update). W is written over S in the thread's row of sS.
// A row that sees no key of this tile skips the update, as the CPU reference does:
// exp(S - m') would be exp(-inf - (-inf)) = NaN for a row that has seen nothing yet.
template <int D>
__device__ __forceinline__ void update(SoftmaxState<D>& state, float* sS_row, const float* sV) {
  float tile_max = -INFINITY;
#pragma unroll 1
  for (int c = 0; c < kBc; ++c) tile_max = fmaxf(tile_max, sS_row[c]);
  if (tile_max == -INFINITY) return;
  const float m_new = fmaxf(state.m, tile_max);
  const float alpha = expf(state.m - m_new);  // exp(-inf) = 0 on the first visible tile
  float* sW_row = sS_row;
#pragma unroll 1
  for (int c = 0; c < kBc; ++c) sW_row[c] = expf(sS_row[c] - m_new);  // 0 where S = -inf
  accumulate<D>(state, alpha, sW_row, sV);
  state.m = m_new;
}

// O = U / l, L = m + log l (flashlab::cpu::finalize); a row that saw no key gets O = 0 and
// L = -inf. gL_row is null when the caller asked for no LSE.
template <class T, int D>
__device__ __forceinline__ void finalize(const SoftmaxState<D>& state, T* gO_row,
                                         float* gL_row) {
  const float inv_l = state.l > 0.0f ? 1.0f / state.l : 0.0f;
#pragma unroll
  for (int k = 0; k < D; ++k) gO_row[k] = from_float<T>(state.rU[k] * inv_l);
  if (gL_row != nullptr) *gL_row = state.l > 0.0f ? state.m + logf(state.l) : -INFINITY;
}

// SRAM, in floats: sQ (Br, D + pad), sK and sV (Bc, D), sS (Br, Bc + pad).
template <int D> constexpr int kSQFloats = kBr * (D + kRowPad);
template <int D> constexpr int kSKVFloats = kBc * D;
constexpr int kSSFloats = kBr * (kBc + kRowPad);

template <class T, int D>
__global__ void __launch_bounds__(kBr) tiled_scalar_kernel(Problem p) {
  FLASHLAB_BLOCK_LOG_BEGIN;  // block_log.cuh: nothing unless a bench program asks for the log
  extern __shared__ float sram[];
  float* sQ = sram;                    // (Br, D + pad)
  float* sK = sQ + kSQFloats<D>;       // (Bc, D)
  float* sV = sK + kSKVFloats<D>;      // (Bc, D)
  float* sS = sV + kSKVFloats<D>;      // (Br, Bc + pad): S, then W, a row per thread

  const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group_size;
  // Its query tile: in grid order, under the mask too (kernel_info.hpp, kCausalLongestFirst).
  const int i = p.causal && scalar::kCausalLongestFirst ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = i * kBr;
  const int row = q0 + threadIdx.x;  // this thread's query row
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  load_tile<T, D>(sQ, D + kRowPad, gQ, p.q_stride.row, q0, kBr, p.n_q);

  SoftmaxState<D> state;
#pragma unroll
  for (int k = 0; k < D; ++k) state.rU[k] = 0.0f;

  // Causal: keys past the block's last row + offset are in everyone's future: never loaded.
  const int n_keys = visible_keys(p, min(q0 + kBr, p.n_q) - 1);
  for (int k0 = 0; k0 < n_keys; k0 += kBc) {
    __syncthreads();  // everyone is done with the previous K/V tile (and sQ is written)
    FLASHLAB_BLOCK_LOG_STEP(k0 / kBc);  // block_log.cuh: nothing unless a bench program asks
    load_tile<T, D>(sK, D, gK, p.k_stride.row, k0, kBc, p.n_k);
    load_tile<T, D>(sV, D, gV, p.v_stride.row, k0, kBc, p.n_k);
    __syncthreads();
    float* sS_row = sS + threadIdx.x * (kBc + kRowPad);  // (Bc)
    compute_scores<D>(sS_row, sQ + threadIdx.x * (D + kRowPad), sK, row, k0, p);
    update<D>(state, sS_row, sV);
  }

  if (row >= p.n_q) return;  // (thread 0's row, q0, is always below N_q)
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;
  float* gL = p.lse ? p.lse + (size_t(b) * p.heads_q + h) * p.n_q : nullptr;  // (N_q)
  finalize<T, D>(state, gO + row * p.o_stride.row, gL ? gL + row : nullptr);
  FLASHLAB_BLOCK_LOG_END;
}

template <class T, int D>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr KernelConfig config = scalar::config(D, kDtypeOf<T>);
  static_assert(config.threads == kBr && config.Br == kBr && config.Bc == kBc);
  static_assert(sizeof(float) * (kSQFloats<D> + 2 * kSKVFloats<D> + kSSFloats) ==
                    config.sram_bytes,
                "the kernel carves up the SRAM that kernel_info.hpp says it takes");
  throw_if_cuda_error(cudaFuncSetAttribute(tiled_scalar_kernel<T, D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(config.sram_bytes)),
                      "scalar kernel shared memory");
  const dim3 grid((p.n_q + config.Br - 1) / config.Br, p.heads_q, p.batch);
  tiled_scalar_kernel<T, D><<<grid, config.threads, config.sram_bytes, stream>>>(p);
  check_launch("tiled_scalar_kernel");
}

}  // namespace

// Each (element type, head dimension of kernel_info.hpp's record) is a kernel of its own.
void launch_scalar(const Problem& problem, cudaStream_t stream) {
  static_assert(compiled_for_64_and_128(find_kernel(FLASHLAB_KERNEL_SCALAR)->head_dims),
                "a head dimension in the table needs its instantiation here");
  dispatch_dtype(problem.dtype, [&](auto t) {
    dispatch_head_dim(problem.d,
                      [&](auto d) { launch<decltype(t), decltype(d)::value>(problem, stream); });
  });
}

}  // namespace flashlab::gpu
