// libFuzzer target over the C ABI's parameter validation (flashlab::gpu::validate, the part
// that needs no CUDA). Each input is a list of edits to a valid call: (field, value) pairs
// with values drawn from the hostile ones (0, -1, 2^31 +- 1, 2^63 - 1, NaN, -0.0, ...) or raw.
// Whatever validate() accepts must keep every invariant the kernels rely on; a violation
// traps, and libFuzzer reports it with the input that caused it.
#include "flashlab/gpu/forward.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "valid_call.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

using flashlab::gpu::Error;
using i128 = __int128;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInteresting[] = {0, 1, -1, 2, 7, 8, 16, 63, 64, 65, 128, 129, 65535, 65536,
                                    (int64_t{1} << 31) - 1, int64_t{1} << 31,
                                    (int64_t{1} << 31) + 1, int64_t{1} << 62, kInt64Max,
                                    kInt64Max - 7, std::numeric_limits<int64_t>::min()};
constexpr double kScales[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, -1.0, 1e-39, 1e39, 0.125};
constexpr double kDropoutPs[] = {0.0, -0.0, NAN, INFINITY, -1e-300, 0.5, 0.9999999999, 1.0,
                                 1.0000001};

void require(bool ok) {
  if (!ok) __builtin_trap();
}


int64_t value(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.PickValueInArray(kInteresting);
  return in.ConsumeIntegral<int64_t>();
}

void edit(flashlab_forward_params& p, FuzzedDataProvider& in) {
  const int field = in.ConsumeIntegralInRange<int>(0, 34);
  const int64_t v = value(in);
  int64_t* const strides[] = {p.q_stride, p.k_stride, p.v_stride, p.o_stride};
  const void** const inputs[] = {&p.q, &p.k, &p.v};
  if (field < 16) {
    strides[field / 4][field % 4] = v;
  } else if (field < 19) {
    *inputs[field - 16] = reinterpret_cast<const void*>(uintptr_t(v));
  } else {
    switch (field) {
      case 19: p.o = reinterpret_cast<void*>(uintptr_t(v)); break;
      case 20: p.lse = reinterpret_cast<float*>(uintptr_t(v)); break;
      case 21: p.batch = v; break;
      case 22: p.heads_q = v; break;
      case 23: p.heads_kv = v; break;
      case 24: p.n_q = v; break;
      case 25: p.n_k = v; break;
      case 26: p.d = v; break;
      case 27: p.dtype = int32_t(v); break;
      case 28: p.causal = int32_t(v); break;
      case 29: p.kernel = int32_t(v); break;
      case 30: p.reserved = int32_t(v); break;
      case 32: p.dropout_p = in.ConsumeBool() ? in.PickValueInArray(kDropoutPs) : double(v); break;
      case 33: p.dropout_seed = uint64_t(v); break;
      case 34: p.dropout_offset = uint32_t(v); break;
      default: p.scale = in.ConsumeBool() ? in.PickValueInArray(kScales) : double(v); break;
    }
  }
}

// The bytes [begin, end) a tensor spans, in 128-bit arithmetic that cannot overflow.
struct Range {
  i128 begin, end;
};
Range range(const void* ptr, const int64_t* stride, const int64_t* extent, int64_t elem) {
  i128 last = 0;
  for (int i = 0; i < 4; ++i)
    if (extent[i] > 1) last += i128(extent[i] - 1) * stride[i];
  require(last >= 0 && last < kInt64Max);
  const i128 bytes = (last + 1) * elem;
  require(bytes <= kInt64Max);
  const i128 begin = i128(reinterpret_cast<uintptr_t>(ptr));
  require(begin + bytes <= i128(std::numeric_limits<uintptr_t>::max()));
  return {begin, begin + bytes};
}

