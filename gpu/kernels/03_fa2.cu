// 03_fa2: FlashAttention-2 on tensor cores. What it adds over 02_tiled_scalar:
//   - bf16/fp16 inputs, fp32 accumulation: S = Q K^T and U += W V run as mma.sync m16n8k16
//     on the tensor cores, their operands brought from SRAM by ldmatrix.
//   - cp.async double buffering: while the warps compute on K_j, V_j in one SRAM buffer, the
//     copy engine is already filling the other with K_{j+1}, V_{j+1}.
//   - warps split over query rows: warp w owns rows [16w, 16w + 16) of the block's Br rows,
//     so each warp's (m, l, U) is its own and no cross-warp reduction is ever needed.
//   - exp2 with scale * log2(e) folded into one FFMA: W = 2^(S * scale * log2 e - m').
//   - delayed normalisation: U is divided by l once, after the last tile.
//   - LSE (L = m + log l) written for the backward pass.
//   - causal: KV tiles wholly in the future are never loaded; only tiles that cross the
//     diagonal (or the ragged end of N_k) are masked, in registers.
// SRAM tiles are swizzled (16-byte chunk c of row r lives at chunk c ^ (r % 8)), so the 8
// rows that one ldmatrix reads fall in 8 different bank groups instead of one.
// d in {64, 128}; bf16 and fp16; any N_q, N_k; batch, heads, GQA; strides as given.
#include "common.cuh"
#include "launch.hpp"
#include "ptx.cuh"

namespace flashlab::gpu {
namespace {

constexpr int kWarpSize = 32;
constexpr int kRowsPerWarp = 16;             // one m16 mma tile of query rows per warp
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kBr = kWarps * kRowsPerWarp;   // 128 query rows per block
constexpr int kBc = 64;                      // keys per K/V tile
constexpr int kChunk = 8;                    // 16-bit elements per 16-byte chunk
constexpr int kSwizzleRows = 8;              // an ldmatrix reads 8 rows at once
constexpr int kBuffers = 2;                  // double buffering of K and V
constexpr unsigned kFullWarp = 0xffffffffu;

template <int D>
constexpr size_t fa2_sram_elems() {
  return size_t(kBr) * D + size_t(kBuffers) * 2 * kBc * D;  // sQ, sK[2], sV[2]
}

// Element offset of 16-byte chunk c of row r in a swizzled (rows, D) SRAM tile.
template <int D>
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * D + ((c ^ (r % kSwizzleRows)) * kChunk);
}

// Starts copying rows [row0, row0 + rows) of a (n_rows, D) matrix into a swizzled SRAM
// tile, 16 bytes per cp.async; rows at or past n_rows are zero-filled, never read.
template <class T, int D, int rows>
__device__ __forceinline__ void load_tile(T* sram, const T* hbm, int64_t row_stride, int row0,
                                          int n_rows) {
  constexpr int kChunksPerRow = D / kChunk;
#pragma unroll
  for (int idx = threadIdx.x; idx < rows * kChunksPerRow; idx += kThreads) {
    const int r = idx / kChunksPerRow, c = idx % kChunksPerRow;
    const bool inside = row0 + r < n_rows;
    const T* src = inside ? hbm + (row0 + r) * row_stride + c * kChunk : hbm;
    ptx::cp_async_16(sram + swizzled<D>(r, c), src, inside);
  }
}

// The warp's 16 rows of Q as mma A fragments, one per 16 columns of d: rQ (D/16, 4 regs).
template <class T, int D>
__device__ __forceinline__ void load_q_fragments(uint32_t (&rQ)[D / 16][4], const T* sQ,
                                                 int warp, int lane) {
  const int row = warp * kRowsPerWarp + (lane % 16);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ptx::ldmatrix_x4(rQ[kk], sQ + swizzled<D>(row, kk * 2 + lane / 16));
}

// S = Q_i K_j^T for the warp's 16 rows: (16, Bc) as Bc/8 mma C fragments.
template <class T, int D>
__device__ __forceinline__ void compute_scores(float (&S)[kBc / 8][4],
                                               const uint32_t (&rQ)[D / 16][4], const T* sK,
                                               int lane) {
  const int key = (lane % 8) + (lane / 16) * 8;  // lanes 16..31 address the upper 8 keys
  const int half = (lane / 8) % 2;               // lanes 8..15, 24..31: the upper 8 of k16
#pragma unroll
  for (int nt = 0; nt < kBc / 8; ++nt) S[nt][0] = S[nt][1] = S[nt][2] = S[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int np = 0; np < kBc / 16; ++np) {
      uint32_t b[4];  // B fragments of key n-tiles 2np and 2np + 1
      ptx::ldmatrix_x4(b, sK + swizzled<D>(np * 16 + key, kk * 2 + half));
      ptx::mma_16816<T>(S[2 * np], rQ[kk], b[0], b[1]);
      ptx::mma_16816<T>(S[2 * np + 1], rQ[kk], b[2], b[3]);
    }
}

// Scores of keys past N_k, and under the causal mask of keys in a row's future, become -inf.
// row_g is the global query row of fragment rows g; elements 2, 3 belong to row g + 8.
__device__ __forceinline__ void mask_scores(float (&S)[kBc / 8][4], int row_g, int k0,
                                            int lane, const Problem& p) {
#pragma unroll
  for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row_g + (e / 2) * 8;
      const int key = k0 + nt * 8 + (lane % 4) * 2 + (e % 2);
      if (key >= p.n_k || (p.causal && key > row + p.causal_offset)) S[nt][e] = -INFINITY;
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
//   m' = max(m, rowmax S); alpha = 2^((m - m') s); W = 2^(S s - m' s); l = alpha l + rowsum W;
//   U = alpha U          with s = scale * log2(e); m stays in raw score units.
// S is overwritten with W. l is this thread's partial sum over its own columns: the quad's
// total is taken once, at the end (alpha is the same in all four threads of a row).
template <int D>
__device__ __forceinline__ void online_softmax_update(float (&S)[kBc / 8][4], float (&m)[2],
                                                      float (&l)[2], float (&U)[D / 8][4],
                                                      float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
      tile_max = fmaxf(tile_max, fmaxf(S[nt][2 * r], S[nt][2 * r + 1]));
    const float m_new = fmaxf(m[r], quad_max(tile_max));
    // A row that has seen only masked keys still has m' = -inf: exponentiate against 0
    // instead, since 2^(-inf - (-inf)) is NaN; its W and alpha then come out 0 as they should.
    const float base = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
    const float alpha = ptx::exp2_approx(m[r] * scale_log2 - base);
    float row_sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        S[nt][e] = ptx::exp2_approx(fmaf(S[nt][e], scale_log2, -base));
        row_sum += S[nt][e];
      }
    l[r] = alpha * l[r] + row_sum;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      U[dt][2 * r] *= alpha;
      U[dt][2 * r + 1] *= alpha;
    }
    m[r] = m_new;
  }
}

