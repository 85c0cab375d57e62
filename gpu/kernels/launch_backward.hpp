// The backward kernels' entry points (gpu/kernels/04_*.cu). Each enqueues one kernel of an
// already validated BackwardProblem on a stream and throws flashlab::gpu::Error if the
// launch fails. Their order and what each needs: gpu/src/backward.cpp.
#pragma once

#include "problem.hpp"

#include <cuda_runtime_api.h>

namespace flashlab::gpu {

// 04_backward_preprocess.cu: D = rowsum(dO o O); the dQ accumulator zeroed (when used).
void launch_backward_preprocess(const BackwardProblem& problem, cudaStream_t stream);
// 04_fa2_backward.cu: dK, dV, and (unless deterministic) dQ's sums into the accumulator.
void launch_fa2_backward(const BackwardProblem& problem, cudaStream_t stream);
// 06_fa3_backward.cu (v3, Hopper): dK, dV and dQ's sums into the accumulator; the calls
// that fa3_backward::takes (kernel_info.hpp).
void launch_fa3_backward(const BackwardProblem& problem, cudaStream_t stream);
// 04_backward_preprocess.cu: dQ = scale * accumulator in the input dtype.
void launch_backward_convert_dq(const BackwardProblem& problem, cudaStream_t stream);
// 04_fa2_backward_dq.cu (deterministic mode): dQ, one block per query tile, in fixed order.
void launch_fa2_backward_dq(const BackwardProblem& problem, cudaStream_t stream);

}  // namespace flashlab::gpu
