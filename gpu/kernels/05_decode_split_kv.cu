// Version 5a: split-KV decode (flash-decoding), the split kernel, on the tensor cores. A few
// query rows per sequence against a long KV cache: one block per (split, KV head x row
// block, batch entry) computes the state (m, l, U) of its packed query rows over the keys of
// its split and writes it, fp32, U unnormalised, to the workspace; 05_decode_combine.cu
// merges the splits.
//
// GQA packing: the block's rows are the N_q rows of every query head that reads its KV head,
// packed row p = (head in group) * N_q + i, up to 16 of them: the M of an mma.sync m16n8k16
// tile, held as A fragments in registers for the whole split. A group of 4 heads with one
// query fills 4 of the 16 rows; the other 12 are zeros, computed and never written. The
// tensor cores have that much to spare: at 4.8 TB/s, S = Q K^T and U += W V cost 16 rows x 2
// x 2 FLOPs per 4 bytes of K and V, 77 TFLOP/s, a tenth of what mma.sync delivers.
// The split's keys arrive in tiles of Bc = 64 keys, K and V, through a ring of `stages`
// SRAM buffers (cp.async, 96 KiB a block: 3 stages at d = 128, 6 at d = 64), stored
// swizzled (sram_tiles.cuh) so that ldmatrix reads them without bank conflicts. Each of the
// 4 warps takes its own 16 keys of every tile and keeps its own state over them:
//   S (16, 16)  = Q (16, d) K_w^T         d / 16 ldmatrix.x4, d / 8 mma   (fp32 in registers)
//   m', alpha, W = exp2(S s - m' s), l     online softmax per row (quad shuffles)
//   U (16, d) += W (16, 16) V_w (16, d)    d / 16 ldmatrix.x4.trans, d / 8 mma
// so a warp issues about 130 instructions for its 8 KiB of K and V (d = 128), where the
// CUDA-core version issued thousands (an unpack and an FMA per element, shuffles per key).
// The warps' states are merged once, at the end, in SRAM (the ring, idle by then), in a fixed
// order: the result is bitwise the same on every run.
// Every block lets the combine kernel launch as soon as it starts (programmatic dependent
// launch, 05_decode_combine.cu): the combine's blocks wait on the SMs for this grid to end.
// A paged cache: a thread's keys of a tile are consecutive and lie on one page, so it reads
// one block-table entry per tile, one tile ahead of the copy that needs it.
// With kv_l2_policy evict-first the K and V copies carry that L2 policy (cp.async's
// L2::cache_hint; decode.h says what for, decode::kDefaultKvL2Policy the default).
// Bytes per working split: Q's rows x d x 2 and its keys x 2 (K, V) x d x 2 read, rows x
// (d + 2) x 4 written, each row's state in whole sectors of its own (decode::state_floats: U
// by whole sectors, then m and l in one store); a split with no keys (more splits than
// tiles) reads nothing.
#include "common.cuh"
#include "decode_problem.hpp"
#include "ptx.cuh"
#include "sram_tiles.cuh"

#include <cstdint>

