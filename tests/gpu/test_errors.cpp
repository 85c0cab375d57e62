// Every bad input comes back as a status and a message that says what was wrong and what
// would be right; nothing aborts, and a good call afterwards still succeeds.
#include "checks.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace flashlab::gpu::test {
namespace {

// Expects `call` to fail with `status` and a message that contains `words`.
void expect_error(const ValidCall& call, flashlab_status status, const char* words) {
  std::string message;
  const flashlab_status got = call.call(&message);
  INFO("message: ", message);
  CHECK(std::string(flashlab_status_name(got)) == flashlab_status_name(status));
  CHECK(message.find(words) != std::string::npos);
}

TEST_CASE("a valid call succeeds and clears the last error") {
  for (flashlab_kernel kernel : all_kernels()) {
    ValidCall bad(kernel);
    bad.params.n_q = 0;
    std::string message;
    CHECK(bad.call(&message) != FLASHLAB_OK);
    CHECK(!message.empty());
    const ValidCall good(kernel);
    CHECK(good.call(&message) == FLASHLAB_OK);
    CHECK(message.empty());
  }
  CHECK(flashlab_abi_version() == FLASHLAB_ABI_VERSION);
}

TEST_CASE("unsupported head dimension or dtype") {
  {
    const ValidCall call(FLASHLAB_KERNEL_FA2, FLASHLAB_BF16, 96);
    expect_error(call, FLASHLAB_ERROR_UNSUPPORTED, "d = 96 is not supported by the fa2 kernel");
  }
  {
    const ValidCall call(FLASHLAB_KERNEL_SCALAR, FLASHLAB_BF16, 59);
    expect_error(call, FLASHLAB_ERROR_UNSUPPORTED, "d = 59 is not supported by the scalar");
  }
  {
    const ValidCall call(FLASHLAB_KERNEL_FA2, FLASHLAB_FP32, 64);
    expect_error(call, FLASHLAB_ERROR_UNSUPPORTED, "dtype fp32 is not supported by the fa2");
  }
  ValidCall call(FLASHLAB_KERNEL_NAIVE);
  call.params.dtype = 9;
  expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "dtype = 9 is unknown");
}

TEST_CASE("misaligned pointers and strides") {
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.q = static_cast<const char*>(call.params.q) + 2;  // one bf16 element off
    expect_error(call, FLASHLAB_ERROR_MISALIGNED, "Q = ");
    expect_error(call, FLASHLAB_ERROR_MISALIGNED, "16-byte aligned");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.v_stride[2] = 68;  // rows 136 bytes apart: every other row misaligned
    expect_error(call, FLASHLAB_ERROR_MISALIGNED, "V's stride 68 is not a multiple of 8");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_SCALAR);
    call.params.o = static_cast<char*>(call.params.o) + 1;  // inside an element
    expect_error(call, FLASHLAB_ERROR_MISALIGNED, "O = ");
  }
  for (flashlab_kernel kernel : all_kernels()) {
    ValidCall call(kernel);
    call.params.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(call.params.lse) + 2);
    expect_error(call, FLASHLAB_ERROR_MISALIGNED, "LSE is not 4-byte aligned");
  }
}

TEST_CASE("a last dimension that is not contiguous, and bad strides") {
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.k_stride[3] = 2;
    expect_error(call, FLASHLAB_ERROR_BAD_STRIDE, "K's column stride = 2");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_SCALAR);
    call.params.q_stride[1] = -64;
    expect_error(call, FLASHLAB_ERROR_BAD_STRIDE, "Q's head stride = -64 is negative");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_NAIVE);
    call.params.k_stride[2] = 32;  // cuBLAS needs a leading dimension >= d = 64
    expect_error(call, FLASHLAB_ERROR_BAD_STRIDE,
                 "K's row stride = 32 does not suit the naive kernel");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_NAIVE);
    const int64_t past_int = int64_t(std::numeric_limits<int>::max()) + 1;  // cuBLAS: int
    call.params.k_stride[2] = past_int;
    expect_error(call, FLASHLAB_ERROR_BAD_STRIDE,
                 ("K's row stride = " + std::to_string(past_int) + " does not suit the naive")
                     .c_str());
  }
}

