// 03_fa2: FlashAttention-2 on tensor cores. What it adds over 02_tiled_scalar:
//   - bf16/fp16 inputs, fp32 accumulation: S = Q K^T and U += W V run as mma.sync m16n8k16
//     on the tensor cores, their operands brought from SRAM by ldmatrix.
//   - cp.async double buffering: while the warps compute on K_j, V_j in one SRAM buffer, the
//     copy engine is already filling the other with K_{j+1}, V_{j+1}.
//   - warps split over query rows: warp w owns rows [32w, 32w + 32) of the block's Br rows
//     (two m16 mma tiles), so each warp's (m, l, U) is its own and no cross-warp reduction
//     is ever needed. Two m16 tiles per warp let every K or V fragment that ldmatrix brings
//     from SRAM feed two mma instructions instead of one.
//   - exp2 with scale * log2(e) folded into one FFMA: W = 2^(S * scale * log2 e - m').
//   - delayed normalisation: U is divided by l once, after the last tile (finalize); and
//     U = alpha U is skipped when no row of the warp changed its max (alpha exactly 1:
//     bitwise no change).
//   - LSE (L = m + log l) written for the backward pass.
//   - causal: KV tiles wholly in the future are never loaded; only tiles that cross the
//     diagonal (or the ragged end of N_k) are masked, in registers.
//   - dropout (dropout.cuh): W o Z after l has summed W, before W V, as the CPU reference.
//     Each m16n8 fragment of W is drawn (one Philox call per lane) and multiplied just
//     before it is packed for W V, where fewest other registers are live. It is a template
//     switch, not a runtime one: p = 0 runs the kernel without any of it.
// The per-tile steps are cut and named as in the CPU reference (softmax_state.hpp):
//   update:     m' = max(m, rowmax S); alpha = exp(m - m'); W = exp(S - m'); accumulate; m = m'
//   accumulate: l = alpha l + rowsum W; U = alpha U + W V
//   finalize:   O = U / l, L = m + log l; O leaves through SRAM in whole 16-byte rows
// SRAM tiles are swizzled (16-byte chunk c of row r lives at chunk c ^ (r % 8)), so the 8
// rows that one ldmatrix reads fall in 8 different bank groups instead of one: load_tile
// and LaneChunks, in sram_tiles.cuh, which the backward kernels share.
// Br, Bc per d, threads, blocks per SM, SRAM, and the head dimensions and dtypes it takes:
// fa2:: in flashlab/gpu/kernel_info.hpp. Any N_q, N_k; batch, heads, GQA; strides as given.
#include "block_log.cuh"
#include "common.cuh"
#include "dropout.cuh"
#include "launch.hpp"
#include "ptx.cuh"
#include "sram_tiles.cuh"

