// Version 5a: split-KV decode (flash-decoding), the split kernel, on the tensor cores. A few query
// rows per sequence against a long KV cache: one block per (split, KV head x row block, batch
// entry) computes the state (m, l, U) of its packed query rows over the keys of its split and
// writes it, fp32, U unnormalised, to the workspace; 05_decode_combine.cu merges the splits. With
// one split there is nothing to merge: the block ends its rows itself, O = U / l and LSE, and the
// call launches no combine (decode::split_kernel_ends_rows). (05_decode_queue.cu takes the same
// steps in persistent blocks; what the two share, the warp's step, the tile's copy and the warps'
// merge, is decode_steps.cuh.)
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
// L2::cache_hint; decode.h says what for, decode::auto_kv_l2_policy the default).
// Bytes per working split: Q's rows x d x 2 and its keys x 2 (K, V) x d x 2 read, rows x
// (d + 2) x 4 written, each row's state in whole sectors of its own (decode::state_floats: U
// by whole sectors, then m and l in one store); a split with no keys (more splits than
// tiles) reads nothing. With one split (decode::split_kernel_ends_rows) no state is written:
// O (rows x d x 2) and LSE (rows x 4) instead.
#include "decode_steps.cuh"

#include <cstdint>

namespace flashlab::gpu {
namespace {

using namespace decode;
using namespace decode_steps;

static_assert(merge_bytes(64) + kMaxRowsPerBlock * 4 <= sram_bytes(64) &&
                  merge_bytes(128) + kMaxRowsPerBlock * 4 <= sram_bytes(128),
              "the merge (and a lone split's LSE) reuses the ring");

// Which keys a block takes: kernel_info.hpp's rule (split_first_tile, which lesson 10
// calls). The sequence is cut into tiles of Bc keys, split s takes tiles
// [s q, (s + 1) q), q = ceil(tiles / splits); in 32-bit arithmetic here, where
// split_first_tile's 64-bit products cost the kernel two registers.
__device__ __forceinline__ KeyRange split_range(int len, int splits, int split) {
  const int all_tiles = (len + kBc - 1) / kBc;
  const int q = (all_tiles + splits - 1) / splits;
  const int t0 = min(split * q, all_tiles), t1 = min(t0 + q, all_tiles);
  return key_range(len, t0, t1);
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

  const int len = clamp_length(p, b, p.seq_lens[b], t == 0 && split == 0 && blockIdx.y == 0);
  const KeyRange range = split_range(len, p.splits, split);

  const CopyLane<kD> copy(t);
  const uint64_t l2_policy = kEvictFirst ? ptx::l2_evict_first_policy() : 0;
  // Starts the copy of tile `tile` into its stage; past the last tile it copies nothing.
  auto load = [&](int tile, int entry) {
    if (tile >= range.tiles) return;
    const int stage = tile % S::kStages;
    load_tile<T, kD, kEvictFirst>(p, b, kv_head, range, tile, entry, copy,
                                  sK + stage * S::kTileElems, sV + stage * S::kTileElems,
                                  l2_policy);
  };

  // The ring's first stages - 1 tiles, their table entries read together first.
  int entries[S::kStages];
#pragma unroll
  for (int s = 0; s < S::kStages; ++s) entries[s] = table_entry(p, b, range, s, copy);
#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) {
    load(s, entries[s]);
    ptx::cp_async_commit();
  }
  int entry_ahead = entries[S::kStages - 1];  // for the next tile to copy

  // Q's fragments; a split with no keys reads none.
  const float scale_log2 = p.scale * kLog2e;
  QueryRows<kD> q;
  load_query_rows<T, kD>(q, p, b, kv_head, row_block, len, range.tiles > 0, lane);

  SoftmaxState<kD> state;
  state.reset();
  for (int tile = 0; tile < range.tiles; ++tile) {
    ptx::cp_async_wait<S::kStages - 2>();  // this thread's copies of `tile` have landed
    __syncthreads();  // everyone's have; and every warp is done with tile - 1's stage
    const int ahead = tile + S::kStages - 1;
    load(ahead, entry_ahead);  // into tile - 1's stage
    entry_ahead = table_entry(p, b, range, ahead + 1, copy);
    ptx::cp_async_commit();  // even when empty: the wait above counts groups

    const int stage = tile % S::kStages;
    step<T, kD>(state, q, sK + stage * S::kTileElems, sV + stage * S::kTileElems,
                range.k0 + tile * kBc, warp, lane, scale_log2);
  }

  // Merge the warps' states in SRAM, over the ring (idle once every copy has landed).
  ptx::cp_async_wait<0>();
  __syncthreads();
  // With one split the merge ends the rows itself (decode::split_kernel_ends_rows).
  merge_warps<T, kD, kMaxRowsPerBlock, /*kMayEndRows=*/true>(
      state, reinterpret_cast<float*>(sram), p, b, kv_head, q.first_row, q.rows, split,
      split_kernel_ends_rows(p.splits, /*queue=*/false), warp, lane, t, scale_log2);
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
