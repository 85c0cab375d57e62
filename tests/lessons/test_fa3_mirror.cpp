// The fa3 kernel's mirror as the lessons configure it: its facts from gpu/'s kernel table, the
// block's SRAM equal to the table's, its bytes into the SMs equal to the grid model's (two
// models of the same grid), N_q != N_k predicted without DRAM, and `flashlab compare` showing
// its row. Then the forward mirrors' L stored from where each head starts, by hand and against
// the sectors an H100 issued.
#include "gpu_bridge/kernels.hpp"
#include "results_csv.hpp"
#include "run_flashlab.hpp"
#include "stored_runs.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_schedule.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/units.hpp"

#include <doctest/doctest.h>
#include <fmt/core.h>

#include <string>

using namespace flashlab::test;
namespace app = flashlab::app;
namespace sim = flashlab::sim;
namespace k = flashlab::gpu::fa3;

TEST_CASE("fa3 mirror: the block's SRAM is the kernel table's, at every d, dtype and stage count") {
  for (const auto dtype : {sim::DType::bf16, sim::DType::fp16})
    for (const app::Index d : {64, 128})
      for (app::Index stages = 1; stages <= k::max_stages(d, app::c_dtype(dtype)); ++stages) {
        CAPTURE(d);
        CAPTURE(stages);
        const app::Fa3Facts f = app::fa3_kernel_facts(d, dtype, stages);
        REQUIRE(f.facts);
        const sim::PassReport r = sim::count_fa3_kernel({.n_q = 97, .n_k = 1023, .d = d}, *f.facts);
        CHECK(r.peak_sram == k::sram_bytes(d, app::c_dtype(dtype), int(stages)));
        CHECK(r.peak_sram <= k::kMaxSramPerBlock);
      }
  for (const app::Index d : {64, 128})  // stages = 0: the kernel's default for d
    CHECK(app::fa3_kernel_facts(d, sim::DType::bf16).facts->stages == k::default_stages(d));
}

TEST_CASE("fa3 mirror: what the kernel does not take is refused with the table's reason") {
  const auto d96 = app::fa3_kernel_facts(96, sim::DType::bf16);
  CHECK(!d96.facts);
  CHECK(d96.why_not.find("d = 96 is not supported by the fa3 kernel") != std::string::npos);
  const auto fp32 = app::fa3_kernel_facts(128, sim::DType::fp32);
  CHECK(fp32.why_not.find("dtype fp32 is not supported by the fa3 kernel") != std::string::npos);
  const auto four = app::fa3_kernel_facts(128, sim::DType::bf16, 4);  // 288 KiB of SRAM
  CHECK(!four.facts);
  CHECK(four.why_not == "the fa3 kernel takes 1 to 3 stages at d = 128, not 4");
  const auto five = app::fa3_kernel_facts(64, sim::DType::bf16, k::kMaxStages + 1);
  CHECK(five.why_not == fmt::format("the fa3 kernel takes 1 to {} stages at d = 64, not {}",
                                    k::kMaxStages, k::kMaxStages + 1));
  CHECK(app::fa3_kernel_facts(64, sim::DType::bf16, k::kMaxStages).facts);
}

