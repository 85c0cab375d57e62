// A forward call that validation accepts, for tests and the fuzz target to break one field
// at a time: BHSD contiguous, batch 1, 2 heads, N = 64, d = 64, bf16. The pointers are only
// numbers (aligned, each tensor 1 GiB from the next): validate() does arithmetic on them
// and never touches the memory.
#pragma once

#include "flashlab/flashlab.h"

#include <cstdint>

namespace flashlab::test {

inline const void* address(uint64_t gib) { return reinterpret_cast<const void*>(gib << 30); }

inline flashlab_forward_params valid_call(flashlab_kernel kernel = FLASHLAB_KERNEL_FA2) {
  flashlab_forward_params p{};
  p.q = address(1);
  p.k = address(2);
  p.v = address(3);
  p.o = const_cast<void*>(address(4));
  p.lse = static_cast<float*>(const_cast<void*>(address(5)));
  p.batch = 1;
  p.heads_q = p.heads_kv = 2;
  p.n_q = p.n_k = 64;
  p.d = 64;
  for (int64_t* s : {p.q_stride, p.k_stride, p.v_stride, p.o_stride}) {
    s[0] = p.heads_q * p.n_q * p.d;  // BHSD contiguous
    s[1] = p.n_q * p.d;
    s[2] = p.d;
    s[3] = 1;
  }
  p.dtype = FLASHLAB_BF16;
  p.kernel = kernel;
  return p;
}

// A backward call that validation accepts, built the same way: BHSD contiguous, batch 1,
// 2 heads, N = 64, d = 64, bf16, each tensor 1 GiB from the next, the workspace last and
// exactly as large as it must be.
inline flashlab_backward_params valid_backward_call() {
  flashlab_backward_params p{};
  p.q = address(1);
  p.k = address(2);
  p.v = address(3);
  p.o = address(4);
  p.dout = address(5);
  p.lse = static_cast<const float*>(address(6));
  p.dq = const_cast<void*>(address(7));
  p.dk = const_cast<void*>(address(8));
  p.dv = const_cast<void*>(address(9));
  p.workspace = const_cast<void*>(address(10));
  p.batch = 1;
  p.heads_q = p.heads_kv = 2;
  p.n_q = p.n_k = 64;
  p.d = 64;
  for (int64_t* s : {p.q_stride, p.k_stride, p.v_stride, p.o_stride, p.dout_stride, p.dq_stride,
                     p.dk_stride, p.dv_stride}) {
    s[0] = p.heads_q * p.n_q * p.d;
    s[1] = p.n_q * p.d;
    s[2] = p.d;
    s[3] = 1;
  }
  p.dtype = FLASHLAB_BF16;
  // D: 4 bytes per query row (512, a multiple of 256), then the fp32 dQ accumulator.
  p.workspace_bytes = 4 * p.batch * p.heads_q * p.n_q * (1 + p.d);
  return p;
}

}  // namespace flashlab::test
