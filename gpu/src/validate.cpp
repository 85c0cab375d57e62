// Checks of a forward or backward call's arguments, before anything touches the GPU: pure
// arithmetic on the parameters, no CUDA (the device-side checks of the pointers are
// device_pointers.cpp's).
// Each failure names what was wrong and what would be right.
#include "validate_parts.hpp"

#include "flashlab/gpu/backward.hpp"
#include "flashlab/gpu/dropout.hpp"
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
namespace validation {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

[[noreturn]] void fail(flashlab_status status, const std::string& message) {
  throw Error(status, message);
}


// A size or stride computation that overflowed int64: no buffer is that large, so the sizes
// or strides that went into it are wrong (a tensor's extent is a stride problem).
[[noreturn]] void overflow(const std::string& what, int64_t a, char op, int64_t b) {
  fail(FLASHLAB_ERROR_BAD_STRIDE, what + " = " + std::to_string(a) + " " + op + " " +
                                      std::to_string(b) + " overflows int64 (at most " +
                                      std::to_string(kMaxInt64) +
                                      "): no buffer is that large, so the sizes or strides are wrong");
}

// Every product and sum of sizes and strides in this file goes through these two.
int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) overflow(what, a, '*', b);
  return out;
}
int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) overflow(what, a, '+', b);
  return out;
}

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

// The fields forward and backward calls share: dtype, causal, reserved, scale.
template <class Params>
void check_common_enums(const Params& p) {
  if (!is_known_dtype(p.dtype))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "dtype = " + std::to_string(p.dtype) + " is unknown: use " + text::known_dtypes());
  if (p.causal < FLASHLAB_CAUSAL_NONE || p.causal > FLASHLAB_CAUSAL_BOTTOM_RIGHT)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "causal = " + std::to_string(p.causal) +
                                          " is unknown: use FLASHLAB_CAUSAL_NONE (0), "
                                          "TOP_LEFT (1) or BOTTOM_RIGHT (2)");
  if (p.reserved != 0)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "reserved = " + std::to_string(p.reserved) +
                                          ": it must be 0 (it is kept for a later version)");
  if (p.scale < 0 || std::isinf(p.scale))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "scale = " + std::to_string(p.scale) +
                                          " is not allowed: give a finite scale > 0, or 0 "
                                          "(or -0.0 or NaN) for the default 1/sqrt(d)");
  check_scale_fits_fp32(p.scale);
  check_dropout_p(p.dropout_p, "dropout_p");
}

void check_enums(const flashlab_forward_params& p) {
  check_common_enums(p);
  if (find_kernel(p.kernel) == nullptr)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "kernel = " + std::to_string(p.kernel) + " is unknown: use " + text::known_kernels());
}

void check_size(const char* name, int64_t value, int64_t max) {
  if (value < 1 || value > max)
    fail(FLASHLAB_ERROR_BAD_SHAPE, std::string(name) + " = " + std::to_string(value) +
                                       " is out of range: it must be in [1, " +
                                       std::to_string(max) + "]");
}

template <class Params>
void check_shapes(const Params& p) {
  check_size("batch", p.batch, kMaxGridDim);
  check_size("heads_q", p.heads_q, kMaxGridDim);
  check_size("heads_kv", p.heads_kv, kMaxGridDim);
  check_size("n_q", p.n_q, kMaxIndex);
  check_size("n_k", p.n_k, kMaxIndex);
  check_size("d", p.d, kMaxIndex);
  // A deliberate limit of the ABI: every kernel may index (batch, head) pairs with an int.
  // Each factor is at most 65535 here (the grid's limit), so the product cannot overflow.
  const int64_t pairs = p.batch * p.heads_q;
  if (pairs > kMaxInt)
    fail(FLASHLAB_ERROR_BAD_SHAPE, "batch * heads_q = " + std::to_string(pairs) +
                                       " is more than INT_MAX = " + std::to_string(kMaxInt) +
                                       " (batch, head) pairs: split the batch");
  if (p.heads_q % p.heads_kv != 0)
    fail(FLASHLAB_ERROR_BAD_SHAPE,
         "heads_q = " + std::to_string(p.heads_q) + " is not a multiple of heads_kv = " +
             std::to_string(p.heads_kv) +
             ": with grouped-query attention every KV head serves the same number of query "
             "heads, so heads_kv must divide heads_q");
}

