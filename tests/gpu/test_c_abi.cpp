// The C ABI's answers that need no GPU: flashlab_kernel_info() returns kernel_info.hpp's
// facts as a plain C struct, with the status and message of every other call.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "flashlab/fa3.h"
#include "flashlab/flashlab.h"
#include "flashlab/gpu/kernel_info.hpp"
#include "valid_call.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace flashlab::gpu {
namespace {

std::string status_name(flashlab_status status) { return flashlab_status_name(status); }

TEST_CASE("flashlab_kernel_info returns the table, field for field") {
  CHECK(flashlab_abi_version() == FLASHLAB_ABI_VERSION);
  for (const KernelRecord& k : kKernels)
    for (flashlab_dtype dtype : kDtypes)
      for (int64_t d : {int64_t{64}, int64_t{96}, int64_t{128}}) {
        INFO(k.name, " d = ", d, " ", dtype_name(dtype));
        const KernelInfo want = kernel_info(k.id, d, dtype);
        flashlab_kernel_info_t got;
        const flashlab_status status = flashlab_kernel_info(k.id, d, dtype, &got);
        CHECK(status_name(status) ==
              status_name(want.supported ? FLASHLAB_OK : FLASHLAB_ERROR_UNSUPPORTED));
        CHECK(std::string(flashlab_last_error()) == want.reason);
        CHECK(std::string(got.name) == k.name);
        CHECK(std::string(got.summary) == k.summary);
        CHECK(got.supported == int(want.supported));
        CHECK(got.br == want.config.Br);
        CHECK(got.bc == want.config.Bc);
        CHECK(got.threads == want.config.threads);
        CHECK(got.sram_bytes == want.config.sram_bytes);
        CHECK(got.blocks_per_sm == want.config.blocks_per_sm);
        CHECK(got.s_level == want.config.s.level);
        CHECK(got.s_dtype == want.config.s.dtype);
        CHECK(got.w_level == want.config.w.level);
        CHECK(got.w_dtype == want.config.w.dtype);
        CHECK(got.kv_passes == want.config.kv_passes);
        CHECK(got.s_hbm_reads == want.config.s_hbm_reads);
        CHECK(got.pointer_align_bytes == want.config.pointer_align_bytes);
        CHECK(got.stride_align_elements == want.config.stride_align_elements);
        CHECK(got.dtypes == k.dtypes.bits);
        CHECK(got.head_dim_count == k.head_dims.count);
        for (int i = 0; i < k.head_dims.count; ++i) CHECK(got.head_dims[i] == k.head_dims.values[i]);
        CHECK(got.max_head_dim == k.head_dims.largest());
      }
}

TEST_CASE("flashlab_kernel_info: unsupported, unknown and NULL") {
  flashlab_kernel_info_t info;
  CHECK(status_name(flashlab_kernel_info(FLASHLAB_KERNEL_FA2, 96, FLASHLAB_BF16, &info)) ==
        "FLASHLAB_ERROR_UNSUPPORTED");
  CHECK(std::string(flashlab_last_error()) ==
        "d = 96 is not supported by the fa2 kernel: it takes d in {64, 128}; the naive kernel "
        "takes d = 96");
  CHECK(info.supported == 0);
  CHECK(info.head_dim_count == 2);
  CHECK(info.head_dims[0] == 64);
  CHECK(info.head_dims[1] == 128);
  CHECK(info.br == 0);

  CHECK(flashlab_kernel_info(FLASHLAB_KERNEL_NAIVE, 96, FLASHLAB_FP32, &info) == FLASHLAB_OK);
  CHECK(std::string(flashlab_last_error()).empty());
  CHECK(info.head_dim_count == 0);  // any d
  CHECK(info.max_head_dim == kMaxIndex);

  CHECK(status_name(flashlab_kernel_info(7, 64, FLASHLAB_BF16, &info)) ==
        "FLASHLAB_ERROR_BAD_ARGUMENT");
  CHECK(std::string(flashlab_last_error()) ==
        "kernel = 7 is unknown: use 0 (naive), 1 (scalar), 2 (fa2) or 3 (fa3)");
  CHECK(info.name == nullptr);  // nothing known about an unknown kernel

  CHECK(status_name(flashlab_kernel_info(FLASHLAB_KERNEL_FA2, 64, -1, &info)) ==
        "FLASHLAB_ERROR_BAD_ARGUMENT");
  CHECK(std::string(flashlab_last_error()) == "dtype = -1 is unknown: use 0 (fp32), 1 (fp16) or 2 (bf16)");

  CHECK(status_name(flashlab_kernel_info(FLASHLAB_KERNEL_FA2, 64, FLASHLAB_BF16, nullptr)) ==
        "FLASHLAB_ERROR_NULL_POINTER");
  CHECK(std::string(flashlab_last_error()).find("out is NULL") == 0);
}

TEST_CASE("fa3's options: FLASHLAB_FA3_AUTO by default, resolved per head dimension") {
  flashlab_fa3_options defaults{};
  REQUIRE(flashlab_fa3_default_options(&defaults) == FLASHLAB_OK);
  CHECK(defaults.stages == FLASHLAB_FA3_AUTO);
  CHECK(defaults.ping_pong == FLASHLAB_FA3_AUTO);
  CHECK(defaults.kv_l2_share == FLASHLAB_FA3_AUTO);
  for (int64_t d : {int64_t{64}, int64_t{128}}) {
    INFO("d = ", d);
    flashlab_fa3_options out{};
    REQUIRE(flashlab_fa3_resolve_options(d, &defaults, &out) == FLASHLAB_OK);
    CHECK(std::string(flashlab_last_error()).empty());
    CHECK(out.stages == fa3::default_stages(d));
    CHECK(out.ping_pong == int(fa3::default_ping_pong(d)));
    CHECK(out.warp_specialized == defaults.warp_specialized);
    CHECK(out.grid == defaults.grid);
    CHECK(out.overlap_items == defaults.overlap_items);
    CHECK(out.kv_l2_share == FLASHLAB_FA3_AUTO);  // the mask's, not d's: it stays
  }
  flashlab_fa3_options out{};
  CHECK(status_name(flashlab_fa3_resolve_options(96, &defaults, &out)) ==
        "FLASHLAB_ERROR_UNSUPPORTED");
  CHECK(std::string(flashlab_last_error()).find("d = 96 is not supported by the fa3 kernel") == 0);
  CHECK(status_name(flashlab_fa3_resolve_options(64, nullptr, &out)) ==
        "FLASHLAB_ERROR_NULL_POINTER");
  CHECK(std::string(flashlab_last_error()).find("options is NULL") == 0);
  CHECK(status_name(flashlab_fa3_resolve_options(64, &defaults, nullptr)) ==
        "FLASHLAB_ERROR_NULL_POINTER");
  CHECK(std::string(flashlab_last_error()).find("out is NULL") == 0);
}

TEST_CASE("flashlab_forward_fa3: a share of the L2 out of range is refused before device work") {
  const flashlab_forward_params p = test::valid_call(FLASHLAB_KERNEL_FA3);
  flashlab_fa3_options o{};
  REQUIRE(flashlab_fa3_default_options(&o) == FLASHLAB_OK);
  for (int32_t bad : {0, -2, fa3::kMaxKvL2Share + 1}) {
    o.kv_l2_share = bad;
    CHECK(status_name(flashlab_forward_fa3(&p, &o)) == "FLASHLAB_ERROR_BAD_ARGUMENT");
    CHECK(std::string(flashlab_last_error()) ==
          "fa3 option kv_l2_share = " + std::to_string(bad) +
              ": it must be a share of the L2 in percent, 1 to 100, or FLASHLAB_FA3_AUTO (-1: the "
              "kernel's own, fa3::auto_kv_l2_share)");
  }
}

TEST_CASE("flashlab_backward_workspace_bytes: kernel_info.hpp's formula through the ABI") {
  flashlab_backward_params p = test::valid_backward_call();
  int64_t bytes = -1;
  REQUIRE(flashlab_backward_workspace_bytes(&p, &bytes) == FLASHLAB_OK);
  CHECK(bytes == fa2_backward::workspace_bytes(p.batch, p.heads_q, p.n_q, p.d, false));
  CHECK(std::string(flashlab_last_error()).empty());
  p.deterministic = 1;
  REQUIRE(flashlab_backward_workspace_bytes(&p, &bytes) == FLASHLAB_OK);
  CHECK(bytes == fa2_backward::workspace_bytes(p.batch, p.heads_q, p.n_q, p.d, true));
  p.n_q = 0;
  CHECK(status_name(flashlab_backward_workspace_bytes(&p, &bytes)) == "FLASHLAB_ERROR_BAD_SHAPE");
  CHECK(std::string(flashlab_last_error()).find("n_q = 0 is out of range") == 0);
  CHECK(status_name(flashlab_backward_workspace_bytes(nullptr, &bytes)) ==
        "FLASHLAB_ERROR_NULL_POINTER");
  CHECK(status_name(flashlab_backward_workspace_bytes(&p, nullptr)) ==
        "FLASHLAB_ERROR_NULL_POINTER");
  CHECK(std::string(flashlab_last_error()).find("bytes is NULL") == 0);
}

TEST_CASE("flashlab_backward: bad parameters come back as statuses before any device work") {
  flashlab_backward_params p = test::valid_backward_call();
  p.dropout_p = 1.5;
  CHECK(status_name(flashlab_backward(&p)) == "FLASHLAB_ERROR_BAD_ARGUMENT");
  CHECK(std::string(flashlab_last_error()).find("dropout_p = 1.5 is outside [0, 1)") == 0);
  p = test::valid_backward_call();
  p.dropout_p = 0.2;
  p.dropout_offset = uint64_t{1} << 32;
  CHECK(status_name(flashlab_backward(&p)) == "FLASHLAB_ERROR_BAD_ARGUMENT");
  CHECK(std::string(flashlab_last_error()).find("dropout_offset = 4294967296 does not fit") == 0);
  p = test::valid_backward_call();
  p.workspace_bytes = 0;
  CHECK(status_name(flashlab_backward(&p)) == "FLASHLAB_ERROR_BAD_ARGUMENT");
  CHECK(std::string(flashlab_last_error()).find("workspace_bytes = 0 is too small") == 0);
  CHECK(status_name(flashlab_backward(nullptr)) == "FLASHLAB_ERROR_NULL_POINTER");
  CHECK(std::string(flashlab_last_error()) ==
        "params is NULL: pass a filled flashlab_backward_params");
}

TEST_CASE("the decode calls refuse NULL params and outputs with a status and a message") {
  flashlab_decode_params p{};
  int32_t splits = 0;
  int64_t bytes = 0;
  CHECK(status_name(flashlab_decode(nullptr)) == status_name(FLASHLAB_ERROR_NULL_POINTER));
  CHECK(std::string(flashlab_last_error()).find("flashlab_decode_params") != std::string::npos);
  CHECK(status_name(flashlab_decode_check(nullptr)) ==
        status_name(FLASHLAB_ERROR_NULL_POINTER));
  CHECK(status_name(flashlab_decode_num_splits(nullptr, &splits)) ==
        status_name(FLASHLAB_ERROR_NULL_POINTER));
  CHECK(status_name(flashlab_decode_num_splits(&p, nullptr)) ==
        status_name(FLASHLAB_ERROR_NULL_POINTER));
  CHECK(status_name(flashlab_decode_workspace_bytes(nullptr, &bytes)) ==
        status_name(FLASHLAB_ERROR_NULL_POINTER));
  CHECK(status_name(flashlab_decode_workspace_bytes(&p, nullptr)) ==
        status_name(FLASHLAB_ERROR_NULL_POINTER));
  // A check with no workspace says which argument it needs.
  CHECK(status_name(flashlab_decode_check(&p)) == status_name(FLASHLAB_ERROR_NULL_POINTER));
  CHECK(std::string(flashlab_last_error()).find("workspace is NULL") != std::string::npos);
}

}  // namespace
}  // namespace flashlab::gpu
