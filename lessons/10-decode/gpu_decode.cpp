#include "10-decode/gpu_decode.hpp"

#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/measured_h200.hpp"

#include "flashlab/cpu/correctness.hpp"
#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace flashlab::app {

namespace {

using cpu::Index;
namespace dec = gpu::decode;
constexpr int kBf16Bytes = 2, kFp32Bytes = 4;
using namespace decode_shape;
constexpr Index kCache = 32768;  // keys per sequence, ANCHORS.md's second length
constexpr std::uint64_t kSeed = 1010;
constexpr int kWarmups = 3, kRepeats = 20;
constexpr int kAutomatic = 0;  // num_splits = 0: the library's heuristic chooses

// Uniform in [-1, 1), rounded to bf16 (the GPU's input), from splitmix64: fast enough for
// the 2 x 268M numbers of the cache.
void fill_bf16(cpu::HeadTensor<float>& t, std::uint64_t seed) {
  std::uint64_t state = seed;
  for (float& x : t.data) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    constexpr float kTwoToMinus23 = 1.0f / float(1 << 23);  // 24-bit fraction in [0, 2)
    x = float(cpu::bf16(float(z >> 40) * kTwoToMinus23 - 1.0f));
  }
}

double max_error(const cpu::HeadTensor<float>& a, const cpu::HeadTensor<float>& ref) {
  double e = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    e = std::max(e, std::abs(double(a.data[i]) - double(ref.data[i])));
  return e;
}

struct Problem {
  cpu::HeadTensor<float> Q, K, V;
  std::vector<Index> lens;
  cpu::HeadTensor<float> O_ref;  // the CPU reference's decode, fp32
  double naive_err = 0;          // max |O - O_ref| of the naive attention computed in bf16
};

// The rule of ANCHORS.md for the forward: a kernel's error against the reference at most
// cpu::kOutputErrorFactor times the error of the naive three-operator attention computed in
// the same low precision.
constexpr double kForwardRule = cpu::kOutputErrorFactor;

// The naive attention in bf16 (each operator rounding its output) on every query head, and
// its largest error against the reference: the baseline of the rule.
double naive_bf16_error(const Problem& p, const cpu::AttentionOptions& options) {
  double err = 0;
  for (Index b = 0; b < kBatch; ++b)
    for (Index kv = 0; kv < kHeadsKV; ++kv) {
      const cpu::Matrix<cpu::bf16> K = p.K.head(b, kv).cast<cpu::bf16>(),
                                   V = p.V.head(b, kv).cast<cpu::bf16>();
      for (Index h = kv * kGroup; h < (kv + 1) * kGroup; ++h) {
        const cpu::Matrix<cpu::bf16> q = p.Q.head(b, h).cast<cpu::bf16>();
        const auto naive = cpu::naive_attention<cpu::bf16>(q, K, V, options);
        err = std::max(err,
                       double((naive.O.cast<float>() - p.O_ref.head(b, h)).cwiseAbs().maxCoeff()));
      }
    }
  return err;
}

std::string within_rule(double err, double naive_err) {
  return err <= kForwardRule * naive_err ? "yes" : "NO";
}

Problem make_problem() {
  Problem p{cpu::HeadTensor<float>(kBatch, kHeadsQ, kNq, kD),
            cpu::HeadTensor<float>(kBatch, kHeadsKV, kCache, kD),
            cpu::HeadTensor<float>(kBatch, kHeadsKV, kCache, kD),
            std::vector<Index>(std::size_t(kBatch), kCache),
            {}};
  fill_bf16(p.Q, kSeed), fill_bf16(p.K, kSeed + 1), fill_bf16(p.V, kSeed + 2);
  cpu::AttentionOptions options;
  options.causal = cpu::Causal::bottom_right;  // the new token is the last position
  p.O_ref = cpu::decode_multihead<float>(p.Q, p.K, p.V, {.splits = 1}, options, p.lens).O;
  p.naive_err = naive_bf16_error(p, options);
  return p;
}