void check_tensor(const TensorArg& t, int64_t d) {
  if (t.ptr == nullptr)
    fail(FLASHLAB_ERROR_NULL_POINTER,
         std::string(t.name) + " is NULL: pass the device pointer of its first element");
  // A dimension of extent 1 never uses its stride (index 0 times anything), so only the
  // others are checked here and below: a (1, H, N, d) view may carry any batch stride.
  for (int i = 0; i < 3; ++i)
    if (t.extent[i] > 1 && t.stride[i] < 0)
      fail(FLASHLAB_ERROR_BAD_STRIDE, std::string(t.name) + "'s " + kDimNames[i] +
                                          " stride = " + std::to_string(t.stride[i]) +
                                          " is negative: strides must be >= 0");
  if (t.stride[3] != 1 && d > 1)
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
// a stride of 0 never does. Q, K and V are only read, so they may broadcast. Runs after
// check_span, so no partial span here can overflow.
void check_output_disjoint(const TensorArg& t) {
  const char* const kPlurals[] = {"batches", "heads", "rows", "columns"};
  std::vector<Dim> dims;
  for (int i = 3; i >= 0; --i)  // innermost first: on equal strides the inner one stays first
    if (t.extent[i] > 1) dims.push_back({kDimNames[i], kPlurals[i], t.stride[i], t.extent[i]});
  for (const Dim& dim : dims)
    if (dim.stride == 0)
      fail_overlap(t, dim, std::string("each of them needs its own memory, a ") + dim.name +
                               " stride >= the span of one " + dim.name);
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t span = 1;  // elements covered by the dimensions below this one
  std::string below;
  for (const Dim& dim : dims) {
    if (dim.stride < span)
      fail_overlap(t, dim, "it must be >= " + std::to_string(span) + ", the span of its " +
                               below);
    span += (dim.extent - 1) * dim.stride;
    below += (below.empty() ? "" : " and ") + std::string(dim.plural);
  }
}


// Its last element sits sum (extent - 1) * stride elements past its first, over the
// dimensions it uses: every term, the sum, the bytes and the end address must fit, or the
// strides describe memory that cannot exist (a stride near INT64_MAX, say).
Span check_span(const TensorArg& t, int64_t element_bytes) {
  const std::string name(t.name);
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    if (t.extent[i] <= 1) continue;
    const std::string dim = kDimNames[i];
    const int64_t term = checked_mul(t.extent[i] - 1, t.stride[i],
                                     name + "'s (" + dim + " extent - 1) * " + dim + " stride");
    last = checked_add(last, term, name + "'s offset of its last element");
  }
  const int64_t elements = checked_add(last, 1, name + "'s span in elements");
  const int64_t bytes = checked_mul(elements, element_bytes, name + "'s span in bytes");
  Span span;
  span.begin = reinterpret_cast<std::uintptr_t>(t.ptr);
  if (__builtin_add_overflow(span.begin, std::uintptr_t(bytes), &span.end))
    fail(FLASHLAB_ERROR_BAD_STRIDE, name + " = " + std::to_string(span.begin) + " spans " +
                                        std::to_string(bytes) +
                                        " bytes, past the end of the address space: its "
                                        "pointer or strides are wrong");
  return span;
}

// The kernels read Q, K, V while they write O and L: O may share no byte with any of them
// (Q, K and V may share theirs with each other, and often do: one packed QKV buffer).
// in_written: the kernels write `in` too (O and LSE in the forward, two gradients).
void check_no_overlap(const char* out_name, const Span& out, const char* in_name, const Span& in,
                      bool in_written) {
  if (out.begin < in.end && in.begin < out.end)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         std::string(out_name) + "'s bytes [" + std::to_string(out.begin) + ", " +
             std::to_string(out.end) + ") overlap " + in_name + "'s [" +
             std::to_string(in.begin) + ", " + std::to_string(in.end) + "): the kernels " +
             (in_written ? "write both" : "read " + std::string(in_name) +
                                                                 " while they write " + out_name) +
             ", so " + out_name + " needs memory of its own");
}

