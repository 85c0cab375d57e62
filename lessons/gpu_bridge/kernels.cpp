#include "gpu_bridge/kernels.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_schedule.hpp"
#include "flashlab/sim/simulate.hpp"
#include "gpu_bridge/measured_h200.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <tuple>

namespace flashlab::app {

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& k : gpu::kKernels) names.emplace_back(k.name);
  return names;
}

std::string kernel_list() { return fmt::format("{}", fmt::join(kernel_names(), ",")); }

std::optional<flashlab_kernel> kernel_by_name(std::string_view name) {
  const gpu::KernelRecord* k = gpu::find_kernel(name);
  if (!k) return std::nullopt;
  return k->id;
}

std::string unknown_kernel_message(std::string_view name) {
  return fmt::format("unknown GPU kernel `{}`: the kernels are {}", name,
                     fmt::join(kernel_names(), ", "));
}

namespace {

// Which of the simulator's programs moves a kernel's bytes: the naive kernel's own program
// (S in fp32, read back by the softmax, P in the input dtype); the scalar kernel and fa2
// both stream K and V tile by tile past a query tile held on chip (FlashAttention-2's
// order), so the FA2 program with their tiles and score dtype mirrors them. fa3 has a
// mirror of its own (TMA, a ring of stages, any N_q, GQA): none of these programs.
std::optional<sim::Algorithm> mirror_program(flashlab_kernel kernel) {
  switch (kernel) {
    case FLASHLAB_KERNEL_NAIVE: return sim::Algorithm::naive_kernel;
    case FLASHLAB_KERNEL_SCALAR:
    case FLASHLAB_KERNEL_FA2: return sim::Algorithm::fa2;
    case FLASHLAB_KERNEL_FA3: return std::nullopt;  // sim::count_fa3_kernel
  }
  return std::nullopt;
}

sim::DType sim_dtype(flashlab_dtype dtype) {
  switch (dtype) {
    case FLASHLAB_FP32: return sim::DType::fp32;
    case FLASHLAB_FP16: return sim::DType::fp16;
    case FLASHLAB_BF16: break;
  }
  return sim::DType::bf16;
}

// The naive mirror's dirty cap (Problem::l2_dirty_cap): what the whole L2 holds dirty at most,
// shared by `heads` heads as the room (problem.l2_bytes, already set) is. A cap of the room or
// more cannot bind: none, which keeps LRU's steady state (l2_cache.hpp).
void set_naive_l2_dirty_cap(sim::Problem& problem, sim::Bytes whole_l2_cap, Index heads) {
  const sim::Bytes share = whole_l2_cap / std::max<Index>(1, heads);
  problem.l2_dirty_cap = share < problem.l2_bytes ? share : 0;
}

}  // namespace

CublasTilesFound cublas_tiles(Index n, Index d, Index heads, sim::DType dtype) {
  CublasTilesFound found;
  if (dtype != sim::DType::bf16) return found;
  // How far apart two sizes are: the ratio of the larger to the smaller, as a power of two.
  const auto apart = [](Index a, Index b) { return std::abs(std::log2(double(a) / double(b))); };
  // N and heads weigh alike (cuBLAS sizes its tiles to the whole batch's work); among shapes
  // as far, the nearer N, then the nearer heads, then the table's first.
  const auto distance = [&](const measured::CublasTiles& t) {
    return std::tuple(apart(t.n, n) + apart(t.heads, heads), apart(t.n, n), apart(t.heads, heads));
  };
  for (const auto& t : measured::kCublasTiles) {
    if (t.d != d) continue;
    if (found.tiles == nullptr || distance(t) < distance(*found.tiles)) found.tiles = &t;
  }
  found.exact = found.tiles && found.tiles->n == n && found.tiles->heads == heads;
  return found;
}

std::string CublasTilesFound::assumption() const {
  if (exact || tiles == nullptr) return "";
  return fmt::format("cuBLAS's tiles assumed from N = {}, {} head{} (this shape's not read)",
                     tiles->n, tiles->heads, tiles->heads == 1 ? "" : "s");
}