namespace flashlab::gpu {
namespace {

using fa2::kBlocksPerSm;
using fa2::kBr;
using fa2::kBuffers;
using fa2::kThreads;

using tiles::kMmaM;                          // rows of one mma.sync m16n8k16 tile
constexpr int kMTiles = 2;                   // m16 tiles of query rows per warp
constexpr int kRowsPerWarp = kMTiles * kMmaM;
constexpr int kWarps = kThreads / kWarpSize;
static_assert(kWarps * kRowsPerWarp == kBr, "each warp owns kMTiles m16 tiles of the Br rows");
static_assert(tiles::kChunk * 2 == fa2::kAlignBytes,
              "a cp.async chunk is the alignment it needs");

// SRAM, in elements: sQ (Br, D), sK and sV (kBuffers, Bc, D).
template <int D> constexpr int kSQElems = kBr * D;
template <int D, int Bc> constexpr int kSKVElems = kBuffers * Bc * D;

// One warp's 32 query rows of the online-softmax state, in registers (the CPU's
// SoftmaxState), as two m16 tiles; each thread holds rows g and g + 8 of each tile
// (g = lane / 4), hence the [2] of m and l.
template <int D>
struct SoftmaxState {
  float m[kMTiles][2];          // the base, in raw score units
  float l[kMTiles][2];          // this thread's share: the sum over its own columns; the
                                // quad's total is taken once, in finalize
  float rU[kMTiles][D / 8][4];  // (32, D) as mma C fragments: sum of W V, not divided by l
};

using tiles::LaneChunks;
using tiles::load_tile;

// S = Q_i K_j^T for the warp's 32 rows: (kMTiles, 16, Bc) as mma C fragments. Q comes from
// SRAM 16 columns of d at a time (rQ), rather than living in registers for the whole sweep:
// the registers are needed for U and S.
template <class T, int D, int Bc>
__device__ __forceinline__ void compute_scores(float (&rS)[kMTiles][Bc / 8][4], const T* sQ,
                                               const T* sK, int warp, int lane) {
  const int q_row = warp * kRowsPerWarp + (lane % 16);
  const int key = (lane % 8) + (lane / 16) * 8;  // lanes 16..31 address the upper 8 keys
  const int half = (lane / 8) % 2;               // lanes 8..15, 24..31: the upper 8 of k16
  const LaneChunks q_chunks(lane, lane / 16), k_chunks(lane, half);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Bc / 8; ++nt)
      rS[mt][nt][0] = rS[mt][nt][1] = rS[mt][nt][2] = rS[mt][nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t rQ[kMTiles][4];  // A fragments: (16, 16) of Q per m-tile
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
      ptx::ldmatrix_x4(rQ[mt], sQ + (q_row + mt * kMmaM) * D + q_chunks.at(kk));
#pragma unroll
    for (int np = 0; np < Bc / 16; ++np) {
      uint32_t rK[4];  // B fragments of key n-tiles 2np and 2np + 1
      ptx::ldmatrix_x4(rK, sK + (np * 16 + key) * D + k_chunks.at(kk));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ptx::mma_16816<T>(rS[mt][2 * np], rQ[mt], rK[0], rK[1]);
        ptx::mma_16816<T>(rS[mt][2 * np + 1], rQ[mt], rK[2], rK[3]);
      }
    }
  }
}

// Scores of keys past N_k, and under the causal mask of keys in a row's future, become -inf.
// row_g is the global query row of fragment row g of m-tile 0; elements 2, 3 of a fragment
// belong to row g + 8, and m-tile mt starts 16 mt rows further down.
template <int Bc>
__device__ __forceinline__ void mask_scores(float (&rS)[kMTiles][Bc / 8][4], int row_g, int k0,
                                            int lane, const Problem& p) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Bc / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row_g + mt * kMmaM + (e / 2) * 8;
        const int key = k0 + nt * 8 + (lane % 4) * 2 + (e % 2);
        // is_masked (common.cuh), written out: called, it made ptxas spill 136 bytes at
        // d = 64, where this kernel uses all 255 registers.
        if (key >= p.n_k || (p.causal && key > row + p.causal_offset))
          rS[mt][nt][e] = -INFINITY;
      }
}


// U = alpha U for one m-tile: rows g (elements 0, 1) and g + 8 (elements 2, 3).
template <int D>
__device__ __forceinline__ void rescale(float (&rU)[D / 8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) rU[dt][e] *= alpha[e / 2];
}

// Whether any row of the warp has alpha != 1. When the running max did not move, alpha is
// exactly 2^0 = 1 and U = alpha U changes nothing; once the max has settled that is most
// tiles, and skipping them saves D/2 multiplications per row pair and thread, bit for bit
// the same result.
__device__ __forceinline__ bool warp_needs_rescale(const float (&alpha)[kMTiles][2]) {
  bool moved = false;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) moved |= alpha[mt][0] != 1.0f || alpha[mt][1] != 1.0f;
  return __any_sync(kFullWarp, moved);
}

// Where a tile's dropout mask is drawn: the (batch, query head) counter word, the global
// row of fragment row g of m-tile 0, the tile's first key.
struct DropoutSite {
  uint32_t head_word;
  int row_g, k0;
};

