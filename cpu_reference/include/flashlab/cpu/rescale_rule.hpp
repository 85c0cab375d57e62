// FlashAttention-4's threshold for conditional rescaling, stated once for every executor:
// the CPU reference (conditional_rescaling.hpp) and the fa3 kernel's switch
// (gpu/kernels/06_fa3.cu) include this header. No Eigen, so that nvcc can read it.
#pragma once

namespace flashlab::cpu {

// FA4 rescales when the max has grown past the base by more than 8 in log2 units, i.e.
// when exp(S - r) would exceed 2^8.
inline constexpr double kFa4RescaleThresholdLog2 = 8.0;

}  // namespace flashlab::cpu
