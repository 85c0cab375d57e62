// `flashlab simulate --pass` and `flashlab compare --pass`: the GPU backward's and decode's
// mirrors on the command line, their figures against the mirrors called directly with the
// kernels' facts from gpu_bridge, and every refusal a line and exit status 2.
#include "run_flashlab.hpp"

#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "gpu_bridge/pass_kernels.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/simulate.hpp"

#include <doctest/doctest.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

using flashlab::test::contains;
using flashlab::test::kUsageError;
using flashlab::test::run_command;
using flashlab::test::run_flashlab;

namespace {

nlohmann::json json_of(const std::string& args) {
  const auto run = run_flashlab(args + " --json");
  REQUIRE(run.status == 0);
  return nlohmann::json::parse(run.output);
}

std::int64_t bytes_of(const nlohmann::json& report, const std::string& tensor, const char* way) {
  for (const auto& t : report["tensors"])
    if (t["name"] == tensor) return t[way].get<std::int64_t>();
  FAIL("no tensor " << tensor);
  return -1;
}

}  // namespace

TEST_CASE("simulate --pass backward prints the mirror configured with the kernel's facts") {
  const auto j = json_of(
      "simulate --pass backward --n 1023 --n-q 97 --d 128 --heads 8 --kv-heads 2 --batch 2 "
      "--causal --deterministic");
  CHECK(j["pass"] == "backward (deterministic)");
  CHECK(j["inputs"]["causal"] == "bottom-right");  // N_q != N
  CHECK(j["inputs"]["heads_kv"] == 2);
  // The same run through the bridge: the figures are the mirror's, nothing recomputed.
  const auto p = flashlab::app::predict(flashlab::app::BackwardRun{.batch = 2,
                                                                   .heads = 8,
                                                                   .kv_heads = 2,
                                                                   .n = 1023,
                                                                   .n_q = 97,
                                                                   .d = 128,
                                                                   .causal = true,
                                                                   .deterministic = true});
  REQUIRE(p.report);
  CHECK(j["bytes"]["total"].get<std::int64_t>() == p.report->bytes_total());
  CHECK(bytes_of(j, "K", "bytes_read") == p.report->tensor("K").read);
  CHECK(j["launches"][2]["name"] == "dQ");
  const auto facts = flashlab::app::backward_kernel_facts(128, flashlab::sim::DType::bf16, true);
  REQUIRE(facts.facts);
  CHECK(j["launches"][1]["blocks"] == 2 * 2 * ((1023 + facts.facts->Bc - 1) / facts.facts->Bc));

  const auto table = run_flashlab("simulate --pass backward --n 512 --d 64");
  REQUIRE(table.status == 0);
  CHECK(contains(table.output, "dQ accumulator"));
  CHECK(contains(table.output, "post (dQ)"));
}

