// The pieces of argument validation that every call of the C ABI shares (the forward and backward
// calls in validate.cpp, the decode call in validate_decode.cpp): overflow-checked arithmetic, sizes,
// a tensor's strides, its span in memory, overlaps. Each failure throws Error with a status
// and a message that says what was wrong and what would be right. No CUDA.
#pragma once

#include "flashlab/gpu/forward.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace flashlab::gpu::validation {

// Grid y and z hold heads and batch; a grid dimension holds at most 65535 blocks.
inline constexpr int64_t kMaxGridDim = 65535;
inline constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

// One tensor argument: its pointer, strides and extents, (batch, head, row, column).
struct TensorArg {
  const char* name;
  const void* ptr;
  const int64_t* stride;
  int64_t extent[4];
};

inline const char* const kDimNames[] = {"batch", "head", "row", "column"};

// The bytes [begin, end) a tensor touches.
struct Span {
  std::uintptr_t begin = 0, end = 0;
};

[[noreturn]] void fail(flashlab_status status, const std::string& message);
int64_t checked_mul(int64_t a, int64_t b, const std::string& what);
int64_t checked_add(int64_t a, int64_t b, const std::string& what);
std::string general(double x);  // %g formatting
// A scale > 0 must be a normal fp32 number (0 and NaN ask for the default).
void check_scale_fits_fp32(double scale);
// BAD_SHAPE unless 1 <= value <= max.
void check_size(const char* name, int64_t value, int64_t max);
// Non-null pointer, used strides >= 0, last dimension contiguous (for d > 1).
void check_tensor(const TensorArg& t, int64_t d);
// No two indices of an output share an address.
void check_output_disjoint(const TensorArg& t);
// The bytes a tensor touches; BAD_STRIDE when they overflow.
Span check_span(const TensorArg& t, int64_t element_bytes);
// BAD_ARGUMENT when an output shares a byte with another tensor.
// in_written: the kernels write `in` too (O and LSE in the forward, two gradients).
void check_no_overlap(const char* out_name, const Span& out, const char* in_name, const Span& in,
                      bool in_written = false);

}  // namespace flashlab::gpu::validation
