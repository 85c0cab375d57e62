// software_exp2 (flashlab/gpu/exp2_software.hpp) run on the device, so that a test can
// compare its bits with the host's: fa3's softmax and the CPU tests must run the same code.
#pragma once

#include <vector>

namespace flashlab::gpu::test {

// software_exp2(x[i]) for every i, computed by a kernel. Throws std::runtime_error on a CUDA
// error.
std::vector<float> software_exp2_on_device(const std::vector<float>& x);

}  // namespace flashlab::gpu::test