std::string tbps(double bytes, double ms) {
  return fmt::format("{:.2f}", bytes / (ms * 1e-3) / 1e12);
}

void splits_sweep(LessonContext& ctx, const Problem& p, double kv) {
  std::vector<int> splits;
  for (int s = 1; s <= dec::kMaxSplits; s *= 2) splits.push_back(s);
  splits.push_back(kAutomatic);
  const auto run = run_gpu_decode(p.Q, p.K, p.V, p.lens,
                                  {.splits = splits, .warmups = kWarmups, .repeats = kRepeats});
  if (!run.ran) {
    ctx.print("The split-KV decode did not run: {}.\n\n", run.message);
    return;
  }
  const Index blocks_per_split = blocks_a_split(kBatch);
  Table t({"num_splits", "blocks", "partial states", "time", "TB/s of K and V", "max |O - O_ref|",
           fmt::format("within {:.0f}x", kForwardRule)});
  for (std::size_t i = 0; i < splits.size(); ++i) {
    const int used = run.splits_used[i];
    t.add({splits[i] == kAutomatic ? fmt::format("auto: {}", used) : fmt::format("{}", used),
           fmt::format("{}", blocks_per_split * used),
           sim::format_bytes(state_bytes(kBatch, kHeadsQ, kNq, kD, used)),
           fmt::format("{:.1f} us", run.median_ms[i] * 1e3), tbps(kv, run.median_ms[i]),
           num(max_error(run.O[i], p.O_ref), 3),
           within_rule(max_error(run.O[i], p.O_ref), p.naive_err)});
  }
  ctx.table(t);
  const auto& anchor = measured::anchor_decode(kCache);
  ctx.print(
      "One split is the unsplit sweep of the step above: {} blocks for the SMs. More splits\n"
      "fill the GPU until the blocks pass one wave; past that they only add partial states\n"
      "and a longer combine. `auto` is the library's choice (kernel_info.hpp's\n"
      "decode::auto_splits): one split where one block an SM already fills {}% of the SMs\n"
      "(no combine at all; contiguous caches); else the fewest splits that keep {}% of a wave\n"
      "of {} blocks an SM busy, held to the {} states the combine loads at once where that\n"
      "still fills one block an SM (step 6 says why each). {}: torch's flash decode {:.2f}\n"
      "TB/s and cuDNN's {:.2f} at this shape; a device-to-device copy {:.2f}, bytes read +\n"
      "written.\n\n",
      blocks_per_split, dec::min_wave_share_percent(), dec::min_wave_share_percent(),
      dec::kBlocksPerSm, dec::kCombineSplitsInFlight, measured::kAnchorDecodeSource.run,
      anchor.flash, anchor.cudnn, sim::find_profile("h200").hbm_bytes_per_s / 1e12);
}