TEST_CASE(
    "fa3 prediction: bytes into the SMs, the grid model's and TMA's fills, and out, TMA's rows and "
    "L's sectors") {
  for (const bool causal : {false, true})
    for (const app::Index n : {1, 97, 1023}) {
      CAPTURE(n);
      CAPTURE(causal);
      const app::KernelRun run{.kernel = "fa3", .n = n, .d = 128, .heads = 3, .causal = causal};
      const app::Prediction p = app::predict(run);
      REQUIRE(p.pass);
      REQUIRE(p.grid);
      // The grid model books the rows inside the tensors, what the L2 serves; TMA's boxes
      // bring their rows past N too, zero-filled: Tr Br rows of Q, and the last KV tile's
      // rows past N in every query tile that loads it (each query tile under the mask too:
      // the last, only one, loads it, and Bc = Br here).
      const double Tr = double((n + k::br(128) - 1) / k::br(128)), row = 128.0 * 2;
      const double q_fill = Tr * k::br(128) - double(n);
      const double kv_fill = (Tr * k::br(128) - double(n)) * (causal ? 1 : Tr);
      REQUIRE(k::br(128) == k::kBc);
      // The work queue's claims, a sector each way an item: at d = 128 (two consumer
      // warpgroups) only under the mask, from kAutoQueueMinTiles query tiles a head (n = 1023:
      // 8 tiles of 128 rows).
      REQUIRE(k::consumer_warpgroups(128) < k::kAutoQueueWithoutMaskMinConsumers);
      const double claim_sectors = causal && Tr >= k::kAutoQueueMinTiles ? 3 * Tr : 0;
      CHECK(claim_sectors == (causal && n == 1023 ? 24 : 0));
      const double claims = 32 * claim_sectors;
      CHECK(p.sm_read() == double(p.grid->sm_read()) + 3 * (q_fill + 2 * kv_fill) * row + claims);
      // Out of the SMs at the default stages: O by TMA stores of sO, its rows whole (its
      // data), and L by finalize's warp stores, a sector per 8 rows; the L1's store pipe sees
      // only L. The grid model books the data the L2 receives. Heads 1 and 2 of L start 4 n
      // and 8 n bytes into the tensor: at n = 97, 4 and 8 bytes past a sector boundary, so
      // their 12 whole runs of 8 rows touch 2 sectors each and their last float 1 (25 each,
      // head 0 13); at n = 1023, 28 and 24 past, 127 runs x 2 and the last 7 rows 2 (256
      // each, head 0 128).
      REQUIRE(k::stages_o(128, FLASHLAB_BF16, k::default_stages(128)));
      const double l_sectors = n == 1 ? 3 : n == 97 ? 13 + 2 * 25 : 128 + 2 * 256;
      CHECK(double(p.grid->sm_written()) == 3 * (n * row + 4.0 * n));
      CHECK(p.sm_written() == 3 * n * row + 32 * l_sectors + claims);
      CHECK(p.sm_written_by_atomics() == claims);
      CHECK(p.sm_written_by_tma() == 3 * n * row);
      CHECK(p.sm_stores_issued() == 32 * l_sectors);
      if (!causal)  // Q once, K and V once per query tile, in whole boxes of Br = Bc rows
        CHECK(p.sm_read() == 3 * (Tr * k::br(128) * row + 2 * Tr * Tr * k::kBc * row));
    }
}

TEST_CASE("fa3 mirror: the shapes whose launch takes items from the work queue") {
  // fa3::resolve_grid with the default options: without the mask from three consumer
  // warpgroups (d = 64's), under it from kAutoQueueMinTiles query tiles a head; never
  // without a producer warp to claim them.
  const auto queue = [](app::Index d, app::Index n_q, bool causal, bool producer = true) {
    sim::Fa3KernelFacts f = *app::fa3_kernel_facts(d, sim::DType::bf16).facts;
    f.warp_specialized = producer;
    return app::fa3_takes_from_queue(
        {.heads_q = 4,
         .heads_kv = 2,
         .n_q = n_q,
         .n_k = 3000,
         .d = d,
         .causal = causal ? flashlab::cpu::Causal::bottom_right : flashlab::cpu::Causal::none},
        f);
  };
  CHECK(queue(64, 1, false));
  CHECK(!queue(128, 5000, false));
  const app::Index few = (k::kAutoQueueMinTiles - 1) * k::br(128);
  CHECK(!queue(128, few, true));
  CHECK(queue(128, few + 1, true));
  CHECK(!queue(64, 1, false, /*producer=*/false));
  CHECK(!queue(128, few + 1, true, /*producer=*/false));
}