TEST_CASE("simulate --pass fa3 prints the Hopper kernel's mirror with the table's facts") {
  const auto j = json_of(
      "simulate --pass fa3 --n 1023 --n-q 97 --d 128 --heads 8 --kv-heads 2 --batch 2 --causal "
      "--stages 3");
  CHECK(j["pass"] == "fa3");
  CHECK(j["inputs"]["causal"] == "bottom-right");
  CHECK(j["inputs"]["stages"] == 3);
  CHECK(j["peak_sram_bytes"] == flashlab::gpu::fa3::sram_bytes(128, FLASHLAB_BF16, 3));
  // 97 query rows, one query tile, bottom-right: its last row sees all 1023 keys. Into the
  // SMs in TMA's whole boxes: 8 of Bc = 128 keys, one of Br = 128 query rows.
  CHECK(bytes_of(j, "K", "bytes_read") == 2 * 8 * 8 * 128 * 128 * 2);
  CHECK(bytes_of(j, "Q", "bytes_read") == 2 * 8 * 128 * 128 * 2);
  // L out of the SMs: a run of 8 rows a store (one lane of each quad stores a float), from
  // where each of the 16 heads starts, 388 h bytes in: 4 h bytes past a sector boundary, mod
  // 32. Heads 0 and 8 start on one, 13 sectors each (12 runs and a float); the other 14 take
  // 2 sectors a run and 1 for the float, 25 each.
  CHECK(bytes_of(j, "L", "bytes_written") == (2 * 13 + 14 * 25) * 32);
  CHECK(j["launches"][0]["blocks"] == 2 * 8);
  const auto table = run_flashlab("simulate --pass fa3 --n 4096 --d 64 --heads 4");
  REQUIRE(table.status == 0);
  CHECK(contains(table.output, "fa3 mirror: Br "));
  CHECK(contains(table.output, "SRAM per block"));
  for (const auto& [args, message] :
       {std::pair{"simulate --pass fa3 --stages 4",
                  "the fa3 kernel takes 1 to 3 stages at d = 128, not 4"},
        std::pair{"simulate --pass fa3 --d 96", "d = 96 is not supported by the fa3 kernel"},
        std::pair{"simulate --pass fa3 --splits 2", "--splits is not an option of --pass fa3"},
        std::pair{"simulate --pass backward --stages 2",
                  "--stages is not an option of --pass backward"},
        std::pair{"compare --pass fa3", "compare runs the fa3 kernel in its forward comparison"}}) {
    CAPTURE(args);
    const auto run = run_flashlab(std::string(args) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
  }
}

TEST_CASE("simulate --pass decode: splits, pages, ragged lengths and the busy SMs") {
  const auto j = json_of(
      "simulate --pass decode --lengths 0,1,97,4096 --heads 32 --kv-heads 8 --d 128 "
      "--splits 16 --page-size 64 --n-q 4");
  CHECK(j["inputs"]["group"] == 4);
  CHECK(j["inputs"]["splits"] == 16);
  const auto p = flashlab::app::predict(flashlab::app::DecodeRun{.lengths = {0, 1, 97, 4096},
                                                                 .kv_heads = 8,
                                                                 .group = 4,
                                                                 .n_q = 4,
                                                                 .d = 128,
                                                                 .splits = 16,
                                                                 .page_size = 64});
  REQUIRE(p.report);
  CHECK(bytes_of(j, "block table", "bytes_read") == p.report->tensor("block table").read);
  // 4 rows of 4 query heads are 16 packed rows: one row block of the kernel's
  // decode::kMaxRowsPerBlock = 16 (an mma tile's M), which reads K and V once.
  static_assert(flashlab::gpu::decode::kMaxRowsPerBlock == 16);
  CHECK(bytes_of(j, "K", "bytes_read") == 1 * 8 * (1 + 97 + 4096) * 128 * 2);
  CHECK(j["launches"][0]["blocks"] == 4 * 8 * 1 * 16);
  CHECK(j["launches"][0]["busy_sms"] == p.report->launch("split").busy_sms(132));
  // The mirror lays out the kernel's SRAM: its ring of K and V tiles, as kernel_info states it.
  CHECK(p.report->peak_sram == flashlab::gpu::decode::sram_bytes(128));

  // One sequence, one KV head: the split count decides how many SMs work.
  const auto one = json_of("simulate --pass decode --kv-len 32768 --splits 1");
  const auto many = json_of("simulate --pass decode --kv-len 32768 --splits 64");
  CHECK(one["launches"][0]["busy_sms"] == 1);
  CHECK(many["launches"][0]["busy_sms"] == 64);
  CHECK(bytes_of(one, "K", "bytes_read") == bytes_of(many, "K", "bytes_read"));
  // The states grow with the splits, each one whole sectors of its own (written by the split
  // kernel, read by the combine): 64 splits, twice 32 splits'. One split writes none: it ends
  // its rows itself (decode::split_kernel_ends_rows) and no combine runs.
  const auto half = json_of("simulate --pass decode --kv-len 32768 --splits 32");
  CHECK(bytes_of(many, "partial state", "bytes_read") ==
        2 * bytes_of(half, "partial state", "bytes_read"));
  CHECK(bytes_of(many, "partial state", "bytes_written") ==
        2 * bytes_of(half, "partial state", "bytes_written"));
  CHECK(bytes_of(half, "partial state", "bytes_written") > 0);
  CHECK(bytes_of(one, "partial state", "bytes_written") == 0);
  CHECK(bytes_of(one, "partial state", "bytes_read") == 0);
  CHECK(one["launches"].size() == 1);
  CHECK(many["launches"].size() == 2);
}

// The mirror's SRAM from the facts gpu_bridge reads in kernel_info, for every d and dtype the
// kernel takes: the ring of K and V tiles that the kernel asks for at launch.
TEST_CASE("the decode mirror's SRAM per block is the kernel's, for every d and dtype") {
  namespace k = flashlab::gpu::decode;
  for (const flashlab::sim::DType dtype : {flashlab::sim::DType::bf16, flashlab::sim::DType::fp16})
    for (const std::int64_t d : k::kHeadDims) {
      CAPTURE(d);
      const auto f = flashlab::app::decode_kernel_facts(d, dtype, 4, 0);
      REQUIRE(f.facts);
      const auto r = flashlab::sim::count_decode_kernel(
          {.lengths = {4096, 97}, .heads_kv = 8, .group = 4, .d = d}, *f.facts);
      CHECK(r.peak_sram == k::sram_bytes(d));
    }
}

// The queue grid's facts: its persistent blocks on the profile's SMs, the kernel's piece rule
// and merge, and its SRAM as kernel_info states it.
TEST_CASE("simulate --pass decode --grid queue: the queue grid's mirror from kernel_info") {
  namespace k = flashlab::gpu::decode;
  for (const std::int64_t d : k::kHeadDims) {
    CAPTURE(d);
    const auto f =
        flashlab::app::decode_kernel_facts(d, flashlab::sim::DType::bf16, 22, 0, true, 132);
    REQUIRE(f.facts);
    CHECK(f.facts->persistent_blocks == 132 * k::kBlocksPerSm);
    CHECK(f.facts->merge_rows_per_pass == k::kQueuePassRows);
    REQUIRE(bool(f.facts->piece_first_step));
    for (const std::int64_t j : {0, 1, 21, 22})
      CHECK(f.facts->piece_first_step(2048, 22, j) == k::piece_first_tile(2048, 22, j));
    const auto r = flashlab::sim::count_decode_kernel(
        {.lengths = {131072, 97}, .heads_kv = 8, .group = 4, .d = d}, *f.facts);
    CHECK(r.peak_sram == k::queue_sram_bytes(d));
  }
  const auto j = json_of(
      "simulate --pass decode --kv-len 131072 --batch 8 --heads 32 --kv-heads 8 --grid queue");
  CHECK(j["inputs"]["grid"] == "queue");
  CHECK(j["inputs"]["splits"] == k::auto_pieces(131072));  // the queue's own count
  CHECK(j["launches"][0]["name"] == "queue");
  CHECK(j["launches"][0]["blocks"] == 132 * k::kBlocksPerSm);
  const auto splits = json_of("simulate --pass decode --kv-len 131072 --batch 8 --heads 32 "
                              "--kv-heads 8 --splits 22");
  // The same keys and pieces' worth of states: K and V alike, and the states alike in bytes.
  CHECK(bytes_of(j, "K", "bytes_read") == bytes_of(splits, "K", "bytes_read"));
  CHECK(bytes_of(j, "partial state", "bytes_written") ==
        bytes_of(splits, "partial state", "bytes_written"));
}

TEST_CASE("simulate --pass decode --splits 1..64: a row per split count") {
  const auto j = json_of(
      "simulate --pass decode --kv-len 4096 --batch 2 --heads 32 --kv-heads 8 --splits 1..64");
  REQUIRE(j.size() == 7);  // 1, 2, 4, ..., 64
  for (std::size_t k = 0; k < j.size(); ++k) {
    const std::int64_t s = std::int64_t(1) << k, blocks = 2 * 8 * s;
    CAPTURE(s);
    CHECK(j[k]["splits"] == s);
    CHECK(j[k]["blocks"] == blocks);
    CHECK(j[k]["busy_sms"] == std::min<std::int64_t>(blocks, 132));
    // Waves of 132 SMs x the blocks each holds at once (the kernel's kBlocksPerSm, 2).
    const std::int64_t wave = 132 * flashlab::gpu::decode::kBlocksPerSm;
    CHECK(j[k]["waves"] == (blocks + wave - 1) / wave);
    // Out of the SMs, the states' sectors: 4 states a block (GQA 4), each U's 16 whole
    // sectors and one for m and l (a state padded to 136 floats); none with one split, which
    // ends its rows in the split kernel.
    CHECK(j[k]["partial_state_bytes_written"] == (s == 1 ? 0 : blocks * 4 * (16 + 1) * 32));
  }
  const auto text = run_flashlab("simulate --pass decode --splits 1,3");
  REQUIRE(text.status == 0);
  CHECK(contains(text.output, "busy SMs"));
}

TEST_CASE("simulate --pass: each launch's DRAM floor from a cold L2, where the mirror books it") {
  // Decode, 8 caches of 4096 keys, 32 query heads over 8 KV heads, 4 splits, d = 128: the split
  // kernel reads Q (8 x 32 rows of 256 bytes), every key of K and V (8 x 8 x 4096 x 256
  // bytes each) and the 8 lengths (a sector) once; the combine reads the 8 x 32 x 4 states of
  // 136 floats.
  const auto j = json_of(
      "simulate --pass decode --kv-len 4096 --batch 8 --heads 32 --kv-heads 8 --splits 4");
  CHECK(j["launches"][0]["dram_floor"]["read"] == 8 * 32 * 256 + 2 * 8 * 8 * 4096 * 256 + 32);
  CHECK(j["launches"][1]["dram_floor"]["read"] == 8 * 32 * 4 * 136 * 4);
  CHECK(j["launches"][0]["dram_floor"]["written"] == 0);  // within the L2's dirty room
  // The backward at 16 heads, N = 4096, d = 128: the pre-kernel writes the accumulator's zeros
  // (32 MiB) and D (0.25 MiB), 3.86 MiB beyond the H200's 28.39 MiB.
  const auto text = run_flashlab("simulate --pass backward --n 4096 --heads 16 --d 128");
  REQUIRE(text.status == 0);
  CHECK(contains(text.output, "DRAM read  DRAM written"));
  CHECK(contains(text.output, "32.0 MiB       3.9 MiB"));
  CHECK(contains(text.output, "beyond the 28.4 MiB the L2 holds dirty (a floor)"));
  // fa3's mirror books no footprint: no such columns.
  const auto fa3 = run_flashlab("simulate --pass fa3 --n 4096 --d 128");
  REQUIRE(fa3.status == 0);
  CHECK_FALSE(contains(fa3.output, "DRAM written"));
}

TEST_CASE("simulate --pass backward --grid-model: each launch's grid through the H200's L2") {
  // 2 heads, N = 1024, d = 64, causal: everything fits the L2, so each launch's grid reads its
  // floor (every row of these shapes starts on a sector) and writes nothing while it runs.
  const auto j =
      json_of("simulate --pass backward --n 1024 --heads 2 --d 64 --causal --grid-model");
  REQUIRE(j["launches"].size() == 3);
  for (const auto& l : j["launches"]) {
    CAPTURE(l["name"].get<std::string>());
    REQUIRE(l.contains("dram_grid"));
    CHECK(l["dram_grid"]["read"] == l["dram_floor"]["read"]);
    CHECK(l["dram_grid"]["written"] == 0);
  }
  // Nothing written while they run: all each launch writes stays dirty, the pre-kernel's D
  // and the accumulator's zeros, the main kernel's dK and dV and the accumulator's lines its
  // reductions dirtied, the post-kernel's dQ (2 heads x 1024 rows, d = 64).
  const double rows = 2 * 1024, acc = rows * 64 * 4, bf16 = rows * 64 * 2;
  CHECK(j["launches"][0]["dram_grid"]["left_dirty"] == rows * 4 + acc);
  CHECK(j["launches"][1]["dram_grid"]["left_dirty"] == 2 * bf16 + acc);
  CHECK(j["launches"][2]["dram_grid"]["left_dirty"] == bf16);
  // Without the flag, no such figures; in the table, two more columns and what they are.
  CHECK_FALSE(json_of("simulate --pass backward --n 1024 --heads 2 --d 64")["launches"][1].contains(
      "dram_grid"));
  const auto text =
      run_flashlab("simulate --pass backward --n 1024 --heads 2 --d 64 --causal --grid-model");
  REQUIRE(text.status == 0);
  CHECK(contains(text.output, "grid model read"));
  CHECK(contains(text.output, "left dirty"));
  CHECK(contains(text.output, "grid model: each launch's blocks in waves through h200's L2"));
  // At 16 heads, N = 4096, d = 128 the pre-kernel's reads of O and dO push the zeros it wrote
  // out of their sets: it writes more than its floor of 3.9 MiB while it runs (the H200: 14.4).
  const auto busy =
      json_of("simulate --pass backward --n 4096 --heads 16 --d 128 --causal --grid-model");
  CHECK(busy["launches"][0]["dram_grid"]["written"].get<double>() >
        2 * busy["launches"][0]["dram_floor"]["written"].get<double>());
}

TEST_CASE("simulate --pass refuses what the pass does not take, with status 2") {
  const struct {
    const char* args;
    const char* message;
  } refusals[] = {
      {"simulate --pass sideways", "unknown pass 'sideways': --pass takes forward"},
      {"simulate --pass decode --splits 0 --kv-len 9", "--splits"},
      {"simulate --pass decode --splits 1025", "--splits 1025 is more than the decode kernel"},
      {"simulate --pass decode --splits 1..2048", "--splits 2048 is more than"},
      {"simulate --pass decode --lengths 5,-1", "--lengths"},
      {"simulate --pass decode --lengths 5 --kv-len 9", "not both"},
      {"simulate --pass decode --n 4096", "--n is not an option of --pass decode"},
      {"simulate --pass backward --splits 4", "--splits is not an option of --pass backward"},
      {"simulate --pass backward --algo fa2", "--algo is not an option of --pass backward"},
      {"simulate --deterministic", "--deterministic is not an option of --pass forward"},
      {"simulate --pass backward --heads 6 --kv-heads 4", "--kv-heads 4 does not divide"},
      {"simulate --pass backward --d 96", "d = 96 is not supported by the backward kernel"},
      {"simulate --pass decode --dtype fp32", "takes fp16 or bf16 inputs"},
      {"simulate --pass decode --n-q 300", "n_q = 300 is out of range"},
      {"simulate --pass decode --grid sideways", "--grid: sideways not in {splits,queue}"},
      {"simulate --pass backward --grid queue", "--grid is not an option of --pass backward"},
      {"simulate --pass decode --grid-model", "--grid-model is not an option of --pass decode"},
  };
  for (const auto& r : refusals) {
    CAPTURE(r.args);
    const auto run = run_flashlab(std::string(r.args) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, r.message));
  }
}

