// The GPU steps of lessons 4, 6, 9 and 10 and the bridge under them, on a machine without a GPU:
// each step says plainly what it would show; the closed forms they print; the shuffled block
// table of the paged cache; the runner's refusals (another plugin version, bad shapes).
#include "run_flashlab.hpp"

#include "06-backward/gpu_backward.hpp"
#include "09-conditional-rescaling/gpu_rescale.hpp"
#include "10-decode/gpu_decode.hpp"
#include "gpu_bridge/block_table.hpp"
#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/runner_abi.h"
#include "random_inputs.hpp"
#include "traces/tile_trace.hpp"
#include "flashlab/flashlab.h"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/profiles.hpp"

#include "flashlab/gpu/kernel_info.hpp"

#include <doctest/doctest.h>
#include <fmt/core.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace flashlab::test {

namespace {

// The lesson's output, or nothing when a GPU is present (the steps then measure instead).
std::string lesson_without_gpu(int number) {
  if (app::gpu_status().available) return "";
  const Run run = run_flashlab(fmt::format("lesson {} --no-color", number));
  REQUIRE(run.status == 0);
  return run.output;
}

// The lines of text that start with prefix.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// The tab-separated cells of a line.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, '\t');) out.push_back(cell);
  return out;
}

// Lesson 9's GPU-step rows of one kind of scores: the CPU reference's, then the GPU's if any.
std::vector<std::vector<std::string>> rescale_rows(const std::string& out,
                                                   const std::string& scores) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : lines_starting(out, scores + "\t"))
    if (const auto c = cells(line); c.size() == 8 && (c[1] == "CPU reference" || c[1] == "GPU fa3"))
      rows.push_back(c);
  return rows;
}

}  // namespace

TEST_CASE("lesson 9's CPU column: fa3's tiles, and a rescale wherever a row's max grows") {
  // Counted here from the full score matrix: a row's tile is `first` once, and the
  // standard algorithm rescales (rescaled + skipped) when the tile's max beats every
  // earlier score of the row. N_q, N_k awkward; Bc from the kernel table.
  constexpr cpu::Index Bc = gpu::fa3::kBc;
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  for (const auto& [n_q, n_k] :
       {std::pair<cpu::Index, cpu::Index>{97, 1023}, {1, 17}, {113, 3 * Bc}}) {
    CAPTURE(n_q);
    CAPTURE(n_k);
    app::RescaleCase c{"random", app::random_inputs({.N = n_q, .d = 64, .seed = seed}).Q,
                       app::random_inputs({.N = n_k, .d = 64, .seed = seed + 1}).K,
                       app::random_inputs({.N = n_k, .d = 64, .seed = seed + 2}).V};
    c.K *= 3.0f;  // scores of std ~ 3: bases move, growths are skipped
    const cpu::RescaleCounts n = app::reference_rescale_counts(c);
    const cpu::Index Tc = (n_k + Bc - 1) / Bc;
    CHECK(n.first == n_q);
    CHECK(n.rescaled + n.skipped + n.kept == n_q * (Tc - 1));
    // S as the reference computes it from bf16 inputs, in fp32 (the accumulator of bf16).
    const cpu::Matrix<float> S = c.Q.cast<cpu::bf16>().cast<float>() *
                                 c.K.cast<cpu::bf16>().cast<float>().transpose() / std::sqrt(64.0f);
    cpu::Index grew = 0;
    for (cpu::Index i = 0; i < n_q; ++i) {
      float running = -std::numeric_limits<float>::infinity();
      for (cpu::Index k0 = 0; k0 < n_k; k0 += Bc) {
        const float tile_max = S.row(i).segment(k0, std::min(Bc, n_k - k0)).maxCoeff();
        grew += k0 > 0 && tile_max > running;
        running = std::max(running, tile_max);
      }
    }
    // A growth within rounding of the running max may be called either way: at most 1%.
    CHECK(std::abs(n.rescaled + n.skipped - grew) <= std::max<cpu::Index>(2, grew / 100));
  }
}

