// 04_fa2_backward_dq: dQ of the deterministic mode, in FlashAttention-2's other order.
// The main kernel (04_fa2_backward.cu) owns a KV tile and gives every query tile's dQ a share
// through fp32 atomicAdd, whose order varies from run to run: the sums round differently
// and dQ differs in its last bits. Here a block owns Br = 64 query rows of one (batch, query
// head) instead, walks the KV tiles in order j = 0, 1, ..., and keeps dQ in registers:
//   S = Q_i K_j^T,  P = exp(S * scale - L),  dP = dO_i V_j^T,  dS = P o (dP - D),
//   dQ_i += dS K_j;   at the end dQ_i * scale, written once.
// Every sum happens in one fixed order, so the result is bitwise the same on every run.
// (The main kernel still runs for dK and dV, without its dS store and dQ product; dK and
// dV sum over query tiles in a fixed order there already.)
// Cost: S and dP are computed twice, once per kernel: 3 products of 2 Br Bc d FLOPs per tile
// pair here plus 4 in the main kernel, 14 N_q N_k d FLOPs per head against 10 (1.4x), in
// exchange for no atomics and no fp32 accumulator in the workspace. Reads: K, V once per
// query tile (4 N_k d ceil(N_q / Br) bytes per head), Q, dO, L, D once.
// Warps split over query rows, warp w owns rows [16w, 16w + 16): like the forward, each
// warp's rows are its own and nothing crosses warps. K and V tiles are double-buffered
// with cp.async. Tiles and SRAM: fa2_backward::dq_config in flashlab/gpu/kernel_info.hpp.
// Dropout: the keep mask Z is drawn again (dropout_keep_m16n8, the forward's fragments: rows
// are queries) and applied to dP only: dS = P o (dP o Z - D), P itself undropped.
#include "common.cuh"
#include "dropout.cuh"
#include "launch_backward.hpp"
#include "sram_tiles.cuh"

namespace flashlab::gpu {
namespace {

using fa2_backward::kBuffers;
constexpr int kBr = fa2_backward::kDqBr;  // this kernel's own tiles (dq_config)
constexpr int kBc = fa2_backward::kDqBc;
constexpr int kThreads = fa2_backward::kDqThreads;
constexpr int kBlocksPerSm = fa2_backward::kDqBlocksPerSm;
using tiles::kMmaM;

constexpr int kWarps = kThreads / kWarpSize;
static_assert(kWarps * kMmaM == kBr, "each warp owns one m16 tile of the block's Br rows");

// SRAM, in elements: sQ, sdO (Br, D); sK, sV (kBuffers, Bc, D).
template <int D>
constexpr int kSQElems = kBr* D;
template <int D>
constexpr int kSKVElems = kBuffers* kBc* D;

// How many KV tiles query tile [q0, q0 + Br) needs: under the causal mask, those past the
// tile's last row + offset are in every row's future.
__device__ __forceinline__ int kv_tile_count(const Problem& p, int q0) {
  const int n_keys = visible_keys(p, min(q0 + kBr, p.n_q) - 1);
  return (n_keys + kBc - 1) / kBc;
}

__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int q0, int k0) {
  return k0 + kBc > p.n_k || (p.causal && k0 + kBc - 1 > q0 + p.causal_offset);
}

// S (16 rows, Bc keys): keys past N_k or in a row's future become -inf. row_g is the row of
// fragment row g; elements 2, 3 belong to row g + 8.
__device__ __forceinline__ void mask_scores(float (&rS)[kBc / 8][4], int row_g, int k0, int lane,
                                            const Problem& p) {
#pragma unroll
  for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row_g + (e / 2) * 8;
      const int key = k0 + nt * 8 + (lane % 4) * 2 + (e % 2);
      if (is_masked(p, row, key)) rS[nt][e] = -INFINITY;
    }
}

