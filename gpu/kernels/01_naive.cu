// 01_naive: attention as three separate operators, the way a framework runs it unfused.
// This is the baseline every later kernel is measured against.
//   1. cuBLAS:        S = Q K^T * scale         fp32, written whole to HBM   (N_q, N_k) per head
//   2. softmax_rows:  P = softmax(S), L          reads S back, writes P in the input dtype
//   3. cuBLAS:        O = P V                   reads P back
// S and P are real tensors in HBM (gS, gP), (4 + sizeof(T)) * N_q * N_k bytes per head, and
// Nsight Compute sees every one of those bytes go out and come back: that traffic is what
// FlashAttention removes. fp32 accumulation throughout. Its softmax block size, the passes
// over S, and the head dimensions and dtypes it takes: naive:: in kernel_info.hpp.
#include "common.cuh"
#include "launch.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashlab::gpu {
namespace {

using naive::kSoftmaxThreads;
// The softmax grid puts the heads of one chunk on its y dimension, which holds at most 65535.
constexpr int kMaxGridY = 65535;
// S and P of all heads at once can exceed the card (B=1, H=16, N=16384: 26 GB), so heads
// are processed in chunks whose S and P fit in this much scratch memory.
constexpr size_t kWorkspaceBudgetBytes = size_t{8} << 30;

void throw_if_cublas_error(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(FLASHLAB_ERROR_CUBLAS, std::string(what) + ": " + cublasGetStatusName(status) +
                                           " (" + cublasGetStatusString(status) + ")");
}

// One cuBLAS handle per thread and device, created on first use: creating one costs
// milliseconds, far more than a small attention call.
cublasHandle_t cublas_handle() {
  constexpr int kMaxDevices = 64;
  thread_local cublasHandle_t handles[kMaxDevices] = {};
  int device = 0;
  throw_if_cuda_error(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= kMaxDevices) throw Error(FLASHLAB_ERROR_INTERNAL, "more than 64 CUDA devices");
  if (!handles[device]) throw_if_cublas_error(cublasCreate(&handles[device]), "cublasCreate");
  return handles[device];
}

cudaDataType cuda_type(flashlab_dtype dtype) {
  switch (dtype) {
    case FLASHLAB_FP32: return CUDA_R_32F;
    case FLASHLAB_FP16: return CUDA_R_16F;
    case FLASHLAB_BF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

// Sum or max of one value per thread over the block; every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float x, float* sPartials) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, x, offset);
    x = kMax ? fmaxf(x, other) : x + other;
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  __syncthreads();  // sPartials may still be read by the previous reduction
  if (lane == 0) sPartials[warp] = x;
  __syncthreads();
  x = sPartials[0];
  for (int w = 1; w < kSoftmaxThreads / kWarpSize; ++w)
    x = kMax ? fmaxf(x, sPartials[w]) : x + sPartials[w];
  return x;
}

// One block per row of S: P[r, :] = softmax(S[r, :]) with the causal mask applied, and
// L[r] = m + log(l) (flashlab::cpu::stable_softmax and log_sum_exp, of one whole row).
// naive::kSoftmaxPasses passes over the row (max, sum, write), each reading S from the L2
// or HBM into the SM: the loads are ld.global.cg (__ldcg), which skip the L1, so every pass
// crosses into the SM and the bytes lesson 5 counts are the bytes Nsight Compute sees. (With
// plain loads the L1 served a varying share of the second and third passes: 1.2 of 3 at
// N = 4096, 0.14 at 8192, docs/IO-LEVELS.md.)
// blockIdx.y is the head within the chunk; first_head is the chunk's first (b, h) index.
template <class T>
__global__ void softmax_rows(const float* gS, T* gP, float* gL, Problem p, int64_t first_head) {
  __shared__ float sPartials[kSoftmaxThreads / kWarpSize];
  const int r = blockIdx.x;
  const size_t row_offset = (size_t(blockIdx.y) * p.n_q + r) * p.n_k;
  const float* gS_row = gS + row_offset;  // (N_k)
  T* gP_row = gP + row_offset;            // (N_k)
  const int valid = visible_keys(p, r);   // keys [0, valid); a causal row may see none

  float m = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, __ldcg(gS_row + j));
  m = block_reduce<true>(m, sPartials);

  float l = 0.0f;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) l += expf(__ldcg(gS_row + j) - m);
  l = block_reduce<false>(l, sPartials);

  // A row with no visible key: P = 0 (so O = 0) and L = -inf, flashlab's convention.
  const float inv_l = valid > 0 ? 1.0f / l : 0.0f;
  for (int j = threadIdx.x; j < p.n_k; j += blockDim.x)
    gP_row[j] = from_float<T>(j < valid ? expf(__ldcg(gS_row + j) - m) * inv_l : 0.0f);
  if (gL != nullptr && threadIdx.x == 0)
    gL[size_t(first_head + blockIdx.y) * p.n_q + r] = valid > 0 ? m + logf(l) : -INFINITY;
}

// Device pointers of every (b, h) pair, for cublasGemmBatchedEx: one array per operand.
struct HeadPointers {
  std::vector<const void*> q, k, v;
  std::vector<void*> o, s, p;
};

