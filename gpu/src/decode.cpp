// The host side of split-KV decode: the SM count, validation, the problem the kernels see,
// the launches (the split or queue kernel, then the combine unless one split ends the rows),
// and the read-back of the error word the split kernel may set.
#include "flashlab/gpu/decode.hpp"

#include "../kernels/decode_problem.hpp"
#include "device_pointers.hpp"
#include "flashlab/gpu/forward.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

namespace flashlab::gpu {
namespace {

void throw_if(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(FLASHLAB_ERROR_CUDA, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                                         cudaGetErrorString(err) + ")");
}

Strides strides_of(const int64_t* s) { return {s[0], s[1], s[2]}; }

int log2_of(int64_t power_of_two) {
  int shift = 0;
  while ((int64_t(1) << shift) < power_of_two) ++shift;
  return shift;
}

DecodeProblem make_problem(const flashlab_decode_params& p, int splits) {
  DecodeProblem problem;
  problem.q = p.q;
  problem.k = p.k_cache;
  problem.v = p.v_cache;
  problem.o = p.o;
  problem.lse = p.lse;
  problem.seq_lens = p.seq_lens;
  problem.block_table = p.block_table;
  problem.q_stride = strides_of(p.q_stride);
  problem.k_stride = strides_of(p.k_stride);
  problem.v_stride = strides_of(p.v_stride);
  problem.o_stride = strides_of(p.o_stride);
  problem.block_table_stride = p.block_table_stride;
  problem.page_shift = p.block_table ? log2_of(p.page_size) : 0;
  problem.num_pages = int(p.num_pages);
  problem.batch = int(p.batch);
  problem.heads_q = int(p.heads_q);
  problem.heads_kv = int(p.heads_kv);
  problem.n_q = int(p.n_q);
  problem.capacity = int(p.max_seq_len);
  problem.d = int(p.d);
  problem.group_size = int(p.heads_q / p.heads_kv);
  problem.row_blocks = int(decode::row_blocks(problem.group_size, p.n_q));
  problem.splits = splits;
  problem.scale = p.scale > 0 ? float(p.scale) : float(1.0 / std::sqrt(double(p.d)));
  problem.dtype = flashlab_dtype(p.dtype);
  problem.kv_evict_first = decode::kv_evict_first(
      p.kv_l2_policy,
      decode::cache_kv_bytes(p.batch, p.max_seq_len, p.heads_kv, p.d, flashlab_dtype(p.dtype)),
      current_l2_bytes());
  problem.queue = decode::uses_queue(p.grid);
  problem.error_word = static_cast<uint32_t*>(p.workspace);
  problem.states =
      reinterpret_cast<float*>(static_cast<char*>(p.workspace) + decode::kWorkspaceHeaderBytes);
  return problem;
}

}  // namespace

int64_t current_l2_bytes() {
  int bytes = 0;
  throw_if(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, current_device()),
           "cudaDeviceGetAttribute(L2CacheSize)");
  return bytes;
}

int64_t current_sm_count() {
  int sms = 0;
  throw_if(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, current_device()),
           "cudaDeviceGetAttribute(MultiProcessorCount)");
  return sms;
}

void run_decode(const flashlab_decode_params& p) {
  const int64_t sm_count = current_sm_count();
  validate_decode(p, sm_count);
  const int device = current_device();
  check_device_pointer("Q", p.q, device);
  check_device_pointer("K cache", p.k_cache, device);
  check_device_pointer("V cache", p.v_cache, device);
  check_device_pointer("O", p.o, device);
  check_device_pointer("seq_lens", p.seq_lens, device);
  check_device_pointer("workspace", p.workspace, device);
  if (p.lse != nullptr) check_device_pointer("LSE", p.lse, device);
  if (p.block_table != nullptr) check_device_pointer("block_table", p.block_table, device);

  const DecodeProblem problem = make_problem(p, decode_num_splits(p, sm_count));
  const auto stream = static_cast<cudaStream_t>(p.stream);
  throw_if(cudaMemsetAsync(problem.error_word, 0, kHeaderWordsZeroed * sizeof(uint32_t), stream),
           "cudaMemsetAsync(workspace error word and queue counter)");
  if (problem.queue)
    launch_decode_queue(problem, int(sm_count), stream);
  else
    launch_decode_split_kv(problem, stream);
  if (!decode::split_kernel_ends_rows(problem.splits, problem.queue))
    launch_decode_combine(problem, stream);
}

void check_decode(const flashlab_decode_params& p) {
  if (p.workspace == nullptr)
    throw Error(FLASHLAB_ERROR_NULL_POINTER,
                "workspace is NULL: pass the workspace of the flashlab_decode call to check");
  uint32_t word[kErrorWords] = {};
  const auto stream = static_cast<cudaStream_t>(p.stream);
  throw_if(cudaMemcpyAsync(word, p.workspace, sizeof(word), cudaMemcpyDeviceToHost, stream),
           "cudaMemcpyAsync(workspace error word)");
  throw_if(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::string message;
  if (word[kErrorBits] & FLASHLAB_DECODE_BAD_LENGTH)
    message += "seq_lens[" + std::to_string(int64_t(word[kErrorLengthEntry]) - 1) +
               "] is outside [0, max_seq_len = " + std::to_string(p.max_seq_len) +
               "] (the kernel clamped it into the cache)";
  if (word[kErrorBits] & FLASHLAB_DECODE_BAD_PAGE)
    message += std::string(message.empty() ? "" : "; ") + "block_table row " +
               std::to_string(int64_t(word[kErrorPageEntry]) - 1) + " holds page index " +
               std::to_string(int32_t(word[kErrorPageIndex])) +
               ", outside [0, num_pages = " + std::to_string(p.num_pages) +
               ") (the kernel read zeros instead)";
  if (!message.empty())
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT, message + ": O and LSE of that entry are wrong");
}

}  // namespace flashlab::gpu