TEST_CASE("lesson 9 without a GPU says why its GPU step is skipped and prints the CPU column") {
  const std::string out = lesson_without_gpu(9);
  if (out.empty()) {
    MESSAGE("a GPU is present: lesson 9's GPU step counts on it instead");
    return;
  }
  CHECK(contains(out, "On a GPU: fa3's conditional rescales beside the reference's"));
  CHECK(contains(out, "No GPU here: "));
  CHECK(contains(out, "Run `flashlab lesson 9` on a machine with an NVIDIA Hopper GPU"));
  // Lesson 9's inputs have d = 64: fa3's tiles there.
  CHECK(contains(out, fmt::format("fa3's tiles (Br = {}, Bc = {})", gpu::fa3::br(64), gpu::fa3::kBc)));
  // The lesson's N = 1024 rows over ceil(1024 / Bc) KV tiles, CPU rows only.
  const cpu::Index N = 1024, Tc = (N + gpu::fa3::kBc - 1) / gpu::fa3::kBc;
  for (const char* scores : {"random", "growing along N"}) {
    CAPTURE(scores);
    const auto rows = rescale_rows(out, scores);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0][1] == "CPU reference");
    CHECK(std::stoll(rows[0][2]) == N);
    CHECK(std::stoll(rows[0][3]) + std::stoll(rows[0][4]) + std::stoll(rows[0][5]) == N * (Tc - 1));
  }
  // Growing scores make the max outgrow the base by more than tau: some rescales remain.
  CHECK(std::stoll(rescale_rows(out, "growing along N")[0][3]) > 0);
}

TEST_CASE("lesson 6 without a GPU says what its GPU step would show and how to run it") {
  const std::string out = lesson_without_gpu(6);
  if (out.empty()) {
    MESSAGE("a GPU is present: lesson 6's GPU step measures instead (bench/gpu/run_device.sh)");
    return;
  }
  CHECK(contains(out, "No GPU here: "));
  CHECK(contains(out, "errors of dQ, dK and dV against the fp64 naive backward"));
  CHECK(contains(out, "the 3x rule of ANCHORS.md"));
  CHECK(contains(out, "whether 50 deterministic runs are bitwise equal"));
  CHECK(contains(out, "Run `flashlab lesson 6` on a machine with an NVIDIA GPU"));
  CHECK(contains(out, "Measured bytes: measuring them needs a GPU and Nsight Compute (ncu)."));
  // P of 16 heads at N = 4096 in bf16: 16 * 4096^2 * 2 bytes = 512 MiB.
  CHECK(contains(out, "P of all 16 heads is 512.0 MiB"));
}

TEST_CASE("lesson 10 without a GPU says what its split-KV step would show and how to run it") {
  const std::string out = lesson_without_gpu(10);
  if (out.empty()) {
    MESSAGE("a GPU is present: lesson 10's GPU step measures instead (bench/gpu/run_device.sh)");
    return;
  }
  CHECK(contains(out, "On a GPU: split-KV decode"));
  CHECK(contains(out, "runs flashlab's split-KV decode kernel on ANCHORS.md's decode"));
  // K and V of B = 8 sequences, 8 KV heads, 32768 keys, d = 128, bf16: 2^30 bytes.
  CHECK(contains(out, "1.0 GiB of K and V a step"));
  CHECK(contains(out, "num_splits = 1, 2, 4, ..., 64 and the automatic choice"));
  CHECK(contains(out, "pages of 16, 64 and 256 keys through a shuffled"));
  CHECK(contains(out, "Run `flashlab lesson 10` on a machine with an NVIDIA GPU"));
}

TEST_CASE("lesson 4 without a GPU says what timing with and without the mask would show") {
  const std::string out = lesson_without_gpu(4);
  if (out.empty()) {
    MESSAGE("a GPU is present: lesson 4's GPU step measures instead (bench/gpu/run_device.sh)");
    return;
  }
  // fa2 at N = 4096: one block per query tile of the kernel table's Br; the places are its
  // blocks per SM on every SM of the H200 profile; causal leaves (T + 1) / 2T of the rows.
  const int br = flashlab::gpu::fa2::kBr, tiles = (4096 + br - 1) / br;
  const int places = flashlab::gpu::fa2::kBlocksPerSm * sim::find_profile("h200").sm_count;
  CHECK(contains(out, "On a GPU: half the work, and the time"));
  CHECK(contains(out, fmt::format("query tile of Br = {} rows ({} a head)", br, tiles)));
  CHECK(contains(out, fmt::format("{:.2f} of the work", double(tiles + 1) / (2.0 * tiles))));
  CHECK(contains(out,
                 fmt::format("With one head all {} blocks run at once ({} places", tiles, places)));
  CHECK(contains(out, "for 1 and 16 heads"));
}