TEST_CASE("compare --pass backward and decode: the mirror's row and the GPU's") {
  const auto backward =
      run_flashlab("compare --pass backward --n 1024 --d 64 --heads 4 --kv-heads 2 --causal");
  REQUIRE(backward.status == 0);
  CHECK(contains(backward.output, "simulator: backward (Br "));
  CHECK(contains(backward.output, "GPU backward"));
  CHECK(contains(backward.output, "causal = top-left"));
  // The floor from a cold L2 beside the bytes into and out of the SMs.
  CHECK(contains(backward.output, "; DRAM from a cold L2, at least "));
  const auto decode = run_flashlab(
      "compare --pass decode --n 4096 --d 128 --batch 8 --heads 32 --kv-heads 8 --splits 4");
  REQUIRE(decode.status == 0);
  CHECK(contains(decode.output, "simulator: decode (4 splits"));
  CHECK(contains(decode.output, "GPU decode"));
  const auto queue = run_flashlab(
      "compare --pass decode --n 4096 --d 128 --batch 8 --heads 32 --kv-heads 8 --grid queue");
  REQUIRE(queue.status == 0);
  CHECK(contains(queue.output, "simulator: decode (4 pieces on a queue of"));
  CHECK(contains(queue.output, "4 pieces on the queue grid"));
  // --splits 0, its default shown by --help, is the kernel's rule: the same row as without it.
  const auto rule = run_flashlab(
      "compare --pass decode --n 4096 --d 128 --batch 8 --heads 32 "
      "--kv-heads 8 --splits 0");
  REQUIRE(rule.status == 0);
  CHECK(contains(rule.output, "simulator: decode (4 splits"));
  for (const char* bad :
       {"compare --pass decode --deterministic", "compare --pass backward --kernels fa2",
        "compare --splits 4", "compare --pass decode --splits 1025", "compare --pass upward",
        "compare --pass backward --gpu-only decode", "compare --pass decode --repeats 0",
        "compare --pass decode --grid sideways", "compare --pass backward --grid queue",
        "compare --grid queue", "compare --pass backward --dtype fp32",
        "compare --pass decode --d 96"}) {
    CAPTURE(bad);
    const auto run = run_flashlab(std::string(bad) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(!run.output.empty());
  }
}

// Without a device the GPU's row is empty and says why; with the stand-in runner whose
// "device" returns zeros, the row carries the pass's median time, and --no-ncu says why
// there are no measured bytes.
TEST_CASE("compare --pass: the GPU's row runs the pass, or says why it is empty") {
  const auto none = run_flashlab("compare --pass backward --n 256 --d 64 --no-color");
  REQUIRE(none.status == 0);
  const auto gpu_line = none.output.substr(none.output.find("GPU: ") + 5);
  const std::string why = gpu_line.substr(0, gpu_line.find('\n'));
  if (why.find("stand-in") == std::string::npos && why.find("NVIDIA") == std::string::npos &&
      why.find("H200") == std::string::npos)  // no device here: the row says the same
    CHECK(contains(none.output, "not run: " + why.substr(0, 40)));
  for (const char* args :
       {"compare --pass backward --n 256 --n-q 97 --d 64 --heads 4 --kv-heads 2 --batch 2 "
        "--causal --repeats 3 --no-ncu --no-color",
        "compare --pass decode --n 1023 --d 128 --heads 8 --kv-heads 2 --batch 3 --splits 4 "
        "--repeats 3 --no-ncu --no-color"}) {
    CAPTURE(args);
    const auto run = run_command(fmt::format("FLASHLAB_GPU_RUNNER={} {} {}",
                                             FLASHLAB_FAKE_RUNNER_ZEROS, FLASHLAB_BINARY, args));
    REQUIRE(run.status == 0);
    CHECK(contains(run.output, "a stand-in device that returns zeros"));
    // not the GPU the mirrors predict for: the line after the device's says so
    CHECK(contains(run.output, "zeros\nnote: the predictions are for the H200"));
    CHECK(contains(run.output, "1000.0 us (median of 3)"));  // the stand-in's 1 ms
    CHECK(contains(run.output, "not measured (--no-ncu)"));
    CHECK(!contains(run.output, "not run"));
  }
}

TEST_CASE("the mirrors take each kernel's warp stores from kernel_info.hpp") {
  namespace gpu = flashlab::gpu;
  namespace sim = flashlab::sim;
  const auto same = [](const std::optional<sim::WarpStore>& s, const gpu::WarpStorePattern& p) {
    return s && s->bytes_per_thread == p.bytes_per_thread && s->threads == p.threads &&
           s->runs == p.runs;
  };
  const auto b = flashlab::app::backward_kernel_facts(128, sim::DType::bf16, false);
  REQUIRE(b.facts);
  // Not deterministic: v3's main kernel, with v2's pre- and post-kernels.
  CHECK(b.facts->main_kernel == "v3");
  CHECK(same(b.facts->stores.dk_dv, gpu::fa3_backward::kDkDvStore));
  CHECK(same(b.facts->stores.dq_reduction, gpu::fa3_backward::kDqReduction));
  CHECK(b.facts->stores.dq_reduction_passes == gpu::fa3_backward::dq_reduction_passes(128));
  CHECK(same(b.facts->stores.d, gpu::fa2_backward::kDStore));
  CHECK(b.facts->pre_post_rows_per_block == gpu::fa2_backward::kPreprocessRowsPerBlock);
  CHECK(b.facts->pre_post_threads == gpu::fa2_backward::kPreprocessThreads);
  CHECK(same(b.facts->stores.dq, gpu::fa2_backward::dq_store(FLASHLAB_BF16)));
  const auto b64 = flashlab::app::backward_kernel_facts(64, sim::DType::bf16, false);
  REQUIRE(b64.facts);
  CHECK(b64.facts->stores.dq_reduction_passes == gpu::fa3_backward::dq_reduction_passes(64));
  // The warpgroups exchange their partials through SRAM and each adds half of d: one pass,
  // as the H200 counted (16,777,216 reduction sectors at B 1, H 16, N 4096 = B H N d
  // ceil(N / Bc) 4 B / 32 B).
  CHECK(b64.facts->stores.dq_reduction_passes == 1);
  // Deterministic: v2 throughout, its dK, dV and the dQ kernel's dQ as whole rows staged in
  // SRAM, one reduction pass.
  const auto det = flashlab::app::backward_kernel_facts(128, sim::DType::bf16, true);
  REQUIRE(det.facts);
  CHECK(det.facts->main_kernel == "v2");
  CHECK(same(det.facts->stores.dk_dv, gpu::fa2_backward::dk_dv_store(128, FLASHLAB_BF16)));
  CHECK(same(det.facts->stores.dq_kernel,
             gpu::fa2_backward::dq_kernel_store(128, FLASHLAB_BF16)));
  // 16 bytes a lane: an instruction writes two whole rows of 256 bytes, two runs.
  CHECK(det.facts->stores.dq_kernel->bytes_per_thread == 16);
  CHECK(det.facts->stores.dq_kernel->runs == 2);
  CHECK(det.facts->stores.dq_reduction_passes == 1);
  CHECK(det.facts->pre_post_rows_per_block == gpu::fa2_backward::kPreprocessRowsPerBlock);
  const auto dec = flashlab::app::decode_kernel_facts(128, sim::DType::bf16, 6, 0);
  REQUIRE(dec.facts);
  CHECK(same(dec.facts->stores.state_u, gpu::decode::kStateUStore));
  CHECK(same(dec.facts->stores.state_ml, gpu::decode::kStateMlStore));
  CHECK(same(dec.facts->stores.lse, gpu::decode::kCombineLseStore));
  CHECK(dec.facts->combine_rows_per_block == gpu::decode::kCombineRowsPerBlock);
  CHECK(dec.facts->combine_threads == gpu::decode::kCombineThreads);
  CHECK(dec.facts->state_floats == gpu::decode::state_floats(128));
  // Six splits go through the combine; one ends its rows in the split kernel, LSE a run a
  // block (kernel_info's rule and store), unless on the queue grid.
  CHECK_FALSE(dec.facts->split_ends_rows);
  const auto lone = flashlab::app::decode_kernel_facts(128, sim::DType::bf16, 1, 0);
  REQUIRE(lone.facts);
  CHECK(lone.facts->split_ends_rows == gpu::decode::split_kernel_ends_rows(1, false));
  CHECK(lone.facts->split_ends_rows);
  CHECK(same(lone.facts->stores.lone_split_lse, gpu::decode::kLoneSplitLseStore));
  const auto lone_queue =
      flashlab::app::decode_kernel_facts(128, sim::DType::bf16, 1, 0, true, 132);
  REQUIRE(lone_queue.facts);
  CHECK_FALSE(lone_queue.facts->split_ends_rows);
  // The sector the kernels' facts pad to is the one the simulator counts in.
  CHECK(gpu::kSectorBytes == sim::kSectorBytes);
  CHECK(dec.facts->stores.state_header == gpu::decode::kWorkspaceHeaderBytes);
  // The forward kernels: the scalar kernel's 2-byte stores a row each, fa2's fragments.
  const sim::Problem asked{.N = 97, .d = 64, .dtype = sim::DType::bf16};
  const auto scalar = flashlab::app::kernel_mirror("scalar", asked);
  CHECK(same(scalar.problem.o_store, gpu::scalar::config(64, FLASHLAB_BF16).o_store));
  CHECK(scalar.problem.o_store->runs == 32);
  const auto fa2 = flashlab::app::kernel_mirror("fa2", asked);
  CHECK(same(fa2.problem.l_store, gpu::fa2::config(64, FLASHLAB_BF16).lse_store));
  // The lessons' FA2 is the paper's: bytes of data.
  CHECK_FALSE(flashlab::app::fa2_kernel_problem(asked).o_store);
  // Not described (a library's kernel): booked as data.
  CHECK_FALSE(flashlab::app::sim_store(gpu::WarpStorePattern{}));
}

TEST_CASE("the scalar kernel's mirror: no L1 as built, the plain loads' L1 from the carve-out") {
  namespace gpu = flashlab::gpu;
  namespace sim = flashlab::sim;
  using flashlab::app::Index;
  // Its blocks wait for their loads; fa2's cp.async.cg and fa3's TMA are issued ahead.
  CHECK(gpu::scalar::config(128, FLASHLAB_BF16).kv_loads_wait);
  CHECK_FALSE(gpu::fa2::config(128, FLASHLAB_BF16).kv_loads_wait);
  const sim::HardwareProfile& h200 = flashlab::app::target_profile();
  for (Index d : {64, 128}) {
    CAPTURE(d);
    const gpu::KernelConfig c = gpu::scalar::config(d, FLASHLAB_BF16);
    const sim::Problem problem{.N = 1024, .d = d, .dtype = sim::DType::bf16};
    const auto built = flashlab::app::kernel_mirror("scalar", problem);
    const auto plain = flashlab::app::kernel_mirror("scalar", problem, 1, true);
    // Blocks by shared memory (registers allow more: ptxas gives 168 and 96), either way; the
    // L1 beside the carve-out that holds them for the plain loads alone.
    const Index blocks = h200.sm.shared_bytes / (c.sram_bytes + h200.sm.shared_reserved_per_block);
    CHECK(built.blocks_per_sm == blocks);
    CHECK(plain.blocks_per_sm == blocks);
    CHECK(built.l1_bytes == 0);
    CHECK(plain.l1_bytes == sim::l1_beside_shared(h200.sm, int(blocks), c.sram_bytes));
    CHECK(plain.l1_bytes > 0);
    CHECK(flashlab::app::kernel_mirror("fa2", sim::Problem{.N = 1024, .d = d}).l1_bytes == 0);
    // Plain loads are the scalar kernel's build alone: another kernel is refused, saying so.
    const auto fa2_plain = flashlab::app::kernel_mirror("fa2", problem, 1, true);
    CHECK_FALSE(fa2_plain.modelled());
    CHECK(fa2_plain.why_not.find("plain loads") != std::string::npos);
    CHECK(fa2_plain.why_not.find("bench_scalar_block_log") != std::string::npos);
  }
  // One head, N = 16384, d = 128: 256 blocks of 64 rows, 3 per SM, all resident. As built
  // every block's every tile crosses into its SM. With plain loads SMs 0 to 123 hold blocks s
  // and s + 132 (the same head, in step), so 132 SMs read K and V for 256 blocks.
  const double kv_per_block = 2.0 * 16384 * 128 * 2;
  const double q = 16384.0 * 128 * 2;
  const auto built = flashlab::app::predict({.kernel = "scalar", .n = 16384, .d = 128});
  REQUIRE(built.report);
  REQUIRE(built.grid);
  CHECK(built.report->bytes_read() == doctest::Approx(q + 256 * kv_per_block));
  CHECK(built.sm_read() == doctest::Approx(q + 256 * kv_per_block));
  const auto p = flashlab::app::predict(
      {.kernel = "scalar", .n = 16384, .d = 128, .heads = 1, .plain_loads = true});
  REQUIRE(p.report);
  REQUIRE(p.grid);
  CHECK(p.report->bytes_read() == doctest::Approx(q + 256 * kv_per_block));
  CHECK(p.sm_read() == doctest::Approx(q + 132 * kv_per_block));
  // At N = 8192 the 128 blocks have an SM each: nothing shared.
  const auto p8 = flashlab::app::predict(
      {.kernel = "scalar", .n = 8192, .d = 128, .heads = 1, .plain_loads = true});
  REQUIRE(p8.report);
  CHECK(p8.sm_read() == doctest::Approx(double(p8.report->bytes_read())));
}

TEST_CASE("the scalar kernel's grid: its heads catch up, the median of the draws, its own order") {
  namespace gpu = flashlab::gpu;
  namespace sim = flashlab::sim;
  namespace measured = flashlab::app::measured;
  // Its mirror takes the step share measured for it; fa2's none (its copies do not wait).
  const sim::Problem asked{.N = 4096, .d = 128, .dtype = sim::DType::bf16};
  const auto scalar = flashlab::app::kernel_mirror("scalar", asked);
  CHECK(scalar.l2_step_share == measured::kScalarL2StepShare.l2_step_share);
  CHECK(flashlab::app::kernel_mirror("fa2", asked).l2_step_share == 1);
  // Under the mask it runs tile x at block x, fa2 the longest first: the kernels' own facts.
  CHECK_FALSE(gpu::scalar::config(128, FLASHLAB_BF16).causal_longest_first);
  CHECK(gpu::fa2::config(128, FLASHLAB_BF16).causal_longest_first);
  CHECK_FALSE(scalar.causal_longest_first);
  CHECK(flashlab::app::kernel_mirror("fa2", asked).causal_longest_first);

  // 16 heads at N = 4096, as built: the grid runs catch_up once, and every load crosses into
  // the SMs whatever the heads' paces, so no draws.
  const auto built = flashlab::app::predict({.kernel = "scalar", .n = 4096, .d = 128, .heads = 16});
  REQUIRE(built.grid);
  REQUIRE(built.report);
  CHECK(built.grid->problem.schedule == sim::GridSchedule::catch_up);
  CHECK(built.grid->problem.l1_bytes == 0);
  CHECK(built.grid->l1_hit_bytes == 0);
  CHECK(built.sm_read() == double(built.report->bytes_read()) * 16);
  CHECK(built.assumption.find("draws") == std::string::npos);
  // With plain loads the note gives the range of the draws, which holds the prediction.
  const auto p = flashlab::app::predict(
      {.kernel = "scalar", .n = 4096, .d = 128, .heads = 16, .plain_loads = true});
  REQUIRE(p.grid);
  CHECK(p.grid->problem.schedule == sim::GridSchedule::catch_up);
  CHECK(p.grid->problem.l2_step_share == measured::kScalarL2StepShare.l2_step_share);
  CHECK(p.grid->problem.block_time_spread == flashlab::app::target_profile().block_time_spread);
  CHECK_FALSE(p.grid->problem.causal_longest_first);
  CHECK(p.assumption.find("median of 5 draws of the heads' paces") != std::string::npos);
  const auto from = p.assumption.find("range from ");
  REQUIRE(from != std::string::npos);
  double low = 0, high = 0;
  REQUIRE(std::sscanf(p.assumption.c_str() + from, "range from %lf to %lf GB", &low, &high) == 2);
  CHECK(low <= high);
  CHECK(p.sm_read() / 1e9 >= low * (1 - 1e-3));
  CHECK(p.sm_read() / 1e9 <= high * (1 + 1e-3));
  // The draw taken is one of the five the grid runs with the seeds 0 to 4, the middle one.
  std::vector<double> draws;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    sim::GridProblem g = p.grid->problem;
    g.seed = seed;
    draws.push_back(double(sim::run_grid(g).l1_hit_bytes));
  }
  std::ranges::sort(draws);
  CHECK(double(p.grid->l1_hit_bytes) == draws[2]);
  // fa2 keeps its schedule (older first), its draws none.
  const auto f = flashlab::app::predict({.kernel = "fa2", .n = 4096, .d = 128, .heads = 16});
  REQUIRE(f.grid);
  CHECK(f.grid->problem.schedule == sim::GridSchedule::older_first);
  CHECK(f.assumption.find("draws") == std::string::npos);
}