namespace flashlab::gpu {
namespace {

using namespace decode;
using tiles::LaneChunks;
using tiles::swizzled;

// kernel_info.hpp's facts for head dimension kD, as constants device code can read.
template <int kD>
struct Shape {
  static constexpr int kChunks = chunks_per_row(kD);          // 16-byte chunks a key
  static constexpr int kKeysPerThread = keys_per_thread(kD);  // 8 or 4, consecutive
  static constexpr int kStages = stages(kD);                  // 3 or 6
  static constexpr int kTileElems = kBc * kD;                 // K or V of one tile
  static_assert(kStages >= 2, "the ring needs a tile to compute and one in flight");
  static_assert(merge_bytes(kD) <= sram_bytes(kD), "the merge reuses the ring");
};

// Sets the workspace's error word: `bit`, and (first writer wins) the entry it concerns.
__device__ void flag_error(uint32_t* error_word, uint32_t bit, int entry_field, int b, int page) {
  atomicOr(&error_word[kErrorBits], bit);
  if (atomicCAS(&error_word[entry_field], 0u, uint32_t(b + 1)) == 0u && page >= 0)
    error_word[kErrorPageIndex] = uint32_t(page);
}

// Which keys a block takes: kernel_info.hpp's rule. The sequence is cut into tiles of Bc
// keys, split s takes tiles [s q, (s + 1) q), q = ceil(tiles / splits): keys [k0, k1).
struct SplitRange {
  int k0 = 0, k1 = 0, tiles = 0;
};
__device__ __forceinline__ SplitRange split_range(int len, int splits, int split) {
  const int all_tiles = (len + kBc - 1) / kBc;
  const int q = (all_tiles + splits - 1) / splits;
  const int t0 = min(split * q, all_tiles), t1 = min(t0 + q, all_tiles);
  return {min(t0 * kBc, len), min(t1 * kBc, len), t1 - t0};
}

// This warp's (m, l, U) over its keys: rows g and g + 8 of the 16 packed rows (g = lane / 4),
// m in raw score units (W = 2^((S - m) s), s = scale log2 e), l this thread's share of the
// row sum (its quad's four shares add up at the merge), U as mma C fragments.
template <int kD>
struct SoftmaxState {
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float rU[kD / 8][4];  // (16, d)
};

// S (16, 16) = Q K_w^T: Q from its A fragments rQ (16, d), K_w the warp's 16 keys of the
// tile (16, d) in SRAM, as the forward's mma_a_bt does with Q in SRAM.
template <class T, int kD>
__device__ __forceinline__ void compute_scores(float (&rS)[2][4], const uint32_t (&rQ)[kD / 16][4],
                                               const T* sKw, int lane) {
  const int key = (lane % 8) + (lane / 16) * 8;   // lanes 16..31: the second n8 tile
  const LaneChunks chunks(lane, (lane / 8) % 2);  // lanes 8..15, 24..31: the upper 8 of k16
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) rS[nt][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t rK[4];  // B fragments of n-tiles 0 and 1, k-slice kk
    ptx::ldmatrix_x4(rK, sKw + key * kD + chunks.at(kk));
    ptx::mma_16816<T>(rS[0], rQ[kk], rK[0], rK[1]);
    ptx::mma_16816<T>(rS[1], rQ[kk], rK[2], rK[3]);
  }
}

// m' = max(m, rowmax S); alpha = 2^((m - m') s); W = 2^(S s - m' s); l = alpha l + rowsum W;
// U = alpha U + W V_w (flashlab::cpu::update and accumulate, as 03_fa2.cu spells them).
template <class T, int kD>
__device__ __forceinline__ void update(SoftmaxState<kD>& state, float (&rS)[2][4], const T* sVw,
                                       int lane, float scale_log2) {
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float tile_max =
        fmaxf(fmaxf(rS[0][2 * r], rS[0][2 * r + 1]), fmaxf(rS[1][2 * r], rS[1][2 * r + 1]));
    const float m_new = fmaxf(state.m[r], quad_max(tile_max));
    // A row that has seen only masked keys still has m' = -inf: exponentiate against 0
    // instead, since 2^(-inf - (-inf)) is NaN; its W and alpha then come out 0.
    const float base = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
    alpha[r] = ptx::exp2_approx(state.m[r] * scale_log2 - base);
    state.m[r] = m_new;
    float row_sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        rS[nt][e] = ptx::exp2_approx(fmaf(rS[nt][e], scale_log2, -base));  // W
        row_sum += rS[nt][e];
      }
    state.l[r] = alpha[r] * state.l[r] + row_sum;
  }
  // Once the running max has settled, alpha is exactly 1 on most tiles: skip U = alpha U.
  if (__any_sync(kFullWarp, alpha[0] != 1.0f || alpha[1] != 1.0f))
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) state.rU[dt][e] *= alpha[e / 2];
  // W's C fragments are its A fragments (rounded to T): one k16 slice of U += W V_w.
  const uint32_t rW[4] = {ptx::pack2<T>(rS[0][0], rS[0][1]), ptx::pack2<T>(rS[0][2], rS[0][3]),
                          ptx::pack2<T>(rS[1][0], rS[1][1]), ptx::pack2<T>(rS[1][2], rS[1][3])};
  tiles::mma_slice_b<T, kD>(state.rU, rW, sVw, /*kk=*/0, lane);
}

