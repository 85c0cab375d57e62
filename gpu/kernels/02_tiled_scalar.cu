// 02_tiled_scalar: the FlashAttention algorithm with nothing else in the way.
// What it adds over 01_naive: S and P never exist in HBM. Each block takes Br query rows,
// one thread per row; it sweeps the keys in tiles of Bc rows that the block stages in shared
// memory (SRAM), and every thread keeps its row's online-softmax state in registers:
//   m  the largest score seen so far         l  sum of exp(S - m)         U  sum of exp(S - m) V
// updated per tile exactly as flashlab::cpu::update() does (softmax_state.hpp):
//   m' = max(m, rowmax(S)); alpha = exp(m - m'); l = alpha l + sum exp(S - m'); U = alpha U + W V
// and normalised once at the end: O = U / l, L = m + log l.
// The tile's scores wait in SRAM (sS) between the two passes over it (max, then update).
// fp32 arithmetic on CUDA cores, scalar loops, no tensor cores, uncoalesced row-per-thread
// output stores: slow on purpose, so the algorithm stays visible. d in {64, 128};
// inputs fp32, fp16 or bf16.
#include "common.cuh"
#include "launch.hpp"

namespace flashlab::gpu {
namespace {

constexpr int kBr = 64;  // query rows per block = threads per block
constexpr int kBc = 32;  // keys per K/V tile in SRAM
// sQ and sS rows are padded by one float: thread r reads sQ[r][k] while its neighbours read
// sQ[r+1][k]; with a row stride of d + 1 floats those land in different banks.
constexpr int kQPad = 1;

template <int D>
constexpr size_t scalar_sram_bytes() {
  // sQ, sK, sV, sS
  return sizeof(float) * (kBr * (D + kQPad) + 2 * kBc * D + kBr * (kBc + kQPad));
}

// Copies rows [row0, row0 + rows) of a (n_rows, D) matrix with the given row stride into
// SRAM as fp32, `ld` floats apart; rows past n_rows become zeros so they add nothing.
template <class T, int D>
__device__ void load_rows(float* sram, int ld, const T* hbm, int64_t row_stride, int row0,
                          int rows, int n_rows) {
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, c = idx % D;
    const bool inside = row0 + r < n_rows;
    sram[r * ld + c] = inside ? to_float(hbm[(row0 + r) * row_stride + c]) : 0.0f;
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kBr) tiled_scalar_kernel(Problem p) {
  extern __shared__ float sram[];
  float* sQ = sram;                        // (Br, D + pad)
  float* sK = sQ + kBr * (D + kQPad);      // (Bc, D)
  float* sV = sK + kBc * D;                // (Bc, D)
  float* sS = sV + kBc * D;                // (Br, Bc + pad) each thread's row of scores

  const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group_size;
  const int q0 = blockIdx.x * kBr;
  const int row = q0 + threadIdx.x;  // this thread's query row
  const T* Q = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head;
  const T* K = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* V = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  load_rows<T, D>(sQ, D + kQPad, Q, p.q_stride.row, q0, kBr, p.n_q);

  // The state (m, l, U) of this thread's row, in registers.
  float m = -INFINITY, l = 0.0f;
  float U[D];  // (D)
#pragma unroll
  for (int k = 0; k < D; ++k) U[k] = 0.0f;

  // Causal: keys past the block's last row + offset are in everyone's future: never loaded.
  const int last_row = min(q0 + kBr, p.n_q) - 1;
  const int n_keys = p.causal ? max(0, min(p.n_k, last_row + p.causal_offset + 1)) : p.n_k;
  for (int k0 = 0; k0 < n_keys; k0 += kBc) {
    __syncthreads();  // everyone is done with the previous K/V tile (and sQ is written)
    load_rows<T, D>(sK, D, K, p.k_stride.row, k0, kBc, p.n_k);
    load_rows<T, D>(sV, D, V, p.v_stride.row, k0, kBc, p.n_k);
    __syncthreads();

    // S = q K_j^T * scale for this row: (Bc) in the thread's row of sS; masked or missing
    // keys get -inf.
    float* S = sS + threadIdx.x * (kBc + kQPad);
    float tile_max = -INFINITY;
#pragma unroll 1
    for (int c = 0; c < kBc; ++c) {
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < D; ++k) dot += sQ[threadIdx.x * (D + kQPad) + k] * sK[c * D + k];
      const int key = k0 + c;
      const bool visible = key < p.n_k && (!p.causal || key <= row + p.causal_offset);
      S[c] = visible ? dot * p.scale : -INFINITY;
      tile_max = fmaxf(tile_max, S[c]);
    }
    // A row that sees no key of this tile skips the update, as the CPU reference does:
    // exp(S - m') would be exp(-inf - (-inf)) = NaN for a row that has seen nothing yet.
    if (tile_max == -INFINITY) continue;

    const float m_new = fmaxf(m, tile_max);
    const float alpha = expf(m - m_new);  // exp(-inf) = 0 on the first visible tile
    l *= alpha;
#pragma unroll
    for (int k = 0; k < D; ++k) U[k] *= alpha;
#pragma unroll 1
    for (int c = 0; c < kBc; ++c) {
      const float W = expf(S[c] - m_new);  // 0 for masked keys
      l += W;
#pragma unroll
      for (int k = 0; k < D; ++k) U[k] += W * sV[c * D + k];
    }
    m = m_new;
  }

  if (row >= p.n_q) return;
  // O = U / l, L = m + log l; a row that saw no key gets O = 0, L = -inf.
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  T* O = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head + row * p.o_stride.row;
#pragma unroll
  for (int k = 0; k < D; ++k) O[k] = from_float<T>(U[k] * inv_l);
  if (p.lse != nullptr)
    p.lse[(size_t(b) * p.heads_q + h) * p.n_q + row] = l > 0.0f ? m + logf(l) : -INFINITY;
}

template <class T, int D>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr size_t sram_bytes = scalar_sram_bytes<D>();
  throw_if_cuda_error(cudaFuncSetAttribute(tiled_scalar_kernel<T, D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(sram_bytes)),
                      "scalar kernel shared memory");
  const dim3 grid((p.n_q + kBr - 1) / kBr, p.heads_q, p.batch);
  tiled_scalar_kernel<T, D><<<grid, kBr, sram_bytes, stream>>>(p);
  check_launch("tiled_scalar_kernel");
}

}  // namespace

bool scalar_supports_d(int d) { return d == 64 || d == 128; }

void launch_scalar(const Problem& problem, cudaStream_t stream) {
  dispatch_dtype(problem.dtype, [&](auto t) {
    using T = decltype(t);
    if (problem.d == 64) launch<T, 64>(problem, stream);
    else launch<T, 128>(problem, stream);
  });
}

}  // namespace flashlab::gpu
