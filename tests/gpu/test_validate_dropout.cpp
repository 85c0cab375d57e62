// Validation of dropout's arguments, without CUDA: the forward call's dropout_p (and which
// kernels take it), and a mask export's region, which must fit the Philox counter of the
// CPU reference's rule. Hostile values: p = 1, just below 0, NaN, inf; regions one past
// each counter word's end; extents whose product overflows int64.
#include <doctest/doctest.h>

#include "flashlab/gpu/dropout.hpp"
#include "flashlab/gpu/forward.hpp"
#include "valid_call.hpp"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

namespace flashlab::gpu {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class Params>
void expect_error(const std::function<void(const Params&)>& check, const Params& p,
                  flashlab_status status, const std::string& words) {
  try {
    check(p);
    FAIL("accepted; expected a refusal saying: ", words);
  } catch (const Error& e) {
    INFO("message: ", std::string(e.what()));
    CHECK(e.status == status);
    CHECK(std::string(e.what()).find(words) != std::string::npos);
  }
}

const std::function<void(const flashlab_forward_params&)> kForward = [](const auto& p) {
  validate(p);
};
const std::function<void(const flashlab_dropout_mask_params&)> kMask = [](const auto& p) {
  validate_dropout_mask(p);
};

TEST_CASE(
    "dropout_p from 0 up to below 1 passes for fa2, and any other value is refused with the reason") {
  for (double p : {0.0, -0.0, 1e-300, 0.5, 1.0 - 1e-16}) {
    auto call = test::valid_call(FLASHLAB_KERNEL_FA2);
    call.dropout_p = p;
    call.dropout_seed = ~uint64_t{0};
    call.dropout_offset = ~uint32_t{0};
    CHECK_NOTHROW(validate(call));
  }
  for (double p : {1.0, -1e-300, -0.5, 2.0, kNaN, kInf, -kInf}) {
    auto call = test::valid_call(FLASHLAB_KERNEL_FA2);
    call.dropout_p = p;
    expect_error(kForward, call, FLASHLAB_ERROR_BAD_ARGUMENT,
                 "is outside [0, 1): p is the chance that a weight is dropped");
  }
}

TEST_CASE("the kernels without dropout refuse p != 0 and name the one that has it") {
  for (flashlab_kernel kernel : {FLASHLAB_KERNEL_NAIVE, FLASHLAB_KERNEL_SCALAR}) {
    auto call = test::valid_call(kernel);
    call.dropout_p = 0.0;
    CHECK_NOTHROW(validate(call));
    call.dropout_p = 0.25;
    expect_error(kForward, call, FLASHLAB_ERROR_UNSUPPORTED,
                 "kernel does not apply dropout; fa2 does, or use dropout_p = 0");
  }
}

flashlab_dropout_mask_params valid_mask() {
  flashlab_dropout_mask_params p{};
  p.mask = reinterpret_cast<uint8_t*>(uintptr_t{1} << 30);  // only a number: never touched
  p.batch = p.heads = p.rows = p.cols = 1;
  p.p = 0.5;
  return p;
}

TEST_CASE("a mask region up to the counter's limits passes") {
  auto p = valid_mask();
  p.batch0 = 65535, p.head0 = 65535;
  p.row0 = (int64_t{1} << 32) - 1;
  p.col0 = (int64_t{1} << 34) - 1;
  CHECK_NOTHROW(validate_dropout_mask(p));
  p = valid_mask();
  p.batch = p.heads = 65536;
  p.rows = 1 << 20;
  CHECK_NOTHROW(validate_dropout_mask(p));
}

TEST_CASE("a mask export with a bad region, p, pointer or reserved is refused") {
  auto p = valid_mask();
  p.mask = nullptr;
  expect_error(kMask, p, FLASHLAB_ERROR_NULL_POINTER, "mask is NULL");
  p = valid_mask();
  p.reserved = 3;
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_ARGUMENT, "reserved = 3: it must be 0");
  for (double bad : {1.0, -0.1, kNaN}) {
    p = valid_mask();
    p.p = bad;
    expect_error(kMask, p, FLASHLAB_ERROR_BAD_ARGUMENT, "is outside [0, 1)");
  }
  p = valid_mask();
  p.batch0 = 65535, p.batch = 2;
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_SHAPE, "batches [65535, 65535 + 2)");
  p = valid_mask();
  p.heads = 0;
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_SHAPE, "heads [0, 0 + 0)");
  p = valid_mask();
  p.row0 = -1;
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_SHAPE, "rows [-1, -1 + 1)");
  p = valid_mask();
  p.row0 = int64_t{1} << 32;
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_SHAPE, "the end at most 2^32");
  p = valid_mask();
  p.col0 = std::numeric_limits<int64_t>::max();
  p.cols = std::numeric_limits<int64_t>::max();
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_SHAPE, "the end at most 2^34");
  p = valid_mask();
  p.batch = p.heads = 65536;
  p.rows = int64_t{1} << 32;
  p.cols = 1 << 10;
  expect_error(kMask, p, FLASHLAB_ERROR_BAD_SHAPE, "overflows int64");
}

}  // namespace
}  // namespace flashlab::gpu
