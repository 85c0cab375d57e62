// Lesson 5: the IO analysis. The simulator counts the HBM bytes of naive attention,
// FlashAttention-1 (with the first paper's tile rule) and FlashAttention-2 (with the tiles of
// flashlab's fa2 kernel) over sweeps of N, d and the SRAM size M; fitted exponents show the
// paper's Theta(N^2 d^2 / M) law, and the roofline says which resource binds on an H200.
#include "05-io-analysis/book_data.hpp"
#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "kit/lesson_context.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <cmath>

namespace flashlab::app {

namespace {

using cpu::Index;
using sim::Algorithm;
constexpr sim::Bytes kKiB = 1024;

// The machine every step of this lesson is counted on, the one flashlab's kernels are built
// for: its SRAM per block and its L2 come from the simulator's profile, which owns them.
const sim::HardwareProfile& h200() { return target_profile(); }

// The slope of log y against log x by least squares: y ~ x^slope.
double fitted_exponent(const std::vector<double>& x, const std::vector<double>& y) {
  double mx = 0, my = 0;
  for (std::size_t k = 0; k < x.size(); ++k) mx += std::log(x[k]), my += std::log(y[k]);
  mx /= double(x.size()), my /= double(y.size());
  double sxy = 0, sxx = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    sxy += (std::log(x[k]) - mx) * (std::log(y[k]) - my);
    sxx += (std::log(x[k]) - mx) * (std::log(x[k]) - mx);
  }
  return sxy / sxx;
}

// Each tiled program with its own tile rule: fa1 the first paper's (the simulator's default,
// Bc = ceil(M / 4d), Br = min(Bc, d)); fa2 the tiles of flashlab's fa2 kernel.
sim::Problem problem_for(Algorithm a, Index N, Index d, sim::Bytes sram) {
  const sim::Problem p{.N = N, .d = d, .dtype = sim::DType::bf16, .sram_bytes = sram};
  return a == Algorithm::fa2 ? fa2_kernel_problem(p) : p;
}

sim::Report count(Algorithm a, Index N, Index d, sim::Bytes sram) {
  return sim::count(a, problem_for(a, N, d, sram));
}

// What each program streams again on every step of its outer loop, and how many times.
std::string restreamed(const sim::Report& r) {
  if (!r.tiles) return "S, P once";
  const cpu::TileSizes t = r.tiles->tiles;
  if (r.algorithm == Algorithm::fa1)
    return fmt::format("Q, O, l, m x Tc = {}", cpu::tile_count(r.problem.N, t.Bc));
  return fmt::format("K, V x Tr = {}", cpu::tile_count(r.problem.N, t.Br));
}

// Why fa1 runs with a smaller Br than its rule gives, when it does; "" otherwise.
std::string fa1_halving(const sim::Report& r) {
  const sim::TileChoice& c = *r.tiles;
  if (c.tiles.Br == c.paper.Br && c.tiles.Bc == c.paper.Bc) return "";
  return fmt::format(
      "fa1 runs with Br = {}, not the rule's {}: the rule budgets four (Bc, d) tiles (K_j,\n"
      "V_j, Q_i, O_i) in M, but the program also keeps the score tile S_ij and the fp32\n"
      "state on chip, {} in all at the rule's sizes, more than the {}. So the\n"
      "simulator halves Br, the inner loop's block, until they fit (here and in steps 3\n"
      "and 4). No byte changes: fa1's traffic is set by Bc alone (its Tc outer steps), and\n"
      "Bc keeps the rule's value.\n\n",
      c.tiles.Br, c.paper.Br,
      sim::format_bytes(double(sim::sram_footprint(Algorithm::fa1, r.problem, c.paper))),
      sim::format_bytes(double(r.problem.sram_bytes)));
}

void three_programs(LessonContext& ctx) {
  ctx.step("Three programs, one problem");
  constexpr Index kN = 4096, kD = 64;
  const sim::Bytes sram = h200().sram_per_sm;
  const auto fa2_tiles = *problem_for(Algorithm::fa2, kN, kD, sram).tiles;
  const int warps =
      gpu::kernel_config(FLASHLAB_KERNEL_FA2, kD, FLASHLAB_BF16).threads / gpu::kWarpSize;
  ctx.print(
      "naive: S and P written to HBM and read back.\n"
      "fa1:   the FlashAttention paper's Algorithm 1 (Dao et al. 2022): KV tiles outside,\n"
      "       query tiles inside; every inner step reads O_i, l_i, m_i from HBM and writes\n"
      "       them back (O_i in fp32). Its tile rule is the paper's: Bc = ceil(M / 4d),\n"
      "       Br = min(Bc, d), M the SRAM in elements. Each outer step re-streams Q, O, l, m,\n"
      "       so the traffic falls as Bc grows, and the rule makes Bc as large as M allows.\n"
      "fa2:   query tiles outside (FlashAttention-2, Dao 2023); the state stays on chip; O_i\n"
      "       written once. Each outer step re-streams K and V, so the traffic falls as Br\n"
      "       grows. Its tiles are those of flashlab's fa2 kernel (gpu/'s kernel table):\n"
      "       Br = {} ({} warps of {} query rows, lesson 7) and Bc = {} at d = {}, small\n"
      "       because the score tile lives in registers. The FlashAttention-2 paper gives no\n"
      "       formula; it picks Br and Bc in {{64, 128}} by d and the shared memory.\n\n",
      fa2_tiles.Br, warps, fa2_tiles.Br / warps, fa2_tiles.Bc, kD);
  Table t({"program", "Br", "Bc", "re-streamed", "HBM read", "HBM written", "total", "vs fa2"},
          {true, false, false, true});
  const double fa2_total = double(count(Algorithm::fa2, kN, kD, sram).bytes_total());
  std::string halving;
  double fa1_total = 0;
  for (const auto a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
    const auto r = count(a, kN, kD, sram);
    const auto tiles = r.tiles ? r.tiles->tiles : cpu::TileSizes{0, 0};
    if (a == Algorithm::fa1) halving = fa1_halving(r), fa1_total = double(r.bytes_total());
    t.add({std::string(sim::to_string(a)), r.tiles ? fmt::format("{}", tiles.Br) : std::string("-"),
           r.tiles ? fmt::format("{}", tiles.Bc) : std::string("-"), restreamed(r),
           sim::format_bytes(double(r.bytes_read())), sim::format_bytes(double(r.bytes_written())),
           sim::format_bytes(double(r.bytes_total())),
           fmt::format("{:.2f}x", double(r.bytes_total()) / fa2_total)});
  }
  ctx.print("N = {}, d = {}, bf16, SRAM = {} (one H200 block's), M = {} elements:\n\n", kN, kD,
            sim::format_bytes(double(sram)), sram / sim::bytes_of(sim::DType::bf16));
  ctx.table(t);
  ctx.say(halving);
  const bool fa1_fewer = fa1_total < fa2_total;
  ctx.print(
      "{}:\n"
      "fa1 re-streams Q and O once per KV tile of Bc keys, fa2 re-reads K and V once per\n"
      "query tile of Br rows, and which is fewer depends on M, d and the kernel's Br.\n"
      "FlashAttention-2's gains are not only bytes: no O, l, m written back at every step,\n"
      "query tiles that run in parallel, fewer non-matrix operations (lesson 3), and on a\n"
      "real GPU an L2 that serves most re-reads of K and V (step 5).\n\n",
      fa1_fewer
          ? fmt::format("Here fa1 moves fewer HBM bytes than fa2 ({:.2f}x)", fa1_total / fa2_total)
          : fmt::format("Here fa1 moves {:.2f}x the HBM bytes of fa2", fa1_total / fa2_total));
}

}  // namespace

