#include "06-backward/gpu_backward.hpp"

#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "gpu_bridge/ncu_bytes.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/naive_backward.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace flashlab::app {

namespace {

namespace bwd = gpu::fa3_backward;  // the default mode's main kernel
constexpr int kBf16Bytes = 2, kFp32Bytes = 4;
constexpr std::uint64_t kSeed = 66;
// The correctness check: GQA (4 query heads over 2 KV heads), d = 64, awkward lengths.
constexpr Index kCheckHeadsQ = 4, kCheckHeadsKV = 2, kCheckD = 64;
// The timing and bytes shape: one sequence of 16 heads, N = 4096, d = 128 (hidden size 2048).
constexpr BackwardShape kTimed{.heads_q = 16, .heads_kv = 16, .n_q = 4096, .n_k = 4096, .d = 128};
// The rule of ANCHORS.md for gradients: at most 3x the error of the naive backward in bf16.
constexpr double kGradientRule = 3;
// ANCHORS.md's determinism check: 50 runs, bitwise equal.
constexpr int kDeterministicRuns = 50, kDefaultRuns = 20, kWarmups = 2;
// Set in the environment of the child that Nsight Compute profiles: it runs one backward of
// the timed shape and nothing else of the lesson.
constexpr const char* kMeasureChild = "FLASHLAB_LESSON6_MEASURE";
// Left out of the measured sums beside the child's first kernel (measure_with_ncu): the
// forward that makes O and L for the backward.
constexpr int kForwardKernels = 1;

cpu::HeadTensor<float> random_heads(Index heads, Index rows, Index d, std::uint64_t seed) {
  cpu::HeadTensor<float> t(1, heads, rows, d);
  for (Index h = 0; h < heads; ++h)
    t.head(0, h) = random_inputs({.N = rows, .d = d, .seed = seed + std::uint64_t(h)}).Q;
  return t;
}

// Every element rounded to bf16, as the GPU receives it, so both sides see one input.
cpu::HeadTensor<float> in_bf16(cpu::HeadTensor<float> t) {
  for (float& x : t.data) x = float(cpu::bf16(x));
  return t;
}

struct Inputs {
  cpu::HeadTensor<float> Q, K, V, dO;
};

Inputs make_inputs(const BackwardShape& s, std::uint64_t seed) {
  return {in_bf16(random_heads(s.heads_q, s.n_q, s.d, seed)),
          in_bf16(random_heads(s.heads_kv, s.n_k, s.d, seed + 100)),
          in_bf16(random_heads(s.heads_kv, s.n_k, s.d, seed + 200)),
          in_bf16(random_heads(s.heads_q, s.n_q, s.d, seed + 300))};
}

struct Gradients {
  cpu::HeadTensor<double> dQ, dK, dV;
};

// The naive backward of every query head in T (fp64, or bf16 with each operator rounded),
// dK and dV of a KV head summed over its query heads, in fp64.
template <class T>
Gradients naive_gradients(const Inputs& in, cpu::Causal causal) {
  Gradients g{cpu::HeadTensor<double>(1, in.Q.heads, in.Q.rows, in.Q.cols),
              cpu::HeadTensor<double>(1, in.K.heads, in.K.rows, in.K.cols),
              cpu::HeadTensor<double>(1, in.V.heads, in.V.rows, in.V.cols)};
  std::fill(g.dK.data.begin(), g.dK.data.end(), 0.0);
  std::fill(g.dV.data.begin(), g.dV.data.end(), 0.0);
  cpu::AttentionOptions options;
  options.causal = causal;
  for (Index h = 0; h < in.Q.heads; ++h) {
    const Index kv = cpu::kv_head_for(h, in.Q.heads, in.K.heads);
    const auto r =
        cpu::naive_backward<T>(in.Q.head(0, h).cast<T>(), in.K.head(0, kv).cast<T>(),
                               in.V.head(0, kv).cast<T>(), in.dO.head(0, h).cast<T>(), options);
    g.dQ.head(0, h) = r.dQ.template cast<double>();
    g.dK.head(0, kv) += r.dK.template cast<double>();
    g.dV.head(0, kv) += r.dV.template cast<double>();
  }
  return g;
}

template <class T>
double max_error(const cpu::HeadTensor<T>& a, const cpu::HeadTensor<double>& exact) {
  double e = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    e = std::max(e, std::abs(double(a.data[i]) - exact.data[i]));
  return e;
}

void errors_against_reference(LessonContext& ctx) {
  ctx.print(
      "Errors against the fp64 naive backward, bf16 inputs, {} query heads over {} KV heads\n"
      "(dK and dV of a KV head summed over its query heads), d = {}. The bound is the rule\n"
      "of ANCHORS.md for gradients: the kernel's error at most {:.0f}x the error of the naive\n"
      "backward computed in bf16 (each operator rounding its output).\n\n",
      kCheckHeadsQ, kCheckHeadsKV, kCheckD, kGradientRule);
  Table t({"N_q", "N_k", "causal", "grad", "GPU err", "naive bf16 err", "ratio", "within 3x"});
  struct Case {
    Index n_q, n_k;
    cpu::Causal causal;
  };
  for (const Case c :
       {Case{1023, 1024, cpu::Causal::none}, Case{113, 1023, cpu::Causal::bottom_right},
        Case{97, 17, cpu::Causal::top_left}}) {
    const Inputs in = make_inputs({kCheckHeadsQ, kCheckHeadsKV, c.n_q, c.n_k, kCheckD}, kSeed);
    const auto gpu = run_gpu_backward(in.Q, in.K, in.V, in.dO, {.causal = c.causal});
    const std::string n_q = fmt::format("{}", c.n_q), n_k = fmt::format("{}", c.n_k);
    const std::string causal(cpu::to_string(c.causal));
    if (!gpu.ran) {
      t.add({n_q, n_k, causal, "-", "not run: " + gpu.message, "-", "-", "-"});
      continue;
    }
    const Gradients exact = naive_gradients<double>(in, c.causal);
    const Gradients low = naive_gradients<cpu::bf16>(in, c.causal);
    const auto row = [&](const char* name, const cpu::HeadTensor<float>& g,
                         const cpu::HeadTensor<double>& e, const cpu::HeadTensor<double>& naive) {
      const double err = max_error(g, e), base = max_error(naive, e);
      t.add({n_q, n_k, causal, name, num(err, 3), num(base, 3), fmt::format("{:.2f}", err / base),
             err <= kGradientRule * base ? "yes" : "NO"});
    };
    row("dQ", gpu.dQ, exact.dQ, low.dQ);
    row("dK", gpu.dK, exact.dK, low.dK);
    row("dV", gpu.dV, exact.dV, low.dV);
  }
  ctx.table(t);
}

double backward_tflops(const BackwardShape& s, double ms) {
  // 2.5x the forward's 4 Hq N_q N_k d matrix FLOPs (five products instead of two).
  return 2.5 * 4.0 * double(s.heads_q) * double(s.n_q) * double(s.n_k) * double(s.d) / (ms * 1e-3) /
         1e12;
}

void two_modes(LessonContext& ctx) {
  const BackwardShape& s = kTimed;
  ctx.print(
      "The two modes, {} heads, N = {}, d = {}, bf16, non-causal. The default adds each KV\n"
      "tile's share of dQ into an fp32 accumulator with atomics, in whatever order the blocks\n"
      "arrive; the deterministic mode sums dQ in a separate kernel, KV tile after KV tile,\n"
      "in one fixed order, and needs no accumulator.\n\n",
      s.heads_q, s.n_q, s.d);
  const Inputs in = make_inputs(s, kSeed + 1);
  Table t({"mode", "median time", "TFLOP/s", "workspace", "runs", "bitwise equal over runs"});
  for (const bool deterministic : {false, true}) {
    const int runs = deterministic ? kDeterministicRuns : kDefaultRuns;
    const auto r =
        run_gpu_backward(in.Q, in.K, in.V, in.dO,
                         {.deterministic = deterministic, .warmups = kWarmups, .repeats = runs});
    const char* mode = deterministic ? "deterministic" : "default (atomics)";
    if (!r.ran) {
      t.add({mode, "not run: " + r.message, "-", "-", "-", "-"});
      continue;
    }
    t.add({mode, fmt::format("{:.3f} ms", r.median_ms),
           fmt::format("{:.0f}", backward_tflops(s, r.median_ms)),
           sim::format_bytes(double(r.workspace_bytes)), fmt::format("{}", runs),
           r.bitwise_repeats ? "yes" : "no"});
  }
  ctx.table(t);
  ctx.say(
      "The default mode may or may not repeat itself bit for bit (the atomics' order is up\n"
      "to the hardware); the deterministic one must, and pays for it with a second pass over\n"
      "K and V for dQ. ANCHORS.md has torch's flash backward at this size for comparison.\n\n");
}

// The measured bytes of one default backward of the timed shape, or why there are none.
NcuOutcome measure_backward() {
  const auto ncu = find_ncu();
  if (!ncu) return {std::nullopt, "measuring them needs Nsight Compute (ncu), not installed here"};
  // env sets the flag and execs this same program in its own process, which ncu follows.
  return measure_with_ncu(*ncu,
                          {"/usr/bin/env", fmt::format("{}=1", kMeasureChild),
                           fmt::format("/proc/{}/exe", getpid()), "lesson", "6", "--no-color"},
                          kForwardKernels);
}

void bytes_of_recomputation(LessonContext& ctx, bool gpu) {
  ctx.step("Recomputing P against keeping it, in bytes");
  const BackwardShape& s = kTimed;
  const BackwardBytes b = recompute_bytes(s, kBf16Bytes);
  const double p = stored_p_bytes(s, kBf16Bytes), dram = compulsory_bytes(s, kBf16Bytes);
  ctx.print(
      "flashlab's backward as built ({} heads, N = {}, d = {}, bf16, Br = {} and Bc = {} from\n"
      "the kernel table, default mode), from the closed forms in gpu_backward.hpp, at two\n"
      "levels:\n"
      "the tiles between the L2 and the SMs (what the two-level model counts), and the bytes\n"
      "DRAM must carry at the least (each input read once, each gradient written once).\n"
      "A backward that kept P would move the same tiles and, on top, P: written by the\n"
      "forward, read back by the backward.\n\n",
      s.heads_q, s.n_q, s.d, bwd::kBr, bwd::kBc);
  Table t({"", "L2 <-> SMs", "DRAM, at least"}, {true});
  t.add(
      {"recompute P (predicted)", sim::format_bytes(b.read + b.written), sim::format_bytes(dram)});
  t.add({"keep P (predicted)", sim::format_bytes(b.read + b.written + p),
         sim::format_bytes(dram + p)});
  const NcuOutcome measured =
      gpu ? measure_backward()
          : NcuOutcome{std::nullopt, "measuring them needs a GPU and Nsight Compute (ncu)"};
  if (measured.bytes) {
    const MeasuredBytes& m = *measured.bytes;
    t.add({"recompute P (measured)", sim::format_bytes(m.sm_read + m.sm_written),
           sim::format_bytes(m.dram_read + m.dram_written)});
  }
  ctx.table(t);
  if (measured.bytes)
    ctx.print(
        "Measured by Nsight Compute over the backward's kernels only: into and out of the\n"
        "SMs (l1tex__m_xbar2l1tex_read_bytes + l1tex__m_l1tex2xbar_write_bytes), and DRAM\n"
        "(dram__bytes_read + dram__bytes_write). The model books dQ's fp32 atomics as\n"
        "writes; the hardware performs them in the L2.\n");
  else
    ctx.print("Measured bytes: {}.\n", measured.message);
  ctx.print(
      "\nBetween the L2 and the SMs the recomputing backward moves more than P itself: Q, dO,\n"
      "L and D come in again for each of the N_k / Bc = {} KV tiles and dQ's shares go out as\n"
      "often, O(N^2 d / Bc) bytes. But those re-reads are of a few MiB per head and hit in the\n"
      "L2. P of all {} heads is {}, written by the forward and read by the backward long\n"
      "after, against an L2 of {} on an H200: every byte of it would go to DRAM and back,\n"
      "{:.1f}x the compulsory DRAM traffic of the whole recomputing backward.\n\n",
      (s.n_k + bwd::kBc - 1) / bwd::kBc, s.heads_q, sim::format_bytes(p / 2),
      sim::format_bytes(double(sim::find_profile("h200").l2_bytes)), p / dram);
}

// The backward of a stored row: one sequence, its heads and N, d = 128, causal.
BackwardRun causal_run(const measured::BackwardDramRead& r) {
  return {.heads = r.heads_q, .kv_heads = r.heads_kv, .n = r.n, .d = kTimed.d, .causal = true};
}

// Where the L2 stops holding the backward's query tiles between visits: the DRAM reads
// measured on the H200 (stored: measured_h200.hpp) beside the floor from a cold L2 of the
// kernels' mirror (sim::compulsory_dram: each sector a launch reads, once) and the grid model's
// prediction (stored beside them: minutes to run at the longest rows).
void dram_reads_measured(LessonContext& ctx) {
  namespace m = measured;
  ctx.step("Where the re-reads stop hitting in the L2, measured");
  const sim::HardwareProfile& h200 = sim::find_profile("h200");
  ctx.print(
      "The re-reads above hit in the L2 as long as a query tile is still there when the next\n"
      "block comes for it. Below: the DRAM reads Nsight Compute measured over the three\n"
      "kernels (it empties the L2 before each), against what the kernels' mirror says each\n"
      "launch must read from a cold L2 at the least (every sector of Q, K, V, dO, L, D and the\n"
      "dQ accumulator once), and against the grid model: the main kernel's blocks run as the\n"
      "H200 runs them, in waves of one block an SM, through the L2's two partitions of hashed\n"
      "sets (`flashlab compare --pass backward --sweep`, docs/IO-LEVELS.md).\n\n");
  Table t({"query / KV heads", "N", "floor", "grid model", "measured", "measured / floor",
           "measured / grid"},
          {true});
  for (const m::BackwardDramRead& r : m::kBackwardDramRead) {
    const PassPrediction p = predict(causal_run(r));
    const auto floor = sim::compulsory_dram(*p.report, sim::l2_dirty_room(h200));
    t.add({fmt::format("{} / {}", r.heads_q, r.heads_kv), fmt::format("{}", r.n),
           sim::format_bytes(double(floor->read)), sim::format_bytes(r.grid_bytes),
           sim::format_bytes(r.read_bytes),
           fmt::format("{:.3f}", r.read_bytes / double(floor->read)),
           fmt::format("{:.3f}", r.read_bytes / r.grid_bytes)});
  }
  ctx.table(t);
  ctx.print("Measured: {}; {}; {}.\n\n", m::kBackwardDramReadSource.run,
            m::kBackwardDramReadSource.shape, m::kBackwardDramReadSource.tool);
  // Under the mask the first wave's block j walks query tiles (Bc / Br) j to Tr - 1 and ends
  // after Tr - (Bc / Br) j steps, the last block (j = R - 1) first. The blocks of the second
  // wave start as those end, (Bc / Br) steps apart and (Bc / Br) tiles further on, so they
  // walk tile t together, at step t + Tr - (Bc / Br) (2 R - 1); block 0 walked it at step t.
  // Between the two visits the first wave reads that many tiles ahead, a step's bytes each.
  const std::int64_t a = bwd::kBc / bwd::kBr, R = std::int64_t(h200.sm_count) * bwd::kBlocksPerSm;
  const double step = double(bwd::kBr) * double(kTimed.d) * (2 * kBf16Bytes + kFp32Bytes) +
                      2.0 * bwd::kBr * kFp32Bytes;
  const double partition = double(h200.l2_bytes) / double(h200.l2_partitions);
  const auto lag = [&](std::int64_t n) { return n / bwd::kBr - a * (2 * R - 1); };
  // The longest row without GQA, the longest whose second wave runs ahead, and the longest
  // with GQA.
  std::int64_t long_n = 0, short_n = 0;
  m::BackwardDramRead gqa{};
  for (const m::BackwardDramRead& r : m::kBackwardDramRead) {
    if (r.heads_kv != r.heads_q) {
      if (r.n > gqa.n) gqa = r;
      continue;
    }
    long_n = std::max(long_n, r.n);
    if (lag(r.n) <= 0) short_n = std::max(short_n, r.n);
  }
  // The GQA row's grid in LRU partitions of whole tiles (fast: a tile at a time).
  const PassPrediction lru_pass = predict(causal_run(gqa));
  const sim::Bytes lru_floor =
      sim::compulsory_dram(*lru_pass.report, sim::l2_dirty_room(h200))->read;
  const sim::CompulsoryDram lru =
      sim::total(*sim::predicted_dram(*lru_pass.report, h200, sim::L2Replacement::lru));
  ctx.print(
      "A block's step moves {} for one query head (Q and dO, L and D, and the dQ rows its\n"
      "reductions add to). Under the mask the first wave's {} blocks start {} query tiles\n"
      "apart and the last ends first; the second wave's blocks start as they end and walk\n"
      "each query tile together, {} steps after block 0 of the first wave did. In between,\n"
      "the first wave reads as many tiles ahead: at N = {}, {} tiles, {}, more than a\n"
      "partition's {}, so the second wave, and each after it, reads its tiles from DRAM\n"
      "again; at N = {}, {}: the second wave runs ahead, and every visit hits.\n"
      "With {} query heads over each KV head the live tiles at N = {} fit the L2 as a whole\n"
      "but not set by set: the same grid in an L2 kept exactly least-recently-used, whole\n"
      "tiles, reads {} there, {:.3f} of the floor, while {}-way sets that draw more\n"
      "lines than they hold lose them. The grid model, which hashes each 128-byte line to\n"
      "its set, reads within {:.0f}% of the H200 there.\n\n",
      sim::format_bytes(step), R, a, lag(long_n), long_n, lag(long_n),
      sim::format_bytes(double(lag(long_n)) * step), sim::format_bytes(partition), short_n,
      lag(short_n), gqa.heads_q / gqa.heads_kv, gqa.n, sim::format_bytes(double(lru.read)),
      double(lru.read) / double(lru_floor), h200.l2_ways,
      std::ceil(100 * std::abs(gqa.read_bytes / gqa.grid_bytes - 1)));
}

}  // namespace