TEST_CASE("the backward's bytes in closed form, counted by hand for a small shape") {
  // Hq = 2, Hkv = 1, N_q = 64, N_k = 3 Bc - 1 (the kernel table's Bc), d = 64, bf16:
  // Tc = 3 KV tiles, the last one ragged.
  constexpr int Bc = flashlab::gpu::fa3_backward::kBc;
  const app::BackwardShape s{.heads_q = 2, .heads_kv = 1, .n_q = 64, .n_k = 3 * Bc - 1, .d = 64};
  const auto b = app::recompute_bytes(s, 2);
  const double q_rows = 2 * 64, keys = 3 * Bc - 1, d = 64, tiles = 3;
  const double preprocess_in = 2 * 2 * q_rows * d, preprocess_out = 4 * q_rows + 4 * q_rows * d;
  const double kv = 2 * 2 * keys * d;                            // K and V once, dK and dV once
  const double per_tile = tiles * q_rows * (2 * 2 * d + 2 * 4);  // Q, dO, L, D per KV tile
  const double atomics = 4 * tiles * q_rows * d;
  const double convert_in = 4 * q_rows * d, convert_out = 2 * q_rows * d;
  CHECK(b.read == preprocess_in + kv + per_tile + convert_in);
  CHECK(b.written == preprocess_out + kv + atomics + convert_out);
  // Q, O, dO (3), K, V (2) in; dQ (1), dK, dV (2) out; L in.
  CHECK(app::compulsory_bytes(s, 2) == 2 * d * (4 * q_rows + 4 * keys) + 4 * q_rows);
  CHECK(app::stored_p_bytes(s, 2) == 2 * 2 * q_rows * keys);
}

TEST_CASE("decode's bytes: K and V of the valid keys, and the partial states") {
  // Lengths 0, 1 and 17: 18 keys, each a K and a V row of d = 64 per KV head (2), bf16.
  CHECK(app::kv_bytes(2, 64, {0, 1, 17}, 2) == 2.0 * 2 * 64 * 2 * 18);
  // (d + 2) fp32 per query row and split padded to whole sectors (72 floats at d = 64),
  // written then read: B = 2, 4 heads, N_q = 1, 3 splits.
  CHECK(app::state_bytes(2, 4, 1, 64, 3) == 2.0 * 4 * 72 * 2 * 4 * 3);
}

TEST_CASE("the shuffled block table uses every page once and covers every sequence") {
  for (const int64_t page_size : {16, 64, 256}) {
    CAPTURE(page_size);
    const int64_t batch = 3, max_seq_len = 1000;
    const auto t = app::shuffled_block_table(batch, max_seq_len, page_size, 7);
    CHECK(t.pages_per_seq == (max_seq_len + page_size - 1) / page_size);
    CHECK(t.num_pages == batch * t.pages_per_seq);
    CHECK(t.capacity() >= max_seq_len);
    CHECK(t.capacity() - max_seq_len < page_size);
    std::vector<int32_t> sorted = t.table;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int32_t> every(sorted.size());
    std::iota(every.begin(), every.end(), 0);
    CHECK(sorted == every);
    CHECK(t.table != every);  // shuffled: some page is not where the identity would put it
    CHECK(app::shuffled_block_table(batch, max_seq_len, page_size, 7).table == t.table);
    CHECK(app::shuffled_block_table(batch, max_seq_len, page_size, 8).table != t.table);
  }
}

TEST_CASE("to_pages puts key j of each sequence where the block table says") {
  const int64_t batch = 2, heads = 3, max_seq_len = 37, d = 4, page_size = 16;
  const auto t = app::shuffled_block_table(batch, max_seq_len, page_size, 11);
  std::vector<float> cache(std::size_t(batch * heads * max_seq_len * d));
  std::iota(cache.begin(), cache.end(), 1.0f);  // every element distinct and non-zero
  const auto paged = app::to_pages(cache, batch, heads, max_seq_len, d, t);
  REQUIRE(paged.size() == std::size_t(t.num_pages * heads * page_size * d));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < t.capacity(); ++j)
        for (int64_t c = 0; c < d; ++c) {
          const int64_t page = t.table[std::size_t(b * t.pages_per_seq + j / page_size)];
          const float got =
              paged[std::size_t(((page * heads + h) * page_size + j % page_size) * d + c)];
          const float want =
              j < max_seq_len ? cache[std::size_t(((b * heads + h) * max_seq_len + j) * d + c)] : 0;
          CHECK(got == want);
        }
}

