// Checks of a forward call's arguments, before anything touches the GPU. Each failure names
// what was wrong and what would be right.
#include "flashlab/gpu/forward.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace flashlab::gpu {
namespace {

// Grid y and z hold heads and batch; a grid dimension holds at most 65535 blocks.
constexpr int64_t kMaxGridDim = 65535;
// Row indices are 32-bit inside the kernels.
constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max() / 2;

[[noreturn]] void fail(flashlab_status status, const std::string& message) {
  throw Error(status, message);
}

struct TensorArg {
  const char* name;
  const void* ptr;
  const int64_t* stride;  // (batch, head, row, column)
};

// %g formatting: std::to_string would print 1e-39 as 0.000000.
std::string general(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

// The kernels multiply by the scale in fp32: a scale above FLT_MAX would become inf there,
// and one below FLT_MIN a subnormal or 0 (every score 0).
void check_scale_fits_fp32(double scale) {
  const bool given = scale > 0;  // 0 and NaN ask for the default
  const double lo = std::numeric_limits<float>::min(), hi = std::numeric_limits<float>::max();
  if (given && (scale < lo || scale > hi))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "scale = " + general(scale) + " does not fit in fp32, where the kernels use it (it " +
             "would become " + (scale > hi ? "inf" : "0 or subnormal") +
             "): give a scale in [FLT_MIN, FLT_MAX] = [" + general(lo) + ", " + general(hi) +
             "], or 0 for the default 1/sqrt(d)");
}

void check_enums(const flashlab_forward_params& p) {
  if (!is_known_dtype(p.dtype))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "dtype = " + std::to_string(p.dtype) + " is unknown: use " + text::known_dtypes());
  if (p.causal < FLASHLAB_CAUSAL_NONE || p.causal > FLASHLAB_CAUSAL_BOTTOM_RIGHT)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "causal = " + std::to_string(p.causal) +
                                          " is unknown: use FLASHLAB_CAUSAL_NONE (0), "
                                          "TOP_LEFT (1) or BOTTOM_RIGHT (2)");
  if (find_kernel(p.kernel) == nullptr)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "kernel = " + std::to_string(p.kernel) + " is unknown: use " + text::known_kernels());
  if (p.scale < 0 || std::isinf(p.scale))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "scale = " + std::to_string(p.scale) +
                                          " is not allowed: give a finite scale > 0, or 0 "
                                          "(or NaN) for the default 1/sqrt(d)");
  check_scale_fits_fp32(p.scale);
}

void check_size(const char* name, int64_t value, int64_t max) {
  if (value < 1 || value > max)
    fail(FLASHLAB_ERROR_BAD_SHAPE, std::string(name) + " = " + std::to_string(value) +
                                       " is out of range: it must be in [1, " +
                                       std::to_string(max) + "]");
}

void check_shapes(const flashlab_forward_params& p) {
  check_size("batch", p.batch, kMaxGridDim);
  check_size("heads_q", p.heads_q, kMaxGridDim);
  check_size("heads_kv", p.heads_kv, kMaxGridDim);
  check_size("n_q", p.n_q, kMaxRows);
  check_size("n_k", p.n_k, kMaxRows);
  check_size("d", p.d, kMaxRows);
  if (p.heads_q % p.heads_kv != 0)
    fail(FLASHLAB_ERROR_BAD_SHAPE,
         "heads_q = " + std::to_string(p.heads_q) + " is not a multiple of heads_kv = " +
             std::to_string(p.heads_kv) +
             ": with grouped-query attention every KV head serves the same number of query "
             "heads, so heads_kv must divide heads_q");
}

void check_tensor(const TensorArg& t, const flashlab_forward_params& p) {
  if (t.ptr == nullptr)
    fail(FLASHLAB_ERROR_NULL_POINTER,
         std::string(t.name) + " is NULL: pass the device pointer of its first element");
  static const char* kDims[] = {"batch", "head", "row", "column"};
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] < 0)
      fail(FLASHLAB_ERROR_BAD_STRIDE, std::string(t.name) + "'s " + kDims[i] + " stride = " +
                                          std::to_string(t.stride[i]) +
                                          " is negative: strides must be >= 0");
  if (t.stride[3] != 1 && p.d > 1)
    fail(FLASHLAB_ERROR_BAD_STRIDE,
         std::string(t.name) + "'s column stride = " + std::to_string(t.stride[3]) +
             ": the last dimension (d) must be contiguous, stride 1; call .contiguous() on a "
             "transposed tensor first");
}

// One dimension of a tensor: its stride in elements and how many indices it has.
struct Dim {
  const char* name;
  const char* plural;
  int64_t stride;
  int64_t extent;
};

[[noreturn]] void fail_overlap(const TensorArg& t, const Dim& dim, const std::string& right) {
  fail(FLASHLAB_ERROR_BAD_STRIDE,
       std::string(t.name) + "'s " + dim.name + " stride = " + std::to_string(dim.stride) +
           " makes its " + std::to_string(dim.extent) + " " + dim.plural +
           " overlap, so several blocks would write the same addresses: " + right);
}

