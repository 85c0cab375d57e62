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
//   - delayed normalisation: U is divided by l once, after the last tile; and U = alpha U is
//     skipped when no row of the warp changed its max (alpha exactly 1: bitwise no change).
//   - LSE (L = m + log l) written for the backward pass.
//   - causal: KV tiles wholly in the future are never loaded; only tiles that cross the
//     diagonal (or the ragged end of N_k) are masked, in registers.
// SRAM tiles are swizzled (16-byte chunk c of row r lives at chunk c ^ (r % 8)), so the 8
// rows that one ldmatrix reads fall in 8 different bank groups instead of one.
// Tiles: Br = 128 query rows (4 warps x 32), Bc = 128 keys for d = 64 and 64 for d = 128;
// 2 blocks per SM. d in {64, 128}; bf16 and fp16; any N_q, N_k; batch, heads, GQA; strides
// as given.
#include "common.cuh"
#include "launch.hpp"
#include "ptx.cuh"

namespace flashlab::gpu {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMmaM = 16;                    // rows of one mma.sync m16n8k16 tile
constexpr int kMTiles = 2;                   // m16 tiles of query rows per warp
constexpr int kRowsPerWarp = kMTiles * kMmaM;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kBr = kWarps * kRowsPerWarp;   // 128 query rows per block
constexpr int kBlocksPerSm = 2;              // 2 x 128 threads x <= 256 registers fit an SM
constexpr int kChunk = 8;                    // 16-bit elements per 16-byte chunk
constexpr int kSwizzleRows = 8;              // an ldmatrix reads 8 rows at once
constexpr int kBuffers = 2;                  // double buffering of K and V
constexpr unsigned kFullWarp = 0xffffffffu;

template <int D, int Bc>
constexpr size_t fa2_sram_elems() {
  return size_t(kBr) * D + size_t(kBuffers) * 2 * Bc * D;  // sQ, sK[2], sV[2]
}

// Element offset of 16-byte chunk c of row r in a swizzled (rows, D) SRAM tile.
template <int D>
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * D + ((c ^ (r % kSwizzleRows)) * kChunk);
}

// Starts copying rows [row0, row0 + rows) of a (n_rows, D) matrix into a swizzled SRAM
// tile, 16 bytes per cp.async; rows at or past n_rows are zero-filled, never read.
// Thread t copies chunk t % (D/8) of rows t / (D/8) + i * kRowsPerPass: kRowsPerPass is a
// multiple of 8, so the swizzle (row % 8) is the same for all of a thread's rows, and source
// and destination just step by a fixed stride from one chunk to the next.
template <class T, int D, int rows>
__device__ __forceinline__ void load_tile(T* sram, const T* hbm, int64_t row_stride, int row0,
                                          int n_rows) {
  constexpr int kChunksPerRow = D / kChunk;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kRowsPerPass % kSwizzleRows == 0 && rows % kRowsPerPass == 0);
  const int r = threadIdx.x / kChunksPerRow, c = threadIdx.x % kChunksPerRow;
  const T* src = hbm + (row0 + r) * row_stride + c * kChunk;
  T* dst = sram + swizzled<D>(r, c);
#pragma unroll
  for (int i = 0; i < rows / kRowsPerPass; ++i) {
    const bool inside = row0 + r + i * kRowsPerPass < n_rows;
    ptx::cp_async_16(dst + i * kRowsPerPass * D, inside ? src : hbm, inside);
    src += kRowsPerPass * row_stride;
  }
}

// The chunk offsets (in elements) of an ldmatrix lane's row, swizzled. Every row a lane
// hands to ldmatrix has row % 8 == lane % 8 (one lane's rows differ by multiples of 8), so
// the swizzle of chunk 8a + b is 8a + (b ^ lane % 8): chunks 2j + low for j < 4 give every
// offset the lane needs, the rest are these plus a compile-time 64 elements per step of a.
// Worked out once per tile instead of once per ldmatrix.
struct LaneChunks {
  int offset[4];  // element offset of chunk 2j + low, swizzled for this lane
  __device__ __forceinline__ LaneChunks(int lane, int low) {
#pragma unroll
    for (int j = 0; j < 4; ++j) offset[j] = ((2 * j + low) ^ (lane % kSwizzleRows)) * kChunk;
  }
  // Chunk 2 jj + low, for any jj.
  __device__ __forceinline__ int at(int jj) const {
    return (jj / 4) * kSwizzleRows * kChunk + offset[jj % 4];
  }
};