// U += W V_j: W (16, Bc) goes straight from C fragments to A fragments (rounded to T, as
// flashlab::cpu::update rounds it), V_j (Bc, D) comes through ldmatrix.trans.
template <class T, int D>
__device__ __forceinline__ void accumulate_wv(float (&U)[D / 8][4], const float (&W)[kBc / 8][4],
                                              const T* sV, int lane) {
  const int key = (lane % 8) + ((lane / 8) % 2) * 8;  // lanes 8..15, 24..31: keys 8..15
  const int upper = lane / 16;                        // lanes 16..31: the upper 8 of d16
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk) {
    const uint32_t a[4] = {ptx::pack2<T>(W[2 * kk][0], W[2 * kk][1]),
                           ptx::pack2<T>(W[2 * kk][2], W[2 * kk][3]),
                           ptx::pack2<T>(W[2 * kk + 1][0], W[2 * kk + 1][1]),
                           ptx::pack2<T>(W[2 * kk + 1][2], W[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];  // B fragments of d n-tiles 2dp and 2dp + 1
      ptx::ldmatrix_x4_trans(b, sV + swizzled<D>(kk * 16 + key, dp * 2 + upper));
      ptx::mma_16816<T>(U[2 * dp], a, b[0], b[1]);
      ptx::mma_16816<T>(U[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// O = U / l and L = m + log l for the warp's rows; a row that saw no key gets O = 0, L = -inf.
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
__device__ __forceinline__ int kv_tile_count(const Problem& p, int q0) {
  int n_keys = p.n_k;
  if (p.causal) {
    const int last_row = min(q0 + kBr, p.n_q) - 1;
    n_keys = max(0, min(p.n_k, last_row + p.causal_offset + 1));
  }
  return (n_keys + kBc - 1) / kBc;
}

// Whether KV tile [k0, k0 + Bc) needs masking for query tile [q0, q0 + Br): it is ragged,
// or some key in it lies in the future of the block's first row.
__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int q0, int k0) {
  return k0 + kBc > p.n_k || (p.causal && k0 + kBc - 1 > q0 + p.causal_offset);
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1) fa2_kernel(Problem p) {
  extern __shared__ __align__(128) unsigned char sram[];
  T* sQ = reinterpret_cast<T*>(sram);  // (Br, D)
  T* sK = sQ + kBr * D;                // (2, Bc, D)
  T* sV = sK + kBuffers * kBc * D;     // (2, Bc, D)

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // Causal query tiles differ in work; the longest (last) ones are scheduled first.
  const int i = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = i * kBr;
  const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group_size;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  const int Tc = kv_tile_count(p, q0);

  load_tile<T, D, kBr>(sQ, gQ, p.q_stride.row, q0, p.n_q);
  ptx::cp_async_commit();
  if (Tc > 0) {
    load_tile<T, D, kBc>(sK, gK, p.k_stride.row, 0, p.n_k);
    load_tile<T, D, kBc>(sV, gV, p.v_stride.row, 0, p.n_k);
  }
  ptx::cp_async_commit();

  float U[D / 8][4] = {};                    // (16, D) unnormalised output, per warp
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  uint32_t rQ[D / 16][4];                    // (16, D) Q_i in registers, per warp
  const float scale_log2 = p.scale * kLog2e;
  const int row_g = q0 + warp * kRowsPerWarp + lane / 4;

  for (int j = 0; j < Tc; ++j) {
    const int buf = j % kBuffers, k0 = j * kBc;
    if (j + 1 < Tc) {  // prefetch K_{j+1}, V_{j+1} into the other buffer
      const int next = (j + 1) % kBuffers;
      load_tile<T, D, kBc>(sK + next * kBc * D, gK, p.k_stride.row, k0 + kBc, p.n_k);
      load_tile<T, D, kBc>(sV + next * kBc * D, gV, p.v_stride.row, k0 + kBc, p.n_k);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // everything but the prefetch just issued has landed
    __syncthreads();
    if (j == 0) load_q_fragments<T, D>(rQ, sQ, warp, lane);

    float S[kBc / 8][4];  // (16, Bc) scores, then W, per warp
    compute_scores<T, D>(S, rQ, sK + buf * kBc * D, lane);
    if (tile_needs_mask(p, q0, k0)) mask_scores(S, row_g, k0, lane, p);
    online_softmax_update<D>(S, m, l, U, scale_log2);
    accumulate_wv<T, D>(U, S, sV + buf * kBc * D, lane);
    __syncthreads();  // all warps are done with buffer `buf` before it is refilled
  }
  ptx::cp_async_wait<0>();

  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;
  float* lse = p.lse ? p.lse + (size_t(b) * p.heads_q + h) * p.n_q : nullptr;
  write_output<T, D>(U, m, l, gO, p.o_stride.row, lse, row_g, lane, p.n_q, scale_log2);
}

template <class T, int D>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr size_t sram_bytes = fa2_sram_elems<D>() * sizeof(T);
  throw_if_cuda_error(cudaFuncSetAttribute(fa2_kernel<T, D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(sram_bytes)),
                      "fa2 kernel shared memory");
  const dim3 grid((p.n_q + kBr - 1) / kBr, p.heads_q, p.batch);
  fa2_kernel<T, D><<<grid, kThreads, sram_bytes, stream>>>(p);
  check_launch("fa2_kernel");
}

template <class T>
void launch_for_d(const Problem& p, cudaStream_t stream) {
  if (p.d == 64) launch<T, 64>(p, stream);
  else launch<T, 128>(p, stream);
}

}  // namespace

bool fa2_supports_d(int d) { return d == 64 || d == 128; }

void launch_fa2(const Problem& problem, cudaStream_t stream) {
  if (problem.dtype == Dtype::fp16) launch_for_d<__half>(problem, stream);
  else launch_for_d<__nv_bfloat16>(problem, stream);
}

}  // namespace flashlab::gpu
