// `flashlab simulate --pass` and `flashlab compare --pass`: the GPU backward's and decode's
// mirrors on the command line, their figures against the mirrors called directly with the
// kernels' facts from gpu_bridge, and every refusal a line and exit status 2.
#include "run_flashlab.hpp"

#include "gpu_bridge/pass_kernels.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

using flashlab::test::contains;
using flashlab::test::kUsageError;
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
  // 4 rows of 4 query heads are 16 packed rows: two row blocks of the kernel's
  // decode::kMaxRowsPerBlock = 8, each of which reads K and V.
  CHECK(bytes_of(j, "K", "bytes_read") == 2 * 8 * (1 + 97 + 4096) * 128 * 2);
  CHECK(j["launches"][0]["blocks"] == 4 * 8 * 2 * 16);
  CHECK(j["launches"][0]["busy_sms"] == p.report->launch("split").busy_sms(132));

  // One sequence, one KV head: the split count decides how many SMs work.
  const auto one = json_of("simulate --pass decode --kv-len 32768 --splits 1");
  const auto many = json_of("simulate --pass decode --kv-len 32768 --splits 64");
  CHECK(one["launches"][0]["busy_sms"] == 1);
  CHECK(many["launches"][0]["busy_sms"] == 64);
  CHECK(bytes_of(one, "K", "bytes_read") == bytes_of(many, "K", "bytes_read"));
  CHECK(bytes_of(many, "partial state", "bytes_written") ==
        64 * bytes_of(one, "partial state", "bytes_written"));
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
    CHECK(j[k]["waves"] == (blocks + 131) / 132);
    CHECK(j[k]["partial_state_bytes_written"] == blocks * 4 * (128 + 2) * 4);
  }
  const auto text = run_flashlab("simulate --pass decode --splits 1,3");
  REQUIRE(text.status == 0);
  CHECK(contains(text.output, "busy SMs"));
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
  const auto decode = run_flashlab(
      "compare --pass decode --n 4096 --d 128 --batch 8 --heads 32 --kv-heads 8 --splits 4");
  REQUIRE(decode.status == 0);
  CHECK(contains(decode.output, "simulator: decode (4 splits"));
  CHECK(contains(decode.output, "GPU decode"));
  for (const char* bad :
       {"compare --pass decode --deterministic", "compare --pass backward --kernels fa2",
        "compare --splits 4", "compare --pass decode --splits 0", "compare --pass upward"}) {
    CAPTURE(bad);
    const auto run = run_flashlab(std::string(bad) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(!run.output.empty());
  }
}