IoSweepN io_sweep_N() {
  IoSweepN s{.d = 64, .sram = h200().sram_per_sm, .Ns = {1024, 2048, 4096, 8192, 16384},
             .programs = {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}, .bytes = {}};
  for (const auto a : s.programs) {
    s.bytes.emplace_back();
    for (Index N : s.Ns) s.bytes.back().push_back(double(count(a, N, s.d, s.sram).bytes_total()));
  }
  return s;
}

namespace {

void sweep_N(LessonContext& ctx) {
  ctx.step("Sweep N: everything is quadratic, with very different constants");
  const IoSweepN s = io_sweep_N();
  const Index kD = s.d;
  const std::vector<Index>& Ns = s.Ns;
  const sim::Bytes sram = s.sram;
  ctx.print("d = {}, bf16, SRAM = {} (one H200 block's), each program with its tile rule:\n\n", kD,
            sim::format_bytes(double(sram)));
  Table t({"N", "naive", "fa1", "fa2"});
  std::vector<double> x;
  const std::vector<std::vector<double>>& y = s.bytes;
  for (std::size_t k = 0; k < Ns.size(); ++k) {
    std::vector<std::string> row{fmt::format("{}", Ns[k])};
    x.push_back(double(Ns[k]));
    for (const auto& program : y) row.push_back(sim::format_bytes(program[k]));
    t.add(row);
  }
  ctx.table(t);
  const double naive_last = y[0].back(), fa1_last = y[1].back(), fa2_last = y[2].back();
  const Index Br = problem_for(Algorithm::fa2, Ns.back(), kD, sram).tiles->Br;
  ctx.print(
      "Fitted exponents of N: naive {:.2f}, fa1 {:.2f}, fa2 {:.2f}. All three grow like N^2.\n"
      "At N = {} naive moves {:.1f}x the bytes of fa1 and {:.1f}x those of fa2. fa2 reads K\n"
      "and V once per query tile: 2 (N / Br) N d elements, which with its kernel's Br = {}\n"
      "and d = {} is {} N^2, against naive's 4 N^2 for S and P. Fusion removes the N^2\n"
      "*storage*; the N^2 *traffic* shrinks only as fast as the tiles grow. On a real GPU\n"
      "most of those repeated K, V reads are served by the L2 cache (step 5).\n\n",
      fitted_exponent(x, y[0]), fitted_exponent(x, y[1]), fitted_exponent(x, y[2]), Ns.back(),
      naive_last / fa1_last, naive_last / fa2_last, Br, kD, num(2.0 * double(kD) / double(Br)));
}

void sweep_M(LessonContext& ctx) {
  ctx.step("Sweep M: FlashAttention-1's traffic falls like 1 / M");
  constexpr Index kN = 8192, kD = 64;
  ctx.print(
      "The paper's Theorem 2: FA1 moves Theta(N^2 d^2 / M) elements. With Bc ~ M / 4d there\n"
      "are about 4 N d / M KV tiles, and each outer step streams all of Q and O, about N d\n"
      "elements, through the chip. N = {}, d = {}, bf16 (M = SRAM / {} bytes); fa1 with\n"
      "the paper's rule, fa2 with its kernel's tiles:\n\n",
      kN, kD, sim::bytes_of(sim::DType::bf16));
  Table t({"SRAM", "M (elements)", "fa1 Br", "fa1 Bc", "fa1 bytes", "fa2 bytes"});
  std::vector<double> x, y1;
  const sim::Problem fa2_problem = problem_for(Algorithm::fa2, kN, kD, h200().sram_per_sm);
  for (sim::Bytes sram : {48 * kKiB, 96 * kKiB, 192 * kKiB, 384 * kKiB, 768 * kKiB}) {
    const auto r1 = count(Algorithm::fa1, kN, kD, sram);
    x.push_back(double(r1.problem.M()));
    y1.push_back(double(r1.bytes_total()));
    sim::Problem p2 = fa2_problem;
    p2.sram_bytes = sram;
    const sim::Bytes needed = sim::sram_footprint(Algorithm::fa2, p2, *p2.tiles);
    const std::string fa2_bytes =
        needed > sram ? fmt::format("needs {}", sim::format_bytes(double(needed)))
                      : sim::format_bytes(double(sim::count(Algorithm::fa2, p2).bytes_total()));
    t.add({sim::format_bytes(double(sram)), fmt::format("{}", r1.problem.M()),
           fmt::format("{}", r1.tiles->tiles.Br), fmt::format("{}", r1.tiles->tiles.Bc),
           sim::format_bytes(y1.back()), fa2_bytes});
  }
  ctx.table(t);
  ctx.print(
      "Fitted exponent of M: fa1 {:.2f} (the theorem says -1). fa2's bytes do not move with\n"
      "M: its tiles are its kernel's (Br = {}, Bc = {}), set by warps and registers, not by\n"
      "the SRAM; where they do not fit, the table says what the simulated program needs\n"
      "(it keeps S_ij and U in SRAM, where the kernel keeps them in registers).\n\n",
      fitted_exponent(x, y1), fa2_problem.tiles->Br, fa2_problem.tiles->Bc);
}

void sweep_d(LessonContext& ctx) {
  ctx.step("Sweep d: fa1's traffic grows like d^2");
  constexpr Index kN = 8192;
  constexpr sim::Bytes kBlocks = 4;  // SRAM of four H200 blocks: long KV tiles even at d = 256
  const sim::Bytes sram = kBlocks * h200().sram_per_sm;
  ctx.print(
      "N = {}, bf16, fa1 with the paper's rule in an SRAM of {} ({} times one H200\n"
      "block's), so that even d = 256 gets long KV tiles:\n\n",
      kN, sim::format_bytes(double(sram)), kBlocks);
  std::vector<double> x, y;
  Table t({"d", "Br", "Bc", "fa1 bytes"});
  for (Index d : {32, 64, 128, 256}) {
    const auto r = count(Algorithm::fa1, kN, d, sram);
    x.push_back(double(d));
    y.push_back(double(r.bytes_total()));
    t.add({fmt::format("{}", d), fmt::format("{}", r.tiles->tiles.Br),
           fmt::format("{}", r.tiles->tiles.Bc), sim::format_bytes(y.back())});
  }
  ctx.table(t);
  ctx.print("Fitted exponent of d: {:.2f} (the theorem says 2: each of ~4Nd/M outer steps moves\n"
            "~Nd elements).\n\n", fitted_exponent(x, y));
}

void roofline(LessonContext& ctx) {
  ctx.step("Which resource binds on an H200");
  const auto& hw = h200();
  ctx.print("t >= max(matrix FLOPs / {:.0f} TFLOP/s, exps / {:.1f} T/s, HBM bytes / {:.2f} TB/s),\n"
            "the simulator's profile of the H200 ({}). A lower bound, not a prediction.\n\n",
            hw.matrix_flops_per_s / 1e12, hw.exp_per_s / 1e12, hw.hbm_bytes_per_s / 1e12,
            hw.description);
  Table t({"program", "N", "d", "matrix", "exp", "memory", "binds", "DRAM past the L2",
           "memory then", "binds then"}, {true});
  const auto us = [](double s) { return fmt::format("{:.1f} us", s * 1e6); };
  for (const auto& [N, d] : {std::pair<Index, Index>{8192, 128}, {8192, 64}, {1024, 64}}) {
    for (const auto a : {Algorithm::naive, Algorithm::fa2}) {
      sim::Problem p = problem_for(a, N, d, hw.sram_per_sm);
      const auto b = sim::roofline(sim::count(a, p), hw);
      p.l2_bytes = hw.l2_bytes;
      const auto with_l2 = sim::count(a, p);
      const auto b2 = sim::roofline(with_l2, hw);
      t.add({std::string(sim::to_string(a)), fmt::format("{}", N), fmt::format("{}", d),
             us(b.matrix_s), us(b.exp_s), us(b.memory_s), std::string(b.binding()),
             sim::format_bytes(double(with_l2.dram_total())), us(b2.memory_s),
             std::string(b2.binding())});
    }
  }
  ctx.table(t);
  ctx.print("Without an L2 (`memory`), every tile fetched from outside the SM is charged at HBM\n"
            "bandwidth, and memory binds for both programs. A real H200 has a {} L2 between\n"
            "HBM and the SMs; the simulator's optional L2 (LRU, write-back) predicts what still\n"
            "reaches DRAM past it. For the fused program that is about Q, K, V and O once, and\n"
            "arithmetic binds: the tensor cores, with the exponentials (one per score, against\n"
            "4d matrix FLOPs) not far behind at d = 64. ANCHORS.md measured the same effect on\n"
            "torch's kernel: 5.48 GB of L2 traffic but 110.6 MB read from DRAM. Naive's S and P\n"
            "(128 MiB each at N = 8192) do not fit, and naive stays memory bound. Overlapping\n"
            "softmax with the matrix products is the subject of lesson 8; lesson 9 removes\n"
            "most of the softmax's rescales.\n\n",
            sim::format_bytes(double(hw.l2_bytes)));
}

// The L2 Request Coalescer: the slices' reads are the SMs' divided by how many SM reads each
// slice read served, a figure of timing that the H200 measured and the model cannot predict.
void coalescing(LessonContext& ctx) {
  constexpr Index d = 128;
  const sim::HardwareProfile& hw = h200();
  const auto fa2 = gpu::kernel_config(FLASHLAB_KERNEL_FA2, d, FLASHLAB_BF16);
  ctx.print("fa2's reads through the Coalescer on an H200: the model's bytes into the SMs, the\n"
            "measured SM reads per slice read, and what that leaves the slices to read:\n\n");
  Table t({"heads", "N", "blocks", "per SM", "into the SMs (model)", "SM reads per slice read",
           "slices read"},
          {false});
  for (const measured::Coalescing& c : measured::kFa2Coalescing) {
    const Prediction p = predict({.kernel = "fa2", .n = c.n, .d = d, .heads = c.heads});
    const Index blocks = Index(c.heads) * ((c.n + fa2.Br - 1) / fa2.Br);
    const Index per_sm = std::min<Index>(fa2.blocks_per_sm, (blocks + hw.sm_count - 1) / hw.sm_count);
    const double ratio = c.to_sms / c.from_slices;
    t.add({fmt::format("{}", c.heads), fmt::format("{}", c.n), fmt::format("{}", blocks),
           fmt::format("{}", per_sm),
           sim::format_bytes(p.sm_read()), fmt::format("{:.2f}", ratio),
           sim::format_bytes(p.sm_read() / ratio)});
  }
  ctx.table(t);
  ctx.print("({}; {}.)\n"
            "Where each SM holds one block of one head, the blocks stream the same K and V\n"
            "tiles in step and about two SM reads meet per slice read. Where two blocks share\n"
            "an SM, or blocks of other heads come between, they drift apart and few meet. The\n"
            "model counts what each block loads, not when: it predicts the bytes into the SMs\n"
            "exactly, and the slices' bytes only once the ratio is measured.\n\n",
            measured::kFa2CoalescingSource.run, measured::kFa2CoalescingSource.tool);
}

// What the two-level model predicts is one level of three; each has its own counter.
void three_levels(LessonContext& ctx) {
  ctx.step("Three levels, three counters");
  constexpr Index N = 4096, d = 128;
  const sim::HardwareProfile& hw = h200();
  ctx.print("On its way from HBM to the tensor cores a byte crosses the L2 slices and then the\n"
            "link into an SM. Nsight Compute counts each level apart. The model of this lesson\n"
            "books every tile load and store between the L2 and one SM, so it predicts the first\n"
            "row of this table; the others need more of the machine. flashlab's kernels as built\n"
            "(their tiles from gpu/'s kernel table), one head, N = {}, d = {}, bf16, with the\n"
            "H200's {} L2 in the model:\n\n",
            N, d, sim::format_bytes(double(hw.l2_bytes)));
  Table t({"kernel", "into the SMs", "out of the SMs", "past the L2 (DRAM)"}, {true});
  for (const std::string& kernel : kernel_names()) {
    const Prediction p = predict({.kernel = kernel, .n = N, .d = d});
    if (!p.report) continue;
    t.add({kernel, sim::format_bytes(p.sm_read()), sim::format_bytes(p.sm_written()),
           sim::format_bytes(p.dram())});
  }
  ctx.table(t);
  ctx.print(
      "Measured on an H200 (docs/IO-LEVELS.md has the runs):\n"
      "- into the SMs, l1tex__m_xbar2l1tex_read_bytes: fa2 and the scalar kernel read exactly\n"
      "  the bytes above, and the naive kernel too: its row books cuBLAS's re-reads of its\n"
      "  operands, once per output tile of the tiles cuBLAS chose on the H200, and all three\n"
      "  of the softmax's passes over S, whose loads skip the SM's L1 (ld.global.cg) so that\n"
      "  each pass crosses into the SM. (fa2's cp.async.cg and the scalar kernel's\n"
      "  ld.global.cg pass the L1 by too; plain loads would not: see below.)\n"
      "- out of the SMs: the L1 issues a store as whole 32-byte sectors\n"
      "  (l1tex__t_sectors_pipe_lsu_mem_global_op_st), so the column above books each store's\n"
      "  sectors, not its bytes, and matches that counter exactly: the scalar kernel's 2-byte\n"
      "  stores, a row per thread, cost 16x their data; 4-byte stores straight from the mma\n"
      "  fragments, half a sector each, would cost 2x. fa2 writes its fragments into SRAM and\n"
      "  stores O as whole rows, 16 bytes a lane, and fa3 sends O from SRAM by TMA stores:\n"
      "  every sector whole, so what leaves the SM (l1tex__m_l1tex2xbar_write_bytes) is\n"
      "  exactly their data. (Half-written sectors leave merged by a rule not yet known.)\n"

      "- at the L2 slices, lts__t_bytes: lower than into the SMs. Between the two sits the\n"
      "  L2 Request Coalescer, which merges the requests of several SMs for the same sectors\n"
      "  when they reach it close enough together: one slice read then serves them all (see\n"
      "  below).\n"
      "- at DRAM, dram__bytes_read: about Q, K and V once; writes still dirty in the L2 when\n"
      "  the kernel ends reach DRAM after it. `flashlab compare` sets each kernel's mirror\n"
      "  beside all three on a GPU.\n\n");
  coalescing(ctx);

  // The L1: passed by every kernel's copies; the scalar kernel built with plain loads stops there.
  constexpr Index kLongN = 16384;
  const Prediction scalar = predict({.kernel = "scalar", .n = kLongN, .d = d, .plain_loads = true});
  const KernelMirror mirror = kernel_mirror(
      "scalar", sim::Problem{.N = kLongN, .d = d, .dtype = sim::DType::bf16}, 1, true);
  if (scalar.report && scalar.grid) {
    const double loads = double(scalar.report->bytes_read());
    ctx.print(
        "The L1 is a fourth level, inside the SM. Every kernel here copies its tiles past it\n"
        "(fa2's cp.async.cg, fa3's TMA, the scalar kernel's ld.global.cg), so what crosses into\n"
        "the SMs is what the blocks load. Plain loads stop in it, and the scalar kernel built\n"
        "with them (bench_scalar_block_log) shows what it does. At N = {} it has {} blocks of\n"
        "{} rows; {} fit on an SM beside their shared memory, which leaves {} of the SM's\n"
        "{} unified cache as L1. The first wave puts block b on SM b mod {}, so blocks b and\n"
        "b + {} share an SM, read the same K and V tiles in step, and the second finds them\n"
        "in the L1: the blocks load {}, and {} of it crosses into the SMs ({:.3f}). The H200\n"
        "measured {:.3f} of the loads at this shape\n({}).\n",
        kLongN, scalar.grid->problem.blocks(), scalar.grid->problem.Br, mirror.blocks_per_sm,
        sim::format_bytes(double(mirror.l1_bytes)),
        sim::format_bytes(double(hw.sm.unified_cache_bytes)), hw.sm_count, hw.sm_count,
        sim::format_bytes(loads), sim::format_bytes(scalar.sm_read()), scalar.sm_read() / loads,
        measured::kScalarSmReadN16384.ratio, measured::kScalarSmReadN16384.source.run);
  }
  // With many heads, which blocks meet on an SM is a matter of time: the heads catch up.
  constexpr Index kManyHeads = 16, kManyN = 8192;
  const Prediction heads =
      predict({.kernel = "scalar", .n = kManyN, .d = d, .heads = kManyHeads, .plain_loads = true});
  if (heads.report && heads.grid && heads.sm_read_high > 0) {
    const double loads = double(heads.report->bytes_read()) * double(kManyHeads);
    const measured::LoadsPastTheL1& past = measured::kScalarLoadsPastTheL1;
    ctx.print(
        "\nWith {} heads at N = {} no rule places a head's blocks together; time does. On the\n"
        "H200 a head's blocks end together even when they start apart: a block that starts\n"
        "behind its head's others finds their K and V tiles already in the L2, and its\n"
        "loads wait less (the kernel's block logs bound such a step at {:.3f} of one served\n"
        "from DRAM, and the model takes that). So the next head's blocks take the freed\n"
        "slots at once, in step, and two of them on one SM share its L1. Which heads end\n"
        "together is a race: the model draws the heads' paces {} times and runs the grid\n"
        "each time. Into the SMs cross {:.3f} to {:.3f} of the loads (median {:.3f}); the H200\n"
        "measured {:.3f}\n({}).\n"
        "Bytes that follow the timing of blocks are bytes no count can promise: two calls of\n"
        "the same kernel need not read the same. So the library's scalar kernel loads past\n"
        "the L1, and its bytes into the SMs are its loads: {} its mirror's at {} shapes,\n"
        "one head and many, both masks. It runs at {:.3f} to {:.3f} of the plain\n"
        "loads' speed at d = 128 and {:.3f} to {:.3f} at d = 64, without the L1's hits\n"
        "({}).\n",
        kManyHeads, kManyN, measured::kScalarL2StepShare.l2_step_share, kPaceDraws,
        heads.sm_read_low / loads, heads.sm_read_high / loads, heads.sm_read() / loads,
        measured::kScalarSmReadH16N8192.ratio, measured::kScalarSmReadH16N8192.source.run,
        past.sm_read_low == past.sm_read_high
            ? fmt::format("{:.3f} of", past.sm_read_low)
            : fmt::format("{:.3f} to {:.3f} of", past.sm_read_low, past.sm_read_high),
        past.shapes, past.speed_d128_low, past.speed_d128_high, past.speed_d64_low,
        past.speed_d64_high, past.source.run);
  }
  // The naive kernel at DRAM: three launches, each measured cold.
  const Prediction naive = predict({.kernel = "naive", .n = N, .d = d});
  ctx.print(
      "\nThe naive kernel is three launches, and Nsight Compute writes the L2 back and empties\n"
      "it before each launch it measures: the softmax reads all of S from DRAM, the second\n"
      "GEMM all of P. Its mirror runs them so, and reads {} from DRAM at N = {} (Q, K and V\n"
      "are {}); the H200 measured {:.3f} times that\n({}).\n",
      sim::format_bytes(naive.dram_read()), N, sim::format_bytes(3.0 * double(N * d * 2)),
      measured::kNaiveDramReadN4096.ratio, measured::kNaiveDramReadN4096.source.run);
}

}  // namespace

void run_lesson_05(LessonContext& ctx) {
  three_programs(ctx);
  sweep_N(ctx);
  sweep_M(ctx);
  sweep_d(ctx);
  roofline(ctx);
  three_levels(ctx);
  ctx.finish("lesson 6, the backward pass: recomputing S instead of storing P.");
}

}  // namespace flashlab::app
