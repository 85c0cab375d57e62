// The checks of a forward call that ask the CUDA runtime: every pointer must be memory the
// current device can read and write. The rest of validation is pure arithmetic (validate.cpp).
#pragma once

#include "flashlab/flashlab.h"

namespace flashlab::gpu {

// Throws Error unless Q, K, V, O (and LSE when given) are device memory of the current
// device or managed memory.
void check_device_pointers(const flashlab_forward_params& params);
// The same for a backward call: Q, K, V, O, dO, LSE, dQ, dK, dV and the workspace.
void check_device_pointers(const flashlab_backward_params& params);

// The same for one pointer; `name` names it in the message.
void check_device_pointer(const char* name, const void* ptr);

// The current CUDA device. Throws Error.
int current_device();

// Throws Error unless ptr (called `name` in the message) is memory of `device` or managed.
void check_device_pointer(const char* name, const void* ptr, int device);

}  // namespace flashlab::gpu