std::string kernel_refusal(std::string_view kernel, cpu::Index d, sim::DType dtype) {
  const auto id = kernel_by_name(kernel);
  if (!id) return unknown_kernel_message(kernel);
  return gpu::kernel_info(*id, d, c_dtype(dtype)).reason;
}

KernelMirror kernel_mirror(std::string_view kernel, const sim::Problem& problem, Index heads,
                           bool plain_loads) {
  KernelMirror mirror{std::nullopt, problem, ""};
  const auto id = kernel_by_name(kernel);
  if (!id) {
    mirror.why_not = unknown_kernel_message(kernel);
    return mirror;
  }
  if (plain_loads && *id != FLASHLAB_KERNEL_SCALAR) {
    mirror.why_not = fmt::format(
        "plain loads through the L1 are a build of the scalar kernel (bench_scalar_block_log); "
        "{} has none",
        kernel);
    return mirror;
  }
  const gpu::KernelInfo info = gpu::kernel_info(*id, problem.d, c_dtype(problem.dtype));
  if (!info.supported) {
    mirror.why_not = info.reason;
    return mirror;
  }
  const gpu::KernelConfig& c = info.config;
  if (c.Br > 0) mirror.problem.tiles = cpu::TileSizes{c.Br, c.Bc};
  mirror.blocks_per_sm = c.blocks_per_sm;
  mirror.causal_longest_first = c.causal_longest_first;
  const sim::SmLimits& sm = target_profile().sm;
  if (mirror.blocks_per_sm == 0 && c.Br > 0)
    mirror.blocks_per_sm = sim::blocks_by_shared_and_threads(sm, c.threads, c.sram_bytes);
  if (plain_loads)
    mirror.l1_bytes = sim::l1_beside_shared(sm, int(mirror.blocks_per_sm), c.sram_bytes);
  // Loads that the block waits for: a step is faster where the L2 holds its tiles (measured
  // for the scalar kernel, the one kernel whose blocks wait so).
  if (c.kv_loads_wait) mirror.l2_step_share = measured::kScalarL2StepShare.l2_step_share;
  if (*id == FLASHLAB_KERNEL_FA3) {
    mirror.fa3 = fa3_kernel_facts(problem.d, problem.dtype).facts;
    return mirror;
  }
  mirror.algorithm = mirror_program(*id);
  if (!mirror.algorithm) {
    mirror.why_not = "not modelled";
    return mirror;
  }
  mirror.problem.score_dtype = sim_dtype(c.s.dtype);
  mirror.problem.o_store = sim_store(c.o_store);
  mirror.problem.l_store = sim_store(c.lse_store);
  if (c.s.level == FLASHLAB_MEMORY_HBM) {  // three operators: S and P are tensors in HBM
    mirror.problem.weight_dtype = sim_dtype(c.w.dtype);
    mirror.problem.score_reads = c.s_hbm_reads;
    if (const CublasTilesFound found = cublas_tiles(problem.N, problem.d, heads, problem.dtype);
        found.tiles) {
      mirror.problem.score_gemm = found.tiles->score;
      mirror.problem.output_gemm = found.tiles->output;
      mirror.assumption = found.assumption();
    } else {
      mirror.assumption = "cuBLAS's tiles not read for this d and dtype: each operand read once";
    }
    mirror.problem.gemm_operands_held = true;  // cuBLAS's persistent blocks share K and V
    // The three launches as Nsight Compute measures them: each starts with an empty L2. And
    // as they run: each line of S and P is written by one block and read by one (a GEMM's
    // output tile, a softmax row), so the SMs of each side hold their own half of the
    // traffic, and a line homed on the other side takes room there too (home copies,
    // set_naive_l2_policy): the mirror's one L2 is the whole L2, both partitions' room for
    // both sides' traffic, half of its lines taking room twice. Each operator runs over all
    // the heads at once (cuBLAS's batch, the softmax's grid), whose tensors stream through it
    // one head after another, so `heads` heads evict what one head evicts through 1 / heads
    // of that room, times heads. What the L2 holds dirty is capped at what the H200 was
    // measured to hold, shared alike: the GEMM's S and the softmax's P are written far past
    // it. (docs/IO-LEVELS.md, "The naive kernel's writes: the whole L2 and its dirty cap":
    // DRAM writes within 15% at every stored row that writes more than 1 MiB; with one
    // partition's room for the whole traffic, which counts each side's lines twice, 0.77 to
    // 0.86 where S is 64 MiB, and 2 MiB where the H200 writes nothing at N = 2048.)
    mirror.problem.l2_emptied_between_kernels = true;
    if (problem.l2_bytes > 0) {
      const sim::HardwareProfile& hw = target_profile();
      // The L2 cut into one share per head.
      const Index shares = std::max<Index>(1, heads);
      mirror.problem.l2_bytes = std::max<sim::Bytes>(1, problem.l2_bytes / shares);
      set_naive_l2_dirty_cap(mirror.problem, sim::l2_dirty_room(hw), heads);
      // The softmax's rows in flight: its resident blocks, one per row, sm_count x what
      // threads and shared memory let an SM hold (2048 / 256 = 8 on the H200; its 20
      // registers a thread allow more), each side's half in its own partition: all of them
      // through the whole room, with heads scaled down alike.
      const Index resident =
          Index(hw.sm_count) * sim::blocks_by_shared_and_threads(hw.sm, c.threads, c.sram_bytes);
      mirror.problem.softmax_rows_in_flight = (resident + shares - 1) / shares;
      // Its blocks share nothing, so they drift apart and take their passes staggered.
      mirror.problem.softmax_staggered = true;
      // Its lines are kept and dropped as the profile's L2 keeps them (hashed sets on the
      // H200, as the grid model's): the onset of the softmax's re-reads follows the measured
      // one (docs/IO-LEVELS.md, "The naive kernel's transition measured"). But where the
      // rows in flight hold kNaiveLruFromRoomMultiple times the room or more, any
      // replacement drops their later passes (16-way sets keep under 0.1% of such a stream)
      // and LRU's steady state says so in milliseconds, where a record per line takes
      // minutes past N = 65536.
      const sim::Bytes rows_in_flight_bytes = mirror.problem.softmax_rows_in_flight *
                                              problem.N *
                                              sim::bytes_of(mirror.problem.score_dtype);
      const bool rows_outgrow_room =
          rows_in_flight_bytes >= kNaiveLruFromRoomMultiple * mirror.problem.l2_bytes;
      set_naive_l2_policy(mirror.problem,
                          rows_outgrow_room ? sim::L2Replacement::lru : hw.l2_replacement);
    }
  }
  return mirror;
}

