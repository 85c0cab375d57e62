// Validation of a backward call's parameters, without CUDA (as test_validate.cpp does for the
// forward): every bad input gets its status and a message that says what would be right.
#include <doctest/doctest.h>

#include "flashlab/gpu/backward.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "valid_call.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace flashlab::gpu {
namespace {

using test::address;
using test::valid_backward_call;

void expect_ok(const flashlab_backward_params& p) {
  try {
    validate_backward(p);
  } catch (const Error& e) {
    FAIL("refused a valid call: ", std::string(e.what()));
  }
}

void expect_error(const flashlab_backward_params& p, flashlab_status status,
                  const std::string& words) {
  try {
    validate_backward(p);
    FAIL("accepted; expected a refusal saying: ", words);
  } catch (const Error& e) {
    INFO("message: ", std::string(e.what()));
    CHECK(e.status == status);
    CHECK(std::string(e.what()).find(words) != std::string::npos);
  }
}

TEST_CASE("backward: a valid call passes, deterministic or not, causal or not") {
  auto p = valid_backward_call();
  expect_ok(p);
  p.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
  expect_ok(p);
  p.deterministic = 1;
  expect_ok(p);
  p.dtype = FLASHLAB_FP16;
  p.d = 128;
  for (int64_t* s : {p.q_stride, p.k_stride, p.v_stride, p.o_stride, p.dout_stride, p.dq_stride,
                     p.dk_stride, p.dv_stride}) {
    s[0] = 2 * 64 * 128;
    s[1] = 64 * 128;
    s[2] = 128;
  }
  expect_ok(p);
}

TEST_CASE("backward: the workspace is the formula of kernel_info.hpp, in bytes") {
  auto p = valid_backward_call();
  // D: 1 * 2 * 64 rows * 4 bytes = 512; the accumulator: 512 * 64 = 32768.
  CHECK(backward_workspace_bytes(p) == 512 + 32768);
  p.deterministic = 1;
  CHECK(backward_workspace_bytes(p) == 512);
  p.n_q = 1;  // 2 rows of D = 8 bytes, rounded up to 256
  CHECK(backward_workspace_bytes(p) == 256);
  p.deterministic = 0;
  CHECK(backward_workspace_bytes(p) == 256 + 2 * 64 * 4);
  p.deterministic = 2;
  CHECK_THROWS_AS(backward_workspace_bytes(p), Error);
  p.deterministic = 0;
  p.n_q = 0;
  CHECK_THROWS_AS(backward_workspace_bytes(p), Error);
}

TEST_CASE("backward: workspace missing, too small, misaligned or overlapping") {
  auto p = valid_backward_call();
  p.workspace = nullptr;
  expect_error(p, FLASHLAB_ERROR_NULL_POINTER,
               "workspace is NULL: pass device memory of at least 33280 bytes");
  p = valid_backward_call();
  p.workspace_bytes -= 1;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT,
               "workspace_bytes = 33279 is too small: this call needs 33280 bytes");
  p = valid_backward_call();
  p.workspace = static_cast<char*>(p.workspace) + 16;
  expect_error(p, FLASHLAB_ERROR_MISALIGNED, "is not 256-byte aligned");
  p = valid_backward_call();
  p.workspace = static_cast<char*>(p.dq) + 256;  // inside dQ
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "dQ's bytes");
  p = valid_backward_call();
  p.workspace = const_cast<void*>(p.q);
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "the workspace's bytes");
}

TEST_CASE("backward: LSE missing or misaligned") {
  auto p = valid_backward_call();
  p.lse = nullptr;
  expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "LSE is NULL: the backward recomputes P");
  p = valid_backward_call();
  p.lse = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.lse) + 2);
  expect_error(p, FLASHLAB_ERROR_MISALIGNED, "LSE is not 4-byte aligned");
}

TEST_CASE(
    "backward: dropout_p below 0, at or above 1 or NaN is refused, any p in 0 to 1 passes, and an "
    "offset past 32 bits is refused") {
  for (double p_drop : {-0.1, 1.0, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto p = valid_backward_call();
    p.dropout_p = p_drop;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "is outside [0, 1)");
  }
  for (double p_drop : {0.0, 0.1, 0.5, 0.999}) {
    auto p = valid_backward_call();
    p.dropout_p = p_drop;
    p.dropout_seed = 0xfedcba9876543210ull;
    p.dropout_offset = std::numeric_limits<uint32_t>::max();
    INFO("dropout_p = ", p_drop);
    expect_ok(p);
  }
  auto p = valid_backward_call();
  p.dropout_p = 0.1;
  p.dropout_offset = uint64_t{1} << 32;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT,
               "dropout_offset = 4294967296 does not fit the Philox counter's 32-bit word");
}