BackwardBytes recompute_bytes(const BackwardShape& s, int element_bytes) {
  const double E = element_bytes, f = kFp32Bytes, Hq = double(s.heads_q), Hkv = double(s.heads_kv),
               n_q = double(s.n_q), n_k = double(s.n_k), d = double(s.d),
               Tc = double((s.n_k + bwd::kBc - 1) / bwd::kBc);
  BackwardBytes b;
  // preprocess: O and dO in; D and the zeroed accumulator out.
  b.read += 2 * E * Hq * n_q * d;
  b.written += f * Hq * n_q + f * Hq * n_q * d;
  // main: K and V once, Q, dO, L and D once per KV tile; dK and dV out, dQ's shares added.
  b.read += 2 * E * Hkv * n_k * d + Tc * Hq * n_q * (2 * E * d + 2 * f);
  b.written += 2 * E * Hkv * n_k * d + f * Tc * Hq * n_q * d;
  // convert: the accumulator in, dQ out.
  b.read += f * Hq * n_q * d;
  b.written += E * Hq * n_q * d;
  return b;
}

double compulsory_bytes(const BackwardShape& s, int element_bytes) {
  const double E = element_bytes, q = double(s.heads_q * s.n_q), kv = double(s.heads_kv * s.n_k),
               d = double(s.d);
  // Q, O, dO and L of every query row, K and V of every key in; dQ, dK and dV out.
  return E * d * (3 * q + 2 * kv) + kFp32Bytes * q + E * d * (q + 2 * kv);
}

