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

// Dropout as the kernels draw it (dropout.cuh), resolved on the host from (p, seed, offset)
// with the CPU reference's own functions (philox_rule.hpp).
struct DropoutRule {
  bool enabled = false;       // p > 0; p = 0 runs the kernel without any dropout code
  uint32_t threshold = 0;     // a Philox word below floor(p * 2^32) drops its weight
  float keep_scale = 1.0f;    // 1/(1 - p), worked out in double and rounded once to fp32
  uint32_t key0 = 0, key1 = 0;  // the seed's low and high 32 bits: the Philox key
  uint32_t offset = 0;        // the counter's last word
};

// A validated region of the dropout mask (flashlab_dropout_mask_params): batches
// [batch0, batch0 + batch), heads, rows and columns alike; mask is (batch, heads, rows, cols).
struct MaskRegion {
  uint8_t* mask = nullptr;
  int64_t batch0 = 0, batch = 0, head0 = 0, heads = 0, row0 = 0, rows = 0, col0 = 0, cols = 0;
};

// The rule of dropout probability p in [0, 1), seed and offset (forward.cpp).
DropoutRule make_dropout_rule(double p, uint64_t seed, uint32_t offset);

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
  DropoutRule dropout;      // on the weights W before W V; fa2 only
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
