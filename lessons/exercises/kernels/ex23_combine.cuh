// Exercise 23 (lesson 10): the split-KV combine, the second kernel of split-KV decode.
//
// Decoding cuts a long KV cache into segments ("splits") so that many blocks share one query's
// work; split s returns its normalised output O_s and its log-sum-exp LSE_s. The combine
// kernel merges them, per row, into the output over all keys:
//   LSE = log sum_s exp(LSE_s)                   (computed as m + log sum_s exp(LSE_s - m),
//                                                 m = max_s LSE_s, so that nothing overflows)
//   O   = sum_s exp(LSE_s - LSE) O_s             (the weights sum to 1)
// It is the merge of lesson 2 with each split's state written as (m = LSE_s, l = 1, U = O_s).
// You write the whole kernel, ex23_combine_kernel(a), in
// lessons/exercises/student/ex23_combine.cu.
//
// The contract (CombineArgs, kernels/common.cuh; every array row-major in device memory):
//   a.o_splits (splits, rows, d), a.lse_splits (splits, rows): split s's O_s and LSE_s for row
//   r are at a.o_splits[(s * rows + r) * d + k] and a.lse_splits[s * rows + r];
//   write a.o (rows, d) and a.lse (rows).
//   - launched with one block per row (gridDim.x = rows) of ex23::kThreads threads; d may be
//     smaller or larger than the block (1 <= d <= kMaxD), splits anything from 1 up;
//   - a split that saw no key has LSE_s = -inf and O_s = 0: it adds nothing;
//   - a row whose splits are all empty gets O = 0 and LSE = -inf (not NaN);
//   - LSE_s may lie far apart (by 100 or more): nothing may overflow.
#pragma once

#include "kernels/common.cuh"

namespace flashlab::kernel_exercises {

// Asked by the harness after the launch: whether the skeleton's not_written_yet() ran.
bool ex23_not_written() { return read_not_written(); }

}  // namespace flashlab::kernel_exercises
