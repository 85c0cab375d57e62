// Lesson 6's GPU step: flashlab's backward kernels (gpu/kernels/04_*.cu and, in the default
// mode, the main kernel 06_fa3_backward.cu, through the GPU runner) beside the CPU reference
// on the same inputs, their two modes timed, and the bytes that recomputing P costs against
// the bytes that storing it would.
//
// The bytes are a closed form of the kernels as built (non-causal, the default mode at
// d = 128, tiles from kernel_info.hpp's fa3_backward; at d = 64 its two warpgroups sum their
// shares of dQ in SRAM first, so the atomics below hold at both), counted as the two-level
// model counts them: every tile that crosses between the L2 and an SM. With E bytes per
// element, Tc = ceil(N_k / Bc):
//   preprocess  reads O, dO:              2 E Hq N_q d
//               writes D, zeroes dQacc:   4 Hq N_q + 4 Hq N_q d
//   main        reads K, V once:          2 E Hkv N_k d
//               reads Q, dO, L, D per KV tile:  Tc Hq N_q (2 E d + 8)
//               writes dK, dV:            2 E Hkv N_k d
//               adds dQ's shares (fp32 atomics, performed in the L2):  4 Tc Hq N_q d
//   convert     reads dQacc, writes dQ:   4 Hq N_q d,  E Hq N_q d
// The least DRAM must carry: Q, O, dO, L, K, V read once, dQ, dK, dV written once:
//   E d (4 Hq N_q + 4 Hkv N_k) + 4 Hq N_q.
// A backward that kept P would move the same tiles and, on top, write P in the forward and
// read it back: 2 E Hq N_q N_k more bytes at both levels (P does not fit in an L2), and
// N_q N_k E bytes of memory per head.
#pragma once

#include "kit/lesson_context.hpp"

#include "flashlab/cpu/types.hpp"

namespace flashlab::app {

struct BackwardShape {
  cpu::Index heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1, d = 64;
};

struct BackwardBytes {
  double read = 0, written = 0;  // into and out of the SMs
};

// The closed form above, for elements of element_bytes (2 for bf16 and fp16).
BackwardBytes recompute_bytes(const BackwardShape& s, int element_bytes);
// The compulsory DRAM bytes above.
double compulsory_bytes(const BackwardShape& s, int element_bytes);
// P written by the forward and read by the backward: 2 E Hq N_q N_k.
double stored_p_bytes(const BackwardShape& s, int element_bytes);

void gpu_backward_step(LessonContext& ctx);

// True in the child that the step runs under Nsight Compute to measure the bytes (its
// environment has FLASHLAB_LESSON6_MEASURE set): it has then run one backward of the step's
// timed shape, and the lesson prints nothing more.
bool lesson6_measure_child();

}  // namespace flashlab::app