// gS and gP hold `chunk` heads' (N_q, N_k) scores and probabilities; (b, h) uses slot
// (b * heads_q + h) % chunk of each.
HeadPointers head_pointers(const Problem& p, float* gS, void* gP, int64_t chunk) {
  HeadPointers ptrs;
  const int64_t elem = dtype_bytes(p.dtype);
  const int64_t score_elems = int64_t(p.n_q) * p.n_k;
  auto at = [elem](const void* base, int64_t offset) {
    return static_cast<const char*>(base) + offset * elem;
  };
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t hk = h / p.group_size;
      const int64_t slot = (b * p.heads_q + h) % chunk;
      ptrs.q.push_back(at(p.q, b * p.q_stride.batch + h * p.q_stride.head));
      ptrs.k.push_back(at(p.k, b * p.k_stride.batch + hk * p.k_stride.head));
      ptrs.v.push_back(at(p.v, b * p.v_stride.batch + hk * p.v_stride.head));
      ptrs.o.push_back(const_cast<char*>(at(p.o, b * p.o_stride.batch + h * p.o_stride.head)));
      ptrs.s.push_back(gS + slot * score_elems);
      ptrs.p.push_back(static_cast<char*>(gP) + slot * score_elems * elem);
    }
  return ptrs;
}

// Row-major S = scale * Q K^T is column-major S^T = scale * K_cm^T Q_cm, where X_cm is the
// column-major (d, rows) view of a row-major (rows, d) matrix: cuBLAS is column-major.
void gemm_scores(cublasHandle_t handle, const Problem& p, const void* const* q,
                 const void* const* k, void* const* s, int count) {
  const float alpha = p.scale, beta = 0.0f;
  const cudaDataType in = cuda_type(p.dtype);
  throw_if_cublas_error(
      cublasGemmBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, p.n_k, p.n_q, p.d, &alpha, k, in,
                          int(p.k_stride.row), q, in, int(p.q_stride.row), &beta, s, CUDA_R_32F,
                          p.n_k, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cuBLAS S = Q K^T");
}

// Row-major O = P V is column-major O^T = V_cm P_cm.
void gemm_output(cublasHandle_t handle, const Problem& p, const void* const* pp,
                 const void* const* v, void* const* o, int count) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType in = cuda_type(p.dtype);
  throw_if_cublas_error(
      cublasGemmBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, p.d, p.n_q, p.n_k, &alpha, v, in,
                          int(p.v_stride.row), pp, in, p.n_k, &beta, o, in, int(p.o_stride.row),
                          count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cuBLAS O = P V");
}

template <class T>
void run_chunks(const Problem& p, cudaStream_t stream) {
  // Validation caps batch * heads_q at INT_MAX; int64 keeps the pointer offsets built from
  // it (head * head_bytes) out of int arithmetic.
  const int64_t heads = int64_t(p.batch) * p.heads_q;
  const size_t score_elems = size_t(p.n_q) * p.n_k;
  const size_t head_bytes = score_elems * (sizeof(float) + sizeof(T));
  const int chunk = int(std::clamp<size_t>(kWorkspaceBudgetBytes / head_bytes, 1,
                                           std::min<int64_t>(heads, kMaxGridY)));

  // gS (chunk, N_q, N_k) fp32, then gP (chunk, N_q, N_k) in T
  StreamScratch workspace(chunk * head_bytes, stream, "S and P");
  float* gS = static_cast<float*>(workspace.get());
  T* gP = reinterpret_cast<T*>(gS + chunk * score_elems);

  const HeadPointers host = head_pointers(p, gS, gP, chunk);
  const size_t array_bytes = heads * sizeof(void*);
  constexpr int kArrays = 6;
  StreamScratch device_ptrs(kArrays * array_bytes, stream, "pointers");
  const void* const* arrays[kArrays] = {host.q.data(), host.k.data(), host.v.data(),
                                        (const void* const*)host.o.data(),
                                        (const void* const*)host.s.data(),
                                        (const void* const*)host.p.data()};
  auto** dev = static_cast<void**>(device_ptrs.get());
  for (int a = 0; a < kArrays; ++a)
    throw_if_cuda_error(cudaMemcpyAsync(dev + a * heads, arrays[a], array_bytes,
                                        cudaMemcpyHostToDevice, stream),
                        "copy pointer arrays");
  void** q = dev;
  void** k = dev + heads;
  void** v = dev + 2 * heads;
  void** o = dev + 3 * heads;
  void** s = dev + 4 * heads;
  void** pp = dev + 5 * heads;

  cublasHandle_t handle = cublas_handle();
  throw_if_cublas_error(cublasSetStream(handle, stream), "cublasSetStream");
  for (int64_t first = 0; first < heads; first += chunk) {
    const int count = int(std::min<int64_t>(chunk, heads - first));
    gemm_scores(handle, p, q + first, k + first, s + first, count);
    softmax_rows<T><<<dim3(p.n_q, count), kSoftmaxThreads, 0, stream>>>(gS, gP, p.lse, p, first);
    check_launch("softmax_rows");
    gemm_output(handle, p, pp + first, v + first, o + first, count);
  }
  device_ptrs.free("free pointers");
  workspace.free("free S and P");
}

}  // namespace

void launch_naive(const Problem& problem, cudaStream_t stream) {
  dispatch_dtype(problem.dtype, [&](auto t) { run_chunks<decltype(t)>(problem, stream); });
}

}  // namespace flashlab::gpu