TEST_CASE("the naive kernel's mirror: launches measured cold, streams through the whole L2") {
  namespace sim = flashlab::sim;
  const sim::HardwareProfile& h200 = flashlab::app::target_profile();
  const double MiB = 1 << 20;
  for (flashlab::app::Index heads : {1, 16}) {
    CAPTURE(heads);
    const auto m = flashlab::app::kernel_mirror(
        "naive", sim::Problem{.N = 1024, .d = 128, .l2_bytes = h200.l2_bytes}, heads);
    CHECK(m.problem.l2_emptied_between_kernels);
    CHECK(m.problem.l2_bytes == h200.l2_bytes / heads);
    CHECK(m.problem.l2_replacement == h200.l2_replacement);  // the profile's L2, as the grid's
    CHECK(m.problem.l2_home_partitions == h200.l2_partitions);
    // What the H200 holds dirty (28.4 MiB, measured), shared as the room is.
    CHECK(m.problem.l2_dirty_cap == sim::l2_dirty_room(h200) / heads);
    CHECK(double(sim::l2_dirty_room(h200)) / MiB == doctest::Approx(28.39).epsilon(1e-3));
    // The softmax's resident blocks, from the kernel table and the profile, scaled as the
    // room is: 132 SMs x 8 blocks of 256 threads, 66 at 16 heads.
    const flashlab::gpu::KernelConfig c = flashlab::gpu::naive::config(FLASHLAB_BF16);
    const flashlab::app::Index resident =
        h200.sm_count * sim::blocks_by_shared_and_threads(h200.sm, c.threads, c.sram_bytes);
    CHECK(resident == 1056);
    CHECK(m.problem.softmax_rows_in_flight * heads == resident);
  }
  // A cap that cannot bind is none: an L2 of 16 MiB holds less than 28.4 MiB dirty anyway.
  CHECK(flashlab::app::kernel_mirror(
            "naive", sim::Problem{.N = 1024, .d = 128, .l2_bytes = sim::Bytes{16} << 20})
            .problem.l2_dirty_cap == 0);
  // N = 1024, one head: every kernel reads its operands from DRAM once (Q and K; S; P and
  // V) and nothing it writes leaves the L2 while it runs.
  const auto p = flashlab::app::predict({.kernel = "naive", .n = 1024, .d = 128, .heads = 1});
  const double N = 1024, d = 128;
  CHECK(p.dram_read() == doctest::Approx(3 * N * d * 2 + N * N * 4 + N * N * 2));
  CHECK(p.dram_written() == 0);
  // N = 2048, one head: S (16 MiB) and P (8 MiB), each with the half homed across twice, fit
  // the whole L2 and its dirty cap, so almost nothing is written while the launches run (the
  // H200: 0 to 0.1 MiB; a share of one partition held both sides' traffic and wrote 2 MiB).
  const auto p2 = flashlab::app::predict({.kernel = "naive", .n = 2048, .d = 128, .heads = 1});
  CHECK(p2.dram_written() < 0.1 * MiB);
  // N = 4096, one head: the GEMM writes 64 MiB of S and the L2 keeps at most the cap dirty,
  // so at least 64 MiB less the cap reaches DRAM while it runs (the H200: 38.2 MiB, 25.8
  // left dirty); the hashed sets' overfull sets add a little.
  const auto m4 = flashlab::app::kernel_mirror(
      "naive", sim::Problem{.N = 4096, .d = 128, .l2_bytes = h200.l2_bytes}, 1);
  REQUIRE(m4.algorithm);
  const double s_written =
      double(sim::count(*m4.algorithm, m4.problem).tensor("S").dram_written) / MiB;
  const double floor_s = 64 - double(sim::l2_dirty_room(h200)) / MiB;
  CHECK(s_written >= floor_s);
  CHECK(s_written <= floor_s + 2);
  // The mirror through an L2 of the given policy, as `predict` runs it with the profile's
  // (home copies only in hashed sets, which know each line's home), its softmax's blocks
  // staggered as built or in step.
  const auto read_through = [&](sim::L2Replacement policy, flashlab::app::Index n_,
                                flashlab::app::Index heads, bool staggered = true) {
    auto mirror = flashlab::app::kernel_mirror(
        "naive", sim::Problem{.N = n_, .d = 128, .l2_bytes = h200.l2_bytes}, heads);
    REQUIRE(mirror.algorithm);
    CHECK(mirror.problem.softmax_staggered);
    mirror.problem.softmax_staggered = staggered;
    flashlab::app::set_naive_l2_policy(mirror.problem, policy);
    return double(sim::count(*mirror.algorithm, mirror.problem).dram_read()) * double(heads);
  };
  // N = 4096, the figure lesson 5 quotes beside the H200's (measured_h200.hpp): the 1056 rows
  // in flight (16 KiB of S each) and their P fill 24.8 of the 60 MiB, so through an LRU every
  // later pass hits and the reads stay compulsory: Q, K, V, then S (fp32) and P (bf16) once
  // each. The profile's hashed sets lose a few lines of sets that overfill (0.02%).
  const double compulsory4 = 3 * 4096.0 * d * 2 + 6 * 4096.0 * 4096;
  CHECK(read_through(sim::L2Replacement::lru, 4096, 1) == doctest::Approx(compulsory4));
  const auto p4 = flashlab::app::predict({.kernel = "naive", .n = 4096, .d = 128, .heads = 1});
  CHECK(p4.dram_read() >= compulsory4);
  CHECK(p4.dram_read() == doctest::Approx(compulsory4).epsilon(1e-3));
  // Where the rows in flight outgrow the room (1056 rows of 64 KiB of S, 66 MiB, in 60 MiB:
  // N = 16384), an LRU of that room with the rows in step loses the softmax's second and
  // third passes, all but those of the last group, 544 rows (16384 = 15 x 1056 + 544, 34
  // MiB), which fits; with 16 heads, 66 rows in 3.75 MiB, all but the last group's 16 rows
  // (16384 = 248 x 66 + 16) for each head. Only the DRAM side moves.
  const double n = 16384, S = n * n * 4, row = n * 4;
  const double compulsory = 3 * n * d * 2 + S + n * n * 2;
  const double lru_one = compulsory + 2 * S - 2 * 544 * row;
  const double lru_sixteen = compulsory + 2 * S - 2 * 16 * row;
  CHECK(read_through(sim::L2Replacement::lru, 16384, 1, false) == doctest::Approx(lru_one));
  CHECK(read_through(sim::L2Replacement::lru, 16384, 16, false) ==
        doctest::Approx(16 * lru_sixteen));
  // Staggered, as the blocks run, the rows still in flight at the end thin out as their slots
  // finish, so more of the last rows fit; but no more than the last 1056 (one row a slot).
  const double lru_staggered = read_through(sim::L2Replacement::lru, 16384, 1);
  CHECK(lru_staggered <= lru_one);
  CHECK(lru_staggered >= compulsory + 2 * S - 2 * 1056 * row);
  // `compare` predicts through the profile's hashed sets, whose step is spread over the room
  // (docs/IO-LEVELS.md). At one head both keep the last, ragged group (544 rows of 1056), and
  // the two read within 1%; at 16 heads, whose last group is 16 rows, a part of the later
  // passes that LRU loses still hits in the sets, so the reads lie between compulsory and
  // LRU's.
  const auto big = flashlab::app::predict({.kernel = "naive", .n = 16384, .d = 128, .heads = 1});
  CHECK(big.dram_read() > compulsory + 0.25 * 2 * S);
  CHECK(big.dram_read() == doctest::Approx(lru_one).epsilon(1e-2));
  CHECK(big.dram_read() == doctest::Approx(read_through(h200.l2_replacement, 16384, 1)));
  const auto big16 = flashlab::app::predict({.kernel = "naive", .n = 16384, .d = 128, .heads = 16});
  CHECK(big16.dram_read() > 16 * (compulsory + 0.25 * 2 * S));
  CHECK(big16.dram_read() < 16 * lru_sixteen);

  // Into the SMs 16 times one head's, but for O = P V: cuBLAS tiles its rows by 128 at one
  // head and by 160 in the calls of 16 heads (measured_h200.hpp), so V is read
  // ceil(16384 / 128) = 128 times a head at one head and ceil(16384 / 160) = 103 times at 16.
  const auto* one = flashlab::app::cublas_tiles(16384, 128, 1, sim::DType::bf16).tiles;
  const auto* sixteen = flashlab::app::cublas_tiles(16384, 128, 16, sim::DType::bf16).tiles;
  REQUIRE(one != nullptr);
  REQUIRE(sixteen != nullptr);
  const double v_reads_less = double(flashlab::cpu::tile_count(16384, one->output.m) -
                                     flashlab::cpu::tile_count(16384, sixteen->output.m));
  CHECK(v_reads_less == 25);
  CHECK(big16.sm_read() == doctest::Approx(16 * (big.sm_read() - v_reads_less * n * d * 2)));
}