TEST_CASE("a block table refuses what it cannot build, saying what would be right") {
  CHECK_THROWS_WITH_AS(app::shuffled_block_table(2, 100, 48, 0),
                       doctest::Contains("page_size = 48 is not a power of two"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(app::shuffled_block_table(0, 100, 16, 0),
                       doctest::Contains("batch >= 1 and max_seq_len >= 1"), std::invalid_argument);
  CHECK_THROWS_AS(app::shuffled_block_table(1 << 20, int64_t(1) << 40, 16, 0),
                  std::invalid_argument);
}

TEST_CASE("the GPU backward and decode calls refuse bad shapes before looking for a GPU") {
  const cpu::HeadTensor<float> q(1, 4, 17, 64), kv(1, 2, 97, 64), wrong_d(1, 2, 97, 128);
  const auto bad = app::run_gpu_backward(q, wrong_d, kv, q, {});
  CHECK_FALSE(bad.ran);
  CHECK(contains(bad.message, "shapes do not match"));
  const auto fp32 = app::run_gpu_backward(q, kv, kv, q, {.dtype = sim::DType::fp32});
  CHECK_FALSE(fp32.ran);
  CHECK(contains(fp32.message, "runs in fp16 or bf16 on the GPU, not fp32"));
  const cpu::HeadTensor<float> dq(2, 4, 1, 64), cache(2, 2, 97, 64);
  const auto lengths = app::run_gpu_decode(dq, cache, cache, {97}, {});
  CHECK_FALSE(lengths.ran);
  CHECK(contains(lengths.message, "1 lengths"));
  const auto none = app::run_gpu_decode(dq, cache, cache, {97, 0}, {.splits = {}});
  CHECK_FALSE(none.ran);
  CHECK(contains(none.message, "no split counts to run"));
}

TEST_CASE("the GPU's line says when the device is not the one the mirrors predict for") {
  const auto& target = app::target_profile();
  REQUIRE(target.name == "h200");
  CHECK(app::gpu_line({true, "NVIDIA H200 (132 SMs)"}) == "GPU: NVIDIA H200 (132 SMs)\n");
  CHECK(app::gpu_line({false, "no CUDA device is present"}) == "GPU: no CUDA device is present\n");
  const std::string other = app::gpu_line({true, "NVIDIA H100 80GB HBM3 (132 SMs)"});
  CHECK(
      other.starts_with("GPU: NVIDIA H100 80GB HBM3 (132 SMs)\nnote: the predictions are for "
                        "the H200 (132 SMs, 60.0 MiB of L2), not this device"));
  CHECK(contains(other, "bytes into and out of the SMs still compare, the L2's"));
  CHECK(contains(other, "the L2's and DRAM's bytes and the times do not"));
  CHECK(other.ends_with("\n"));
}

TEST_CASE("without a GPU, the backward and decode calls say why nothing ran") {
  const auto status = app::gpu_status();
  if (status.available) {
    MESSAGE("a GPU is present: bench/gpu/run_device.sh runs the calls");
    return;
  }
  const cpu::HeadTensor<float> q(1, 4, 17, 64), kv(1, 2, 97, 64);
  const auto b = app::run_gpu_backward(q, kv, kv, q, {});
  CHECK_FALSE(b.ran);
  CHECK(b.message == status.description);
  const cpu::HeadTensor<float> dq(2, 4, 1, 64), cache(2, 2, 97, 64);
  const auto d = app::run_gpu_decode(dq, cache, cache, {97, 0}, {});
  CHECK_FALSE(d.ran);
  CHECK(d.message == status.description);
}

#ifdef FLASHLAB_FAKE_RUNNER_PREVIOUS
TEST_CASE("the program refuses a GPU runner of another version, or one that lacks a call") {
  for (const char* plugin : {FLASHLAB_FAKE_RUNNER_PREVIOUS, FLASHLAB_FAKE_RUNNER_NO_RESCALE}) {
    CAPTURE(plugin);
    const Run run = run_command(
        fmt::format("FLASHLAB_GPU_RUNNER={} {} lesson 6 --no-color 2>&1", plugin, FLASHLAB_BINARY));
    CHECK(run.status == 0);
    CHECK(contains(run.output, fmt::format("{} is not a GPU runner of this flashlab (version {} "
                                           "expected)",
                                           plugin, FLASHLAB_RUNNER_VERSION)));
  }
}
#endif

// Lesson 6's GPU step driven end to end by a runner whose "device" returns zeros: its CPU
// side (the fp64 and bf16 naive backward over a GQA group, the rule) runs as on a GPU, and
// zero gradients must fail the 3x rule on every row.
TEST_CASE("lesson 6's GPU step, fed zero gradients, finds every one outside the 3x rule") {
  const Run run = run_command(fmt::format("FLASHLAB_GPU_RUNNER={} {} lesson 6 --no-color 2>&1",
                                          FLASHLAB_FAKE_RUNNER_ZEROS, FLASHLAB_BINARY));
  REQUIRE(run.status == 0);
  const std::string& out = run.output;
  CHECK(contains(out, "a stand-in device that returns zeros."));
  CHECK(contains(out, "N_q\tN_k\tcausal\tgrad\tGPU err\tnaive bf16 err\tratio\twithin 3x"));
  for (const char* row :
       {"1023\t1024\tnone\tdQ\t", "113\t1023\tbottom-right\tdK\t", "97\t17\ttop-left\tdV\t"})
    CHECK(contains(out, row));
  // 3 shapes x (dQ, dK, dV), each refused; none accepted.
  std::size_t refused = 0;
  for (std::size_t at = out.find("\tNO\n"); at != std::string::npos;
       at = out.find("\tNO\n", at + 1))
    ++refused;
  CHECK(refused == 9);
  CHECK(contains(out, "deterministic\t1.000 ms\t"));
  CHECK(contains(out, "\t50\tyes"));
}

// Lesson 9's GPU step driven by a runner whose "device" counts nothing: the CPU column as
// without a GPU, and zero counts refused by the agreement rule, naming what differs.
TEST_CASE("lesson 9's GPU step, fed zero counts, finds that they do not agree") {
  const Run run = run_command(fmt::format("FLASHLAB_GPU_RUNNER={} {} lesson 9 --no-color 2>&1",
                                          FLASHLAB_FAKE_RUNNER_ZEROS, FLASHLAB_BINARY));
  REQUIRE(run.status == 0);
  const std::string& out = run.output;
  CHECK(contains(out, "a stand-in device that returns zeros."));
  for (const char* scores : {"random", "growing along N"}) {
    CAPTURE(scores);
    const auto rows = rescale_rows(out, scores);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0][1] == "CPU reference");
    CHECK(rows[1][1] == "GPU fa3");
    CHECK(rows[1][2] == "0");
    CHECK(rows[1][7].rfind("NO: first tiles differ (0 against 1024)", 0) == 0);
  }
}

