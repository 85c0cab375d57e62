// The C++ host API of split-KV decode: the calls of flashlab/decode.h with errors as
// exceptions (flashlab::gpu::Error). The pure parts (split count for a given SM count,
// workspace bytes, validation) need no CUDA and live in flashlab::gpu_check.
#pragma once

#include "flashlab/flashlab.h"

#include <cstdint>

namespace flashlab::gpu {

// The split count for params on a GPU of sm_count SMs: params.num_splits when it is in
// [1, kMaxSplits], else decode::auto_splits. Reads only the sizes; throws Error for sizes
// or a num_splits that validate_decode would refuse.
int decode_num_splits(const flashlab_decode_params& params, int64_t sm_count);

// The workspace bytes for params with that split count.
int64_t decode_workspace_bytes(const flashlab_decode_params& params, int64_t sm_count);

// Throws Error unless params describe a decode the kernels can run on a GPU of sm_count SMs
// (every rule of decode.h: sizes, dtype and d, strides, alignment, page size, num_splits,
// workspace size, overlaps). Pure arithmetic on the parameters.
void validate_decode(const flashlab_decode_params& params, int64_t sm_count);

// The current device's SM count (CUDA). Throws Error.
int64_t current_sm_count();
// The current device's L2 in bytes (decode::auto_kv_l2_policy weighs the cache against it).
int64_t current_l2_bytes();

// Validates (with the current device's SM count and pointer checks), clears the
// workspace's error word and enqueues the split and combine kernels on params.stream.
void run_decode(const flashlab_decode_params& params);

// Waits for params.stream and throws Error(BAD_ARGUMENT) when the kernel flagged a length
// or a page index (see decode.h).
void check_decode(const flashlab_decode_params& params);

}  // namespace flashlab::gpu