void paged_layouts(LessonContext& ctx, const Problem& p, double kv) {
  ctx.print(
      "The same step with the cache in pages of a serving engine's allocator: each sequence's\n"
      "keys in pages of page_size keys, found through a block table whose pages are shuffled\n"
      "in memory (block_table.hpp). The automatic split count each time:\n\n");
  Table t({"layout", "splits", "time", "TB/s of K and V", "vs contiguous", "max |O - O_ref|",
           fmt::format("within {:.0f}x", kForwardRule)});
  double contiguous_ms = 0;
  const auto add = [&](const std::string& layout, const GpuDecodeRun& run) {
    if (!run.ran) {
      t.add({layout, "not run: " + run.message, "-", "-", "-", "-", "-"});
      return;
    }
    const double ms = run.median_ms[0];
    if (contiguous_ms == 0) contiguous_ms = ms;
    t.add({layout, fmt::format("{}", run.splits_used[0]), fmt::format("{:.1f} us", ms * 1e3),
           tbps(kv, ms), fmt::format("{:+.1f}%", (ms / contiguous_ms - 1) * 100),
           num(max_error(run.O[0], p.O_ref), 3),
           within_rule(max_error(run.O[0], p.O_ref), p.naive_err)});
  };
  add("contiguous",
      run_gpu_decode(p.Q, p.K, p.V, p.lens,
                     {.splits = {kAutomatic}, .warmups = kWarmups, .repeats = kRepeats}));
  for (const Index page_size : kPageSizes)
    add(fmt::format("paged, {} keys a page", page_size), run_gpu_decode(p.Q, p.K, p.V, p.lens,
                                                                        {.page_size = page_size,
                                                                         .table_seed = kSeed,
                                                                         .splits = {kAutomatic},
                                                                         .warmups = kWarmups,
                                                                         .repeats = kRepeats}));
  ctx.table(t);
  ctx.say(
      "Each thread of the split kernel looks up the block table once per tile (its keys of a\n"
      "tile lie on one page), a tile ahead of the copy that needs the entry, so the table\n"
      "itself is a few bytes per page. What a page costs is the break in the stream: the next\n"
      "keys come from another address, so smaller pages cut the copies into shorter runs.\n"
      "The column against contiguous shows what that costs on this GPU.\n\n");
}

}  // namespace

double kv_bytes(Index heads_kv, Index d, const std::vector<Index>& seq_lens, int element_bytes) {
  const double keys = double(std::accumulate(seq_lens.begin(), seq_lens.end(), Index{0}));
  return 2.0 * element_bytes * double(d) * double(heads_kv) * keys;
}

double state_bytes(Index batch, Index heads_q, Index n_q, Index d, int splits) {
  return 2.0 * kFp32Bytes * double(dec::state_floats(d)) * double(batch * heads_q * n_q) * splits;
}

void gpu_decode_step(LessonContext& ctx) {
  ctx.step("On a GPU: split-KV decode");
  const std::vector<Index> full(std::size_t(kBatch), kCache);
  const double kv = kv_bytes(kHeadsKV, kD, full, kBf16Bytes);
  const GpuStatus status = gpu_status();
  if (!status.available) {
    ctx.print(
        "No GPU here: {}.\n"
        "With one, this step runs flashlab's split-KV decode kernel on ANCHORS.md's decode\n"
        "shape (B = {}, {} query heads over {} KV heads, d = {}, one new token against {} keys\n"
        "each, bf16): {} of K and V a step. It prints the time and the bandwidth (bytes of K\n"
        "and V / time) for num_splits = 1, 2, 4, ..., {} and the automatic choice, then a\n"
        "contiguous cache against paged ones (pages of 16, 64 and 256 keys through a shuffled\n"
        "block table), each with its error against the CPU reference's decode on the same\n"
        "inputs. Run `flashlab lesson 10` on a machine with an NVIDIA GPU and a CUDA build.\n\n",
        status.description, kBatch, kHeadsQ, kHeadsKV, kD, kCache, sim::format_bytes(kv),
        dec::kMaxSplits);
    return;
  }
  ctx.print(
      "{}.\nB = {}, {} query heads over {} KV heads, d = {}, one new token against {} keys\n"
      "each, bf16: {} of K and V a step. O_ref: the CPU reference's decode (fp32) on the same\n"
      "bf16-rounded inputs.\n\n",
      status.description, kBatch, kHeadsQ, kHeadsKV, kD, kCache, sim::format_bytes(kv));
  const Problem p = make_problem();
  ctx.print(
      "The naive attention computed in bf16 is off from O_ref by up to {}; the rule of\n"
      "ANCHORS.md allows a kernel {:.0f}x that.\n\n",
      num(p.naive_err, 3), kForwardRule);
  splits_sweep(ctx, p, kv);
  paged_layouts(ctx, p, kv);
}

}  // namespace flashlab::app