TEST_CASE("the naive kernel's mirror: LRU where the rows in flight hold twice the room, and "
          "there the policies agree") {
  namespace sim = flashlab::sim;
  using flashlab::app::Index;
  const sim::HardwareProfile& h200 = flashlab::app::target_profile();
  REQUIRE(h200.l2_replacement != sim::L2Replacement::lru);
  // An L2 of 4 MiB for one head, 1056 rows of S (fp32, 4N bytes) in flight, so twice the
  // room from N = 2 x 4 MiB / (1056 x 4) = 1986.
  const sim::Bytes l2 = sim::Bytes{4} << 20;
  const auto mirror_at = [&](Index n) {
    return flashlab::app::kernel_mirror("naive", sim::Problem{.N = n, .d = 64, .l2_bytes = l2});
  };
  // The mirror under a replacement alone, each line homed in its one partition.
  const auto read_through = [&](Index n, sim::L2Replacement policy) {
    auto m = mirror_at(n);
    REQUIRE(m.algorithm);
    m.problem.l2_replacement = policy;
    m.problem.l2_home_partitions = 1;
    return double(sim::count(*m.algorithm, m.problem).dram_read());
  };
  for (Index n : {Index(1000), Index(1985), Index(1986), Index(3001)}) {
    CAPTURE(n);
    const auto m = mirror_at(n);
    const bool past = m.problem.softmax_rows_in_flight * n * 4 >=
                      flashlab::app::kNaiveLruFromRoomMultiple * m.problem.l2_bytes;
    CHECK(past == (n >= 1986));
    CHECK(m.problem.l2_replacement == (past ? sim::L2Replacement::lru : h200.l2_replacement));
  }
  // Past the switch the two policies read the same from DRAM within 0.5%; below it, where
  // the rows fit the room about once, they differ (the sets' spread step).
  // With the profile's home copies as well (as the mirror runs the sets below the switch)
  // within 1.5%: they lose a few rows of the tail that LRU still keeps. (N = 3001 ends in a
  // ragged group of rows, 4224 in four whole ones of 1056.)
  for (Index n : {Index(3001), Index(4224)}) {
    CAPTURE(n);
    const double lru = read_through(n, sim::L2Replacement::lru);
    CHECK(read_through(n, h200.l2_replacement) == doctest::Approx(lru).epsilon(5e-3));
    auto m = mirror_at(n);
    flashlab::app::set_naive_l2_policy(m.problem, h200.l2_replacement);
    CHECK(double(sim::count(*m.algorithm, m.problem).dram_read()) ==
          doctest::Approx(lru).epsilon(1.5e-2));
  }
  const double lru_at_fit = read_through(1200, sim::L2Replacement::lru);
  CHECK(std::abs(read_through(1200, h200.l2_replacement) / lru_at_fit - 1) > 0.01);
}