// S = Q_i K_j^T for the warp's 32 rows: (kMTiles, 16, Bc) as mma C fragments. Q comes from
// SRAM 16 columns of d at a time (rQ), rather than living in registers for the whole sweep:
// the registers are needed for U and S.
template <class T, int D, int Bc>
__device__ __forceinline__ void compute_scores(float (&S)[kMTiles][Bc / 8][4], const T* sQ,
                                               const T* sK, int warp, int lane) {
  const int q_row = warp * kRowsPerWarp + (lane % 16);
  const int key = (lane % 8) + (lane / 16) * 8;  // lanes 16..31 address the upper 8 keys
  const int half = (lane / 8) % 2;               // lanes 8..15, 24..31: the upper 8 of k16
  const LaneChunks q_chunks(lane, lane / 16), k_chunks(lane, half);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Bc / 8; ++nt)
      S[mt][nt][0] = S[mt][nt][1] = S[mt][nt][2] = S[mt][nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t rQ[kMTiles][4];  // A fragments: (16, 16) of Q per m-tile
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
      ptx::ldmatrix_x4(rQ[mt], sQ + (q_row + mt * kMmaM) * D + q_chunks.at(kk));
#pragma unroll
    for (int np = 0; np < Bc / 16; ++np) {
      uint32_t b[4];  // B fragments of key n-tiles 2np and 2np + 1
      ptx::ldmatrix_x4(b, sK + (np * 16 + key) * D + k_chunks.at(kk));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ptx::mma_16816<T>(S[mt][2 * np], rQ[mt], b[0], b[1]);
        ptx::mma_16816<T>(S[mt][2 * np + 1], rQ[mt], b[2], b[3]);
      }
    }
  }
}

// Scores of keys past N_k, and under the causal mask of keys in a row's future, become -inf.
// row_g is the global query row of fragment row g of m-tile 0; elements 2, 3 of a fragment
// belong to row g + 8, and m-tile mt starts 16 mt rows further down.
template <int Bc>
__device__ __forceinline__ void mask_scores(float (&S)[kMTiles][Bc / 8][4], int row_g, int k0,
                                            int lane, const Problem& p) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < Bc / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row_g + mt * kMmaM + (e / 2) * 8;
        const int key = k0 + nt * 8 + (lane % 4) * 2 + (e % 2);
        if (key >= p.n_k || (p.causal && key > row + p.causal_offset))
          S[mt][nt][e] = -INFINITY;
      }
}

// The four threads of a quad (lane / 4 equal) hold one row's scores between them.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullWarp, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullWarp, x, 1);
  return x + __shfl_xor_sync(kFullWarp, x, 2);
}

// FlashAttention-2's update (flashlab::cpu::update), per fragment row r in {g, g + 8}:
//   m' = max(m, rowmax S); alpha = 2^((m - m') s); W = 2^(S s - m' s); l = alpha l + rowsum W
// with s = scale * log2(e); m stays in raw score units. The last step, U = alpha U, is
// rescale_output's. S is overwritten with W. l is this thread's partial sum over its own
// columns: the quad's total is taken once, at the end (alpha is the same in all four
// threads of a row).
template <int Bc>
__device__ __forceinline__ void online_softmax_update(float (&S)[Bc / 8][4], float (&m)[2],
                                                      float (&l)[2], float (&alpha)[2],
                                                      float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < Bc / 8; ++nt)
      tile_max = fmaxf(tile_max, fmaxf(S[nt][2 * r], S[nt][2 * r + 1]));
    const float m_new = fmaxf(m[r], quad_max(tile_max));
    // A row that has seen only masked keys still has m' = -inf: exponentiate against 0
    // instead, since 2^(-inf - (-inf)) is NaN; its W and alpha then come out 0 as they should.
    const float base = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
    alpha[r] = ptx::exp2_approx(m[r] * scale_log2 - base);
    float row_sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < Bc / 8; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        S[nt][e] = ptx::exp2_approx(fmaf(S[nt][e], scale_log2, -base));
        row_sum += S[nt][e];
      }
    l[r] = alpha[r] * l[r] + row_sum;
    m[r] = m_new;
  }
}