void set_naive_l2_policy(sim::Problem& problem, sim::L2Replacement replacement) {
  const sim::HardwareProfile& hw = target_profile();
  problem.l2_replacement = replacement;
  // Its sets keep kL2Ways (16) lines, whatever the profile's l2_ways (16 on the GH100 today,
  // though its measured edges alone would say 64: profiles.cpp's kGh100L2Ways). Why: the naive
  // mirror's one L2 stands for both partitions and every SM's rows at once, drifting apart,
  // and a wider spread of the sets stands for that; with 64 ways its DRAM reads were within 15%
  // at 36 of 47 stored rows against 40 with 16 (docs/IO-LEVELS.md, "The room one side's reads
  // have"). The grid model, which runs the partitions and the SMs' blocks themselves, takes
  // the profile's ways.
  problem.l2_ways = sim::kL2Ways;
  // A line read from DRAM, or written, takes room at its home partition too: half of them,
  // those homed across from the side that touches them, take room twice in the whole L2.
  // Past kNaiveLruFromRoomMultiple, LRU's steady state drops the later passes with or without
  // those copies.
  problem.l2_home_partitions =
      hw.l2_home_copies && replacement == sim::L2Replacement::sets ? hw.l2_partitions : 1;
}

Fa3Facts fa3_kernel_facts(Index d, sim::DType dtype, Index stages) {
  namespace k = gpu::fa3;
  const gpu::KernelInfo info = gpu::kernel_info(FLASHLAB_KERNEL_FA3, d, c_dtype(dtype));
  if (!info.supported) return {std::nullopt, info.reason};
  if (stages == 0) stages = k::default_stages(d);
  const int most = k::max_stages(d, c_dtype(dtype));
  if (stages < 1 || stages > most)
    return {std::nullopt, fmt::format("the fa3 kernel takes 1 to {} stages at d = {}, not {}",
                                      most, d, stages)};
  return {sim::Fa3KernelFacts{.Br = info.config.Br,
                              .Bc = info.config.Bc,
                              .consumers = k::consumer_warpgroups(d),
                              .stages = stages,
                              .q_buffers = k::q_buffers(d, c_dtype(dtype), int(stages)),
                              .warp_specialized = info.config.threads == k::threads(true, d),
                              .threads = info.config.threads,
                              .align_slack = k::kSwizzleAtom,
                              .barrier_bytes = k::kBarrierBytes,
                              .dtype = dtype,
                              .writes_lse = true,
                              .o_store = sim_store(info.config.o_store),
                              .lse_store = sim_store(info.config.lse_store),
                              .stages_o = k::stages_o(d, c_dtype(dtype), int(stages)),
                              // as the default options run it
                              .skips_unseen = k::consumers_skip_unseen(
                                  d, /*warp_specialized=*/true, k::default_ping_pong(d),
                                  k::runs_across_items(k::kDefaultOverlapItems != 0,
                                                       /*warp_specialized=*/true,
                                                       /*conditional=*/false,
                                                       k::q_buffers(d, c_dtype(dtype),
                                                                    int(stages))))},
          ""};
}

