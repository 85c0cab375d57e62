// Validation of a decode call's parameters, without CUDA (flashlab::gpu_check): every rule
// of flashlab/decode.h refused with its status and a message naming the field. Pointers are
// only numbers here (aligned, 1 GiB apart): validate_decode() never touches the memory.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "flashlab/gpu/decode.hpp"
#include "flashlab/gpu/forward.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "valid_call.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace flashlab::gpu {
namespace {

using test::address;
constexpr int64_t kSms = 132;

// GQA 8 over 2, N_q = 2, d = 128, bf16, a contiguous cache of 1024 keys, batch 3.
flashlab_decode_params valid_contiguous() {
  flashlab_decode_params p{};
  p.q = address(1);
  p.k_cache = address(2);
  p.v_cache = address(3);
  p.o = const_cast<void*>(address(4));
  p.lse = static_cast<float*>(const_cast<void*>(address(5)));
  p.seq_lens = static_cast<const int32_t*>(address(6));
  p.batch = 3;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.n_q = 2;
  p.max_seq_len = 1024;
  p.d = 128;
  for (int64_t* s : {p.q_stride, p.o_stride}) {
    s[0] = p.heads_q * p.n_q * p.d;
    s[1] = p.n_q * p.d;
    s[2] = p.d;
    s[3] = 1;
  }
  for (int64_t* s : {p.k_stride, p.v_stride}) {
    s[0] = p.heads_kv * p.max_seq_len * p.d;
    s[1] = p.max_seq_len * p.d;
    s[2] = p.d;
    s[3] = 1;
  }
  p.dtype = FLASHLAB_BF16;
  p.workspace = const_cast<void*>(address(7));
  p.workspace_bytes = decode_workspace_bytes(p, kSms);
  return p;
}

// The same with pages of 64 keys, (num_pages, page_size, heads_kv, d).
flashlab_decode_params valid_paged() {
  flashlab_decode_params p = valid_contiguous();
  p.block_table = static_cast<const int32_t*>(address(8));
  p.page_size = 64;
  p.num_pages = 100;
  p.block_table_stride = p.max_seq_len / p.page_size;
  for (int64_t* s : {p.k_stride, p.v_stride}) {
    s[0] = p.page_size * p.heads_kv * p.d;
    s[1] = p.d;
    s[2] = p.heads_kv * p.d;
    s[3] = 1;
  }
  return p;
}

void expect_ok(const flashlab_decode_params& p) {
  try {
    validate_decode(p, kSms);
  } catch (const Error& e) {
    FAIL("refused a valid call: ", std::string(e.what()));
  }
}

void expect_error(const flashlab_decode_params& p, flashlab_status status,
                  const std::string& words) {
  try {
    validate_decode(p, kSms);
    FAIL("accepted; expected a refusal saying: ", words);
  } catch (const Error& e) {
    INFO("message: ", std::string(e.what()));
    CHECK(e.status == status);
    CHECK(std::string(e.what()).find(words) != std::string::npos);
  }
}

TEST_CASE("valid decode calls pass: contiguous, paged, every accepted page size, N_q 1..16") {
  expect_ok(valid_contiguous());
  expect_ok(valid_paged());
  for (int64_t page_size : {16, 32, 64, 128, 256, 1024}) {
    auto p = valid_paged();
    p.page_size = page_size;
    p.block_table_stride = p.max_seq_len / page_size;
    p.k_stride[0] = p.v_stride[0] = page_size * p.heads_kv * p.d;
    expect_ok(p);
  }
  for (int64_t n_q = 1; n_q <= decode::kMaxQueryRows; ++n_q) {
    auto p = valid_contiguous();
    p.n_q = n_q;
    p.q_stride[0] = p.o_stride[0] = p.heads_q * n_q * p.d;
    p.q_stride[1] = p.o_stride[1] = n_q * p.d;
    p.workspace_bytes = decode_workspace_bytes(p, kSms);
    expect_ok(p);
  }
}

TEST_CASE("decode: null pointers") {
  auto p = valid_contiguous();
  SUBCASE("q") {
    p.q = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "Q is NULL");
  }
  SUBCASE("k") {
    p.k_cache = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "K cache is NULL");
  }
  SUBCASE("v") {
    p.v_cache = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "V cache is NULL");
  }
  SUBCASE("o") {
    p.o = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "O is NULL");
  }
  SUBCASE("lens") {
    p.seq_lens = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "seq_lens is NULL");
  }
  SUBCASE("workspace") {
    p.workspace = nullptr;
    expect_error(p, FLASHLAB_ERROR_NULL_POINTER, "workspace is NULL");
  }
}