// Everything an accepted call promises the kernels.
void check_accepted(const flashlab_forward_params& p) {
  using namespace flashlab::gpu;
  require(p.reserved == 0);
  require(p.dropout_p >= 0 && p.dropout_p < 1);
  require(p.dropout_p == 0 || find_kernel(p.kernel)->dropout);
  require(find_kernel(p.kernel) != nullptr && is_known_dtype(p.dtype));
  require(p.causal >= FLASHLAB_CAUSAL_NONE && p.causal <= FLASHLAB_CAUSAL_BOTTOM_RIGHT);
  const auto dtype = flashlab_dtype(p.dtype);
  require(supports(flashlab_kernel(p.kernel), p.d, dtype));
  require(std::isnan(p.scale) || p.scale == 0 ||
          (p.scale >= std::numeric_limits<float>::min() &&
           p.scale <= std::numeric_limits<float>::max()));
  for (int64_t size : {p.batch, p.heads_q, p.heads_kv}) require(size >= 1 && size <= 65535);
  for (int64_t size : {p.n_q, p.n_k, p.d}) require(size >= 1 && size <= kMaxIndex);
  require(p.heads_q % p.heads_kv == 0);
  require(i128(p.batch) * p.heads_q <= std::numeric_limits<int32_t>::max());
  const int64_t q_extent[4] = {p.batch, p.heads_q, p.n_q, p.d};
  const int64_t kv_extent[4] = {p.batch, p.heads_kv, p.n_k, p.d};
  const KernelConfig config = kernel_config(flashlab_kernel(p.kernel), p.d, dtype);
  const void* ptrs[] = {p.q, p.k, p.v, p.o};
  const int64_t* strides[] = {p.q_stride, p.k_stride, p.v_stride, p.o_stride};
  const int64_t* extents[] = {q_extent, kv_extent, kv_extent, q_extent};
  Range ranges[4];
  for (int t = 0; t < 4; ++t) {
    require(ptrs[t] != nullptr);
    require(reinterpret_cast<uintptr_t>(ptrs[t]) % config.pointer_align_bytes == 0);
    for (int i = 0; i < 3; ++i)
      if (extents[t][i] > 1)
        require(strides[t][i] >= 0 && strides[t][i] % config.stride_align_elements == 0);
    require(p.d == 1 || strides[t][3] == 1);
    ranges[t] = range(ptrs[t], strides[t], extents[t], dtype_bytes(dtype));
  }
  const auto disjoint = [](Range a, Range b) { return a.end <= b.begin || b.end <= a.begin; };
  for (int t = 0; t < 3; ++t) require(disjoint(ranges[3], ranges[t]));
  if (p.lse != nullptr) {
    require(reinterpret_cast<uintptr_t>(p.lse) % alignof(float) == 0);
    const int64_t lse_stride[4] = {p.heads_q * p.n_q, p.n_q, 1, 1};
    const int64_t lse_extent[4] = {p.batch, p.heads_q, p.n_q, 1};
    require(disjoint(ranges[3], range(p.lse, lse_stride, lse_extent, sizeof(float))));
  }
  // O's elements are distinct: checked exactly on small outputs, by brute force.
  if (i128(p.batch) * p.heads_q * p.n_q * p.d <= 4096) {
    static int64_t seen[4096];
    int count = 0;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads_q; ++h)
        for (int64_t r = 0; r < p.n_q; ++r)
          for (int64_t c = 0; c < p.d; ++c) {
            const int64_t at = (b > 0 ? b * p.o_stride[0] : 0) + (h > 0 ? h * p.o_stride[1] : 0) +
                               (r > 0 ? r * p.o_stride[2] : 0) + (c > 0 ? c * p.o_stride[3] : 0);
            for (int i = 0; i < count; ++i) require(seen[i] != at);
            seen[count++] = at;
          }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  flashlab_forward_params p = flashlab::test::valid_call();
  while (in.remaining_bytes() > 0) edit(p, in);
  try {
    flashlab::gpu::validate(p);
  } catch (const Error& e) {
    require(e.status != FLASHLAB_OK && std::strlen(e.what()) > 0);
    return 0;
  }
  check_accepted(p);
  return 0;
}
