// The C++ host API of the backward pass: the same calls as backward.h's C ABI, with errors
// as exceptions (flashlab::gpu::Error, forward.hpp).
#pragma once

#include "flashlab/flashlab.h"
#include "flashlab/gpu/forward.hpp"

#include <cstdint>

namespace flashlab::gpu {

// The workspace bytes of a call (fa2_backward::workspace_bytes of kernel_info.hpp), after
// checking the fields it depends on (batch, heads_q, n_q, d, deterministic). Throws Error.
int64_t backward_workspace_bytes(const flashlab_backward_params& params);

// Throws Error unless params describe a backward call the kernels can run: known enums and
// reserved = 0, dropout_p in [0, 1) and dropout_offset < 2^32, sizes
// in range, heads_q a multiple of heads_kv, a supported (d, dtype), every tensor non-null
// with a contiguous last dimension, strides that fit int64 and the address space and meet
// the kernels' 16-byte alignment, outputs dQ, dK, dV whose indices do not overlap and that
// share no byte with any input, each other or the workspace, LSE present and 4-byte
// aligned, and a workspace at least backward_workspace_bytes() large and 256-byte aligned.
// Pure arithmetic on the parameters: no CUDA (library flashlab::gpu_check).
void validate_backward(const flashlab_backward_params& params);

// Validates, checks that every pointer is device memory, then enqueues the backward
// kernels on params.stream. Throws Error.
void backward(const flashlab_backward_params& params);

}  // namespace flashlab::gpu