TEST_CASE("the GPU rescale count refuses bad shapes and dtypes before looking for a GPU") {
  const cpu::Matrix<float> q = cpu::Matrix<float>::Zero(17, 64),
                           kv = cpu::Matrix<float>::Zero(97, 64),
                           wrong_d = cpu::Matrix<float>::Zero(97, 32);
  const auto bad = app::run_gpu_rescale_counts(q, wrong_d, kv, sim::DType::bf16, cpu::Causal::none);
  CHECK_FALSE(bad.ran);
  CHECK(contains(bad.message, "shapes do not match: Q must be (N_q, d), K and V (N_k, d)"));
  CHECK(contains(bad.message, "K (97, 32)"));
  const auto empty = app::run_gpu_rescale_counts(cpu::Matrix<float>(0, 64), kv, kv,
                                                 sim::DType::bf16, cpu::Causal::none);
  CHECK_FALSE(empty.ran);
  CHECK(contains(empty.message, "none of them empty; got Q (0, 64)"));
  const auto fp32 = app::run_gpu_rescale_counts(q, kv, kv, sim::DType::fp32, cpu::Causal::none);
  CHECK_FALSE(fp32.ran);
  CHECK(contains(fp32.message, "fa3's rescale count runs in fp16 or bf16 on the GPU, not fp32"));
  const auto status = app::gpu_status();
  if (status.available) return;
  const auto none = app::run_gpu_rescale_counts(q, kv, kv, sim::DType::bf16, cpu::Causal::none);
  CHECK_FALSE(none.ran);
  CHECK(none.message == status.description);
}