// U += W V_j on the tensor cores: W (kMTiles, 16, Bc) goes straight from C fragments to A
// fragments (rounded to T, as flashlab::cpu::accumulate rounds it), V_j (Bc, D) comes
// through ldmatrix.trans. With dropout each fragment becomes W o Z just before it is packed
// (drawn here rather than for the whole tile at once: ptxas spills less).
template <class T, int D, int Bc, bool kDropout>
__device__ __forceinline__ void mma_wv(float (&rU)[kMTiles][D / 8][4],
                                       float (&rW)[kMTiles][Bc / 8][4], const T* sV, int lane,
                                       const DropoutRule& rule, const DropoutSite& site) {
  const int key = (lane % 8) + ((lane / 8) % 2) * 8;  // lanes 8..15, 24..31: keys 8..15
  const int upper = lane / 16;                        // lanes 16..31: the upper 8 of d16
  const LaneChunks v_chunks(lane, upper);
#pragma unroll
  for (int kk = 0; kk < Bc / 16; ++kk) {
    uint32_t rWa[kMTiles][4];  // A fragments: (16, 16) of W per m-tile
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      if constexpr (kDropout)
#pragma unroll
        for (int nt = 2 * kk; nt < 2 * kk + 2; ++nt)
          apply_dropout(rW[mt][nt],
                        dropout_keep_m16n8(rule, site.head_word, site.row_g + mt * kMmaM,
                                           site.k0 + nt * 8, lane),
                        rule.keep_scale);
      rWa[mt][0] = ptx::pack2<T>(rW[mt][2 * kk][0], rW[mt][2 * kk][1]);
      rWa[mt][1] = ptx::pack2<T>(rW[mt][2 * kk][2], rW[mt][2 * kk][3]);
      rWa[mt][2] = ptx::pack2<T>(rW[mt][2 * kk + 1][0], rW[mt][2 * kk + 1][1]);
      rWa[mt][3] = ptx::pack2<T>(rW[mt][2 * kk + 1][2], rW[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t rV[4];  // B fragments of d n-tiles 2dp and 2dp + 1
      ptx::ldmatrix_x4_trans(rV, sV + (kk * 16 + key) * D + v_chunks.at(dp));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ptx::mma_16816<T>(rU[mt][2 * dp], rWa[mt], rV[0], rV[1]);
        ptx::mma_16816<T>(rU[mt][2 * dp + 1], rWa[mt], rV[2], rV[3]);
      }
    }
  }
}

// l = alpha l + rowsum W;  U = alpha U + W V   (flashlab::cpu::accumulate)
// Per fragment row r in {g, g + 8}; l is this thread's share of the row sum (alpha is the
// same in all four threads of a row, so the shares add up in finalize). With dropout,
// mma_wv makes W o Z after l has counted W: U = alpha U + (W o Z) V.
template <class T, int D, int Bc, bool kDropout>
__device__ __forceinline__ void accumulate(SoftmaxState<D>& state,
                                           const float (&alpha)[kMTiles][2],
                                           float (&rW)[kMTiles][Bc / 8][4], const T* sV,
                                           int lane, const DropoutRule& rule,
                                           const DropoutSite& site) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float row_sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < Bc / 8; ++nt)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) row_sum += rW[mt][nt][e];
      state.l[mt][r] = alpha[mt][r] * state.l[mt][r] + row_sum;
    }
  if (warp_needs_rescale(alpha))
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) rescale<D>(state.rU[mt], alpha[mt]);
  mma_wv<T, D, Bc, kDropout>(state.rU, rW, sV, lane, rule, site);
}

// m' = max(m, rowmax S); alpha = 2^((m - m') s); W = 2^(S s - m' s); accumulate; m = m'
// (flashlab::cpu::update), per fragment row, with s = scale * log2(e): exp(x) = 2^(x log2 e)
// and m stays in raw score units. W is written over S.
template <class T, int D, int Bc, bool kDropout>
__device__ __forceinline__ void update(SoftmaxState<D>& state,
                                       float (&rS)[kMTiles][Bc / 8][4], const T* sV, int lane,
                                       float scale_log2, const DropoutRule& rule,
                                       const DropoutSite& site) {
  float alpha[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < Bc / 8; ++nt)
        tile_max = fmaxf(tile_max, fmaxf(rS[mt][nt][2 * r], rS[mt][nt][2 * r + 1]));
      const float m_new = fmaxf(state.m[mt][r], quad_max(tile_max));
      // A row that has seen only masked keys still has m' = -inf: exponentiate against 0
      // instead, since 2^(-inf - (-inf)) is NaN; its W and alpha then come out 0, and
      // accumulate leaves its l = 0 and U = 0, as the CPU's skipped row keeps them.
      const float base = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
      alpha[mt][r] = ptx::exp2_approx(state.m[mt][r] * scale_log2 - base);
      state.m[mt][r] = m_new;  // m = m' (the CPU stores it after accumulate; nothing there
                               // reads m, so storing it here is the same)
#pragma unroll
      for (int nt = 0; nt < Bc / 8; ++nt)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e)
          rS[mt][nt][e] = ptx::exp2_approx(fmaf(rS[mt][nt][e], scale_log2, -base));
    }
  auto& rW = rS;
  accumulate<T, D, Bc, kDropout>(state, alpha, rW, sV, lane, rule, site);
}

