// Version 5a: split-KV decode (flash-decoding), the split kernel. A few query rows per
// sequence against a long KV cache: one block per (split, KV head x row block, batch entry)
// computes the state (m, l, U) of its packed query rows over the keys of its split and
// writes it, fp32, U unnormalised, to the workspace; 05_decode_combine.cu merges the splits.
//
// GQA packing: the block's rows are the N_q rows of every query head that reads its KV head,
// packed row p = (head in group) * N_q + i, so each K and V byte is read once per row block.
// Thread layout (d = 128: 16 threads per key, 8 key lanes; d = 64: 8 and 16): thread t holds
// columns [8 (t % tpk), 8 (t % tpk) + 8) of Q's rows in registers and of U's rows, and takes
// the keys lane, lane + lanes, ... of every tile (lane = t / tpk). Each key lane keeps its
// own state (m, l, U) over its own keys, so the sweep needs no block-wide reduction; the
// lanes' states are merged once, at the end, in a fixed order (deterministic).
// The loads: K and V go straight from HBM into registers (16-byte ld.global.nc, no L1
// allocation), one tile ahead: while a thread computes tile j from registers, its loads of
// tile j + 1 are in flight. No SRAM staging: every thread uses only the vectors it loaded
// itself, so a copy through SRAM would only cross L1 twice. In flight per block: one tile,
// kThreads x kKeysPerLane x 2 (K, V) x 16 B = 16 KiB (decode::bytes_in_flight_per_block);
// at 3 blocks per SM 48 KiB per SM, above the ~30 KiB that Little's law asks of HBM (4.8 TB/s
// x 800 ns / 132 SMs). SRAM holds only the key lanes' states for the final merge (33 KiB).
// A paged cache costs one block-table read per page and key lane (a lane remembers its
// current page and reads the next one's entry ahead), not one per key.
// Bytes per split: its keys x 2 (K, V) x d x 2 read, rows x (d + 2) x 4 written. Slow part,
// said plainly: Q K^T and W V are fp32 FMAs on the CUDA cores (no tensor cores), fine for 4
// packed rows, compute-bound for 8 (N_q = 16 takes 8 row blocks per KV head).
#include "common.cuh"
#include "decode_problem.hpp"
#include "ptx.cuh"

#include <cstdint>