// kEvictFirst: K and V are copied with an evict-first L2 policy (kv_l2_policy, decode.h).
template <class T, int kD, bool kEvictFirst>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    decode_split_kv_kernel(const DecodeProblem p) {
  using S = Shape<kD>;
  extern __shared__ __align__(128) unsigned char sram[];
  T* sK = reinterpret_cast<T*>(sram);       // (stages, Bc, d), swizzled
  T* sV = sK + S::kStages * S::kTileElems;  // (stages, Bc, d), swizzled

  // The combine kernel may be launched now (programmatic dependent launch): its blocks take
  // the SMs' spare room and wait there for this grid's end, so no launch gap separates the two.
  cudaTriggerProgrammaticLaunchCompletion();

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.row_blocks;
  const int row_block = blockIdx.y % p.row_blocks;
  const int b = blockIdx.z;
  const int t = threadIdx.x, warp = t / kWarpSize, lane = t % kWarpSize;

  // The length, clamped into the cache so that no load leaves it.
  int len = p.seq_lens[b];
  if (len < 0 || len > p.capacity) {
    if (t == 0 && split == 0 && blockIdx.y == 0)
      flag_error(p.error_word, FLASHLAB_DECODE_BAD_LENGTH, kErrorLengthEntry, b, -1);
    len = min(max(len, 0), p.capacity);
  }
  const SplitRange range = split_range(len, p.splits, split);

  // The copy: thread t moves chunk `chunk` of keys [first_key, first_key + kKeysPerThread)
  // of every tile, K and V.
  const T* gK = static_cast<const T*>(p.k);
  const T* gV = static_cast<const T*>(p.v);
  const int chunk = t % S::kChunks, first_key = t / S::kChunks * S::kKeysPerThread;
  const bool paged = p.block_table != nullptr;
  const uint64_t l2_policy = kEvictFirst ? ptx::l2_evict_first_policy() : 0;
  const int32_t* table_row = paged ? p.block_table + int64_t(b) * p.block_table_stride : nullptr;
  // The block-table entry of this thread's keys of `tile` (0 when contiguous or past the end).
  auto entry_of = [&](int tile) {
    const int j0 = range.k0 + tile * kBc + first_key;
    return paged && tile < range.tiles && j0 < range.k1 ? table_row[j0 >> p.page_shift] : 0;
  };
  // Starts the copy of tile `tile` into its stage; past the last tile it copies nothing.
  auto load_tile = [&](int tile, int entry) {
    if (tile >= range.tiles) return;
    const int j0 = range.k0 + tile * kBc + first_key;
    int outer = b, row = j0;  // the batch entry (contiguous) or page (paged), the row there
    bool page_ok = true;
    if (paged) {
      outer = entry;
      row = j0 & ((1 << p.page_shift) - 1);
      page_ok = entry >= 0 && entry < p.num_pages;
      if (!page_ok && j0 < range.k1)
        flag_error(p.error_word, FLASHLAB_DECODE_BAD_PAGE, kErrorPageEntry, b, entry);
    }
    const int64_t k_at = int64_t(outer) * p.k_stride.batch + int64_t(kv_head) * p.k_stride.head +
                         int64_t(row) * p.k_stride.row + chunk * tiles::kChunk;
    const int64_t v_at = int64_t(outer) * p.v_stride.batch + int64_t(kv_head) * p.v_stride.head +
                         int64_t(row) * p.v_stride.row + chunk * tiles::kChunk;
    const int stage = tile % S::kStages;
    T* sKs = sK + stage * S::kTileElems;
    T* sVs = sV + stage * S::kTileElems;
#pragma unroll
    for (int i = 0; i < S::kKeysPerThread; ++i) {
      // Keys past the split (the sequence's ragged end) and a bad page are zero-filled.
      const bool valid = page_ok && j0 + i < range.k1;
      const int dst = swizzled<kD>(first_key + i, chunk);
      const T* k_src = valid ? gK + k_at + i * p.k_stride.row : gK;
      const T* v_src = valid ? gV + v_at + i * p.v_stride.row : gV;
      if constexpr (kEvictFirst) {
        ptx::cp_async_16(sKs + dst, k_src, valid, l2_policy);
        ptx::cp_async_16(sVs + dst, v_src, valid, l2_policy);
      } else {
        ptx::cp_async_16(sKs + dst, k_src, valid);
        ptx::cp_async_16(sVs + dst, v_src, valid);
      }
    }
  };

  // The ring's first stages - 1 tiles, their table entries read together first.
  int entries[S::kStages];
#pragma unroll
  for (int s = 0; s < S::kStages; ++s) entries[s] = entry_of(s);
#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) {
    load_tile(s, entries[s]);
    ptx::cp_async_commit();
  }
  int entry_ahead = entries[S::kStages - 1];  // for the next tile to copy

  // Q's A fragments, rows g and g + 8 of the packed rows (zeros past the group), columns
  // 2 (lane % 4) .. + 1 and + 8 of every k16 slice; a split with no keys reads none.
  const float scale_log2 = p.scale * kLog2e;
  const int first_row = row_block * kMaxRowsPerBlock;
  const int rows = min(kMaxRowsPerBlock, p.group_size * p.n_q - first_row);
  uint32_t rQ[kD / 16][4];
  int visible_end[2];  // packed row r sees keys j < len - N_q + i + 1 (bottom-right)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int packed = first_row + lane / 4 + 8 * r;
    const int h = kv_head * p.group_size + packed / p.n_q, i = packed % p.n_q;
    visible_end[r] = len - p.n_q + i + 1;
    const bool has_row = lane / 4 + 8 * r < rows && range.tiles > 0;
    const T* gQ = static_cast<const T*>(p.q) + int64_t(b) * p.q_stride.batch +
                  int64_t(h) * p.q_stride.head + int64_t(i) * p.q_stride.row + 2 * (lane % 4);
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
      for (int half = 0; half < 2; ++half)  // a0/a1: columns 16 kk + 2t; a2/a3: + 8
        rQ[kk][2 * half + r] =
            has_row ? *reinterpret_cast<const uint32_t*>(gQ + 16 * kk + 8 * half) : 0u;
  }
  // The first key some packed row does not see: tiles that reach it are masked.
  const int mask_from = len - p.n_q + 1;

  SoftmaxState<kD> state;
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) state.rU[dt][e] = 0.0f;

  for (int tile = 0; tile < range.tiles; ++tile) {
    ptx::cp_async_wait<S::kStages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();  // everyone's have; and every warp is done with tile - 1's stage
    const int ahead = tile + S::kStages - 1;
    load_tile(ahead, entry_ahead);  // into tile - 1's stage
    entry_ahead = entry_of(ahead + 1);
    ptx::cp_async_commit();  // even when empty: the wait above counts groups

    const int stage = tile % S::kStages;
    const T* sKw = sK + stage * S::kTileElems + warp * kKeysPerWarp * kD;  // (16, d)
    const T* sVw = sV + stage * S::kTileElems + warp * kKeysPerWarp * kD;  // (16, d)
    float rS[2][4];  // S, then W: (16 rows, 16 keys)
    compute_scores<T, kD>(rS, rQ, sKw, lane);
    const int key0 = range.k0 + tile * kBc;
    if (key0 + kBc > mask_from) {  // the sequence's end, or a row's causal window
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + warp * kKeysPerWarp + nt * 8 + 2 * (lane % 4) + e % 2;
          if (key >= visible_end[e / 2]) rS[nt][e] = -INFINITY;
        }
    }
    update<T, kD>(state, rS, sVw, lane, scale_log2);
  }

  // Merge the warps' states in SRAM: sU (warps, 16, d), sM and sL (warps, 16), over the ring.
  ptx::cp_async_wait<0>();
  __syncthreads();
  float* sU = reinterpret_cast<float*>(sram);
  float* sM = sU + kWarps * kMaxRowsPerBlock * kD;
  float* sL = sM + kWarps * kMaxRowsPerBlock;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = lane / 4 + 8 * r;
    float* sU_row = sU + (warp * kMaxRowsPerBlock + row) * kD + 2 * (lane % 4);
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
      *reinterpret_cast<float2*>(sU_row + dt * 8) =
          make_float2(state.rU[dt][2 * r], state.rU[dt][2 * r + 1]);
    const float l_row = quad_sum(state.l[r]);
    if (lane % 4 == 0) {
      sM[warp * kMaxRowsPerBlock + row] = state.m[r];
      sL[warp * kMaxRowsPerBlock + row] = l_row;
    }
  }
  __syncthreads();
  // merge of kWarps states at once: m = max m_w, then each scaled by 2^((m_w - m) s).
  for (int idx = t; idx < rows * kD; idx += kThreads) {
    const int r = idx / kD, c = idx % kD;
    float m_max = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m_max = fmaxf(m_max, sM[w * kMaxRowsPerBlock + r]);
    float l_sum = 0.0f, u_sum = 0.0f;
    if (m_max != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float beta = ptx::exp2_approx((sM[w * kMaxRowsPerBlock + r] - m_max) * scale_log2);
        l_sum = fmaf(beta, sL[w * kMaxRowsPerBlock + r], l_sum);
        u_sum = fmaf(beta, sU[(w * kMaxRowsPerBlock + r) * kD + c], u_sum);
      }
    }
    const int packed = first_row + r;
    const int h = kv_head * p.group_size + packed / p.n_q, i = packed % p.n_q;
    // (U (d), m, l, padding): m natural, m scale; every state starts on a sector.
    constexpr int kStride = int(state_floats(kD));
    float* state_out = p.states + ((int64_t(b) * p.heads_q + h) * p.n_q + i) * p.splits * kStride +
                       int64_t(split) * kStride;
    state_out[c] = u_sum;
    if (c == 0)  // m and l in one 8-byte store (kStateMlStore), alone in their sector
      *reinterpret_cast<float2*>(state_out + kD) =
          make_float2(m_max == -INFINITY ? -INFINITY : m_max * p.scale, l_sum);
  }
}

template <class T, int kD, bool kEvictFirst>
void launch(const DecodeProblem& p, cudaStream_t stream) {
  const auto kernel = decode_split_kv_kernel<T, kD, kEvictFirst>;
  const int sram = int(sram_bytes(kD));
  throw_if_cuda_error(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sram),
      "cudaFuncSetAttribute(decode_split_kv)");
  const dim3 grid(p.splits, p.heads_kv * p.row_blocks, p.batch);
  kernel<<<grid, kThreads, sram, stream>>>(p);
  check_launch("decode_split_kv");
}

}  // namespace

void launch_decode_split_kv(const DecodeProblem& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, float>) {
      if (p.d == 64)
        p.kv_evict_first ? launch<T, 64, true>(p, stream) : launch<T, 64, false>(p, stream);
      else
        p.kv_evict_first ? launch<T, 128, true>(p, stream) : launch<T, 128, false>(p, stream);
    }
  });
}

}  // namespace flashlab::gpu