double stored_p_bytes(const BackwardShape& s, int element_bytes) {
  return 2.0 * element_bytes * double(s.heads_q) * double(s.n_q) * double(s.n_k);
}

bool lesson6_measure_child() {
  const char* flag = std::getenv(kMeasureChild);
  if (!flag || !*flag) return false;
  const Inputs in = make_inputs(kTimed, kSeed + 1);
  run_ncu_first_kernel("lesson 6's measured child");
  run_gpu_backward(in.Q, in.K, in.V, in.dO, {.warmups = 0, .repeats = 1});
  return true;
}

void gpu_backward_step(LessonContext& ctx) {
  ctx.step("On a GPU: flashlab's backward kernels beside the reference");
  const GpuStatus status = gpu_status();
  if (!status.available) {
    ctx.print(
        "No GPU here: {}.\n"
        "With one, this step runs flashlab's GPU backward (fa2's forward for O and L, then\n"
        "flashlab_backward) on the same bf16 inputs as the CPU reference and prints the\n"
        "errors of dQ, dK and dV against the fp64 naive backward and against the naive\n"
        "backward in bf16 (the {:.0f}x rule of ANCHORS.md), then the time of the default and\n"
        "the deterministic mode, and whether {} deterministic runs are bitwise equal.\n"
        "Run `flashlab lesson 6` on a machine with an NVIDIA GPU and a CUDA build.\n\n",
        status.description, kGradientRule, kDeterministicRuns);
  } else {
    ctx.print("{}.\n\n", status.description);
    errors_against_reference(ctx);
    two_modes(ctx);
  }
  bytes_of_recomputation(ctx, status.available);
  dram_reads_measured(ctx);
}

}  // namespace flashlab::app