namespace flashlab::gpu {
namespace {

using namespace decode;

// 8 elements of one 16-byte vector to fp32.
template <class T>
__device__ __forceinline__ void to_float8(const uint4& raw, float (&out)[kVecElements]) {
  const T* x = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int e = 0; e < kVecElements; ++e) out[e] = to_float(x[e]);
}

// Sets the workspace's error word: `bit`, and (first writer wins) the entry it concerns.
__device__ void flag_error(uint32_t* error_word, uint32_t bit, int entry_field, int b, int page) {
  atomicOr(&error_word[kErrorBits], bit);
  if (atomicCAS(&error_word[entry_field], 0u, uint32_t(b + 1)) == 0u && page >= 0)
    error_word[kErrorPageIndex] = uint32_t(page);
}

// A key lane's walk through the pages of a paged cache. The lane's keys rise in steps of
// key_lanes(d) <= kMinPageSize, so it visits the pages of its split one after another: it
// reads the block table once per page, and reads the entry of the next page as soon as it
// enters one, so that the K and V loads at the page's end do not wait for the table.
struct PageCursor {
  int logical = -1;   // the sequence's page number (key >> page_shift); -1: none yet
  int page = 0;       // the block table's entry for it: the page's index in the cache
  int next_page = 0;  // the entry for logical + 1, read ahead (when the split reaches it)
};

// Where key j of sequence b lives: its batch entry (contiguous) or page (paged) in `outer`,
// its row there in `row`; `k1` is the split's end. False when the block table names a page
// outside [0, num_pages): the loads then read nothing and give zeros, and the error word
// says so.
__device__ __forceinline__ bool locate_key(const DecodeProblem& p, int b, int j, int k1,
                                           PageCursor* cursor, int* outer, int* row) {
  if (p.block_table == nullptr) {
    *outer = b;
    *row = j;
    return true;
  }
  const int logical = j >> p.page_shift;
  if (logical != cursor->logical) {
    const int32_t* table_row = p.block_table + int64_t(b) * p.block_table_stride;
    cursor->page = cursor->logical >= 0 && logical == cursor->logical + 1 ? cursor->next_page
                                                                          : table_row[logical];
    cursor->logical = logical;
    if ((int64_t(logical) + 1) << p.page_shift < k1) cursor->next_page = table_row[logical + 1];
    if (cursor->page < 0 || cursor->page >= p.num_pages)
      flag_error(p.error_word, FLASHLAB_DECODE_BAD_PAGE, kErrorPageEntry, b, cursor->page);
  }
  *outer = cursor->page;
  *row = j & ((1 << p.page_shift) - 1);
  return cursor->page >= 0 && cursor->page < p.num_pages;
}

// The HBM address of the 16-byte vector `vec` of (outer, kv_head, row) in K or V.
template <class T>
__device__ __forceinline__ const T* vector_at(const T* base, const Strides& s, int outer,
                                              int kv_head, int row, int vec) {
  return base + int64_t(outer) * s.batch + int64_t(kv_head) * s.head + int64_t(row) * s.row +
         vec * kVecElements;
}

// kernel_info.hpp's tile shape for head dimension kD, as constants device code can read.
template <int kD>
struct Shape {
  static constexpr int kTpk = threads_per_key(kD);  // threads per key
  static constexpr int kLanes = key_lanes(kD);      // key lanes: keys per block step
  static constexpr int kBc = bc(kD);                // keys per tile
  static_assert(kLanes <= kMinPageSize, "a key lane visits every page of its split in turn");
};

// kRows: the packed rows this instantiation holds in registers (4 or 8).
template <class T, int kD, int kRows>
__global__ void __launch_bounds__(kThreads, blocks_per_sm(kRows))
    decode_split_kv_kernel(const DecodeProblem p) {
  constexpr int kTpk = Shape<kD>::kTpk;
  constexpr int kLanes = Shape<kD>::kLanes;
  constexpr int kBc = Shape<kD>::kBc;
  extern __shared__ __align__(16) unsigned char sram[];  // the key lanes' states, at the end

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.row_blocks;
  const int row_block = blockIdx.y % p.row_blocks;
  const int b = blockIdx.z;
  const int t = threadIdx.x;
  const int lane = t / kTpk, vec = t % kTpk;

  // The length, clamped into the cache so that no load leaves it.
  int len = p.seq_lens[b];
  if (len < 0 || len > p.capacity) {
    if (t == 0 && split == 0 && blockIdx.y == 0)
      flag_error(p.error_word, FLASHLAB_DECODE_BAD_LENGTH, kErrorLengthEntry, b, -1);
    len = min(max(len, 0), p.capacity);
  }
  // The reference's segment: keys [split seg, min((split + 1) seg, len)), seg = ceil(len / splits).
  const int seg = (len + p.splits - 1) / p.splits;
  const int k0 = min(split * seg, len);
  const int k1 = min(k0 + seg, len);

  const T* gK = static_cast<const T*>(p.k);
  const T* gV = static_cast<const T*>(p.v);
  const int tiles = (k1 - k0 + kBc - 1) / kBc;
  PageCursor cursor;
  // Issues the loads of this thread's vectors of tile `tile` (its lane's keys only) into
  // rK, rV; past the last tile, or for a key beyond the split, it loads nothing (zeros).
  auto load_tile = [&](int tile, uint4(&rK)[kKeysPerLane], uint4(&rV)[kKeysPerLane]) {
#pragma unroll
    for (int kk = 0; kk < kKeysPerLane; ++kk) {
      const int j = k0 + tile * kBc + kk * kLanes + lane;
      int outer = 0, row = 0;
      const bool valid = tile < tiles && j < k1 && locate_key(p, b, j, k1, &cursor, &outer, &row);
      rK[kk] = ptx::ld_global_nc_16(vector_at(gK, p.k_stride, outer, kv_head, row, vec), valid);
      rV[kk] = ptx::ld_global_nc_16(vector_at(gV, p.v_stride, outer, kv_head, row, vec), valid);
    }
  };

  // The first tile's loads go out before Q's, so that the two latencies overlap.
  uint4 rK_next[kKeysPerLane], rV_next[kKeysPerLane];  // tile + 1, in flight
  load_tile(0, rK_next, rV_next);

  // The packed rows: p_row = row_block * kMaxRowsPerBlock + r, (head in group, i).
  const int first_row = row_block * kMaxRowsPerBlock;
  const int rows = min(kRows, p.group_size * p.n_q - first_row);
  float rQ[kRows][kVecElements];  // this thread's columns of Q * scale * log2 e
  int visible_end[kRows];         // row i sees keys j < len - N_q + i + 1 (bottom-right)
  const float q_scale = p.scale * kLog2e;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    visible_end[r] = 0;
    for (int e = 0; e < kVecElements; ++e) rQ[r][e] = 0.0f;
    if (r < rows) {
      const int packed = first_row + r;
      const int h = kv_head * p.group_size + packed / p.n_q, i = packed % p.n_q;
      visible_end[r] = min(k1, len - p.n_q + i + 1);
      const T* gQ = static_cast<const T*>(p.q) + int64_t(b) * p.q_stride.batch +
                    int64_t(h) * p.q_stride.head + int64_t(i) * p.q_stride.row + vec * kVecElements;
      float x[kVecElements];
      to_float8<T>(*reinterpret_cast<const uint4*>(gQ), x);
      for (int e = 0; e < kVecElements; ++e) rQ[r][e] = x[e] * q_scale;
    }
  }