TEST_CASE("decode: enums, d, scale, kv_l2_policy, grid, num_splits") {
  auto p = valid_contiguous();
  SUBCASE("dtype unknown") {
    p.dtype = 7;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "dtype = 7 is unknown");
  }
  SUBCASE("fp32") {
    p.dtype = FLASHLAB_FP32;
    expect_error(p, FLASHLAB_ERROR_UNSUPPORTED, "fp16 or bf16");
  }
  SUBCASE("d = 96") {
    p.d = 96;
    expect_error(p, FLASHLAB_ERROR_UNSUPPORTED, "d in {64, 128}");
  }
  SUBCASE("kv_l2_policy unknown") {
    for (int32_t policy : {-1, 3, 1 << 30}) {
      p.kv_l2_policy = policy;
      expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT,
                   "kv_l2_policy = " + std::to_string(policy) + " is unknown");
    }
  }
  SUBCASE("every kv_l2_policy is taken") {
    for (int32_t policy : {FLASHLAB_DECODE_L2_AUTO, FLASHLAB_DECODE_L2_EVICT_NORMAL,
                           FLASHLAB_DECODE_L2_EVICT_FIRST}) {
      p.kv_l2_policy = policy;
      CHECK_NOTHROW(validate_decode(p, kSms));
    }
  }
  SUBCASE("an unknown grid") {
    p.grid = 3;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "grid = 3 is unknown");
  }
  SUBCASE("every grid is taken") {
    for (int32_t grid :
         {FLASHLAB_DECODE_GRID_AUTO, FLASHLAB_DECODE_GRID_SPLITS, FLASHLAB_DECODE_GRID_QUEUE}) {
      p.grid = grid;
      CHECK_NOTHROW(validate_decode(p, kSms));
    }
  }
  SUBCASE("negative scale") {
    p.scale = -1;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "scale = -1");
  }
  SUBCASE("inf scale") {
    p.scale = INFINITY;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "finite scale");
  }
  SUBCASE("scale beyond fp32") {
    p.scale = 1e300;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "does not fit in fp32");
  }
  SUBCASE("num_splits 65") {
    p.num_splits = 65;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "[1, 64]");
  }
  SUBCASE("num_splits -1") {
    p.num_splits = -1;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "num_splits = -1");
  }
  SUBCASE("NaN scale is the default") {
    p.scale = NAN;
    expect_ok(p);
  }
}

TEST_CASE("decode: shapes") {
  auto p = valid_contiguous();
  SUBCASE("batch 0") {
    p.batch = 0;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "batch = 0");
  }
  SUBCASE("batch 65536") {
    p.batch = 65536;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "batch = 65536");
  }
  SUBCASE("n_q 0") {
    p.n_q = 0;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "n_q = 0");
  }
  SUBCASE("n_q 17") {
    p.n_q = 17;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "[1, 16]");
  }
  SUBCASE("heads") {
    p.heads_q = 7;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "not a multiple of heads_kv");
  }
  SUBCASE("capacity 0") {
    p.max_seq_len = 0;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "max_seq_len = 0");
  }
  SUBCASE("capacity 2^31") {
    p.max_seq_len = int64_t{1} << 31;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "max_seq_len");
  }
}

