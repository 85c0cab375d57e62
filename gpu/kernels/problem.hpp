// One attention problem as the kernels see it: validated, with the defaults resolved.
// Plain data only, so that .cu and .cpp files share it (no Eigen, no CUDA types).
#pragma once

#include "flashlab/flashlab.h"

#include <cstdint>

namespace flashlab::gpu {

// (batch, head, row) strides of one tensor, in elements; the last dimension is contiguous.
struct Strides {
  int64_t batch = 0, head = 0, row = 0;
};

struct Problem {
  const void* q = nullptr;  // (B, Hq, N_q, d)
  const void* k = nullptr;  // (B, Hkv, N_k, d)
  const void* v = nullptr;  // (B, Hkv, N_k, d)
  void* o = nullptr;        // (B, Hq, N_q, d)
  float* lse = nullptr;     // (B, Hq, N_q) contiguous, or null
  Strides q_stride, k_stride, v_stride, o_stride;
  int batch = 0, heads_q = 0, heads_kv = 0, n_q = 0, n_k = 0, d = 0;
  float scale = 0.0f;       // resolved: 1/sqrt(d) when the caller gave 0 or NaN
  bool causal = false;
  // Under the causal mask query i sees key j exactly when j <= i + causal_offset:
  // 0 for top-left alignment, N_k - N_q for bottom-right.
  int causal_offset = 0;
  int group_size = 1;       // heads_q / heads_kv: query head h reads KV head h / group_size
  flashlab_dtype dtype = FLASHLAB_BF16;
};

// One backward problem as the kernels see it: the forward's fields (o is the forward's
// output, read here), plus dO, the gradients and the workspace's parts.
struct BackwardProblem {
  Problem fwd;               // q, k, v, o, lse (read), their strides, sizes, scale, mask
  const void* dout = nullptr;  // (B, Hq, N_q, d)
  void* dq = nullptr;          // (B, Hq, N_q, d)
  void* dk = nullptr;          // (B, Hkv, N_k, d)
  void* dv = nullptr;          // (B, Hkv, N_k, d)
  Strides dout_stride, dq_stride, dk_stride, dv_stride;
  float* d_rows = nullptr;     // D = rowsum(dO o O): (B, Hq, N_q) fp32, in the workspace
  float* dq_accum = nullptr;   // (B, Hq, N_q, d) fp32 contiguous; null when deterministic
  bool deterministic = false;
};

}  // namespace flashlab::gpu