  // This key lane's state, base 2: m2 = m log2 e, W = exp2(S log2 e - m2).
  float m2[kRows], l[kRows], rU[kRows][kVecElements];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m2[r] = -INFINITY;
    l[r] = 0.0f;
    for (int e = 0; e < kVecElements; ++e) rU[r][e] = 0.0f;
  }

  // Two tiles a loop body, so that "this tile" and "the next" swap register names instead of
  // being copied (ptxas: no spills at 255 registers for 8 rows, where one a body spilled).
#pragma unroll 2
  for (int tile = 0; tile < tiles; ++tile) {
    uint4 rK[kKeysPerLane], rV[kKeysPerLane];  // tile, landed (or landing)
#pragma unroll
    for (int kk = 0; kk < kKeysPerLane; ++kk) {
      rK[kk] = rK_next[kk];
      rV[kk] = rV_next[kk];
    }
    load_tile(tile + 1, rK_next, rV_next);

    // S = Q K^T for this lane's kKeysPerLane keys, base 2: reduce the kTpk column slices.
    float s[kKeysPerLane][kRows];
#pragma unroll
    for (int kk = 0; kk < kKeysPerLane; ++kk) {
      const int j = k0 + tile * kBc + kk * kLanes + lane;
      float k_f[kVecElements];
      to_float8<T>(rK[kk], k_f);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < kVecElements; ++e) dot = fmaf(rQ[r][e], k_f[e], dot);
#pragma unroll
        for (int offset = kTpk / 2; offset > 0; offset /= 2)
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[kk][r] = j < visible_end[r] ? dot : -INFINITY;  // masked keys weigh exp2(-inf) = 0
      }
    }
    // The online-softmax update of each row with this lane's keys of the tile.
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float m_tile = s[0][r];
#pragma unroll
      for (int kk = 1; kk < kKeysPerLane; ++kk) m_tile = fmaxf(m_tile, s[kk][r]);
      const float m_new = fmaxf(m2[r], m_tile);
      // A row with no valid key yet keeps the empty state: we don't want (-inf) - (-inf).
      const float alpha = m_new == -INFINITY ? 1.0f : ptx::exp2_approx(m2[r] - m_new);
      float row_sum = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKeysPerLane; ++kk) {
        s[kk][r] = m_new == -INFINITY ? 0.0f : ptx::exp2_approx(s[kk][r] - m_new);  // W
        row_sum += s[kk][r];
      }
      m2[r] = m_new;
      l[r] = alpha * l[r] + row_sum;