TEST_CASE("decode: strides, alignment, overflow") {
  auto p = valid_contiguous();
  SUBCASE("column stride") {
    p.k_stride[3] = 2;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "K cache's column stride");
  }
  SUBCASE("negative") {
    p.v_stride[2] = -128;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "negative");
  }
  SUBCASE("O rows overlap") {
    p.o_stride[2] = 64;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "overlap");
  }
  SUBCASE("Q misaligned") {
    p.q = static_cast<const char*>(p.q) + 8;
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, "16-byte aligned");
  }
  SUBCASE("K stride not a multiple of 8") {
    p.k_stride[2] = 132;
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, "multiple of 8");
  }
  SUBCASE("O odd address") {
    p.o = static_cast<char*>(p.o) + 1;
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, "O is not 2-byte aligned");
  }
  SUBCASE("lens misaligned") {
    p.seq_lens = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(p.seq_lens) + 2);
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, "seq_lens is not 4-byte aligned");
  }
  SUBCASE("overflowing stride") {
    p.k_stride[0] = std::numeric_limits<int64_t>::max() / 2;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "overflows int64");
  }
}

TEST_CASE("decode: workspace size, alignment and overlaps") {
  auto p = valid_contiguous();
  SUBCASE("too small, saying how many bytes") {
    const int64_t needed = p.workspace_bytes;
    p.workspace_bytes = needed - 1;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "needs " + std::to_string(needed) + " bytes");
  }
  SUBCASE("forced splits need more") {
    p.num_splits = 64;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "64 splits");
  }
  SUBCASE("misaligned") {
    p.workspace = static_cast<char*>(p.workspace) + 4;
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, "workspace is not 16-byte aligned");
  }
  SUBCASE("O on Q") {
    p.o = const_cast<void*>(p.q);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "O's bytes");
  }
  SUBCASE("workspace on K") {
    p.workspace = const_cast<void*>(p.k_cache);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "workspace's bytes");
  }
  SUBCASE("workspace on O") {
    p.workspace = p.o;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "overlap");
  }
  SUBCASE("LSE on V") {
    p.lse = static_cast<float*>(const_cast<void*>(p.v_cache));
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "LSE's bytes");
  }
  SUBCASE("O on seq_lens") {
    p.o = const_cast<int32_t*>(p.seq_lens);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "seq_lens");
  }
}

TEST_CASE("decode: paging") {
  auto p = valid_paged();
  SUBCASE("page size 24") {
    p.page_size = 24;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "page_size = 24 is not accepted");
  }
  SUBCASE("page size 8") {
    p.page_size = 8;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "power of two in [16");
  }
  SUBCASE("page size 0") {
    p.page_size = 0;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "page_size = 0");
  }
  SUBCASE("no pages") {
    p.num_pages = 0;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "num_pages = 0");
  }
  SUBCASE("capacity not whole pages") {
    p.max_seq_len = 1000;
    expect_error(p, FLASHLAB_ERROR_BAD_SHAPE, "not a multiple of page_size");
  }
  SUBCASE("table rows overlap") {
    p.block_table_stride = 15;
    expect_error(p, FLASHLAB_ERROR_BAD_STRIDE, "block_table_stride = 15");
  }
  SUBCASE("table misaligned") {
    p.block_table =
        reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(p.block_table) + 1);
    expect_error(p, FLASHLAB_ERROR_MISALIGNED, "block_table is not 4-byte aligned");
  }
  SUBCASE("O on the table") {
    p.o = const_cast<int32_t*>(p.block_table);
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "block_table");
  }
  SUBCASE("page fields without a table") {
    p.block_table = nullptr;
    expect_error(p, FLASHLAB_ERROR_BAD_ARGUMENT, "without a block_table");
  }
}

TEST_CASE("decode: the split count and the workspace follow kernel_info's formulas") {
  auto p = valid_contiguous();
  CHECK(decode_num_splits(p, kSms) == decode::auto_splits(p.batch, p.heads_kv,
                                                          p.heads_q / p.heads_kv, p.n_q,
                                                          p.max_seq_len, /*paged=*/false, kSms));
  p.num_splits = 9;
  CHECK(decode_num_splits(p, kSms) == 9);
  CHECK(decode_workspace_bytes(p, kSms) ==
        decode::workspace_bytes(p.batch, p.heads_q, p.n_q, p.d, 9));
}

}  // namespace
}  // namespace flashlab::gpu