void check_supported(const flashlab_forward_params& p) {
  const KernelInfo info = kernel_info(p.kernel, p.d, p.dtype);
  if (!info.supported) fail(FLASHLAB_ERROR_UNSUPPORTED, info.reason);
  if (p.dropout_p != 0 && !info.kernel->dropout)
    fail(FLASHLAB_ERROR_UNSUPPORTED,
         "dropout_p = " + general(p.dropout_p) + ": the " + std::string(info.kernel->name) +
             " kernel does not apply dropout; " + text::dropout_kernels() +
             " does, or use dropout_p = 0");
}

// cuBLAS reads a (rows, d) row-major matrix as column-major (d, rows) with leading
// dimension = row stride, which it requires to be >= d and to fit in an int.
void check_naive_rows(const TensorArg& t, const flashlab_forward_params& p) {
  if (t.stride[2] < p.d || t.stride[2] > kMaxInt)
    fail(FLASHLAB_ERROR_BAD_STRIDE,
         std::string(t.name) + "'s row stride = " + std::to_string(t.stride[2]) +
             " does not suit the naive kernel (cuBLAS): it must be in [d = " +
             std::to_string(p.d) + ", 2^31)");
}

// kernel_name: "fa2", "fa2 backward"; config: its alignment needs.
void check_alignment(const TensorArg& t, std::string_view kernel_name, const KernelConfig& config,
                     flashlab_dtype dtype) {
  const std::string align = std::to_string(config.pointer_align_bytes);
  const std::string why = config.pointer_align_bytes > dtype_bytes(dtype)
                              ? "it loads " + align + "-byte chunks"
                              : "an element of " + std::string(dtype_name(dtype)) + " is " +
                                    std::to_string(dtype_bytes(dtype)) + " bytes";
  const auto address = reinterpret_cast<std::uintptr_t>(t.ptr);
  if (address % config.pointer_align_bytes != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, std::string(t.name) + " = " + std::to_string(address) +
                                        " is not " + align + "-byte aligned, which the " +
                                        std::string(kernel_name) + " kernel needs: " + why);
  for (int i = 0; i < 3; ++i)
    if (t.extent[i] > 1 && t.stride[i] % config.stride_align_elements != 0)
      fail(FLASHLAB_ERROR_MISALIGNED,
           std::string(t.name) + "'s stride " + std::to_string(t.stride[i]) +
               " is not a multiple of " + std::to_string(config.stride_align_elements) +
               " elements: the " + std::string(kernel_name) + " kernel needs every row to " +
               "start " + align + "-byte aligned, because " + why);
}

}  // namespace validation

using namespace validation;

void validate(const flashlab_forward_params& p) {
  check_enums(p);
  check_shapes(p);
  const TensorArg tensors[] = {
      {"Q", p.q, p.q_stride, {p.batch, p.heads_q, p.n_q, p.d}},
      {"K", p.k, p.k_stride, {p.batch, p.heads_kv, p.n_k, p.d}},
      {"V", p.v, p.v_stride, {p.batch, p.heads_kv, p.n_k, p.d}},
      {"O", p.o, p.o_stride, {p.batch, p.heads_q, p.n_q, p.d}}};
  const TensorArg& out = tensors[3];
  for (const TensorArg& t : tensors) check_tensor(t, p.d);
  check_supported(p);
  Span spans[4];
  for (int i = 0; i < 4; ++i) spans[i] = check_span(tensors[i], dtype_bytes(flashlab_dtype(p.dtype)));
  check_output_disjoint(out);
  for (const TensorArg& t : tensors) {
    if (p.kernel == FLASHLAB_KERNEL_NAIVE) check_naive_rows(t, p);
    const auto dtype = flashlab_dtype(p.dtype);
    check_alignment(t, find_kernel(p.kernel)->name,
                    kernel_config(flashlab_kernel(p.kernel), p.d, dtype), dtype);
  }
  for (int i = 0; i < 3; ++i) check_no_overlap("O", spans[3], tensors[i].name, spans[i]);
  if (p.lse == nullptr) return;
  if (reinterpret_cast<std::uintptr_t>(p.lse) % alignof(float) != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "LSE is not 4-byte aligned: it is an fp32 array");
  // LSE is (batch, heads_q, N_q) contiguous; shapes are checked, so heads_q * N_q fits.
  const int64_t lse_stride[4] = {p.heads_q * p.n_q, p.n_q, 1, 1};
  const TensorArg lse{"LSE", p.lse, lse_stride, {p.batch, p.heads_q, p.n_q, 1}};
  check_no_overlap("O", spans[3], "LSE", check_span(lse, sizeof(float)), /*in_written=*/true);
}

