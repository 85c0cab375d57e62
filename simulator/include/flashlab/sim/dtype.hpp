// Element types of the simulated tensors, and the byte sizes the machine counts with.
#pragma once

#include <cstdint>
#include <string_view>

namespace flashlab::sim {

// Q, K, V and O are stored in the input type; scores, the softmax state (m, l, L) and the
// accumulators (U) are fp32, as real kernels keep them.
enum class DType { fp32, bf16, fp16 };

inline constexpr DType kAccumulator = DType::fp32;  // S tiles, m, l, U, L

using Bytes = std::int64_t;

constexpr Bytes bytes_of(DType t) { return t == DType::fp32 ? 4 : 2; }

std::string_view to_string(DType t);

// "fp32", "bf16" or "fp16"; anything else throws cpu::InvalidArgument listing the three.
DType parse_dtype(std::string_view name);

}  // namespace flashlab::sim