// Blocks write O, so no two (batch, head, row, column) indices may share an address. Taking
// the dimensions with more than one index from the smallest stride up, each stride must be
// at least the span of those below it, 1 + sum (extent - 1) * stride: then offsets are
// digits of a mixed-radix number and cannot collide. BHSD, BSHD and padded rows all pass;
// a stride of 0 never does. Q, K and V are only read, so they may broadcast.
void check_output_disjoint(const TensorArg& t, const flashlab_forward_params& p) {
  // Innermost first, so that on equal strides the inner dimension keeps its place.
  const Dim all[] = {{"column", "columns", t.stride[3], p.d},
                     {"row", "rows", t.stride[2], p.n_q},
                     {"head", "heads", t.stride[1], p.heads_q},
                     {"batch", "batches", t.stride[0], p.batch}};
  std::vector<Dim> dims;
  for (const Dim& dim : all)
    if (dim.extent > 1) dims.push_back(dim);
  for (const Dim& dim : dims)
    if (dim.stride == 0)
      fail_overlap(t, dim, std::string("each of them needs its own memory, a ") + dim.name +
                               " stride >= the span of one " + dim.name);
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  constexpr int64_t kMaxSpan = std::numeric_limits<int64_t>::max();
  int64_t span = 1;  // elements covered by the dimensions below this one
  std::string below;
  for (const Dim& dim : dims) {
    if (dim.stride < span)
      fail_overlap(t, dim, "it must be >= " + std::to_string(span) + ", the span of its " +
                               below);
    // Saturates instead of overflowing: no buffer spans 2^63 elements.
    const bool overflows = dim.stride > (kMaxSpan - span) / (dim.extent - 1);
    span = overflows ? kMaxSpan : span + (dim.extent - 1) * dim.stride;
    below += (below.empty() ? "" : " and ") + std::string(dim.plural);
  }
}

void check_supported(const flashlab_forward_params& p) {
  const KernelInfo info = kernel_info(p.kernel, p.d, p.dtype);
  if (!info.supported) fail(FLASHLAB_ERROR_UNSUPPORTED, info.reason);
}

// cuBLAS reads a (rows, d) row-major matrix as column-major (d, rows) with leading
// dimension = row stride, which it requires to be >= d and to fit in an int.
void check_naive_rows(const TensorArg& t, const flashlab_forward_params& p) {
  if (t.stride[2] < p.d || t.stride[2] > std::numeric_limits<int>::max())
    fail(FLASHLAB_ERROR_BAD_STRIDE,
         std::string(t.name) + "'s row stride = " + std::to_string(t.stride[2]) +
             " does not suit the naive kernel (cuBLAS): it must be in [d = " +
             std::to_string(p.d) + ", 2^31)");
}

void check_alignment(const TensorArg& t, const flashlab_forward_params& p) {
  const KernelRecord& kernel = *find_kernel(p.kernel);
  const auto dtype = flashlab_dtype(p.dtype);
  const KernelConfig config = kernel_config(kernel.id, p.d, dtype);
  const std::string align = std::to_string(config.pointer_align_bytes);
  const std::string why = config.pointer_align_bytes > dtype_bytes(dtype)
                              ? "it loads " + align + "-byte chunks"
                              : "an element of " + std::string(dtype_name(dtype)) + " is " +
                                    std::to_string(dtype_bytes(dtype)) + " bytes";
  const auto address = reinterpret_cast<std::uintptr_t>(t.ptr);
  if (address % config.pointer_align_bytes != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, std::string(t.name) + " = " + std::to_string(address) +
                                        " is not " + align + "-byte aligned, which the " +
                                        std::string(kernel.name) + " kernel needs: " + why);
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] % config.stride_align_elements != 0)
      fail(FLASHLAB_ERROR_MISALIGNED,
           std::string(t.name) + "'s stride " + std::to_string(t.stride[i]) +
               " is not a multiple of " + std::to_string(config.stride_align_elements) +
               " elements: the " + std::string(kernel.name) + " kernel needs every row to " +
               "start " + align + "-byte aligned, because " + why);
}

}  // namespace

void validate(const flashlab_forward_params& p) {
  check_enums(p);
  check_shapes(p);
  const TensorArg tensors[] = {
      {"Q", p.q, p.q_stride}, {"K", p.k, p.k_stride}, {"V", p.v, p.v_stride},
      {"O", p.o, p.o_stride}};
  for (const TensorArg& t : tensors) check_tensor(t, p);
  check_output_disjoint({"O", p.o, p.o_stride}, p);
  check_supported(p);
  for (const TensorArg& t : tensors) {
    if (p.kernel == FLASHLAB_KERNEL_NAIVE) check_naive_rows(t, p);
    check_alignment(t, p);
  }
  if (reinterpret_cast<std::uintptr_t>(p.lse) % alignof(float) != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "LSE is not 4-byte aligned: it is an fp32 array");
}

}  // namespace flashlab::gpu
