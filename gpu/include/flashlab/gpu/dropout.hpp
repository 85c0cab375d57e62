// The C++ host API of dropout on the GPU: the checks of its arguments and the export of its
// keep mask (flashlab/dropout.h's C ABI, with errors as exceptions). The rule itself is the
// CPU reference's (cpu_reference dropout.hpp); the kernels draw it in gpu/kernels/dropout.cuh.
#pragma once

#include "flashlab/dropout.h"
#include "flashlab/gpu/forward.hpp"

namespace flashlab::gpu {

// Throws Error(FLASHLAB_ERROR_BAD_ARGUMENT) unless 0 <= p < 1 (NaN is refused too); `field`
// names the parameter in the message.
void check_dropout_p(double p, const char* field);

// Throws Error unless params describe a region of the mask that the Philox counter can
// address (see flashlab_dropout_mask in dropout.h for each status). Pure arithmetic on the
// parameters, no CUDA (library flashlab::gpu_check); dropout_mask() also asks the CUDA
// runtime that the mask is device memory.
void validate_dropout_mask(const flashlab_dropout_mask_params& params);

// Validates, then enqueues the mask export on params.stream. Throws Error.
void dropout_mask(const flashlab_dropout_mask_params& params);

}  // namespace flashlab::gpu