TEST_CASE("an output whose batches, heads or rows overlap is refused, while inputs may broadcast") {
  const std::string race = " overlap, so several blocks would write the same addresses: ";
  for (flashlab_kernel kernel : all_kernels()) {
    {
      ValidCall call(kernel);
      call.params.o_stride[1] = 0;  // both query heads into one place
      expect_error(call, FLASHLAB_ERROR_BAD_STRIDE,
                   ("O's head stride = 0 makes its " + std::to_string(call.params.heads_q) +
                    " heads" + race + "each of them needs its own memory")
                       .c_str());
    }
    {
      ValidCall call(kernel);
      call.params.o_stride[2] = 32;  // row r + 1 starts in the middle of row r
      expect_error(call, FLASHLAB_ERROR_BAD_STRIDE,
                   ("O's row stride = 32 makes its " + std::to_string(call.params.n_q) +
                    " rows" + race + "it must be >= " + std::to_string(call.params.d) +
                    ", the span of its columns")
                       .c_str());
    }
    {
      ValidCall call(kernel);
      call.params.batch = 2;
      call.params.o_stride[0] = 0;  // both batches into one place; rejected before any launch
      expect_error(call, FLASHLAB_ERROR_BAD_STRIDE, "O's batch stride = 0 makes its 2 batches");
    }
    {
      ValidCall call(kernel);
      call.params.q_stride[1] = 0;  // both query heads read the same Q: allowed
      std::string message;
      CHECK(call.call(&message) == FLASHLAB_OK);
      CHECK(message.empty());
    }
  }
}

TEST_CASE("heads_q not a multiple of heads_kv, and sizes out of range") {
  for (flashlab_kernel kernel : all_kernels()) {
    {
      ValidCall call(kernel);
      call.params.heads_kv = 3;  // heads_q = 2
      expect_error(call, FLASHLAB_ERROR_BAD_SHAPE,
                   "heads_q = 2 is not a multiple of heads_kv = 3");
    }
    {
      ValidCall call(kernel);
      call.params.n_k = 0;
      expect_error(call, FLASHLAB_ERROR_BAD_SHAPE, "n_k = 0 is out of range");
    }
  }
}

// Heads go on the grid's y dimension and batches on z; one past the device's limit is refused.
TEST_CASE("batch or heads above the grid's limit") {
  int max_y = 0, max_z = 0;
  REQUIRE(cudaDeviceGetAttribute(&max_y, cudaDevAttrMaxGridDimY, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&max_z, cudaDevAttrMaxGridDimZ, 0) == cudaSuccess);
  const auto out_of_range = [](const char* name, int64_t value, int64_t max) {
    return std::string(name) + " = " + std::to_string(value) +
           " is out of range: it must be in [1, " + std::to_string(max) + "]";
  };
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.batch = int64_t(max_z) + 1;
    expect_error(call, FLASHLAB_ERROR_BAD_SHAPE,
                 out_of_range("batch", call.params.batch, max_z).c_str());
  }
  {
    ValidCall call(FLASHLAB_KERNEL_NAIVE);
    call.params.heads_q = int64_t(max_y) + 1;
    expect_error(call, FLASHLAB_ERROR_BAD_SHAPE,
                 out_of_range("heads_q", call.params.heads_q, max_y).c_str());
  }
  {
    ValidCall call(FLASHLAB_KERNEL_SCALAR);
    call.params.heads_kv = int64_t(max_y) + 1;
    expect_error(call, FLASHLAB_ERROR_BAD_SHAPE,
                 out_of_range("heads_kv", call.params.heads_kv, max_y).c_str());
  }
}

TEST_CASE("host memory where device memory is required, and reserved != 0") {
  std::vector<uint16_t> host(64 * 64 * 2);
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.k = host.data();
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "is host memory");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_NAIVE);
    call.params.reserved = 1;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "reserved = 1: it must be 0");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_SCALAR);
    call.params.o = const_cast<void*>(call.params.q);  // O written over the Q it reads
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap Q's");
  }
}

TEST_CASE("null pointers") {
  const char* kNames[] = {"Q is NULL", "K is NULL", "V is NULL", "O is NULL"};
  for (int which = 0; which < 4; ++which) {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    if (which == 0) call.params.q = nullptr;
    if (which == 1) call.params.k = nullptr;
    if (which == 2) call.params.v = nullptr;
    if (which == 3) call.params.o = nullptr;
    expect_error(call, FLASHLAB_ERROR_NULL_POINTER, kNames[which]);
  }
  CHECK(flashlab_forward(nullptr) == FLASHLAB_ERROR_NULL_POINTER);
  CHECK(std::string(flashlab_last_error()).find("params is NULL") != std::string::npos);
}

TEST_CASE("unknown enums and a bad scale") {
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.kernel = 7;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "kernel = 7 is unknown");
  }
  {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.causal = 5;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "causal = 5 is unknown");
  }
  for (double scale : {-1.0, std::numeric_limits<double>::infinity()}) {
    ValidCall call(FLASHLAB_KERNEL_SCALAR);
    call.params.scale = scale;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "is not allowed: give a finite scale > 0");
  }
  // Finite in fp64, but inf or 0 once the kernels convert it to fp32.
  const double fp32_max = std::numeric_limits<float>::max();
  const double fp32_min = std::numeric_limits<float>::min();
  for (double scale : {2 * fp32_max, fp32_min / 2}) {
    ValidCall call(FLASHLAB_KERNEL_NAIVE);
    call.params.scale = scale;
    expect_error(call, FLASHLAB_ERROR_BAD_ARGUMENT, "does not fit in fp32");
  }
}

}  // namespace
}  // namespace flashlab::gpu::test