TEST_CASE("fa3 prediction with N_q != N_k: the SMs' bytes, and DRAM from its grid") {
  const app::KernelRun run{.kernel = "fa3", .n = 1023, .n_q = 97, .d = 64, .heads = 2};
  const app::Prediction p = app::predict(run);
  REQUIRE(p.pass);
  REQUIRE(p.grid);
  CHECK(p.grid->problem.queries() == 97);
  CHECK(p.grid->problem.N == 1023);
  // One query tile of 97 rows reads all 1023 keys of K and V, into the SMs in whole boxes:
  // one of Br = 192 rows of Q, 8 of Bc = 128 rows of K and of V. Three consumer warpgroups
  // at d = 64 take their items from the work queue: a claim's sector back for each.
  REQUIRE(k::consumer_warpgroups(64) >= k::kAutoQueueWithoutMaskMinConsumers);
  const double row = 64.0 * 2;
  CHECK(p.sm_read() == 2 * (k::br(64) * row + 2 * 8 * k::kBc * row + 32));
  // The H200's L2 holds it all: Q, K and V once from DRAM, O and L left dirty.
  CHECK(p.dram_read() == 2 * (97 * row + 2 * 1023 * row));
  CHECK(p.dram_written() == 0);
  const auto out = run_flashlab(
      "compare --kernels fa3 --n 1023 --n-q 97 --d 64 --heads 2 "
      "--causal --repeats 1 --no-ncu --no-color");
  REQUIRE(out.status == 0);
  // Two heads' K and V fit the L2 many times over: one section of both.
  CHECK(contains(out.output,
                 fmt::format("simulator: fa3 (Br {}, Bc {}, {} stages, sections of 2 heads)",
                             k::br(64), k::kBc, k::default_stages(64))));
  CHECK(
      contains(out.output, "DRAM " + sim::format_bytes(2 * (97 * row + 2 * 1023 * row)) + " read"));
  CHECK(!contains(out.output, "not modelled"));
  const auto square = run_flashlab(
      "compare --kernels fa2,fa3 --n 256 --d 128 --repeats 1 "
      "--no-ncu --no-color");
  REQUIRE(square.status == 0);
  CHECK(contains(square.output, "simulator: fa3 (Br "));
  CHECK(!contains(square.output, "not modelled"));
}

TEST_CASE("fa3 prediction: the grid runs fa3's own tile order, not the grid order") {
  // 16 heads of N = 4096, d = 128 (ANCHORS.md's measured shape): fa3's scheduler puts as many
  // heads in a section as its share of the L2 (fa3::kL2ShareForKV) holds K and V of, the
  // head varying fastest. The
  // prediction's grid must be that order's run, and here the two orders differ.
  const app::KernelRun run{.kernel = "fa3", .n = 4096, .d = 128, .heads = 16};
  const app::Prediction p = app::predict(run);
  REQUIRE(p.grid);
  CHECK(!p.crossover);  // the crossover's closed form is for grid order
  const sim::HardwareProfile& gpu = app::target_profile();
  const k::TileOrder order = k::make_tile_order(1, 16, 16, 4096, 4096, 128, 2, false, gpu.l2_bytes);
  sim::GridProblem g = sim::on_gpu(
      gpu, {.N = 4096, .d = 128, .heads = 16, .Br = k::br(128), .Bc = k::kBc, .blocks_per_sm = 1});
  const sim::GridReport grid_order = sim::run_grid(g);
  g.order = [order](app::Index b) {
    const k::WorkItem w = k::work_item(order, b);
    return sim::BlockTile{w.h, w.tile};
  };
  const sim::GridReport fa3_order = sim::run_grid(g);
  CHECK(p.grid->dram_read() == fa3_order.dram_read());
  CHECK(p.grid->dram_written() == fa3_order.dram_written());
  CHECK(fa3_order.dram_read() != grid_order.dram_read());
}