// O = U / l and L = m + log l (flashlab::cpu::finalize) for the warp's 32 rows; a row that
// saw no key gets O = 0 and L = -inf. O goes through SRAM: the warp writes its fragments into
// its own 32 rows of sQ (only this warp ever read them, and its last read of Q is done), then
// copies whole rows out with 16-byte stores, so every sector leaving the SM is full; stored
// straight from the fragments, each instruction would write 8 rows x 16 bytes, half of each
// of 8 sectors. gO and gL point at row 0 of the (b, h) slice; gL is null when the caller
// asked for no LSE. The lane is read afresh (ptx::lane_id): taken from the mainloop's values,
// it kept a register live across the loop and ptxas spilled 4 bytes at d = 128.
template <class T, int D>
__device__ __forceinline__ void finalize(const SoftmaxState<D>& state, T* sO, T* gO,
                                         int64_t row_stride, float* gL, int row_g, int warp,
                                         int n_q, float scale_log2) {
  const int row0 = warp * kRowsPerWarp;  // the warp's first row in the tile
  const int lane = ptx::lane_id();
  __syncwarp();  // every lane's last ldmatrix of these rows is done before any lane writes
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const float l_lo = quad_sum(state.l[mt][0]), l_hi = quad_sum(state.l[mt][1]);
    tiles::store_fragments<T, D>(sO, row0 + mt * kMmaM, state.rU[mt],
                                 l_lo > 0.0f ? 1.0f / l_lo : 0.0f,
                                 l_hi > 0.0f ? 1.0f / l_hi : 0.0f, lane);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l_row = r == 0 ? l_lo : l_hi;
      const int row = row_g + mt * kMmaM + r * 8;
      if (gL != nullptr && lane % 4 == 0 && row < n_q)
        gL[row] = l_row > 0.0f ? (state.m[mt][r] * scale_log2 + log2f(l_row)) * kLn2 : -INFINITY;
    }
  }
  __syncwarp();
  tiles::store_rows<T, D, kRowsPerWarp>(gO, row_stride, row_g - lane / 4, n_q, sO, row0, lane);
}

// Whether KV tile [k0, k0 + Bc) needs masking for query tile [q0, q0 + Br): it is ragged,
// or some key in it lies in the future of the block's first row.
template <int Bc>
__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int q0, int k0) {
  return k0 + Bc > p.n_k || (p.causal && k0 + Bc - 1 > q0 + p.causal_offset);
}

