// 04_backward_preprocess: the two small kernels around the backward's main kernel
// (04_fa2_backward.cu).
//   preprocess: D_i = rowsum(dO_i o O_i) in fp32, one warp per query row, and the row's fp32
//     dQ accumulator set to 0 (the main kernel adds into it with atomic 16-byte reductions).
//     Why D: dS = P o (dP - D) needs, per row, sum_j P_ij dP_ij, and that sum equals
//     sum_k dO_ik O_ik (dP = dO V^T and O = P V), d terms instead of N_k.
//     Per row it reads 2 d elements (dO, O) and writes 4 bytes of D (+ 4 d of zeros). The
//     block's rows are consecutive rows of D, so their D goes out together: the warps leave
//     their sums in SRAM and one instruction stores them, a whole 32-byte sector for the
//     block's 8 floats (store_block_rows, fa2_backward::kDStore), not a sector per float.
//   convert: dQ = scale * accumulator, rounded to the input dtype, written with dQ's
//     strides; per row it reads 4 d bytes and writes d elements.
// Both are memory-bound: together about (2 + 4 + 4 + 2) d bytes per query row in bf16,
// against the main kernel's O(N_k d) work per row.
#include "common.cuh"
#include "launch_backward.hpp"

namespace flashlab::gpu {
namespace {

using fa2_backward::kPreprocessThreads;
constexpr int kRowsPerBlock = fa2_backward::kPreprocessRowsPerBlock;

// Query row n of (b, h) for global warp w = (b * Hq + h) * N_q + n.
struct Row {
  int64_t index;  // (b * Hq + h) * N_q + n: the row of D and of the accumulator
  int b, h, n;
};
__device__ __forceinline__ bool row_of_warp(const Problem& p, Row* row) {
  const int64_t w = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (w >= int64_t(p.batch) * p.heads_q * p.n_q) return false;
  row->index = w;
  row->n = int(w % p.n_q);
  row->h = int((w / p.n_q) % p.heads_q);
  row->b = int(w / (int64_t(p.n_q) * p.heads_q));
  return true;
}

template <class T>
__global__ void __launch_bounds__(kPreprocessThreads) preprocess_kernel(BackwardProblem bp) {
  __shared__ float sD[kRowsPerBlock];  // the block's D, one float a warp
  const Problem& p = bp.fwd;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  Row row;
  if (row_of_warp(p, &row)) {  // past the last row a warp has no row, but meets the barrier
    const T* gO = static_cast<const T*>(p.o) + row.b * p.o_stride.batch +
                  row.h * p.o_stride.head + row.n * p.o_stride.row;  // (d)
    const T* gdO = static_cast<const T*>(bp.dout) + row.b * bp.dout_stride.batch +
                   row.h * bp.dout_stride.head + row.n * bp.dout_stride.row;  // (d)
    float sum = 0.0f;
    for (int c = lane; c < p.d; c += kWarpSize) sum += to_float(gdO[c]) * to_float(gO[c]);
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(kFullWarp, sum, offset);
    if (lane == 0) sD[warp] = sum;
    if (bp.dq_accum != nullptr)
      for (int c = lane; c < p.d; c += kWarpSize) bp.dq_accum[row.index * p.d + c] = 0.0f;
  }
  __syncthreads();
  store_block_rows<kRowsPerBlock>(bp.d_rows, int64_t(blockIdx.x) * kRowsPerBlock,
                                  int64_t(p.batch) * p.heads_q * p.n_q, sD);
}

template <class T>
__global__ void __launch_bounds__(kPreprocessThreads) convert_dq_kernel(BackwardProblem bp) {
  const Problem& p = bp.fwd;
  Row row;
  if (!row_of_warp(p, &row)) return;
  const int lane = threadIdx.x % kWarpSize;
  T* gdQ = static_cast<T*>(bp.dq) + row.b * bp.dq_stride.batch + row.h * bp.dq_stride.head +
           row.n * bp.dq_stride.row;  // (d)
  const float* accum = bp.dq_accum + row.index * p.d;
  for (int c = lane; c < p.d; c += kWarpSize) gdQ[c] = from_float<T>(accum[c] * p.scale);
}

unsigned blocks_for_rows(const Problem& p) {
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.n_q;
  return unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void launch_backward_preprocess(const BackwardProblem& problem, cudaStream_t stream) {
  const unsigned blocks = blocks_for_rows(problem.fwd);
  if (problem.fwd.dtype == FLASHLAB_FP16)
    preprocess_kernel<__half><<<blocks, kPreprocessThreads, 0, stream>>>(problem);
  else
    preprocess_kernel<__nv_bfloat16><<<blocks, kPreprocessThreads, 0, stream>>>(problem);
  check_launch("backward preprocess_kernel");
}

void launch_backward_convert_dq(const BackwardProblem& problem, cudaStream_t stream) {
  const unsigned blocks = blocks_for_rows(problem.fwd);
  if (problem.fwd.dtype == FLASHLAB_FP16)
    convert_dq_kernel<__half><<<blocks, kPreprocessThreads, 0, stream>>>(problem);
  else
    convert_dq_kernel<__nv_bfloat16><<<blocks, kPreprocessThreads, 0, stream>>>(problem);
  check_launch("backward convert_dq_kernel");
}

}  // namespace flashlab::gpu