TEST_CASE("fa2, fa3 and the scalar kernel: each head's L stored from where it starts") {
  // N = 777, 3 heads, d = 64 (measured on an H100: bench/results/2026-12-05-h100-forward-
  // unseen-d64.csv). Head h's L starts 3108 h bytes into the tensor: heads 1 and 2 start 4 and
  // 8 bytes past a sector boundary. fa2 and fa3 store L 8 rows a run (32 bytes): head 0 97
  // runs and a float, 98 sectors; heads 1 and 2 2 sectors a run, 195 each. The scalar kernel
  // 32 rows a run (128 bytes): head 0 24 x 4 + 2 = 98; heads 1 and 2 24 x 5 + 2 = 122 each.
  // O: fa2's whole rows and fa3's TMA rows are its data; the scalar kernel's lane a row, one
  // bf16 a store, a sector an element. fa3's mirror counts each head itself, the others add
  // the heads past the first to one head's count: the two ways agree. Without the mask fa3's
  // blocks at d = 64 claim their items from the work queue, one atomic per item (5 query
  // tiles of 192 rows x 3 heads: 15 sectors out, beside the stores); under it 5 tiles a head
  // are too few for the queue (fa3::kAutoQueueMinTiles), and the blocks take fixed turns.
  const double o_data = 3 * 777 * 64 * 2;
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    const auto at = [&](const char* kernel) {
      return app::predict({.kernel = kernel, .n = 777, .d = 64, .heads = 3, .causal = causal});
    };
    const app::Prediction fa2 = at("fa2"), fa3 = at("fa3"), scalar = at("scalar");
    CHECK(fa2.sm_written() == o_data + (98 + 2 * 195) * 32);
    REQUIRE(k::br(64) * 5 >= 777);
    REQUIRE(k::kAutoQueueMinTiles > 5);
    const double claims = causal ? 0 : 3 * 5;
    CHECK(fa3.sm_written_by_atomics() == claims * 32);
    CHECK(fa3.sm_written() == fa2.sm_written() + claims * 32);
    CHECK(fa3.sm_stores_issued() == (98 + 2 * 195) * 32);
    CHECK(scalar.sm_written() == 3 * 777 * 64 * 32 + (98 + 2 * 122) * 32);
    // The first head alone is as before: one head's count, nothing past a boundary.
    const auto one = app::predict({.kernel = "fa2", .n = 777, .d = 64, .heads = 1});
    CHECK(one.sm_written_past_boundaries == 0);
    CHECK(one.sm_written() == 777 * 64 * 2 + 98 * 32);
  }
}

TEST_CASE("the mirrors' bytes in and out of the SMs are those an H100 moved at shapes read once") {
  // Three runs of `flashlab compare` on an H100 (bench/results/): scalar, fa2 and fa3 at N =
  // 777 and 2,500 over 3 heads, d = 64, both masks (2026-12-05-h100-forward-unseen-d64.csv);
  // the same three at N = 1,001 and 2,047 over 2 and 7 heads, d = 128 (2026-12-06-h100-l-
  // stores-unseen-d128.csv, predicted before it ran: 2026-12-05-l-stores-unseen-d128-
  // predicted.csv); fa3 at N = 1,500 and 3,000 over 5 heads, both d and masks (2026-12-06-h100-
  // fa3-claims-unseen.csv, predicted before it ran: 2026-12-06-fa3-claims-predicted.csv).
  // Store sectors the L1 issued (l1tex__t_sectors_pipe_lsu_mem_global_op_st + _red, x 32 B)
  // and bytes into and out of the SMs, none of which depends on the card's L2.
  struct Run {
    const char* file;
    int rows;
  };
  for (const Run csv : {Run{"2026-12-05-h100-forward-unseen-d64.csv", 12},
                        Run{"2026-12-06-h100-l-stores-unseen-d128.csv", 12},
                        Run{"2026-12-06-h100-fa3-claims-unseen.csv", 8}}) {
    CAPTURE(csv.file);
    int rows = 0;
    for (const auto& row : flashlab::test::results_csv(csv.file)) {
      const auto at = [&](const char* name) { return std::stod(row.at(name)); };
      const app::KernelRun run = stored_run(row);
      const std::string shape = shape_of(run);
      CAPTURE(shape);
      const app::Prediction p = app::predict(run);
      CHECK(p.sm_stores_issued() == at("stores_issued_measured"));
      // Into the SMs: exact, fa3's work queue's claims included (a sector back an item).
      CHECK(p.sm_read() == at("sm_read_measured"));
      // Out of the SMs: fa2's stores to the byte; fa3's TMA rows of O, L's sectors and the
      // claims' sectors to the byte, or one sector fewer where two of the queue's claims
      // leave as one, now and then (N = 777, 3 heads: 32 bytes short in one run of three,
      // docs/IO-LEVELS.md, "fa3's work queue"); the scalar kernel's partly written sectors
      // are merged on the way by a rule not modelled.
      const double out = at("sm_written_measured");
      if (run.kernel == "fa2") CHECK(p.sm_written() == out);
      if (run.kernel == "fa3") {
        CHECK(p.sm_written() >= out);
        CHECK(p.sm_written() <= out + sim::kClaimBytes);
      }
      if (run.kernel == "scalar") CHECK(out <= p.sm_written());
      ++rows;
    }
    CHECK(rows == csv.rows);
  }
}