template <class T, int D, bool kDropout>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fa2_backward_dq_kernel(BackwardProblem bp) {
  extern __shared__ __align__(128) unsigned char sram[];
  T* sQ = reinterpret_cast<T*>(sram);  // (Br, D)
  T* sdO = sQ + kSQElems<D>;           // (Br, D)
  T* sK = sdO + kSQElems<D>;           // (2, Bc, D)
  T* sV = sK + kSKVElems<D>;           // (2, Bc, D)

  const Problem& p = bp.fwd;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Causal query tiles differ in work; the longest (last) ones are scheduled first.
  const int i = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = i * kBr, h = blockIdx.y, b = blockIdx.z, hk = h / p.group_size;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head;
  const T* gdO =
      static_cast<const T*>(bp.dout) + b * bp.dout_stride.batch + h * bp.dout_stride.head;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  const int Tc = kv_tile_count(p, q0);

  tiles::load_tile<T, D, kBr, kThreads>(sQ, gQ, p.q_stride.row, q0, p.n_q);
  tiles::load_tile<T, D, kBr, kThreads>(sdO, gdO, bp.dout_stride.row, q0, p.n_q);
  if (Tc > 0) {
    tiles::load_tile<T, D, kBc, kThreads>(sK, gK, p.k_stride.row, 0, p.n_k);
    tiles::load_tile<T, D, kBc, kThreads>(sV, gV, p.v_stride.row, 0, p.n_k);
  }
  ptx::cp_async_commit();

  // L and D of the thread's two rows g and g + 8, in registers for the whole loop. A row
  // past N_q reads nothing (its dQ is never written); a row with L = -inf saw no key, every
  // score of it is masked, and 0 stands in for L so that -inf - L is not NaN.
  const int row_g = q0 + warp * kMmaM + lane / 4;
  const int64_t row_base = (int64_t(b) * p.heads_q + h) * p.n_q;
  float base[2], Drow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_g + 8 * r;
    const float L = row < p.n_q ? p.lse[row_base + row] : 0.0f;
    base[r] = L == -INFINITY ? 0.0f : L * kLog2e;
    Drow[r] = row < p.n_q ? bp.d_rows[row_base + row] : 0.0f;
  }
  const float scale_log2 = p.scale * kLog2e;

  float rdQ[D / 8][4];  // (16 rows, D), summed over the KV tiles in order
  tiles::zero<D>(rdQ);
  for (int j = 0; j < Tc; ++j) {
    const int buf = j % kBuffers, k0 = j * kBc;
    ptx::cp_async_wait<0>();
    __syncthreads();  // tile j has landed; every warp is done with tile j - 1's buffer
    if (j + 1 < Tc) {
      const int next = (j + 1) % kBuffers;
      tiles::load_tile<T, D, kBc, kThreads>(sK + next * kBc * D, gK, p.k_stride.row, k0 + kBc,
                                            p.n_k);
      tiles::load_tile<T, D, kBc, kThreads>(sV + next * kBc * D, gV, p.v_stride.row, k0 + kBc,
                                            p.n_k);
      ptx::cp_async_commit();
    }
    const T* sK_j = sK + buf * kBc * D;
    const T* sV_j = sV + buf * kBc * D;

    float rS[kBc / 8][4];  // S (16 rows, Bc), then P
    tiles::zero<kBc>(rS);
    tiles::mma_a_bt<T, D, kBc>(rS, sQ, warp * kMmaM, sK_j, lane);
    if (tile_needs_mask(p, q0, k0)) mask_scores(rS, row_g, k0, lane, p);
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        rS[nt][e] = ptx::exp2_approx(fmaf(rS[nt][e], scale_log2, -base[e / 2]));

    float rdP[kBc / 8][4];  // dP (16 rows, Bc) = dO_i V_j^T, then dS = P o (dP - D)
    tiles::zero<kBc>(rdP);
    tiles::mma_a_bt<T, D, kBc>(rdP, sdO, warp * kMmaM, sV_j, lane);
    if constexpr (kDropout)  // dP o Z: the gradient reaches only the kept weights
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt)
        apply_dropout(
            rdP[nt],
            dropout_keep_m16n8(p.dropout, dropout_head_word(b, h), row_g, k0 + nt * 8, lane),
            p.dropout.keep_scale);
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) rdP[nt][e] = rS[nt][e] * (rdP[nt][e] - Drow[e / 2]);
    tiles::mma_c_b<T, kBc, D>(rdQ, rdP, sK_j, lane);  // dQ_i += dS K_j
  }
  // With Tc = 0 the Q and dO copies may still be in flight, other threads' into this warp's
  // rows of sQ among them: every copy of the block lands before any warp writes dQ there.
  ptx::cp_async_wait<0>();
  if (Tc == 0) __syncthreads();  // Tc is the block's: every thread takes the same branch

  // dQ leaves through SRAM, as the forward's O: the warp writes its fragments into its own 16
  // rows of sQ (only this warp read them, and its last read is done), then copies whole rows
  // out with 16-byte stores, so every sector leaving the SM is full. Stored straight from the
  // fragments, each instruction wrote 8 rows x 16 bytes, half of each of 8 sectors, which the
  // H200 merged in part after the L1 (docs/IO-LEVELS.md, "The passes from a cold L2").
  const int row0 = warp * kMmaM;
  __syncwarp();
  tiles::store_fragments<T, D>(sQ, row0, rdQ, p.scale, p.scale, lane);
  __syncwarp();
  T* gdQ = static_cast<T*>(bp.dq) + b * bp.dq_stride.batch + h * bp.dq_stride.head;
  tiles::store_rows<T, D, kMmaM>(gdQ, bp.dq_stride.row, q0 + row0, p.n_q, sQ, row0, lane);
}

template <class T, int D, bool kDropout>
void launch(const BackwardProblem& bp, cudaStream_t stream) {
  constexpr KernelConfig config = fa2_backward::dq_config(D, kDtypeOf<T>);
  static_assert(config.Br == kBr && config.Bc == kBc && config.threads == kThreads);
  static_assert(sizeof(T) * (2 * kSQElems<D> + 2 * kSKVElems<D>) == config.sram_bytes,
                "the kernel carves up the SRAM that kernel_info.hpp says it takes");
  throw_if_cuda_error(
      cudaFuncSetAttribute(fa2_backward_dq_kernel<T, D, kDropout>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(config.sram_bytes)),
      "fa2 backward dQ kernel shared memory");
  const dim3 grid((bp.fwd.n_q + kBr - 1) / kBr, bp.fwd.heads_q, bp.fwd.batch);
  fa2_backward_dq_kernel<T, D, kDropout><<<grid, config.threads, config.sram_bytes, stream>>>(bp);
  check_launch("fa2_backward_dq_kernel");
}

}  // namespace

// Each (element type, dropout or not, head dimension of fa2_backward::kHeadDims) is a kernel of
// its own.
void launch_fa2_backward_dq(const BackwardProblem& problem, cudaStream_t stream) {
  static_assert(compiled_for_64_and_128(fa2_backward::kHeadDims),
                "a head dimension in the table needs its instantiation here");
  dispatch_half_dtype_dropout_head_dim(
      problem.fwd.dtype, problem.fwd.dropout.enabled, problem.fwd.d,
      [&](auto t, auto d, auto dropout) {
        launch<decltype(t), decltype(d)::value, decltype(dropout)::value>(problem, stream);
      });
}

}  // namespace flashlab::gpu
