// The C++ host API of gpu/: the same call as flashlab.h's C ABI, with errors as exceptions.
#pragma once

#include "flashlab/fa3.h"
#include "flashlab/flashlab.h"

#include <stdexcept>
#include <string>

namespace flashlab::gpu {

// Every failure of the host API: a status from flashlab.h and a message that says what was
// wrong and what would be right. The C ABI turns it back into (status, flashlab_last_error()).
struct Error : std::runtime_error {
  flashlab_status status;
  Error(flashlab_status status, const std::string& message)
      : std::runtime_error(message), status(status) {}
};

// Throws Error unless params describe a call the chosen kernel can run: non-null pointers,
// sizes in range, heads_q a multiple of heads_kv, contiguous last dimension, known enums and
// reserved = 0, a supported (d, dtype) for the kernel, dropout_p in [0, 1) and 0 unless the
// kernel applies dropout, the alignment the kernel's loads
// need, tensors whose extents fit int64 and the address space, an output O whose batches,
// heads and rows do not overlap and that shares no byte with Q, K, V or LSE, and a scale
// that fp32 holds as a normal number. Pure arithmetic on the parameters: it needs no CUDA
// (library flashlab::gpu_check). forward() then also asks the CUDA runtime that every
// pointer is device or managed memory.
void validate(const flashlab_forward_params& params);

// Validates, then enqueues the forward pass on params.stream. Throws Error. The fa3 kernel
// runs with default_fa3_options().
void forward(const flashlab_forward_params& params);

// fa3's switches (flashlab/fa3.h): the defaults, and forward() with the caller's. Throws
// Error with FLASHLAB_ERROR_BAD_ARGUMENT for another kernel than fa3 or a switch out of
// range, FLASHLAB_ERROR_UNSUPPORTED for a combination that is not compiled or stages whose
// SRAM the device does not have.
flashlab_fa3_options default_fa3_options();
void forward_fa3(const flashlab_forward_params& params, const flashlab_fa3_options& options);

}  // namespace flashlab::gpu