template <class T, int D, int Bc, bool kDropout>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) fa2_kernel(Problem p) {
  FLASHLAB_BLOCK_LOG_BEGIN;  // block_log.cuh: nothing unless a bench program asks for the log
  extern __shared__ __align__(128) unsigned char sram[];
  T* sQ = reinterpret_cast<T*>(sram);  // (Br, D)
  T* sK = sQ + kSQElems<D>;            // (2, Bc, D)
  T* sV = sK + kSKVElems<D, Bc>;       // (2, Bc, D)

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Causal query tiles differ in work; the longest (last) ones are scheduled first.
  const int i = p.causal && fa2::kCausalLongestFirst ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = i * kBr;
  const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group_size;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  const int Tc = kv_tile_count<kBr, Bc>(p, q0);

  load_tile<T, D, kBr, kThreads>(sQ, gQ, p.q_stride.row, q0, p.n_q);
  ptx::cp_async_commit();
  if (Tc > 0) {
    load_tile<T, D, Bc, kThreads>(sK, gK, p.k_stride.row, 0, p.n_k);
    load_tile<T, D, Bc, kThreads>(sV, gV, p.v_stride.row, 0, p.n_k);
  }
  ptx::cp_async_commit();

  SoftmaxState<D> state;  // the warp's 32 rows: m = -inf, l = 0, U = 0
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    state.m[mt][0] = state.m[mt][1] = -INFINITY;
    state.l[mt][0] = state.l[mt][1] = 0.0f;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      state.rU[mt][dt][0] = state.rU[mt][dt][1] = state.rU[mt][dt][2] = state.rU[mt][dt][3] = 0.0f;
  }
  const float scale_log2 = p.scale * kLog2e;
  const int row_g = q0 + warp * kRowsPerWarp + lane / 4;

  for (int j = 0; j < Tc; ++j) {
    const int buf = j % kBuffers, k0 = j * Bc;
    // One barrier per tile does two jobs: K_j, V_j (and Q) have landed for every thread, and
    // every warp is done with tile j - 1, whose buffer the prefetch below refills.
    ptx::cp_async_wait<0>();
    __syncthreads();
    if (j + 1 < Tc) {  // prefetch K_{j+1}, V_{j+1} into the other buffer, behind this tile
      const int next = (j + 1) % kBuffers;
      load_tile<T, D, Bc, kThreads>(sK + next * Bc * D, gK, p.k_stride.row, k0 + Bc, p.n_k);
      load_tile<T, D, Bc, kThreads>(sV + next * Bc * D, gV, p.v_stride.row, k0 + Bc, p.n_k);
      ptx::cp_async_commit();
    }

    float rS[kMTiles][Bc / 8][4];  // (32, Bc) scores, then W, per warp
    compute_scores<T, D, Bc>(rS, sQ, sK + buf * Bc * D, warp, lane);
    if (tile_needs_mask<Bc>(p, q0, k0)) mask_scores<Bc>(rS, row_g, k0, lane, p);
    update<T, D, Bc, kDropout>(state, rS, sV + buf * Bc * D, lane, scale_log2, p.dropout,
                               {dropout_head_word(b, h), row_g, k0});
  }
  ptx::cp_async_wait<0>();  // with Tc = 0 the Q copy may still be in flight, other
  if (Tc == 0) __syncthreads();  // threads' included: finalize writes O over sQ

  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;  // (N_q, D)
  float* gL = p.lse ? p.lse + (size_t(b) * p.heads_q + h) * p.n_q : nullptr;  // (N_q)
  finalize<T, D>(state, sQ, gO, p.o_stride.row, gL, row_g, warp, p.n_q, scale_log2);
  FLASHLAB_BLOCK_LOG_END;
}

template <class T, int D, bool kDropout>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr KernelConfig config = fa2::config(D, kDtypeOf<T>);
  constexpr int Bc = config.Bc;
  static_assert(config.Br == kBr && config.threads == kThreads);
  static_assert(sizeof(T) * (kSQElems<D> + 2 * kSKVElems<D, Bc>) == config.sram_bytes,
                "the kernel carves up the SRAM that kernel_info.hpp says it takes");
  static_assert(config.o_store.bytes_per_thread == swizzle::kChunkBytes &&
                    config.o_store.runs == tiles::kRowsPerStore<D>,
                "finalize stores O as kernel_info.hpp's o_store says (the simulator's count)");
  throw_if_cuda_error(cudaFuncSetAttribute(fa2_kernel<T, D, Bc, kDropout>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(config.sram_bytes)),
                      "fa2 kernel shared memory");
  const dim3 grid((p.n_q + kBr - 1) / kBr, p.heads_q, p.batch);
  fa2_kernel<T, D, Bc, kDropout><<<grid, config.threads, config.sram_bytes, stream>>>(p);
  check_launch("fa2_kernel");
}

}  // namespace

// Each (element type, dropout or not, head dimension of kernel_info.hpp's record) is a kernel
// of its own.
void launch_fa2(const Problem& problem, cudaStream_t stream) {
  static_assert(compiled_for_64_and_128(find_kernel(FLASHLAB_KERNEL_FA2)->head_dims),
                "a head dimension in the table needs its instantiation here");
  dispatch_half_dtype_dropout_head_dim(
      problem.dtype, problem.dropout.enabled, problem.d, [&](auto t, auto d, auto dropout) {
        launch<decltype(t), decltype(d)::value, decltype(dropout)::value>(problem, stream);
      });
}

}  // namespace flashlab::gpu