bool fa3_takes_from_queue(const sim::Fa3Shape& s, const sim::Fa3KernelFacts& f) {
  namespace k = gpu::fa3;
  const k::TileOrder order =
      k::make_tile_order(s.batch, s.heads_q, s.heads_kv, s.n_q, s.n_k, s.d, sim::bytes_of(f.dtype),
                         s.causal != cpu::Causal::none, target_profile().l2_bytes);
  return k::resolve_grid(k::kDefaultGrid, order, f.warp_specialized) == FLASHLAB_FA3_GRID_QUEUE;
}

sim::PassReport count_fa3_as_launched(const sim::Fa3Shape& shape, sim::Fa3KernelFacts facts) {
  facts.work_queue = fa3_takes_from_queue(shape, facts);
  return sim::count_fa3_kernel(shape, facts);
}

std::optional<sim::WarpStore> sim_store(const gpu::WarpStorePattern& pattern) {
  if (pattern.threads == 0) return std::nullopt;
  return sim::WarpStore{.bytes_per_thread = pattern.bytes_per_thread,
                        .threads = pattern.threads,
                        .runs = pattern.runs};
}

sim::Problem fa2_kernel_problem(const sim::Problem& problem) {
  const KernelMirror mirror = kernel_mirror("fa2", problem);
  if (!mirror.algorithm || !mirror.problem.tiles)
    throw cpu::InvalidArgument(
        fmt::format("the fa2 kernel's tiles are not defined here: {}", mirror.why_not));
  sim::Problem paper = mirror.problem;  // the paper's algorithm: bytes of data
  paper.o_store.reset();
  paper.l_store.reset();
  return paper;
}

namespace {

// The target, once set_target_profile has chosen one; kDefaultTarget before.
const sim::HardwareProfile* g_target = nullptr;

// A profile the mirrors can predict for: where its blocks land has been measured (the grid
// model needs it) and a device's name tells the card.
bool is_target(const sim::HardwareProfile& p) {
  return !p.first_wave_partitions[0].empty() && !p.device_name.empty();
}

}  // namespace