TEST_CASE("the naive kernel's mirror takes cuBLAS's tiles of the nearest shape read, and says so") {
  namespace sim = flashlab::sim;
  namespace measured = flashlab::app::measured;
  using flashlab::app::cublas_tiles;
  using flashlab::app::Index;
  const auto entry = [](Index n, Index d, Index heads) -> const measured::CublasTiles* {
    for (const auto& t : measured::kCublasTiles)
      if (t.n == n && t.d == d && t.heads == heads) return &t;
    return nullptr;
  };
  // Every entry is found as itself, exactly, and its prediction assumes nothing.
  for (const auto& t : measured::kCublasTiles) {
    CAPTURE(t.n);
    CAPTURE(t.heads);
    const auto found = cublas_tiles(t.n, t.d, t.heads, sim::DType::bf16);
    CHECK(found.tiles == &t);
    CHECK(found.exact);
    CHECK(found.assumption().empty());
  }
  // Between two Ns read, the nearer by ratio: 5000 is 4096 x 1.22 and 6144 / 1.23.
  REQUIRE(entry(4096, 128, 1) != nullptr);
  REQUIRE(entry(6144, 128, 1) != nullptr);
  REQUIRE(entry(5000, 128, 1) == nullptr);
  auto found = cublas_tiles(5000, 128, 1, sim::DType::bf16);
  CHECK(found.tiles == entry(4096, 128, 1));
  CHECK_FALSE(found.exact);
  CHECK(found.assumption() == "cuBLAS's tiles assumed from N = 4096, 1 head (this shape's not read)");
  CHECK(cublas_tiles(5200, 128, 1, sim::DType::bf16).tiles == entry(6144, 128, 1));
  // Heads count as N does: 12 heads at N = 4096 take the 16 heads' tiles (12 is 8 x 1.5 and
  // 16 / 1.33), and 12 heads at N = 5000 those of N = 4096, 16 heads too (0.29 + 0.42 powers
  // of two, against 0.30 + 0.42 for N = 6144).
  REQUIRE(entry(4096, 128, 16) != nullptr);
  REQUIRE(entry(4096, 128, 12) == nullptr);
  found = cublas_tiles(4096, 128, 12, sim::DType::bf16);
  CHECK(found.tiles == entry(4096, 128, 16));
  CHECK(found.assumption() == "cuBLAS's tiles assumed from N = 4096, 16 heads (this shape's not read)");
  CHECK(cublas_tiles(5000, 128, 12, sim::DType::bf16).tiles == entry(4096, 128, 16));
  // The sum of both distances: 4 heads at N = 16384 take N = 8192's 4 heads (one power of
  // two away) before N = 16384's 1 or 16 heads (two powers of two); 2 heads at N = 4096,
  // as far from 1 head as from 4, take the table's first of the two (1 head).
  REQUIRE(entry(8192, 128, 4) != nullptr);
  REQUIRE(entry(16384, 128, 4) == nullptr);
  CHECK(cublas_tiles(16384, 128, 4, sim::DType::bf16).tiles == entry(8192, 128, 4));
  REQUIRE(entry(4096, 128, 4) != nullptr);
  CHECK(cublas_tiles(4096, 128, 2, sim::DType::bf16).tiles == entry(4096, 128, 1));
  // Past the table's ends, its last entries; fp16 and fp32 were never read.
  CHECK(cublas_tiles(65536, 128, 1, sim::DType::bf16).tiles == entry(32768, 128, 1));
  CHECK(cublas_tiles(4096, 128, 1, sim::DType::fp16).tiles == nullptr);

  // compare's prediction carries the assumption; where no table entry has the dtype, it says
  // that each operand is read once.
  const auto p = flashlab::app::predict({.kernel = "naive", .n = 5000, .d = 128, .heads = 1});
  CHECK(p.assumption == "cuBLAS's tiles assumed from N = 4096, 1 head (this shape's not read)");
  const auto fp16 =
      flashlab::app::predict({.kernel = "naive", .n = 5000, .d = 128, .heads = 1, .dtype = "fp16"});
  CHECK(fp16.assumption.find("each operand read once") != std::string::npos);
  const auto exact = flashlab::app::predict({.kernel = "naive", .n = 4096, .d = 128, .heads = 1});
  CHECK(exact.assumption.empty());
  const auto table =
      run_flashlab("compare --kernels naive --n 2600 --d 128 --no-ncu");  // nearer 3072
  CHECK(table.output.find("cuBLAS's tiles assumed from N = 3072, 1 head") != std::string::npos);
}