// The backward call. Its name in messages: "the fa2 backward kernel".
namespace {

constexpr std::string_view kBackwardName = "fa2 backward";

void check_backward_enums(const flashlab_backward_params& p) {
  check_common_enums(p);
  if (p.deterministic != 0 && p.deterministic != 1)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "deterministic = " + std::to_string(p.deterministic) +
                                          " is unknown: use 0 (dQ by atomics, fast) or 1 (dQ "
                                          "summed in a fixed order, bitwise reproducible)");
  // !(p >= 0 && p < 1) also catches NaN.
  if (!(p.dropout_p >= 0.0 && p.dropout_p < 1.0))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "dropout_p = " + general(p.dropout_p) +
             " is outside [0, 1): it is the probability of dropping a score, and p = 1 "
             "would drop them all");
  if (p.dropout_offset > std::numeric_limits<uint32_t>::max())
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "dropout_offset = " + std::to_string(p.dropout_offset) +
             " does not fit the Philox counter's 32-bit word: give the forward's "
             "dropout_offset, in [0, 2^32 - 1]");
}

void check_backward_supported(const flashlab_backward_params& p) {
  const auto dtype = flashlab_dtype(p.dtype);
  if (!fa2_backward::kHeadDims.contains(p.d))
    fail(FLASHLAB_ERROR_UNSUPPORTED, "d = " + std::to_string(p.d) +
                                         " is not supported by the fa2 backward kernel: it "
                                         "takes " +
                                         text::describe(fa2_backward::kHeadDims));
  if (!fa2_backward::kDtypes.contains(dtype))
    fail(FLASHLAB_ERROR_UNSUPPORTED, "dtype " + std::string(dtype_name(dtype)) +
                                         " is not supported by the fa2 backward kernel: it "
                                         "takes " +
                                         text::describe(fa2_backward::kDtypes));
}

// The bytes of the workspace, with every product checked (shapes are checked first).
int64_t checked_workspace_bytes(const flashlab_backward_params& p) {
  const int64_t rows = checked_mul(checked_mul(p.batch, p.heads_q, "batch * heads_q"), p.n_q,
                                   "batch * heads_q * n_q");
  const int64_t d_bytes = checked_mul(rows, int64_t(sizeof(float)), "D's bytes");
  checked_add(d_bytes, fa2_backward::kWorkspaceAlignBytes, "D's bytes, rounded up");
  if (p.deterministic == 0) {
    const int64_t accum = checked_mul(checked_mul(rows, p.d, "dQ accumulator's elements"),
                                      int64_t(sizeof(float)), "dQ accumulator's bytes");
    checked_add(fa2_backward::dq_accum_offset_bytes(p.batch, p.heads_q, p.n_q), accum,
                "the workspace's bytes");
  }
  return fa2_backward::workspace_bytes(p.batch, p.heads_q, p.n_q, p.d, p.deterministic != 0);
}

void check_workspace(const flashlab_backward_params& p, int64_t needed) {
  if (p.workspace == nullptr)
    fail(FLASHLAB_ERROR_NULL_POINTER,
         "workspace is NULL: pass device memory of at least " + std::to_string(needed) +
             " bytes (flashlab_backward_workspace_bytes) for D and the dQ accumulator");
  if (p.workspace_bytes < needed)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "workspace_bytes = " + std::to_string(p.workspace_bytes) +
             " is too small: this call needs " + std::to_string(needed) +
             " bytes (flashlab_backward_workspace_bytes): D = rowsum(dO o O), 4 bytes per "
             "query row" +
             (p.deterministic ? "" : ", and the fp32 dQ accumulator"));
  const auto address = reinterpret_cast<std::uintptr_t>(p.workspace);
  if (address % fa2_backward::kWorkspaceAlignBytes != 0)
    fail(FLASHLAB_ERROR_MISALIGNED,
         "workspace = " + std::to_string(address) + " is not " +
             std::to_string(fa2_backward::kWorkspaceAlignBytes) +
             "-byte aligned: its fp32 parts are read in 16-byte pieces (cudaMalloc's memory "
             "is 256-byte aligned)");
}

}  // namespace