const sim::HardwareProfile& target_profile() {
  return g_target ? *g_target : sim::find_profile(kDefaultTarget);
}

std::vector<std::string_view> target_names() {
  std::vector<std::string_view> names;
  for (const auto& p : sim::profiles())
    if (is_target(p)) names.push_back(p.name);
  return names;
}

void set_target_profile(std::string_view name) {
  for (const auto& p : sim::profiles())
    if (p.name == name && is_target(p)) {
      g_target = &p;
      return;
    }
  throw cpu::InvalidArgument(fmt::format(
      "--profile {}: the kernels' mirrors predict for a GPU the kernels are built for (sm_90a) "
      "whose L2 has been measured: {}",
      name, fmt::join(target_names(), ", ")));
}

std::string_view target_of_device(std::string_view device) {
  for (const auto& p : sim::profiles())
    if (is_target(p) && device.find(p.device_name) != std::string_view::npos) return p.name;
  return {};
}

cpu::Causal KernelRun::alignment() const {
  if (!causal) return cpu::Causal::none;
  return queries() == n ? cpu::Causal::top_left : cpu::Causal::bottom_right;
}

namespace {

// fa3's tile scheduler's order for the run (tile_schedule.hpp), planned for an L2 of l2_bytes
// (on the run's share of it where it gives one, fa3_kv_l2_share): batch 1, heads as the run's.
gpu::fa3::TileOrder fa3_tile_order(const KernelRun& run, Index heads_kv, sim::DType dtype,
                                   std::int64_t l2_bytes) {
  return gpu::fa3::make_tile_order(1, run.heads, heads_kv, run.queries(), run.n, run.d,
                                   sim::bytes_of(dtype), run.causal, l2_bytes, run.fa3_kv_l2_share);
}

// The sections of that order in words, for fa3's row: ", sections of 8 heads", and the share
// where the run gives one.
std::string fa3_sections(const KernelRun& run, const gpu::fa3::TileOrder& order) {
  std::string s = fmt::format(", sections of {} head{}", order.section_pairs,
                              order.section_pairs == 1 ? "" : "s");
  if (run.fa3_kv_l2_share != FLASHLAB_FA3_AUTO)
    s += fmt::format(" on {}% of the L2", run.fa3_kv_l2_share);
  return s;
}

// fa3's blocks take their (head, query tile) from that order, on the L2 of the GPU the mirror
// runs on.
std::function<sim::BlockTile(Index)> fa3_order(const KernelRun& run, const sim::GridProblem& g) {
  const gpu::fa3::TileOrder order = fa3_tile_order(run, g.kv_head_count(), g.dtype, g.l2_bytes);
  return [order](Index block) {
    const gpu::fa3::WorkItem w = gpu::fa3::work_item(order, block);
    return sim::BlockTile{w.b * order.heads_q + w.h, w.tile};
  };
}

// The catch_up schedule's heads run at paces drawn from the grid's seed, and which head's
// blocks free which slots, and so which blocks share an SM's L1, follows the draws: the
// bytes into the SMs of one draw are one of many a GPU could show (its own calls spread as
// much, docs/IO-LEVELS.md). So the grid runs with kPaceDraws seeds and the draw whose bytes
// into the SMs are the median is the prediction; the others' range goes into the
// prediction's note.
void predict_from_draws(sim::GridProblem grid, Prediction& p) {
  std::vector<std::future<sim::GridReport>> runs;
  for (int seed = 0; seed < kPaceDraws; ++seed) {
    grid.seed = std::uint64_t(seed);
    runs.push_back(std::async(std::launch::async, [g = grid] { return sim::run_grid(g); }));
  }
  std::vector<sim::GridReport> draws;
  for (auto& r : runs) draws.push_back(r.get());
  // Into the SMs: the same loads in every draw, less what the L1s served.
  std::ranges::sort(draws, std::greater{}, &sim::GridReport::l1_hit_bytes);
  const double loads = double(p.report->bytes_read()) * double(p.heads);
  p.sm_read_low = loads - double(draws.front().l1_hit_bytes);
  p.sm_read_high = loads - double(draws.back().l1_hit_bytes);
  const std::string range = fmt::format(
      "into the SMs the median of {} draws of the heads' paces (catch_up), which "
      "range from {:.3f} to {:.3f} GB",
      kPaceDraws, p.sm_read_low / 1e9, p.sm_read_high / 1e9);
  p.assumption = p.assumption.empty() ? range : p.assumption + "; " + range;
  p.grid = std::move(draws[kPaceDraws / 2]);
}

}  // namespace

