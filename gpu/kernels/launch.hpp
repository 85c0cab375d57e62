// The entry points of the kernel ladder, one per file in gpu/kernels/. Each enqueues one
// forward pass of an already validated Problem on a stream and throws flashlab::gpu::Error
// if the launch fails. What each kernel takes (d, dtypes, alignment) is kernel_info.hpp's.
#pragma once

#include "flashlab/fa3.h"
#include "problem.hpp"

#include <cuda_runtime_api.h>

namespace flashlab::gpu {

void launch_naive(const Problem& problem, cudaStream_t stream);   // 01_naive.cu
void launch_scalar(const Problem& problem, cudaStream_t stream);  // 02_tiled_scalar.cu
void launch_fa2(const Problem& problem, cudaStream_t stream);     // 03_fa2.cu
void launch_fa3(const Problem& problem, const flashlab_fa3_options& options,
                cudaStream_t stream);                                // 06_fa3.cu

// dropout_mask.cu: the keep mask of a validated region (flashlab_dropout_mask_params).
void launch_dropout_mask(const MaskRegion& region, const DropoutRule& rule,
                         cudaStream_t stream);

}  // namespace flashlab::gpu
