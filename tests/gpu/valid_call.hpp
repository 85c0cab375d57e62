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

}  // namespace flashlab::test