Prediction predict(const KernelRun& run) {
  if (!gpu::fa3::is_kv_l2_share(run.fa3_kv_l2_share))
    throw cpu::InvalidArgument(
        fmt::format("fa3's share of the L2 for its order is {}: give a percent from 1 to {}, or "
                    "FLASHLAB_FA3_AUTO ({}) for the kernel's own",
                    run.fa3_kv_l2_share, gpu::fa3::kMaxKvL2Share, FLASHLAB_FA3_AUTO));
  const sim::Problem asked{.N = run.n,
                           .N_q = run.queries(),
                           .d = run.d,
                           .dtype = sim::parse_dtype(run.dtype),
                           .causal = run.alignment(),
                           .sram_bytes = target_profile().sram_per_sm,
                           .l2_bytes = target_profile().l2_bytes};
  const KernelMirror mirror = kernel_mirror(run.kernel, asked, run.heads, run.plain_loads);
  Prediction p{run.kernel, run.kernel, std::nullopt, run.heads, ""};
  p.assumption = mirror.assumption;
  if (!mirror.modelled()) {
    p.why_not = mirror.why_not;
    return p;
  }
  if (const auto& t = mirror.problem.tiles)
    p.label = fmt::format("{} (Br {}, Bc {})", run.kernel, t->Br, t->Bc);
  if (mirror.fa3) {
    const gpu::fa3::TileOrder order =
        fa3_tile_order(run, run.heads, asked.dtype, target_profile().l2_bytes);
    p.label = fmt::format("{} (Br {}, Bc {}, {} stages{})", run.kernel, mirror.fa3->Br,
                          mirror.fa3->Bc, mirror.fa3->stages, fa3_sections(run, order));
    const sim::Fa3Shape shape{.batch = 1,
                              .heads_q = run.heads,
                              .heads_kv = run.heads,
                              .n_q = run.queries(),
                              .n_k = run.n,
                              .d = run.d,
                              .causal = run.alignment()};
    p.pass = count_fa3_as_launched(shape, *mirror.fa3);
  } else if (run.queries() != run.n && *mirror.algorithm != sim::Algorithm::fa2) {
    p.why_not = fmt::format("not modelled (the {} program takes N_q = N_k)",
                            sim::to_string(*mirror.algorithm));
    return p;
  } else {
    p.report = sim::count(*mirror.algorithm, mirror.problem);
    // One head's count books each tile's L from a sector boundary (a tile starts a whole
    // number of runs into its head); the heads after it start where the one before ends.
    if (const auto& store = mirror.problem.l_store) {
      const sim::Bytes head = run.queries() * sim::bytes_of(sim::kAccumulator);
      p.sm_written_past_boundaries = double(sim::bytes_out_of_heads(*store, head, run.heads) -
                                            run.heads * sim::bytes_out(*store, head));
    }
  }
  if (mirror.blocks_per_sm > 0 && mirror.problem.tiles) {  // a grid built for an occupancy
    // On the profile's GPU: its L2 and replacement, blocks placed on the L2's partitions as
    // its block scheduler places them where that is measured for this occupancy.
    sim::GridProblem grid =
        sim::paced_on_gpu(target_profile(), {.N = run.n,
                                             .N_q = run.queries(),
                                             .d = run.d,
                                             .dtype = mirror.problem.dtype,
                                             .heads = run.heads,
                                             .causal = mirror.problem.causal,
                                             .causal_longest_first = mirror.causal_longest_first,
                                             .Br = mirror.problem.tiles->Br,
                                             .Bc = mirror.problem.tiles->Bc,
                                             .blocks_per_sm = mirror.blocks_per_sm,
                                             .l2_step_share = mirror.l2_step_share,
                                             .l1_bytes = mirror.l1_bytes});
    if (mirror.fa3) grid.order = fa3_order(run, grid);
    // The crossover's closed form is of the grid as the model schedules it, log or not.
    if (grid.causal == cpu::Causal::none && !grid.order && run.queries() == run.n)
      p.crossover = sim::l2_crossover(grid);
    // A GPU's log, where the run has one, replayed. Else paced_on_gpu's: the blocks older
    // first where the profile has measured how far the older of an SM's blocks runs ahead
    // (fa2's block logs: the reads past the crossover; docs/IO-LEVELS.md, "The blocks
    // logged"), for kernels whose copies are issued ahead (fa2; fa3's single block an SM has
    // no younger one). The blocks of the scalar kernel, which wait for their loads, run each
    // head at its own pace and catch up with their head's others, taking the tiles those
    // brought into the L2 (catch_up). With plain loads its K and V pass the L1 too, and the
    // draws of the heads' paces decide which blocks share an SM's L1 (at one head, N =
    // 16,384, its SMs read 0.516 of its blocks' bytes, as blocks in step share them).
    if (!run.block_log.empty()) {
      grid.schedule = sim::GridSchedule::logged;
      grid.block_time_spread = 0;
      grid.older_block_lead = 0;
      grid.l2_step_share = 1;
      grid.block_log = run.block_log;
    }
    if (grid.schedule == sim::GridSchedule::catch_up && grid.l1_bytes > 0)
      predict_from_draws(grid, p);
    else
      p.grid = sim::run_grid(grid);
  }
  return p;
}

