// What every kernel exercise shares: the problem a kernel is handed, the facts of each launch
// (threads, tiles, SRAM), the state a thread keeps for its query row, and the few device
// helpers a student may call. The harness (harness.cu) launches with exactly these numbers;
// the exercises' kernels are written against them: one owner for each.
//
// Precision: fp32 inputs, fp32 arithmetic, fp32 outputs, on CUDA cores (no tensor cores).
// The checker holds a kernel to flashlab's rule: its error against an fp64 reference may be at
// most twice that of naive attention computed in fp32, plus a margin for summing in another
// order (lessons/exercises/kernel_checker.cpp says how much).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace flashlab::kernel_exercises {

// The largest head dimension the exercises take: a thread keeps its row's U (d floats) in
// registers, so d has a ceiling fixed at compile time.
constexpr int kMaxD = 128;

// One attention problem in device memory (HBM), every matrix row-major with rows d floats
// apart: S = Q K^T * scale, O = softmax(S) V, L = the log-sum-exp of each row of S.
struct ForwardArgs {
  const float* q;  // (n_q, d)
  const float* k;  // (n_k, d)
  const float* v;  // (n_k, d)
  float* o;        // (n_q, d)
  float* lse;      // (n_q)
  int n_q, n_k, d;
  float scale;          // 1 / sqrt(d)
  int causal;           // 1: query row i sees key j only when j <= i + diagonal_offset
  int diagonal_offset;  // n_k - n_q: causal aligned bottom-right, as decode against a cache needs
};

// Whether key `key` is hidden from query row `row`: past the last key, or in its future.
__device__ __forceinline__ bool is_masked(const ForwardArgs& a, int row, int key) {
  return key >= a.n_k || (a.causal != 0 && key > row + a.diagonal_offset);
}

// How many keys, from the first, some row of [first_row, last_row] may see: a causal block
// never loads the keys past its last row's diagonal (they are in every row's future).
__device__ __forceinline__ int visible_keys(const ForwardArgs& a, int last_row) {
  if (a.causal == 0) return a.n_k;
  return max(0, min(a.n_k, last_row + a.diagonal_offset + 1));
}

// The online-softmax state of one query row, in its thread's registers:
//   m  the largest score seen so far      (-inf before the first key)
//   l  sum of exp(S - m)                  (0 before the first key)
//   U  sum of exp(S - m) V, a d-vector    (0 before the first key; entries from d on unused)
struct RowState {
  float m;
  float l;
  float U[kMaxD];
};

// Exercise 21 (lesson 3): the scalar kernel. Blocks of kBr threads, one per query row; KV
// tiles of kBc keys staged in SRAM. SRAM in floats: sQ (Br, d), sK (Bc, d), sV (Bc, d) and the
// scores sS (Br, Bc + 1), each row one float longer so that the threads' rows start in
// different banks.
namespace ex21 {
constexpr int kBr = 32;
constexpr int kBc = 16;
constexpr std::size_t sram_bytes(int d) {
  return sizeof(float) * (std::size_t(kBr) * d + 2 * std::size_t(kBc) * d + kBr * (kBc + 1));
}
}  // namespace ex21

// Exercise 22 (lesson 8): the same kernel with its K and V tiles double buffered by cp.async.
// Two warps, so that a missing barrier between them can matter. SRAM in floats: sQ (Br, d),
// kStages x (sK (Bc, d), sV (Bc, d)), sS (Br, Bc + 1): 68 KiB at d = 128, past the 48 KiB a
// block gets without asking, so the harness raises the kernel's limit.
namespace ex22 {
constexpr int kBr = 64;
constexpr int kBc = 16;
constexpr int kStages = 2;
constexpr std::size_t sram_bytes(int d) {
  return sizeof(float) *
         (std::size_t(kBr) * d + 2 * kStages * std::size_t(kBc) * d + kBr * (kBc + 1));
}
}  // namespace ex22

// Exercise 23 (lesson 10): the split-KV combine. One block of kThreads threads per row.
namespace ex23 {
constexpr int kThreads = 64;  // fewer than kMaxD: a thread may own several columns
}  // namespace ex23

// The per-split results of split-KV attention, and where their combination goes. Split s
// attended to its own segment of the keys: O_s is its normalised output, LSE_s its log-sum-exp
// (-inf, with O_s = 0, for a split that saw no key).
struct CombineArgs {
  const float* o_splits;    // (splits, rows, d)
  const float* lse_splits;  // (splits, rows)
  float* o;                 // (rows, d)
  float* lse;               // (rows)
  int splits, rows, d;
};

// ---- the kernels every plugin defines (student/, solutions/, or a test's wrong ones) ----
__global__ void ex21_scalar_forward_kernel(ForwardArgs a);
__global__ void ex22_pipelined_forward_kernel(ForwardArgs a);
__global__ void ex23_combine_kernel(CombineArgs a);
// Whether the exercise's not_written_yet() ran during the last launch (asked by the harness).
bool ex21_not_written();
bool ex22_not_written();
bool ex23_not_written();

// ---- helpers for the code you write ----

// Each exercise file has its own flag, not_written_yet() and read_not_written() (an anonymous
// namespace): the harness asks each exercise's exNN_not_written() about its own file.
namespace {

__device__ int g_not_written = 0;

// The skeletons call this where your code goes: `flashlab check` then says the exercise is not
// written yet instead of comparing numbers. Delete the call when you write the code.
__device__ __forceinline__ void not_written_yet() { g_not_written = 1; }

// The host side of not_written_yet(), for the harness; an exercise's header defines its
// exNN_not_written() with it.
bool read_not_written() {
  int flag = 0;
  return cudaMemcpyFromSymbol(&flag, g_not_written, sizeof flag) == cudaSuccess && flag != 0;
}

}  // namespace

// cp.async (sm_80 and later): a copy from HBM to SRAM that the thread starts and does not wait
// for. Copies are gathered in groups: cp_async_commit() closes the group of every copy this
// thread started since the last commit; cp_async_wait<n>() waits until at most n of this
// thread's groups are still in flight. Both concern this thread's copies alone: another
// thread's copies are visible to it only after it waited for them and a __syncthreads().

// Starts copying one float from hbm to sram; with valid = false it writes 0 and reads nothing.
__device__ __forceinline__ void cp_async_float(float* sram, const float* hbm, bool valid) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(sram));
  const int bytes_read = valid ? 4 : 0;  // the rest of the 4 bytes is filled with zeros
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(hbm),
               "r"(bytes_read)
               : "memory");
}

// Closes this thread's current group of copies.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

}  // namespace flashlab::kernel_exercises
