// flashlab_backward's bad inputs through the C ABI on a device: the status and message come
// back, nothing is launched, and a good call afterwards still succeeds. (The pure arithmetic
// checks are test_validate_backward.cpp's, on any machine.)
#include "checks.hpp"
#include "host_tensors.hpp"

#include <cstring>
#include <memory>
#include <vector>

namespace flashlab::gpu::test {
namespace {

// A backward call on real device buffers: B = 1, Hq = 2, Hkv = 1, N = 16, d = 64, bf16.
struct ValidBackwardCall {
  static constexpr int kHeadsQ = 2, kN = 16, kD = 64;
  flashlab_backward_params params{};
  std::vector<std::unique_ptr<DeviceBuffer>> owned;

  ValidBackwardCall() {
    const size_t q_bytes = size_t(kHeadsQ) * kN * kD * 2, kv_bytes = size_t(kN) * kD * 2;
    auto buffer = [&](size_t bytes) {
      owned.push_back(std::make_unique<DeviceBuffer>(bytes));
      check_cuda(cudaMemset(owned.back()->ptr, 0, bytes), "clear");
      return owned.back()->ptr;
    };
    params.q = buffer(q_bytes);
    params.k = buffer(kv_bytes);
    params.v = buffer(kv_bytes);
    params.o = buffer(q_bytes);
    params.dout = buffer(q_bytes);
    params.lse = static_cast<const float*>(buffer(size_t(kHeadsQ) * kN * sizeof(float)));
    params.dq = buffer(q_bytes);
    params.dk = buffer(kv_bytes);
    params.dv = buffer(kv_bytes);
    const int64_t q_strides[4] = {int64_t(kHeadsQ) * kN * kD, int64_t(kN) * kD, kD, 1};
    const int64_t kv_strides[4] = {int64_t(kN) * kD, int64_t(kN) * kD, kD, 1};
    for (int64_t* s : {params.q_stride, params.o_stride, params.dout_stride, params.dq_stride})
      std::memcpy(s, q_strides, sizeof(q_strides));
    for (int64_t* s : {params.k_stride, params.v_stride, params.dk_stride, params.dv_stride})
      std::memcpy(s, kv_strides, sizeof(kv_strides));
    params.batch = 1;
    params.heads_q = kHeadsQ;
    params.heads_kv = 1;
    params.n_q = params.n_k = kN;
    params.d = kD;
    params.dtype = FLASHLAB_BF16;
    int64_t bytes = 0;
    REQUIRE(flashlab_backward_workspace_bytes(&params, &bytes) == FLASHLAB_OK);
    params.workspace = buffer(size_t(bytes));
    params.workspace_bytes = bytes;
  }

  flashlab_status call(std::string* message) const {
    const flashlab_status status = flashlab_backward(&params);
    check_cuda(cudaDeviceSynchronize(), "ValidBackwardCall");
    *message = flashlab_last_error();
    return status;
  }
};

void expect_error(const ValidBackwardCall& call, flashlab_status status, const char* words) {
  std::string message;
  const flashlab_status got = call.call(&message);
  INFO("message: ", message);
  CHECK(std::string(flashlab_status_name(got)) == flashlab_status_name(status));
  CHECK(message.find(words) != std::string::npos);
}

TEST_CASE("flashlab_backward: a valid call succeeds, in both modes, after a failed one") {
  ValidBackwardCall call;
  call.params.n_k = 0;
  std::string message;
  CHECK(call.call(&message) == FLASHLAB_ERROR_BAD_SHAPE);
  CHECK(!message.empty());
  call.params.n_k = ValidBackwardCall::kN;
  CHECK(call.call(&message) == FLASHLAB_OK);
  CHECK(message.empty());
  call.params.deterministic = 1;
  CHECK(call.call(&message) == FLASHLAB_OK);
}

TEST_CASE("flashlab_backward: host memory is refused by name") {
  ValidBackwardCall call;
  std::vector<uint8_t> host(size_t(ValidBackwardCall::kN) * ValidBackwardCall::kD * 2 * 2 + 256);
  call.params.dk = host.data() + (16 - reinterpret_cast<uintptr_t>(host.data()) % 16) % 16;
  expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "dK = ");
  expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "is host memory");
}

TEST_CASE("flashlab_backward: workspace too small, LSE missing, dropout") {
  {
    ValidBackwardCall call;
    call.params.workspace_bytes = 8;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "workspace_bytes = 8 is too small");
  }
  {
    ValidBackwardCall call;
    call.params.lse = nullptr;
    expect_error(call, FLASHLAB_ERROR_NULL_POINTER, "LSE is NULL");
  }
  {
    ValidBackwardCall call;
    call.params.dropout_p = 0.5;
    call.params.dropout_offset = uint64_t{1} << 40;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "dropout_offset = 1099511627776 does not fit");
  }
  {
    ValidBackwardCall call;
    call.params.dropout_p = 1.0;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "dropout_p = 1 is outside [0, 1)");
  }
  CHECK(std::string(flashlab_status_name(flashlab_backward(nullptr))) ==
        "FLASHLAB_ERROR_NULL_POINTER");
}

}  // namespace
}  // namespace flashlab::gpu::test