// U = alpha U for one m-tile: rows g (elements 0, 1) and g + 8 (elements 2, 3).
template <int D>
__device__ __forceinline__ void rescale_output(float (&U)[D / 8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) U[dt][e] *= alpha[e / 2];
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

// U += W V_j: W (kMTiles, 16, Bc) goes straight from C fragments to A fragments (rounded to
// T, as flashlab::cpu::update rounds it), V_j (Bc, D) comes through ldmatrix.trans.
template <class T, int D, int Bc>
__device__ __forceinline__ void accumulate_wv(float (&U)[kMTiles][D / 8][4],
                                              const float (&W)[kMTiles][Bc / 8][4],
                                              const T* sV, int lane) {
  const int key = (lane % 8) + ((lane / 8) % 2) * 8;  // lanes 8..15, 24..31: keys 8..15
  const int upper = lane / 16;                        // lanes 16..31: the upper 8 of d16
  const LaneChunks v_chunks(lane, upper);
#pragma unroll
  for (int kk = 0; kk < Bc / 16; ++kk) {
    uint32_t a[kMTiles][4];  // A fragments: (16, 16) of W per m-tile
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      a[mt][0] = ptx::pack2<T>(W[mt][2 * kk][0], W[mt][2 * kk][1]);
      a[mt][1] = ptx::pack2<T>(W[mt][2 * kk][2], W[mt][2 * kk][3]);
      a[mt][2] = ptx::pack2<T>(W[mt][2 * kk + 1][0], W[mt][2 * kk + 1][1]);
      a[mt][3] = ptx::pack2<T>(W[mt][2 * kk + 1][2], W[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];  // B fragments of d n-tiles 2dp and 2dp + 1
      ptx::ldmatrix_x4_trans(b, sV + (kk * 16 + key) * D + v_chunks.at(dp));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ptx::mma_16816<T>(U[mt][2 * dp], a[mt], b[0], b[1]);
        ptx::mma_16816<T>(U[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// O = U / l and L = m + log l for one m-tile's 16 rows; a row that saw no key gets O = 0 and
// L = -inf.
template <class T, int D>
__device__ __forceinline__ void write_output(const float (&U)[D / 8][4], const float (&m)[2],
                                             const float (&l)[2], T* O, int64_t row_stride,
                                             float* lse, int row_g, int lane, int n_q,
                                             float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l_row = quad_sum(l[r]);
    const int row = row_g + r * 8;
    if (row >= n_q) continue;
    const float inv_l = l_row > 0.0f ? 1.0f / l_row : 0.0f;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int col = dt * 8 + (lane % 4) * 2;
      *reinterpret_cast<uint32_t*>(O + row * row_stride + col) =
          ptx::pack2<T>(U[dt][2 * r] * inv_l, U[dt][2 * r + 1] * inv_l);
    }
    if (lse != nullptr && lane % 4 == 0)
      lse[row] = l_row > 0.0f ? (m[r] * scale_log2 + log2f(l_row)) * kLn2 : -INFINITY;
  }
}

// How many KV tiles query tile [q0, q0 + Br) needs: under the causal mask, the tiles past
// the block's last row + offset are in every row's future and are never loaded.
template <int Bc>
__device__ __forceinline__ int kv_tile_count(const Problem& p, int q0) {
  int n_keys = p.n_k;
  if (p.causal) {
    const int last_row = min(q0 + kBr, p.n_q) - 1;
    n_keys = max(0, min(p.n_k, last_row + p.causal_offset + 1));
  }
  return (n_keys + Bc - 1) / Bc;
}

// Whether KV tile [k0, k0 + Bc) needs masking for query tile [q0, q0 + Br): it is ragged,
// or some key in it lies in the future of the block's first row.
template <int Bc>
__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int q0, int k0) {
  return k0 + Bc > p.n_k || (p.causal && k0 + Bc - 1 > q0 + p.causal_offset);
}

template <class T, int D, int Bc>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) fa2_kernel(Problem p) {
  extern __shared__ __align__(128) unsigned char sram[];
  T* sQ = reinterpret_cast<T*>(sram);  // (Br, D)
  T* sK = sQ + kBr * D;                // (2, Bc, D)
  T* sV = sK + kBuffers * Bc * D;     // (2, Bc, D)

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Causal query tiles differ in work; the longest (last) ones are scheduled first.
  const int i = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = i * kBr;
  const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group_size;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  const int Tc = kv_tile_count<Bc>(p, q0);

  load_tile<T, D, kBr>(sQ, gQ, p.q_stride.row, q0, p.n_q);
  ptx::cp_async_commit();
  if (Tc > 0) {
    load_tile<T, D, Bc>(sK, gK, p.k_stride.row, 0, p.n_k);
    load_tile<T, D, Bc>(sV, gV, p.v_stride.row, 0, p.n_k);
  }
  ptx::cp_async_commit();

  // Per warp: (m, l, U) of its 32 rows, as two m16 tiles; each thread holds rows g and g + 8
  // of each tile (g = lane / 4), hence the [2] of m and l.
  float U[kMTiles][D / 8][4] = {};           // (32, D) unnormalised output
  float m[kMTiles][2], l[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
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
      load_tile<T, D, Bc>(sK + next * Bc * D, gK, p.k_stride.row, k0 + Bc, p.n_k);
      load_tile<T, D, Bc>(sV + next * Bc * D, gV, p.v_stride.row, k0 + Bc, p.n_k);
      ptx::cp_async_commit();
    }

    float S[kMTiles][Bc / 8][4];  // (32, Bc) scores, then W, per warp
    compute_scores<T, D, Bc>(S, sQ, sK + buf * Bc * D, warp, lane);
    if (tile_needs_mask<Bc>(p, q0, k0)) mask_scores<Bc>(S, row_g, k0, lane, p);
    float alpha[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
      online_softmax_update<Bc>(S[mt], m[mt], l[mt], alpha[mt], scale_log2);
    if (warp_needs_rescale(alpha))
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) rescale_output<D>(U[mt], alpha[mt]);
    accumulate_wv<T, D, Bc>(U, S, sV + buf * Bc * D, lane);
  }
  ptx::cp_async_wait<0>();  // with Tc = 0 the Q copy may still be in flight

  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;
  float* lse = p.lse ? p.lse + (size_t(b) * p.heads_q + h) * p.n_q : nullptr;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
    write_output<T, D>(U[mt], m[mt], l[mt], gO, p.o_stride.row, lse, row_g + mt * kMmaM, lane,
                       p.n_q, scale_log2);
}

template <class T, int D, int Bc>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr size_t sram_bytes = fa2_sram_elems<D, Bc>() * sizeof(T);
  throw_if_cuda_error(cudaFuncSetAttribute(fa2_kernel<T, D, Bc>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(sram_bytes)),
                      "fa2 kernel shared memory");
  const dim3 grid((p.n_q + kBr - 1) / kBr, p.heads_q, p.batch);
  fa2_kernel<T, D, Bc><<<grid, kThreads, sram_bytes, stream>>>(p);
  check_launch("fa2_kernel");
}

// Bc per head dimension, measured on the H200 (bench/gpu/NOTES.md): with d = 64 a 128-key
// tile fits the registers and beats 64 (270 against 250 TFLOP/s); with d = 128, 64 beats 32.
template <class T>
void launch_for_d(const Problem& p, cudaStream_t stream) {
  if (p.d == 64) launch<T, 64, 128>(p, stream);
  else launch<T, 128, 64>(p, stream);
}

}  // namespace

bool fa2_supports_d(int d) { return d == 64 || d == 128; }

void launch_fa2(const Problem& problem, cudaStream_t stream) {
  if (problem.dtype == Dtype::fp16) launch_for_d<__half>(problem, stream);
  else launch_for_d<__nv_bfloat16>(problem, stream);
}

}  // namespace flashlab::gpu
