// fa3's switches (flashlab/fa3.h) change how the work is scheduled, never the result: every
// combination of warp specialisation, stages, ping-pong and intra-warpgroup overlap matches
// the fp64 reference on awkward shapes, and a switch out of range is refused with a message.
#include "checks.hpp"

#include <string>

namespace flashlab::gpu::test {
namespace {

std::vector<flashlab_fa3_options> every_combination() {
  std::vector<flashlab_fa3_options> out;
  for (int ws : {0, 1})
    for (int stages = 1; stages <= fa3::kMaxStages; ++stages)
      for (int ping_pong : {0, 1})
        for (int overlap : {0, 1}) out.push_back({ws, stages, ping_pong, overlap});
  return out;
}

TEST_CASE("fa3: every switch combination matches the reference (bf16, d = 128)") {
  // (N_q, N_k): one tile, a ragged tile, several tiles with a ragged end, N_q != N_k.
  constexpr int kShapes[][2] = {{1, 1}, {97, 113}, {300, 1023}, {1023, 300}};
  constexpr flashlab_causal kModes[] = {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT,
                                        FLASHLAB_CAUSAL_BOTTOM_RIGHT};
  for (const flashlab_fa3_options& o : every_combination())
    for (const auto& shape : kShapes)
      for (flashlab_causal causal : kModes) {
        Case c;
        c.kernel = FLASHLAB_KERNEL_FA3;
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.n_q = shape[0];
        c.n_k = shape[1];
        c.d = 128;
        c.causal = causal;
        c.fa3 = o;
        expect_matches_reference(c);
      }
}

TEST_CASE("fa3: the runtime switches (stages, ping-pong) at d = 64 and fp16") {
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128})
      for (int stages = 1; stages <= fa3::kMaxStages; ++stages)
        for (int ping_pong : {0, 1}) {
          Case c;
          c.kernel = FLASHLAB_KERNEL_FA3;
          c.dtype = dtype;
          c.heads_q = 2;
          c.heads_kv = 1;
          c.n_q = 517;
          c.n_k = 1023;
          c.d = d;
          c.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
          c.fa3 = flashlab_fa3_options{1, stages, ping_pong, 1};
          expect_matches_reference(c);
        }
}

// Calls flashlab_forward_fa3 on a valid problem with `o`; returns the status and message.
flashlab_status call_fa3(const ValidCall& call, const flashlab_fa3_options& o,
                         std::string* message) {
  const flashlab_status status = flashlab_forward_fa3(&call.params, &o);
  *message = flashlab_last_error();
  return status;
}

TEST_CASE("fa3: switches out of range, another kernel, NULL options") {
  flashlab_fa3_options defaults{};
  REQUIRE(flashlab_fa3_default_options(&defaults) == FLASHLAB_OK);
  CHECK(defaults.warp_specialized == 1);
  CHECK(defaults.stages == fa3::kDefaultStages);
  const ValidCall call(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 128);
  std::string message;
  CHECK(call_fa3(call, defaults, &message) == FLASHLAB_OK);
  CHECK(message.empty());
  for (int stages : {0, fa3::kMaxStages + 1}) {
    flashlab_fa3_options o = defaults;
    o.stages = stages;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message.find("stages = " + std::to_string(stages)) != std::string::npos);
  }
  flashlab_fa3_options o = defaults;
  o.ping_pong = 2;
  CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
  CHECK(message.find("must be 0 (off) or 1 (on)") != std::string::npos);
  const ValidCall fa2(FLASHLAB_KERNEL_FA2, FLASHLAB_BF16, 128);
  CHECK(call_fa3(fa2, defaults, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
  CHECK(message.find("FLASHLAB_KERNEL_FA3") != std::string::npos);
  CHECK(flashlab_forward_fa3(&call.params, nullptr) == FLASHLAB_ERROR_NULL_POINTER);
  CHECK(std::string(flashlab_last_error()).find("options is NULL") != std::string::npos);
  // Not compiled: the switches other than stages and ping-pong exist at bf16, d = 128 only.
  const ValidCall d64(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 64);
  o = defaults;
  o.intra_overlap = 0;
  CHECK(call_fa3(d64, o, &message) == FLASHLAB_ERROR_UNSUPPORTED);
  CHECK(message.find("both must be 1") != std::string::npos);
}

TEST_CASE("fa3: a broadcast row (row stride 0) is refused; broadcast heads and batches are read") {
  const ValidCall ok(FLASHLAB_KERNEL_FA3);
  std::string message;
  {
    ValidCall call(FLASHLAB_KERNEL_FA3);
    call.params.k_stride[2] = 0;  // every key row the same memory: TMA has no 0 stride
    CHECK(call.call(&message) == FLASHLAB_ERROR_UNSUPPORTED);
    CHECK(message.find("K's row stride is 0") != std::string::npos);
    CHECK(message.find("the fa2, naive and scalar kernels take it") != std::string::npos);
  }
  {
    ValidCall call(FLASHLAB_KERNEL_FA3);
    call.params.q_stride[1] = 0;  // both query heads read the same Q
    call.params.k_stride[0] = call.params.v_stride[0] = 0;
    CHECK(call.call(&message) == FLASHLAB_OK);
    CHECK(message.empty());
  }
}

}  // namespace
}  // namespace flashlab::gpu::test
