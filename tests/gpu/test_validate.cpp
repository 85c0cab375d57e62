// Validation of a forward call's parameters, without CUDA: the pointers are only numbers
// here (aligned addresses far apart), since validate() does arithmetic on them and never
// touches the memory. Hostile values: 2^31 +- 1, 2^63 - 1, negative, NaN, -0.0.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "flashlab/gpu/forward.hpp"
#include "valid_call.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace flashlab::gpu {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t k2To31 = int64_t{1} << 31;

using test::address;

flashlab_forward_params valid(flashlab_kernel kernel = FLASHLAB_KERNEL_FA2) { return test::valid_call(kernel); }

void expect_ok(const flashlab_forward_params& p) {
  try {
    validate(p);
  } catch (const Error& e) {
    FAIL("refused a valid call: ", std::string(e.what()));
  }
}

void expect_error(const flashlab_forward_params& p, flashlab_status status,
                  const std::string& words) {
  try {
    validate(p);
    FAIL("accepted; expected a refusal saying: ", words);
  } catch (const Error& e) {
    INFO("message: ", std::string(e.what()));
    CHECK(e.status == status);
    CHECK(std::string(e.what()).find(words) != std::string::npos);
  }
}

TEST_CASE("a valid call passes for every kernel") {
  for (flashlab_kernel k : {FLASHLAB_KERNEL_NAIVE, FLASHLAB_KERNEL_SCALAR, FLASHLAB_KERNEL_FA2})
    expect_ok(valid(k));
}

TEST_CASE("reserved must be 0") {
  for (int32_t reserved : {1, -1, std::numeric_limits<int32_t>::max()}) {
    auto p = valid();
    p.reserved = reserved;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT,
                 "reserved = " + std::to_string(reserved) + ": it must be 0");
  }
}

TEST_CASE("scale: 0, -0.0 and NaN ask for the default, and negative and inf are refused") {
  for (double scale : {0.0, -0.0, std::nan("")}) {
    auto p = valid();
    p.scale = scale;
    expect_ok(p);
  }
  for (double scale : {-1e-30, -std::numeric_limits<double>::infinity()}) {
    auto p = valid();
    p.scale = scale;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "is not allowed: give a finite scale > 0");
  }
}

TEST_CASE("sizes around 2^31 and 2^63, and negative ones") {
  const std::string range = " is out of range: it must be in [1, " +
                            std::to_string(std::numeric_limits<int32_t>::max() / 2) + "]";
  for (int64_t n : {k2To31 - 1, k2To31, k2To31 + 1, kInt64Max, int64_t{-1}}) {
    auto p = valid(FLASHLAB_KERNEL_NAIVE);
    p.n_k = n;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "n_k = " + std::to_string(n) + range);
    p = valid(FLASHLAB_KERNEL_NAIVE);
    p.d = n;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "d = " + std::to_string(n) + range);
  }
  auto p = valid();
  p.batch = -(k2To31 + 1);
  expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "batch = -2147483649 is out of range: it must be in [1, 65535]");
}

TEST_CASE("batch * heads_q above INT_MAX is refused") {
  auto p = valid(FLASHLAB_KERNEL_NAIVE);
  p.batch = p.heads_q = 65535;
  p.heads_kv = 1;
  expect_error(p, FLASHLAB_ERROR_BAD_SHAPE,
               "batch * heads_q = 4294836225 is more than INT_MAX = 2147483647");
}

TEST_CASE("strides near INT64_MAX: every product and sum is checked") {
  {
    auto p = valid();
    p.q_stride[2] = kInt64Max - 7;  // a multiple of 8: only the overflow is wrong
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE,
                 "Q's (row extent - 1) * row stride = 63 * " + std::to_string(kInt64Max - 7) +
                     " overflows int64");
  }
  {
    auto p = valid();
    p.batch = 2;
    p.k_stride[0] = int64_t{1} << 62;  // batch and head terms each 2^62: the sum overflows
    p.k_stride[1] = int64_t{1} << 62;
    for (int64_t* s : {p.q_stride, p.o_stride, p.v_stride}) s[0] = 2 * 64 * 64;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "K's offset of its last element = ");
  }
  {
    auto p = valid();
    p.v_stride[2] = int64_t{1} << 57;  // 63 * 2^57 fits; in bytes (x 2) it does not
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "V's span in bytes = ");
  }
  {
    auto p = valid();
    p.o = reinterpret_cast<void*>(std::numeric_limits<std::uintptr_t>::max() - 15);
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "past the end of the address space");
  }
}

TEST_CASE("a dimension of extent 1 may carry any stride") {
  auto p = valid();
  p.q_stride[0] = 3;    // batch = 1: misaligned for fa2, never used
  p.o_stride[0] = -5;   // negative, never used
  p.heads_q = p.heads_kv = 1;
  p.k_stride[1] = 7;    // heads = 1
  p.v_stride[1] = -kInt64Max;
  p.o_stride[1] = 0;    // O's one head: no overlap possible
  expect_ok(p);
  p.heads_q = p.heads_kv = 2;  // now the head strides are used
  expect_error(p, FLASHLAB_ERROR_BAD_STRIDE,
               "V's head stride = " + std::to_string(-kInt64Max) + " is negative");
  p.v_stride[1] = 64 * 64;
  p.o_stride[1] = 64 * 64;
  expect_error(p, FLASHLAB_ERROR_MISALIGNED, "K's stride 7 is not a multiple of 8");
}

TEST_CASE("O may share no memory with Q, K, V or LSE, and Q, K and V may share theirs") {
  {
    auto p = valid();
    p.k = p.q;
    p.v = p.q;
    expect_ok(p);
  }
  {
    auto p = valid();
    p.o = const_cast<void*>(p.q);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap Q's");
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "so O needs memory of its own");
  }
  {
    auto p = valid();
    // V's last element is 2*64*64 - 1 elements in: O starting there overlaps by one element.
    p.o = const_cast<char*>(static_cast<const char*>(p.v)) + 2 * (2 * 64 * 64 - 8);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap V's");
  }
  {
    auto p = valid();
    p.lse = reinterpret_cast<float*>(static_cast<char*>(p.o) + 64);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap LSE's");
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "the kernels write both");
  }
  {
    auto p = valid();  // O directly after V: adjacent, not overlapping
    p.o = const_cast<char*>(static_cast<const char*>(p.v)) + 2 * (2 * 64 * 64);
    expect_ok(p);
  }
}

}  // namespace
}  // namespace flashlab::gpu