int64_t backward_workspace_bytes(const flashlab_backward_params& p) {
  if (p.deterministic != 0 && p.deterministic != 1)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "deterministic = " + std::to_string(p.deterministic) + " is unknown: use 0 or 1");
  check_shapes(p);
  return checked_workspace_bytes(p);
}

void validate_backward(const flashlab_backward_params& p) {
  check_backward_enums(p);
  check_shapes(p);
  const auto dtype = flashlab_dtype(p.dtype);
  const int64_t q_extent[4] = {p.batch, p.heads_q, p.n_q, p.d};
  const int64_t kv_extent[4] = {p.batch, p.heads_kv, p.n_k, p.d};
  auto arg = [](const char* name, const void* ptr, const int64_t* stride, const int64_t* e) {
    return TensorArg{name, ptr, stride, {e[0], e[1], e[2], e[3]}};
  };
  constexpr int kInputs = 5, kTensors = 8;
  const TensorArg tensors[kTensors] = {
      arg("Q", p.q, p.q_stride, q_extent),        arg("K", p.k, p.k_stride, kv_extent),
      arg("V", p.v, p.v_stride, kv_extent),       arg("O", p.o, p.o_stride, q_extent),
      arg("dO", p.dout, p.dout_stride, q_extent), arg("dQ", p.dq, p.dq_stride, q_extent),
      arg("dK", p.dk, p.dk_stride, kv_extent),    arg("dV", p.dv, p.dv_stride, kv_extent)};
  for (const TensorArg& t : tensors) check_tensor(t, p.d);
  if (p.lse == nullptr)
    fail(FLASHLAB_ERROR_NULL_POINTER,
         "LSE is NULL: the backward recomputes P = exp(S - L) from the forward's log-sum-exp "
         "L; pass the lse that flashlab_forward wrote for these Q, K, V");
  check_backward_supported(p);
  const KernelConfig config = fa2_backward::config(p.d, dtype);
  Span spans[kTensors];
  for (int i = 0; i < kTensors; ++i) spans[i] = check_span(tensors[i], dtype_bytes(dtype));
  for (int i = kInputs; i < kTensors; ++i) check_output_disjoint(tensors[i]);
  for (const TensorArg& t : tensors) check_alignment(t, kBackwardName, config, dtype);
  if (reinterpret_cast<std::uintptr_t>(p.lse) % alignof(float) != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "LSE is not 4-byte aligned: it is an fp32 array");
  const int64_t lse_stride[4] = {p.heads_q * p.n_q, p.n_q, 1, 1};
  const TensorArg lse{"LSE", p.lse, lse_stride, {p.batch, p.heads_q, p.n_q, 1}};
  const Span lse_span = check_span(lse, sizeof(float));
  const int64_t needed = checked_workspace_bytes(p);
  check_workspace(p, needed);
  Span workspace;
  workspace.begin = reinterpret_cast<std::uintptr_t>(p.workspace);
  if (__builtin_add_overflow(workspace.begin, std::uintptr_t(needed), &workspace.end))
    fail(FLASHLAB_ERROR_BAD_STRIDE, "workspace = " + std::to_string(workspace.begin) + " with " +
                                        std::to_string(needed) +
                                        " bytes runs past the end of the address space");
  for (int out = kInputs; out < kTensors; ++out) {
    const char* name = tensors[out].name;
    for (int in = 0; in < kInputs; ++in)
      check_no_overlap(name, spans[out], tensors[in].name, spans[in]);
    check_no_overlap(name, spans[out], "LSE", lse_span);
    for (int other = out + 1; other < kTensors; ++other)
      check_no_overlap(name, spans[out], tensors[other].name, spans[other],
                       /*in_written=*/true);
    check_no_overlap(name, spans[out], "the workspace", workspace, /*in_written=*/true);
  }
  for (int in = 0; in < kInputs; ++in)
    check_no_overlap("the workspace", workspace, tensors[in].name, spans[in]);
  check_no_overlap("the workspace", workspace, "LSE", lse_span);
}

}  // namespace flashlab::gpu