TEST_CASE("backward: enums, reserved, scale") {
  auto p = valid_backward_call();
  p.deterministic = 2;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "deterministic = 2 is unknown: use 0");
  p = valid_backward_call();
  p.reserved = 1;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "reserved = 1: it must be 0");
  p = valid_backward_call();
  p.causal = 3;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "causal = 3 is unknown");
  p = valid_backward_call();
  p.dtype = 7;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "dtype = 7 is unknown");
  p = valid_backward_call();
  p.scale = -1;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "scale = -1");
}

TEST_CASE("backward: unsupported d and dtype name what is supported") {
  auto p = valid_backward_call();
  p.d = 96;
  for (int64_t* s : {p.q_stride, p.k_stride, p.v_stride, p.o_stride, p.dout_stride, p.dq_stride,
                     p.dk_stride, p.dv_stride})
    s[2] = 96, s[1] = 64 * 96, s[0] = 2 * 64 * 96;
  p.workspace_bytes = backward_workspace_bytes(p);
  expect_error(p, FLASHLAB_ERROR_UNSUPPORTED,
               "d = 96 is not supported by the fa2 backward kernel: it takes d in {64, 128}");
  p = valid_backward_call();
  p.dtype = FLASHLAB_FP32;
  expect_error(p, FLASHLAB_ERROR_UNSUPPORTED,
               "dtype fp32 is not supported by the fa2 backward kernel: it takes fp16 or bf16");
}

TEST_CASE("backward: shapes") {
  auto p = valid_backward_call();
  p.heads_q = 3;
  expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "heads_q = 3 is not a multiple of heads_kv = 2");
  p = valid_backward_call();
  p.n_k = 0;
  expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "n_k = 0 is out of range");
}

TEST_CASE("backward: every tensor is checked, by name") {
  const char* names[] = {"Q", "K", "V", "O", "dO", "dQ", "dK", "dV"};
  for (int i = 0; i < 8; ++i) {
    auto p = valid_backward_call();
    const void** ptrs[] = {&p.q,
                           &p.k,
                           &p.v,
                           &p.o,
                           &p.dout,
                           const_cast<const void**>(&p.dq),
                           const_cast<const void**>(&p.dk),
                           const_cast<const void**>(&p.dv)};
    int64_t* strides[] = {p.q_stride,    p.k_stride,  p.v_stride,  p.o_stride,
                          p.dout_stride, p.dq_stride, p.dk_stride, p.dv_stride};
    INFO(names[i]);
    *ptrs[i] = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, std::string(names[i]) + " is NULL");
    p = valid_backward_call();
    *ptrs[i] = static_cast<const char*>(*ptrs[i]) + 2;
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, std::string(names[i]) + " = ");
    p = valid_backward_call();
    strides[i][2] = 68;  // rows 136 bytes apart; heads and batches spaced to match
    strides[i][1] = 68 * 64;
    strides[i][0] = 2 * 68 * 64;
    expect_error(p, FLASHLAB_ERROR_MISALIGNED,
                 std::string(names[i]) + "'s stride 68 is not a multiple of 8");
    p = valid_backward_call();
    strides[i][3] = 2;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, std::string(names[i]) + "'s column stride = 2");
  }
}

TEST_CASE("backward: strides whose extent overflows int64 are refused, not wrapped") {
  auto p = valid_backward_call();
  p.dout_stride[0] = std::numeric_limits<int64_t>::max();
  p.batch = 2;
  p.workspace_bytes *= 2;
  expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "dO's offset of its last element");
  p = valid_backward_call();
  p.dk_stride[2] = -8;
  expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "dK's row stride = -8 is negative");
}

TEST_CASE("backward: outputs may not overlap themselves, each other or an input") {
  auto p = valid_backward_call();
  p.dk_stride[2] = 0;  // every key row on the same memory
  expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "dK's row stride = 0");
  p = valid_backward_call();
  p.dv = p.dk;
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "dK's bytes");
  p = valid_backward_call();
  p.dq = const_cast<void*>(p.dout);
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap dO's");
  p = valid_backward_call();
  p.dv = const_cast<float*>(p.lse);
  expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap LSE's");
  // Inputs may share memory: one packed buffer, or K and V broadcast.
  p = valid_backward_call();
  p.v = p.k;
  expect_ok(p);
}

}  // namespace
}  // namespace flashlab::gpu