#ifdef FLASHLAB_GPU_RUNNER_PLUGIN
// The plugin itself, loaded as the program loads it: its refusals come before any CUDA call,
// so they hold on a machine without a GPU.
TEST_CASE("the GPU runner plugin refuses bad backward and decode calls with a message") {
  void* handle = dlopen(FLASHLAB_GPU_RUNNER_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(handle != nullptr, dlerror());
  const auto version =
      reinterpret_cast<flashlab_runner_version_fn>(dlsym(handle, "flashlab_runner_version"));
  const auto backward =
      reinterpret_cast<flashlab_runner_backward_fn>(dlsym(handle, "flashlab_runner_backward"));
  const auto decode =
      reinterpret_cast<flashlab_runner_decode_fn>(dlsym(handle, "flashlab_runner_decode"));
  REQUIRE((version && backward && decode));
  CHECK(version() == FLASHLAB_RUNNER_VERSION);

  std::vector<float> x(4 * 97 * 64);
  flashlab_runner_backward_call b{.q = x.data(),
                                  .k = x.data(),
                                  .v = x.data(),
                                  .dout = x.data(),
                                  .dq = x.data(),
                                  .dk = x.data(),
                                  .dv = x.data(),
                                  .n_q = 17,
                                  .n_k = 97,
                                  .d = 64,
                                  .heads_q = 3,
                                  .heads_kv = 2,
                                  .dtype = FLASHLAB_BF16,
                                  .warmups = 0,
                                  .repeats = 1};
  flashlab_runner_backward_result br{};
  backward(&b, &br);
  CHECK(br.ran == 0);
  CHECK(contains(br.message, "heads_kv >= 1 dividing heads_q"));
  b.heads_q = 4, b.dtype = FLASHLAB_FP32;
  backward(&b, &br);
  CHECK(br.ran == 0);
  CHECK(contains(br.message, "the backward takes fp16 or bf16"));

  const std::vector<int32_t> lens{97, 98}, splits{0};
  std::vector<int32_t> used(1);
  std::vector<double> ms(1);
  flashlab_runner_decode_call d{.q = x.data(),
                                .k = x.data(),
                                .v = x.data(),
                                .seq_lens = lens.data(),
                                .splits = splits.data(),
                                .o = x.data(),
                                .lse = x.data(),
                                .splits_used = used.data(),
                                .median_ms = ms.data(),
                                .configs = 1,
                                .batch = 2,
                                .heads_q = 4,
                                .heads_kv = 2,
                                .n_q = 1,
                                .max_seq_len = 97,
                                .d = 64,
                                .dtype = FLASHLAB_BF16,
                                .warmups = 0,
                                .repeats = 1};
  flashlab_runner_decode_result dr{};
  decode(&d, &dr);
  CHECK(dr.ran == 0);
  CHECK(
      contains(dr.message, "sequence 1 has length 98: lengths must lie in [0, max_seq_len = 97]"));
  d.max_seq_len = 98, d.page_size = 48;
  decode(&d, &dr);
  CHECK(dr.ran == 0);
  CHECK(contains(dr.message, "page_size = 48 is not a power of two"));

  const auto rescale =
      reinterpret_cast<flashlab_runner_rescale_fn>(dlsym(handle, "flashlab_runner_rescale"));
  REQUIRE((rescale != nullptr));
  flashlab_runner_rescale_call rc{.q = x.data(),
                                  .k = x.data(),
                                  .v = x.data(),
                                  .o = x.data(),
                                  .n_q = 0,
                                  .n_k = 97,
                                  .d = 64,
                                  .dtype = FLASHLAB_BF16,
                                  .causal = FLASHLAB_CAUSAL_NONE};
  flashlab_runner_rescale_result rr{};
  rescale(&rc, &rr);
  CHECK(rr.ran == 0);
  CHECK(contains(rr.message, "n_q = 0, n_k = 97, d = 64: each must be >= 1"));
  rc.n_q = 17, rc.dtype = FLASHLAB_FP32;
  rescale(&rc, &rr);
  CHECK(rr.ran == 0);
  CHECK(contains(rr.message, "fa3 counts rescales in fp16 or bf16"));
  dlclose(handle);
}
#endif

}  // namespace flashlab::test