double Prediction::sm_read() const {
  if (pass) return double(pass->bytes_read());
  // The blocks' loads less what their SMs' L1s served (none where K and V bypass the L1).
  const double l1_hits = grid ? double(grid->l1_hit_bytes) : 0;
  return report ? double(report->bytes_read()) * double(heads) - l1_hits : 0;
}

double Prediction::sm_written() const {
  if (pass) return double(pass->bytes_written());
  return report ? double(report->bytes_written()) * double(heads) + sm_written_past_boundaries : 0;
}

double Prediction::sm_written_by_tma() const {
  return pass ? double(pass->bytes_written_by_tma()) : 0;
}

double Prediction::sm_written_by_atomics() const {
  return pass ? double(pass->bytes_written_by_atomics()) : 0;
}

double Prediction::sm_stores_issued() const {
  return pass ? double(pass->bytes_stores_issued()) : sm_written();
}

double Prediction::dram_read() const {
  if (grid) return double(grid->dram_read());
  return report ? double(report->dram_read()) * double(heads) : 0;
}

double Prediction::dram_written() const {
  if (grid) return double(grid->dram_written());
  return report ? double(report->dram_written()) * double(heads) : 0;
}

double Prediction::left_dirty() const { return grid ? double(grid->left_dirty()) : 0; }

flashlab_dtype c_dtype(sim::DType dtype) {
  switch (dtype) {
    case sim::DType::fp32: return FLASHLAB_FP32;
    case sim::DType::fp16: return FLASHLAB_FP16;
    case sim::DType::bf16: break;
  }
  return FLASHLAB_BF16;
}

flashlab_causal c_causal(cpu::Causal causal) {
  switch (causal) {
    case cpu::Causal::none: return FLASHLAB_CAUSAL_NONE;
    case cpu::Causal::top_left: return FLASHLAB_CAUSAL_TOP_LEFT;
    case cpu::Causal::bottom_right: return FLASHLAB_CAUSAL_BOTTOM_RIGHT;
  }
  return FLASHLAB_CAUSAL_NONE;
}

}  // namespace flashlab::app