#pragma unroll
      for (int e = 0; e < kVecElements; ++e) rU[r][e] *= alpha;
    }
    // U += W V for this lane's keys and this thread's columns.
#pragma unroll
    for (int kk = 0; kk < kKeysPerLane; ++kk) {
      float v_f[kVecElements];
      to_float8<T>(rV[kk], v_f);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int e = 0; e < kVecElements; ++e) rU[r][e] = fmaf(s[kk][r], v_f[e], rU[r][e]);
    }
  }
  // Merge the key lanes' states in SRAM: sU (lanes, kMaxRowsPerBlock, d), sM, sL.
  float* sU = reinterpret_cast<float*>(sram);
  float* sM = sU + kLanes * kMaxRowsPerBlock * kD;
  float* sL = sM + kLanes * kMaxRowsPerBlock;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) continue;
    for (int e = 0; e < kVecElements; ++e)
      sU[(lane * kMaxRowsPerBlock + r) * kD + vec * kVecElements + e] = rU[r][e];
    if (vec == 0) {
      sM[lane * kMaxRowsPerBlock + r] = m2[r];
      sL[lane * kMaxRowsPerBlock + r] = l[r];
    }
  }
  __syncthreads();
  // merge of n states at once: m = max m_lane, then each scaled by exp2(m_lane - m).
  for (int idx = t; idx < rows * kD; idx += kThreads) {
    const int r = idx / kD, c = idx % kD;
    float m_max = -INFINITY;
    for (int ln = 0; ln < kLanes; ++ln) m_max = fmaxf(m_max, sM[ln * kMaxRowsPerBlock + r]);
    float l_sum = 0.0f, u_sum = 0.0f;
    if (m_max != -INFINITY) {
      for (int ln = 0; ln < kLanes; ++ln) {
        const float beta = ptx::exp2_approx(sM[ln * kMaxRowsPerBlock + r] - m_max);
        l_sum = fmaf(beta, sL[ln * kMaxRowsPerBlock + r], l_sum);
        u_sum = fmaf(beta, sU[(ln * kMaxRowsPerBlock + r) * kD + c], u_sum);
      }
    }
    const int packed = first_row + r;
    const int h = kv_head * p.group_size + packed / p.n_q, i = packed % p.n_q;
    float* state = p.states + ((int64_t(b) * p.heads_q + h) * p.n_q + i) * p.splits * (kD + 2) +
                   int64_t(split) * (kD + 2);  // (U (d), m, l), m natural: m2 ln 2
    state[c] = u_sum;
    if (c == 0) {
      state[kD] = m_max == -INFINITY ? -INFINITY : m_max * kLn2;
      state[kD + 1] = l_sum;
    }
  }
}

template <class T, int kD, int kRows>
void launch(const DecodeProblem& p, cudaStream_t stream) {
  const auto kernel = decode_split_kv_kernel<T, kD, kRows>;
  const int sram = int(sram_bytes(kD));
  throw_if_cuda_error(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sram),
      "cudaFuncSetAttribute(decode_split_kv)");
  const dim3 grid(p.splits, p.heads_kv * p.row_blocks, p.batch);
  kernel<<<grid, kThreads, sram, stream>>>(p);
  check_launch("decode_split_kv");
}

template <class T, int kD>
void launch_rows(const DecodeProblem& p, cudaStream_t stream) {
  if (rows_per_block(p.group_size, p.n_q) == kMaxRowsPerBlock / 2)
    launch<T, kD, kMaxRowsPerBlock / 2>(p, stream);
  else
    launch<T, kD, kMaxRowsPerBlock>(p, stream);
}

}  // namespace

void launch_decode_split_kv(const DecodeProblem& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, float>) {
      if (p.d == 64)
        launch_rows<T, 64>(p, stream);
      else
        launch_rows<T, 128>(p, stream);
    }
  });
}

}  // namespace flashlab::gpu
