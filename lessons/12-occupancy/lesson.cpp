// Lesson 12: registers, occupancy and the grid. Why flashlab's fa2 kernel (03_fa2.cu) runs
// with 255 registers a thread, 2 blocks per SM and 2 warps per scheduler, read from the
// compiler's own report (ptxas_report.*) and computed from the H200's SM limits (the
// simulator's hardware profile owns them; occupancy.*); what other register counts would
// give; what the measured warp states say it costs (measured_h200.hpp); and how
// FlashAttention-2's blocks per (batch, head, query tile) fill the 132 SMs where blocks per
// (batch, head) alone would not.
#include "12-occupancy/occupancy.hpp"
#include "12-occupancy/ptxas_report.hpp"
#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "kit/lesson_context.hpp"

#include "flashlab/cpu/options.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_balance.hpp"
#include "flashlab/gpu/tile_schedule.hpp"
#include "flashlab/sim/units.hpp"

#include <algorithm>
#include <map>

namespace flashlab::app {

namespace {

using gpu::KernelConfig;

constexpr int kHeadDims[] = {64, 128};
constexpr std::int64_t kKiB = 1024;

KernelConfig fa2_config(int d) { return gpu::kernel_config(FLASHLAB_KERNEL_FA2, d, FLASHLAB_BF16); }
const sim::SmLimits& sm() { return target_profile().sm; }

// The registers of one fa2 instantiation as ptxas reported them, by (d, dropout); bf16 and
// fp16 get the same count in every report seen, and the larger is kept if they ever differ.
using RegisterCounts = std::map<std::pair<int, bool>, int>;

RegisterCounts compiler_report(LessonContext& ctx) {
  ctx.step("What the compiler gave the kernel");
  const ReportFile file = fa2_ptxas_report();
  RegisterCounts counts;
  if (!file.text) {
    ctx.print(
        "The compiler's report is missing: {}.\n"
        "The steps below use the budget the kernel's launch bounds give ptxas instead.\n\n",
        file.why_missing);
    return counts;
  }
  ctx.print(
      "ptxas reports, for every kernel it compiles, the registers a thread uses and the\n"
      "bytes it had to spill to local memory (per thread, in the L1 and beyond) when\n"
      "they did not fit. Its report of 03_fa2.cu, written by this build to\n  {}:\n\n",
      file.path);
  Table t(
      {"dtype", "d", "Bc", "dropout", "registers", "spill stores", "spill loads", "stack frame"});
  for (const KernelResources& k : parse_ptxas_report(*file.text)) {
    const auto fa2 = fa2_instance(k.name);
    if (!fa2) continue;
    t.add({fa2->dtype, fmt::format("{}", fa2->d), fmt::format("{}", fa2->Bc),
           fa2->dropout ? "yes" : "no", fmt::format("{}", k.registers),
           fmt::format("{} B", k.spill_store_bytes), fmt::format("{} B", k.spill_load_bytes),
           fmt::format("{} B", k.stack_bytes)});
    int& r = counts[{fa2->d, fa2->dropout}];
    r = std::max(r, k.registers);
  }
  ctx.table(t);
  ctx.print(
      "Every instantiation is at the ceiling of {} registers a thread. Without dropout\n"
      "nothing spills; with it, the Philox draws need a few more live values than fit, and\n"
      "ptxas parks them in local memory (read back through the L1 at every use).\n\n",
      sm().max_registers_per_thread);
  return counts;
}

int registers_of(const RegisterCounts& counts, int d, int budget) {
  const auto at = counts.find({d, false});
  return at == counts.end() ? budget : at->second;
}

void sm_limits(LessonContext& ctx, const RegisterCounts& counts) {
  ctx.step("What an SM holds, and what one fa2 block asks for");
  const auto& s = sm();
  ctx.print(
      "An H200 SM ({} of them) holds at most {} threads and {} blocks, {} registers of\n"
      "32 bits (given to warps in units of {}, a quarter of the file to each of its {}\n"
      "schedulers) and {} of shared memory, of which {} is reserved for each resident\n"
      "block (the hardware profile, from NVIDIA's tables). A block of fa2 is {} threads\n"
      "({} warps), with the SRAM kernel_info.hpp gives it:\n\n",
      target_profile().sm_count, s.max_threads, s.max_blocks, s.registers, s.register_granule,
      s.schedulers, sim::format_bytes(double(s.shared_bytes)),
      sim::format_bytes(double(s.shared_reserved_per_block)), fa2_config(128).threads,
      fa2_config(128).threads / gpu::kWarpSize);
  const int budget = register_budget(s, fa2_config(128).threads, gpu::fa2::kBlocksPerSm);
  Table t({"d", "registers", "SRAM", "blocks by registers", "by SRAM", "by threads",
           "by block limit", "blocks per SM", "warps per scheduler", "built for"});
  for (int d : kHeadDims) {
    const KernelConfig c = fa2_config(d);
    const int r = registers_of(counts, d, budget);
    const Occupancy o = occupancy(s, c.threads, r, c.sram_bytes);
    t.add({fmt::format("{}", d), fmt::format("{}", r), sim::format_bytes(double(c.sram_bytes)),
           fmt::format("{}", o.by_registers), fmt::format("{}", o.by_shared),
           fmt::format("{}", o.by_threads), fmt::format("{}", o.by_blocks),
           fmt::format("{}", o.blocks), num(o.warps_per_scheduler(s), 3),
           fmt::format("{}", c.blocks_per_sm)});
  }
  ctx.table(t);
  const Occupancy o = occupancy(s, fa2_config(128).threads, budget, fa2_config(128).sram_bytes);
  ctx.print(
      "{} registers a thread is {} a warp once rounded to the unit; a scheduler's {}\n"
      "registers hold {} such warps, the SM {}, so {} blocks of {} warps. The SRAM says\n"
      "the same: two double-buffered blocks fit the SM's {}, three do not. The kernel asks\n"
      "for exactly this with __launch_bounds__({}, {}), which lets ptxas use up to {}\n"
      "registers a thread: it takes them all.\n\n",
      budget, o.registers_per_warp, s.registers / s.schedulers,
      s.registers / s.schedulers / o.registers_per_warp, o.warps_per_sm(), o.blocks,
      o.warps_per_block, sim::format_bytes(double(s.shared_bytes)), fa2_config(128).threads,
      gpu::fa2::kBlocksPerSm, budget);
}

// The fp32 values a thread of fa2 keeps in registers for the whole sweep or the whole tile:
// the warp's rows of U (rows x d) and of S (rows x Bc), spread over 32 lanes.
void why_255(LessonContext& ctx) {
  ctx.step("Why so many, and what fewer would buy");
  ctx.print(
      "FlashAttention-2 keeps a query tile's state on chip for the whole sweep, and fa2\n"
      "keeps it in registers: the accumulator U and the score tile S of each warp's rows\n"
      "(split-Q, lesson 7). Each warp owns Br / warps rows, so a thread holds\n"
      "(rows x d + rows x Bc) / 32 fp32 values, before the mma operands, m and l,\n"
      "addresses and loop counters:\n\n");
  Table t({"d", "Br", "Bc", "rows per warp", "U", "S", "m, l", "mma operands", "sum"});
  for (int d : kHeadDims) {
    const KernelConfig c = fa2_config(d);
    const int rows = c.Br / (c.threads / gpu::kWarpSize);
    const int U = rows * d / gpu::kWarpSize, S = rows * c.Bc / gpu::kWarpSize;
    // m and l: two rows (g, g + 8) per m16 tile; operands: an A fragment of Q (4 registers)
    // per m16 tile and one of K or V (4 registers), as compute_scores and mma_wv hold them.
    constexpr int kMmaM = 16, kFragment = 4;
    const int ml = 2 * 2 * rows / kMmaM, operands = kFragment * rows / kMmaM + kFragment;
    t.add({fmt::format("{}", d), fmt::format("{}", c.Br), fmt::format("{}", c.Bc),
           fmt::format("{}", rows), fmt::format("{}", U), fmt::format("{}", S),
           fmt::format("{}", ml), fmt::format("{}", operands),
           fmt::format("{}", U + S + ml + operands)});
  }
  ctx.table(t);
  const auto& s = sm();
  const KernelConfig c = fa2_config(128);
  ctx.print(
      "A block of {} threads with r registers a thread, alone and with fa2's {} of SRAM\n"
      "(d = 128):\n\n",
      c.threads, sim::format_bytes(double(c.sram_bytes)));
  Table w({"registers", "a warp (allocated)", "warps per scheduler", "blocks by registers",
           "blocks with fa2's SRAM", "warps per scheduler then"});
  for (int r : {128, 168, s.max_registers_per_thread}) {
    const Occupancy alone = occupancy(s, c.threads, r, 0);
    const Occupancy with_sram = occupancy(s, c.threads, r, c.sram_bytes);
    w.add({fmt::format("{}", r), fmt::format("{}", alone.registers_per_warp),
           num(double(alone.by_registers * alone.warps_per_block) / s.schedulers, 3),
           fmt::format("{}", alone.by_registers), fmt::format("{}", with_sram.blocks),
           num(with_sram.warps_per_scheduler(s), 3)});
  }
  ctx.table(w);
  const int warps = c.threads / gpu::kWarpSize;
  ctx.print(
      "{} registers is the most that still fits three blocks of {} warps, {} the most for\n"
      "four. But fa2 gains nothing from fewer registers alone: its SRAM also stops at two\n"
      "blocks. More warps would need both a smaller register footprint (fewer rows or a\n"
      "shorter KV tile per warp) and less SRAM (one buffer, or smaller tiles): each costs\n"
      "something back.\n\n",
      register_budget(s, c.threads, 3), warps, register_budget(s, c.threads, 4));
}

void what_it_costs(LessonContext& ctx) {
  ctx.step("What two warps per scheduler cost");
  const auto& m = measured::kFa2WarpState;
  const auto& s = sm();
  const Occupancy o = occupancy(s, fa2_config(128).threads,
                                register_budget(s, fa2_config(128).threads, gpu::fa2::kBlocksPerSm),
                                fa2_config(128).sram_bytes);
  ctx.print(
      "A scheduler issues one instruction a cycle from one of its ready warps. With {}\n"
      "warps to pick from, every latency (an ldmatrix from SRAM, an exp2 on the special\n"
      "function unit, the tensor core's result) that both warps wait on at once is a\n"
      "cycle lost. Measured by {}\n  at {}\n  ({}):\n\n",
      num(o.warps_per_scheduler(s), 3), m.source.tool, m.source.shape, m.source.run);
  Table t({"figure", "value"}, {true});
  t.add({"cycles with no eligible warp (measured)",
         fmt::format("{:.0f}%", 100 * m.no_eligible_share)});
  t.add({"cycles that can issue, at most (1 - that)",
         fmt::format("{:.0f}%", 100 * (1 - m.no_eligible_share))});
  t.add({"warps per scheduler", num(o.warps_per_scheduler(s), 3)});
  t.add({"warps per scheduler the SM could hold (its thread limit)",
         num(double(s.max_threads / gpu::kWarpSize) / s.schedulers, 3)});
  ctx.table(t);
  ctx.say(
      "Within one warp, the softmax of a tile waits for all of S = Q K^T and W V waits for\n"
      "the softmax; with only two warps there is little else to run meanwhile. That is the\n"
      "gap FlashAttention-3 closes on Hopper: wgmma runs asynchronously, so a warpgroup's\n"
      "softmax overlaps another's matrix products (lesson 8), and its accumulators grow\n"
      "without the same register squeeze (setmaxnreg moves registers to the consumers).\n\n");
}

// fa3's registers: a producer warpgroup that gives most of its share to the consumers
// (setmaxnreg), and what a consumer keeps for a whole KV tile; two consumers at d = 128,
// three at d = 64, and why the second needs FlashAttention-3's one W buffer. Every figure is
// kernel_info.hpp's (fa3::).
void fa3_registers(LessonContext& ctx) {
  namespace k = gpu::fa3;
  ctx.step("fa3: a producer that gives its registers away, two or three consumers");
  ctx.print(
      "fa3 runs one block per SM: a producer warpgroup that only issues TMA copies, and\n"
      "consumer warpgroups that each own {} query rows and compute. At launch every thread\n"
      "gets the same share of the SM's {} registers, what __launch_bounds__(threads, 1)\n"
      "allows; then setmaxnreg takes the producer's down and the consumers' up, so that the\n"
      "warps that hold the tiles have them. A consumer thread keeps, for a whole KV tile, its\n"
      "share of S ({} rows x Bc = {} keys, fp32, over 128 threads), of U ({} rows x d, fp32)\n"
      "and of W, the softmax's output in bf16, the A operand of U += W V ({} registers a\n"
      "buffer); before addresses, m and l, and the softmax's temporaries:\n\n",
      k::kRowsPerConsumer, sm().registers, k::kRowsPerConsumer, k::kBc, k::kRowsPerConsumer,
      k::w_registers());
  Table t({"d", "consumers", "Br", "threads", "at launch", "producer", "consumer",
           "registers used", "S", "U", "W buffers", "S + U + W"});
  const auto data = [](int d, int buffers) { return k::consumer_data_registers(d, buffers); };
  const auto at_launch = [](int d) { return k::registers_at_launch(k::threads(true, d)); };
  for (int d : {128, 64}) {
    const int threads = k::threads(true, d), consumers = k::consumer_warpgroups(d);
    const int used = k::kWarpgroupThreads * (k::producer_registers(d) +
                                             consumers * k::consumer_registers(d));
    t.add({fmt::format("{}", d), fmt::format("{}", consumers), fmt::format("{}", k::br(d)),
           fmt::format("{}", threads), fmt::format("{}", at_launch(d)),
           fmt::format("{}", k::producer_registers(d)), fmt::format("{}", k::consumer_registers(d)),
           fmt::format("{} of {}", used, sm().registers), fmt::format("{}", k::s_registers()),
           fmt::format("{}", k::u_registers(d)), fmt::format("{}", k::w_buffers(d)),
           fmt::format("{}", data(d, k::w_buffers(d)))});
  }
  ctx.table(t);
  ctx.print(
      "At d = 128 {} consumers hold {} registers of data in {}, {} W buffers among them:\n"
      "the softmax packs W_j into one while U += W_{{j-1}} V_{{j-1}} still reads the other. At\n"
      "d = 64 a KV tile's products are half as long and the softmax is not, so with two\n"
      "consumers each softmax outlasts the other's products and the tensor cores wait; with\n"
      "{} (Br = {}) each softmax has the others' products to run under. {} warpgroups leave\n"
      "{} registers a thread at launch and {} a consumer after setmaxnreg: with two W\n"
      "buffers the data alone would be {}, and ptxas spilled. So at d = 64 the softmax\n"
      "writes W over S in fp32 and packs it into the one W buffer once U += W V has landed\n"
      "(FlashAttention-3's order). On the H200 three consumers ran 1.07 to 1.22x two from\n"
      "N = 1024 without the mask (bench/RESULTS.md, the fifth run of 2026-12-02); lesson 8's\n"
      "exercise 5 asks why.\n\n",
      k::consumer_warpgroups(128), data(128, k::w_buffers(128)), k::consumer_registers(128),
      k::w_buffers(128), k::consumer_warpgroups(64), k::br(64), k::consumer_warpgroups(64) + 1,
      at_launch(64), k::consumer_registers(64), data(64, 2));
}

// FlashAttention-2 (section 3.2): blocks over (batch, head) and query tiles, where
// FlashAttention-1 had one block per (batch, head).
void parallelism(LessonContext& ctx) {
  ctx.step("Parallelism over the sequence: enough blocks for 132 SMs");
  const auto& hw = target_profile();
  const KernelConfig c = fa2_config(128);
  const int per_sm = c.blocks_per_sm;
  ctx.print(
      "FlashAttention-1 gave each (batch, head) one thread block, which swept all its query\n"
      "rows. FlashAttention-2 (Dao 2023, section 3.2) also splits the rows: one block per\n"
      "(batch, head, query tile of Br = {} rows). With d = 128 the H200 holds {} SMs x {}\n"
      "blocks = {} at once; a grid runs in waves of that many:\n\n",
      c.Br, hw.sm_count, per_sm, hw.sm_count * per_sm);
  Table t({"B", "H", "N", "blocks (b, h)", "SMs busy", "blocks (b, h, tile)", "waves", "slots busy",
           "SMs busy"});
  struct Shape {
    std::int64_t B, H, N;
  };
  for (const Shape& p : {Shape{1, 16, 8192}, Shape{2, 16, 8192}, Shape{1, 32, 16384},
                         Shape{8, 16, 2048}, Shape{32, 16, 512}, Shape{1, 1, 4096}}) {
    const GridFill heads = grid_fill(p.B * p.H, hw.sm_count, per_sm);
    const GridFill tiles = grid_fill(p.B * p.H * ((p.N + c.Br - 1) / c.Br), hw.sm_count, per_sm);
    t.add({fmt::format("{}", p.B), fmt::format("{}", p.H), fmt::format("{}", p.N),
           fmt::format("{}", heads.blocks), fmt::format("{} of {}", heads.sms_busy, hw.sm_count),
           fmt::format("{}", tiles.blocks), fmt::format("{}", tiles.waves),
           fmt::format("{:.0f}%", 100 * tiles.slot_share),
           fmt::format("{} of {}", tiles.sms_busy, hw.sm_count)});
  }
  ctx.table(t);
  const GridFill one = grid_fill(16, hw.sm_count, per_sm);
  ctx.print(
      "At B = 1, H = 16, N = 8192 a block per (batch, head) leaves {} of {} SMs idle for\n"
      "the whole kernel, however long the sequence. Long sequences come with small\n"
      "batches (memory), which is exactly where FlashAttention-1 ran short of blocks.\n"
      "Query tiles are independent (each has its own m, l, U), so splitting them costs\n"
      "only K and V read once per tile instead of once per head, from the L2 (lesson 5).\n"
      "`slots busy` is the share of the block slots in use averaged over the waves: a\n"
      "short last wave is lost time. Decode has one query row and no tiles to split:\n"
      "lesson 10 splits the keys instead.\n\n",
      hw.sm_count - one.sms_busy, hw.sm_count);
}

// Causal blocks of unequal work: fa3's persistent blocks in fixed turns against blocks that
// take the next tile when they are free (tile_balance.hpp counts both).
void unequal_blocks(LessonContext& ctx) {
  ctx.step("Unequal blocks: the causal mask, fixed turns and a work queue");
  const auto& hw = target_profile();
  constexpr std::int64_t kHidden = 2048, kTokens = 16384;  // H = 2048 / d, B = 16384 / N
  ctx.print(
      "Under the causal mask query tile t reads the KV tiles up to its last row, (t + 1) Br / Bc\n"
      "of them rounded up: the last tile of a head does Tr times the work of the first, or\n"
      "nearly. fa3 (Br = {} at d = 128, {} at d = 64, Bc = {}) can run one persistent block per\n"
      "SM, its set-up paid once, the tiles handed out longest first. In fixed turns (block k\n"
      "takes tiles k, k + {}, ...) some blocks draw more long tiles than others; taken in order as\n"
      "blocks free up (the hardware's dispatch of one block per tile, or fa3's work queue: a\n"
      "counter in device memory) a block that drew a long tile takes fewer. The busiest SM's\n"
      "work over the mean, counted in KV tiles, H = {} / d, B = {} / N:\n\n",
      gpu::fa3::br(128), gpu::fa3::br(64), gpu::fa3::kBc, hw.sm_count, kHidden, kTokens);
  Table t({"d", "N", "tiles", "tiles a SM", "in turns", "in order"});
  for (std::int64_t d : {64, 128})
    for (std::int64_t n : {1024, 4096, 16384}) {
      const auto order =
          gpu::fa3::make_tile_order(kTokens / n, kHidden / d, kHidden / d, n, n, d,
                                    gpu::dtype_bytes(FLASHLAB_BF16), /*causal=*/true, hw.l2_bytes);
      t.add({fmt::format("{}", d), fmt::format("{}", n), fmt::format("{}", order.items),
             fmt::format("{:.1f}", double(order.items) / hw.sm_count),
             fmt::format("{:.3f}", gpu::fa3::busiest_in_turns(order, hw.sm_count, true)),
             fmt::format("{:.3f}", gpu::fa3::busiest_in_order(order, hw.sm_count, true))});
    }
  ctx.table(t);
  ctx.print(
      "The kernel ends when its busiest SM does, so `in turns` is the time fixed turns take\n"
      "over an even share, before any overhead. Without the mask every tile costs the same\n"
      "and turns are even. The queue's producer claims the next tile as many KV tiles before\n"
      "its block is free as the ring has stages ({} at d = 128, {} at d = 64), so that the\n"
      "atomic's trip to the L2 is not waited for: that can hand a tile to another block, but\n"
      "not, counted so, change the busiest one's work at these shapes. It costs one atomic\n"
      "add per tile. FLASHLAB_FA3_GRID_AUTO takes it under the causal mask from {} query\n"
      "tiles a head, and without the mask where a block runs {} consumers (d = 64): equal\n"
      "tiles still end at unequal times on the GPU, measured 1 to 2% faster from the queue\n"
      "(kernel_info.hpp has the H200's figures; time it with\n"
      "bench/gpu/bench.py --impls fa3-queue fa3-persistent).\n\n",
      gpu::fa3::default_stages(128), gpu::fa3::default_stages(64), gpu::fa3::kAutoQueueMinTiles,
      gpu::fa3::kAutoQueueWithoutMaskMinConsumers);
}

// The (64, Bc) tile-slots one head's blocks take under the top-left mask if each block lasts
// as long as its busiest consumer (consumers x that consumer's own KV tiles), with the query
// tiles started `lead` rows before row 0 (rows below 0 hold nothing): exercise 6's count.
std::int64_t busiest_consumer_slots(std::int64_t n, std::int64_t lead,
                                    const sim::Fa3KernelFacts& f) {
  const std::int64_t rows = f.Br / f.consumers, tiles = cpu::tile_count(n + lead, f.Br);
  std::int64_t slots = 0;
  for (std::int64_t t = 0; t < tiles; ++t) {
    std::int64_t busiest = 0;
    for (std::int64_t c = 0; c < f.consumers; ++c) {
      const std::int64_t first = std::max<std::int64_t>(t * f.Br - lead + c * rows, 0);
      const std::int64_t end = std::min(t * f.Br - lead + (c + 1) * rows, n);
      if (first < end) busiest = std::max(busiest, cpu::tile_count(end, f.Bc));  // keys 0..end-1
    }
    slots += f.consumers * busiest;
  }
  return slots;
}

// Consumers of unequal work inside one fa3 block at d = 64: the (64, Bc) tiles the three
// consumers compute, every tile the block loads or only their own rows' (own_tiles in
// 06_fa3.cu), counted by the kernel's simulator mirror (sim::count_fa3_kernel).
void unequal_consumers(LessonContext& ctx) {
  ctx.step("Unequal consumers: inside a block, at d = 64");
  constexpr std::int64_t d = 64;
  const Fa3Facts asked = fa3_kernel_facts(d, sim::DType::bf16);
  sim::Fa3KernelFacts facts = *asked.facts;
  const std::int64_t rows = facts.Br / facts.consumers;
  constexpr std::int64_t kN = 1024;  // the worked example: a head's last block
  const std::int64_t last = cpu::tile_count(kN, facts.Br) - 1;
  const std::int64_t empty_rows = (last + 1) * facts.Br - kN;  // of the last block, past N
  ctx.print(
      "At d = 64 a block holds {} consumer warpgroups of {} rows (Br = {}), against KV tiles\n"
      "of Bc = {} keys. The producer loads every KV tile some row of the block sees; a\n"
      "consumer's own rows may see fewer. Under the causal mask a diagonal block's first\n"
      "consumers end a tile before its last one, and where Br does not divide N a head's\n"
      "partly empty block has consumers with no row at all (N = {}: rows {}..{}, the last\n"
      "{} consumers past N). Counted by fa3's simulator mirror for one head, in ({}, {})\n"
      "tiles, with every consumer computing every tile the block loads, and with each\n"
      "computing only its own rows' (fa3::consumers_skip_unseen: at d = 64 where ping-pong\n"
      "is off and items run apart, the defaults there):\n\n",
      facts.consumers, rows, facts.Br, facts.Bc, kN, last * facts.Br, (last + 1) * facts.Br - 1,
      empty_rows / rows, rows, facts.Bc);
  Table t({"N", "mask", "every tile", "own rows' tiles", "left out"});
  const auto consumer_tiles = [&](const sim::Fa3Shape& shape, bool skips) {
    facts.skips_unseen = skips;
    return sim::fa3_consumer_tiles(shape, facts);
  };
  std::int64_t own_causal = 0;  // at kN under the mask
  for (std::int64_t n : {1024, 2048, 4096, 16384})
    for (const bool causal : {false, true}) {
      const sim::Fa3Shape shape{.n_q = n, .n_k = n, .d = d,
                                .causal = causal ? cpu::Causal::top_left : cpu::Causal::none};
      const std::int64_t every = consumer_tiles(shape, false), own = consumer_tiles(shape, true);
      if (n == kN && causal) own_causal = own;
      t.add({fmt::format("{}", n), causal ? "causal" : "none", fmt::format("{}", every),
             fmt::format("{}", own), fmt::format("{:.1f}%", 100.0 * double(every - own) / every)});
    }
  ctx.table(t);
  const auto& gain = measured::kFa3SkipUnseenN1024;
  ctx.print(
      "A consumer that leaves its unseen tiles out releases them unread as they land, and\n"
      "the others' matmuls take the tensor cores meanwhile. Measured by {}\n  at {}\n"
      "  ({}),\n"
      "over the same kernel computing every tile, in two runs: {:.3f} and {:.3f} under the\n"
      "mask, {:.3f} and {:.3f} without it. Under ping-pong every consumer must take as many\n"
      "turns, so there each computes every tile.\n\n",
      gain.source.tool, gain.source.shape, gain.source.run, gain.causal[0], gain.causal[1],
      gain.none[0], gain.none[1]);
  const auto& lead = measured::kFa3LeadFirstN1024;
  // The tiles started as many whole consumers' rows before row 0 as the last tile lacks.
  const std::int64_t lead_rows = empty_rows / rows * rows;
  ctx.print(
      "Does a block end when its busiest consumer does? Under the mask the partly empty\n"
      "tile is a head's last, the one that sees the most keys, where one consumer of three\n"
      "works alone. At N = {} starting the tiles {} rows before row 0 makes it the first\n"
      "instead, and the busiest consumer's share of a head falls from {} tile-slots to {}\n"
      "(exercise 6). Measured by {}\n  at {}\n  ({}):\n"
      "{:.3f} of the kernel without it under the mask\n"
      "({:.3f} without the mask, where nothing moved: the spread of two builds). No gain.\n"
      "The likely reason (read from the counts, not profiled): the three consumers share one\n"
      "SM's tensor cores, so a consumer left alone issues into tensor cores no one else is\n"
      "using and runs faster; a block's time then follows the tiles its consumers compute\n"
      "together ({} either way), which is what leaving out the unseen tiles reduced.\n\n",
      kN, lead_rows, busiest_consumer_slots(kN, 0, facts),
      busiest_consumer_slots(kN, lead_rows, facts), lead.source.tool, lead.source.shape,
      lead.source.run, lead.causal, lead.none, own_causal);
}

}  // namespace

void run_lesson_12(LessonContext& ctx) {
  const RegisterCounts counts = compiler_report(ctx);
  sm_limits(ctx, counts);
  why_255(ctx);
  what_it_costs(ctx);
  fa3_registers(ctx);
  parallelism(ctx);
  unequal_blocks(ctx);
  unequal_consumers(ctx);
  ctx.finish("lesson 13: dropout, drawn again in the backward pass instead of stored.");
}

}  // namespace flashlab::app
