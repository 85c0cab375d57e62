// Small pieces every kernel file shares: element types, the causal mask, error checks,
// stream-ordered scratch memory.
#pragma once

#include "flashlab/gpu/forward.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "problem.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

namespace flashlab::gpu {

// The element conversions a kernel needs: every arithmetic step happens in fp32.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// The flashlab_dtype of an element type, to look a kernel's configuration up by it.
template <class T> inline constexpr flashlab_dtype kDtypeOf = FLASHLAB_FP32;
template <> inline constexpr flashlab_dtype kDtypeOf<__half> = FLASHLAB_FP16;
template <> inline constexpr flashlab_dtype kDtypeOf<__nv_bfloat16> = FLASHLAB_BF16;

// The mask: query row `row` does not see key `key` when the key is past N_k or, under the
// causal mask, in the row's future, key > row + causal_offset (Problem says which alignment
// the offset encodes).
__device__ __forceinline__ bool is_masked(const Problem& p, int row, int key) {
  return key >= p.n_k || (p.causal && key > row + p.causal_offset);
}
// How many keys row `row` sees: they are keys [0, visible_keys), all N_k without the causal
// mask, and none at all for the first N_q - N_k rows under bottom-right alignment.
__device__ __forceinline__ int visible_keys(const Problem& p, int row) {
  return p.causal ? max(0, min(p.n_k, row + p.causal_offset + 1)) : p.n_k;
}

// How many KV tiles of Bc keys query tile [q0, q0 + Br) needs: under the causal mask, the
// tiles past its last row + offset are in every row's future and are never loaded. This is
// visible_keys of the last row, written out: called, it cost fa2 a 4-byte spill.
template <int Br, int Bc>
__device__ __forceinline__ int kv_tile_count(const Problem& p, int q0) {
  int n_keys = p.n_k;
  if (p.causal) {
    const int last_row = min(q0 + Br, p.n_q) - 1;
    n_keys = max(0, min(p.n_k, last_row + p.causal_offset + 1));
  }
  return (n_keys + Bc - 1) / Bc;
}

// The lane mask of a warp-wide shuffle or vote: all 32 lanes take part.
inline constexpr unsigned kFullWarp = 0xffffffffu;

// An mma fragment (m16n8, mma.sync's and wgmma's alike) gives each row's scores to the four
// threads of a quad (lane / 4 equal): the row's max and sum take two shuffles among them.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullWarp, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullWarp, x, 1);
  return x + __shfl_xor_sync(kFullWarp, x, 2);
}

// One float a row, for the block's kRows consecutive rows [first, first + kRows) of g, each
// left in SRAM (sRows) by the warp that computed it: the block's first kRows threads store
// them in one instruction, a whole sector where kRows = kFloatsPerSector, so no sector of g
// is written by two stores (a float per warp would issue a sector for 4 bytes, and some of
// those are merged on the way out of the SM by a rule that moves with timing:
// docs/IO-LEVELS.md, "One float a row"). Rows at or past `rows` are not written. Called by
// every thread after the barrier that follows the SRAM writes.
template <int kRows>
__device__ __forceinline__ void store_block_rows(float* g, int64_t first, int64_t rows,
                                                 const float* sRows) {
  const int r = int(threadIdx.x);
  if (r < kRows && first + r < rows) g[first + r] = sRows[r];
}

// log2(e): exp(x) = exp2(x * log2 e), and the hardware's fast exponential is exp2.
inline constexpr float kLog2e = 1.4426950408889634f;
// ln(2): log(x) = log2(x) * ln 2, to turn a base-2 log-sum-exp back into the natural one.
inline constexpr float kLn2 = 0.6931471805599453f;

inline void throw_if_cuda_error(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(FLASHLAB_ERROR_CUDA, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                                         cudaGetErrorString(err) + ")");
}

// After a kernel launch: a bad configuration shows up here, not at the <<< >>> itself.
inline void check_launch(const char* kernel) {
  throw_if_cuda_error(cudaGetLastError(), kernel);
}

// Scratch memory from cudaMallocAsync, returned with cudaFreeAsync on the same stream, so
// the free is ordered after the work already enqueued on it. free() is the normal path and
// reports a failed free; the destructor frees what is still held when a later step threw.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream, const char* what) : stream_(stream) {
    throw_if_cuda_error(cudaMallocAsync(&ptr_, bytes, stream), what);
  }
  ~StreamScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);  // a destructor cannot throw
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  void* get() const { return ptr_; }
  void free(const char* what) {
    void* ptr = ptr_;
    ptr_ = nullptr;
    throw_if_cuda_error(cudaFreeAsync(ptr, stream_), what);
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

// Calls fn with a value of the element type that dtype names (float, __half, __nv_bfloat16).
template <class Fn>
void dispatch_dtype(flashlab_dtype dtype, Fn&& fn) {
  switch (dtype) {
    case FLASHLAB_FP32: fn(float{}); return;
    case FLASHLAB_FP16: fn(__half{}); return;
    case FLASHLAB_BF16: fn(__nv_bfloat16{}); return;
  }
}

// The tensor-core kernels' two element types: calls fn with __half{} for fp16 and
// __nv_bfloat16{} otherwise (the ABI has refused fp32 before a launch gets here).
template <class Fn>
void dispatch_half_dtype(flashlab_dtype dtype, Fn&& fn) {
  if (dtype == FLASHLAB_FP16)
    fn(__half{});
  else
    fn(__nv_bfloat16{});
}

// A run-time flag made a template argument: calls fn with std::true_type{} or std::false_type{}.
template <class Fn>
void dispatch_flag(bool flag, Fn&& fn) {
  if (flag)
    fn(std::true_type{});
  else
    fn(std::false_type{});
}

// Whether a kernel's record lists exactly the head dimensions dispatch_head_dim compiles.
constexpr bool compiled_for_64_and_128(const HeadDims& dims) {
  return dims.count == 2 && dims.values[0] == 64 && dims.values[1] == 128;
}

// The head dimension made a template argument: calls fn with std::integral_constant<int, 64>{}
// for d = 64 and <int, 128>{} otherwise. Each caller checks its kernel's record with
// compiled_for_64_and_128, so that a head dimension added there cannot go without its
// instantiation here.
template <class Fn>
void dispatch_head_dim(int64_t d, Fn&& fn) {
  if (d == 64)
    fn(std::integral_constant<int, 64>{});
  else
    fn(std::integral_constant<int, 128>{});
}

// The three together, for the kernels compiled with and without dropout (fa2, its backward and
// the backward's dQ kernel): calls fn(element, head dimension, dropout), each a value of a
// type as above.
template <class Fn>
void dispatch_half_dtype_dropout_head_dim(flashlab_dtype dtype, bool dropout, int64_t d, Fn&& fn) {
  dispatch_half_dtype(dtype, [&](auto t) {
    dispatch_flag(dropout,
                  [&](auto drop) { dispatch_head_dim(d, [&](auto dim) { fn(t, dim, drop); }); });
  });
}

}  // namespace flashlab::gpu
