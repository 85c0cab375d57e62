// The GPU the kernels' mirrors predict for: the H200 by default, the H100 where `flashlab
// compare` runs on one or is given --profile h100; and the H100 profile's DRAM predictions
// against what an H100 read and wrote (bench/results/h100/), some predicted before the run.
#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/kernels.hpp"
#include "results_csv.hpp"
#include "run_flashlab.hpp"
#include "stored_runs.hpp"

#include "flashlab/gpu/tile_schedule.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"
#include "flashlab/sim/warp_store.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

using namespace flashlab::test;
namespace app = flashlab::app;

namespace {

// Sets the target for one test and puts the one before back after it, whatever happens.
struct TargetFor {
  explicit TargetFor(std::string_view name) : before(app::target_profile().name) {
    app::set_target_profile(name);
  }
  ~TargetFor() { app::set_target_profile(before); }
  std::string_view before;
  TargetFor(const TargetFor&) = delete;
  TargetFor& operator=(const TargetFor&) = delete;
};

}  // namespace

TEST_CASE("targets: the measured GH100 parts, matched by the device's name") {
  CHECK(app::target_profile().name == "h200");
  CHECK(app::target_names() == std::vector<std::string_view>{"h100", "h200"});
  CHECK(app::target_of_device("NVIDIA H200") == "h200");
  CHECK(app::target_of_device("NVIDIA H200 (132 SMs)") == "h200");
  CHECK(app::target_of_device("NVIDIA H100 80GB HBM3") == "h100");
  // Other parts of the same names have other SMs and L2s: no target.
  CHECK(app::target_of_device("NVIDIA H100 PCIe").empty());
  CHECK(app::target_of_device("NVIDIA H100 NVL").empty());
  CHECK(app::target_of_device("NVIDIA A100-SXM4-80GB").empty());  // a profile, not measured
  CHECK(app::target_of_device("no CUDA device is present").empty());
  // A profile that is no target is refused, naming those that are.
  for (const char* name : {"a100", "b200", "h300", ""}) {
    CAPTURE(name);
    try {
      app::set_target_profile(name);
      FAIL("accepted");
    } catch (const flashlab::cpu::InvalidArgument& e) {
      CHECK(std::string(e.what()) ==
            "--profile " + std::string(name) +
                ": the kernels' mirrors predict for a GPU the kernels are built for (sm_90a) "
                "whose L2 has been measured: h100, h200");
    }
  }
  CHECK(app::target_profile().name == "h200");  // the refusals changed nothing
}

TEST_CASE("targets: with the H100 chosen, the mirrors run on its L2 and the GPU line follows") {
  const TargetFor h100("h100");
  CHECK(app::target_profile().name == "h100");
  CHECK(app::target_profile().l2_bytes == 50 << 20);
  CHECK(app::gpu_line({true, "NVIDIA H100 80GB HBM3 (132 SMs)"}) ==
        "GPU: NVIDIA H100 80GB HBM3 (132 SMs)\n");
  CHECK(contains(app::gpu_line({true, "NVIDIA H200 (132 SMs)"}),
                 "note: the predictions are for the H100 (132 SMs, 50.0 MiB of L2), not this "
                 "device"));
  // One head at N = 45,056, d = 128: K and V (22 MiB, with the blocks' Q and O tiles beside
  // them) stay within one side of the H200's L2 (30 MiB) longer than within the H100's (25
  // MiB): fa2 reads 46.8 MiB on the H100 against 39.3 on the H200 (Q, K and V once: 33).
  const app::KernelRun run{.kernel = "fa2", .n = 45056, .d = 128};
  const double on_h100 = app::predict(run).dram_read();
  app::set_target_profile("h200");
  CHECK(on_h100 > 1.15 * app::predict(run).dram_read());
}

namespace {

struct H100Run {
  const char* measured;
  const char* predicted;  // the predictions made before the run, or nullptr
  int rows;
};

using Row = std::map<std::string, std::string>;

// The row of `rows` of the same kernel and shape as `row` (a prediction kept before a run
// whose rows came back in other files or another order).
const Row& same_shape(const std::vector<Row>& rows, const Row& row) {
  const auto found = std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
    return r.at("kernel") == row.at("kernel") && r.at("N") == row.at("N") &&
           r.at("d") == row.at("d") && r.at("heads") == row.at("heads") &&
           r.at("causal") == row.at("causal");
  });
  REQUIRE(found != rows.end());
  return *found;
}

// `flashlab compare` on an H100 80GB HBM3 (bench/results/h100/) against its profile's grid
// model: DRAM reads within 15% of the measured, except one head at the onset (N = 40,960 to
// 49,152; the H100's is 41,600 by the closed form), where the model's sharp step meets the
// hardware's gradual one, and fa3 under the mask at 16 heads (within 1.25 both). Writes during the
// kernel within 15% or 3 MiB: where a kernel writes a few MiB, the model's are up to 3 MiB short
// (fa2 at 16 heads, N = 4,096: 3.5 MiB against 6.5). Returns how many reads are within 15%.
// `also`, where given, checks more of each row against its prediction and the one kept before
// the run (the row's own where none was).
constexpr double kWrittenSlack = 3.0 * (1 << 20);
using RowCheck =
    std::function<void(const Row& measured, const Row& kept, const app::Prediction& p)>;
int h100_dram_within(std::initializer_list<H100Run> runs, const RowCheck& also = {}) {
  int within = 0;
  for (const H100Run csv : runs) {
    const std::string file = csv.measured;
    CAPTURE(file);
    const auto measured = results_csv(csv.measured);
    CHECK(measured.size() == std::size_t(csv.rows));
    const auto before = csv.predicted ? results_csv(csv.predicted) : measured;
    for (const Row& row : measured) {
      const auto at = [&](const char* name) { return std::stod(row.at(name)); };
      const app::KernelRun run = stored_run(row);
      const std::string shape = shape_of(run);
      CAPTURE(shape);
      const app::Prediction p = app::predict(run);
      const Row& kept = csv.predicted ? same_shape(before, row) : row;
      if (csv.predicted) {  // the prediction made before the run, made again
        CHECK(p.dram_read() == std::stod(kept.at("dram_read_predicted")));
        CHECK(p.dram_written() == std::stod(kept.at("dram_written_predicted")));
      }
      const double read = at("dram_read_measured") / p.dram_read();
      CAPTURE(read);
      // The two misses the H200 has too (docs/IO-LEVELS.md): one head at the onset, and fa3
      // under the mask at 16 heads.
      const bool onset = run.heads == 1 && run.n >= 40960 && run.n <= 49152;
      const bool fa3_masked_16 = run.kernel == "fa3" && run.causal && run.heads == 16;
      CHECK(read >= 0.85);
      CHECK(read <= (onset || fa3_masked_16 ? 1.25 : 1.15));
      within += read >= 0.85 && read <= 1.15;
      const double written = at("dram_written_measured");
      CHECK(std::abs(written - p.dram_written()) <= std::max(0.15 * written, kWrittenSlack));
      if (also) also(row, kept, p);
    }
  }
  return within;
}

}  // namespace

TEST_CASE("targets: an H100's DRAM bytes against its profile, the first run on that card") {
  // fa2 and fa3 at d = 128, one head N = 16,384 to 65,536 and 16 heads N = 2,048 to 16,384:
  // the first run on the card after its profile's L2 was measured, nothing of the model
  // fitted to it. fa3 at one head, N = 49,152 is the miss (1.22).
  const TargetFor h100("h100");
  CHECK(h100_dram_within({{"h100/2026-12-06-h100-compare-fa2-fa3-h1.csv", nullptr, 8},
                          {"h100/2026-12-06-h100-compare-fa2-fa3-h16.csv", nullptr, 8}}) == 15);
}

TEST_CASE("targets: an H100's DRAM bytes against its profile, the runs of the day before") {
  // Runs of 2026-12-05 on an H100, a day before its profile had a measured L2, with the H200's
  // predictions beside them then: scalar, fa2 and fa3 at 16 heads, N = 2,048 to 8,192, both
  // masks (application replay); and at N = 1,000, 3,000, 5,000, one head and 16, d = 128 and
  // (16 heads) 64, both masks. fa3 under the mask at 16 heads, N = 4,096 is the miss (1.21).
  const TargetFor h100("h100");
  CHECK(
      h100_dram_within({{"h100/2026-12-05-h100-app-replay-compare-h16-both-masks.csv", nullptr, 18},
                        {"h100/2026-12-05-h100-compare-odd-n-d128.csv", nullptr, 36},
                        {"h100/2026-12-05-h100-compare-odd-n-d64.csv", nullptr, 12}}) == 65);
}

TEST_CASE("targets: an H100's DRAM bytes against its profile, predicted before the run") {
  // Three sets predicted before they ran (the -predicted.csv files): one head at N = 40,960
  // and 45,056, d = 128 (the onset; fa2 at both and fa3 at 45,056 are the misses, 1.15 to
  // 1.17); 8 heads at d = 64 for scalar, fa2 and fa3 under both masks; fa2 and fa3 over 4 and
  // 12 heads at N = 12,288, d = 128, both masks.
  const TargetFor h100("h100");
  CHECK(
      h100_dram_within(
          {{"h100/2026-12-06-h100-unseen-a.csv", "h100/2026-12-06-h100-unseen-a-predicted.csv", 4},
           {"h100/2026-12-06-h100-unseen-b.csv", "h100/2026-12-06-h100-unseen-b-predicted.csv", 12},
           {"h100/2026-12-06-h100-unseen-c.csv", "h100/2026-12-06-h100-unseen-c-predicted.csv",
            8}}) == 21);
}

TEST_CASE("targets: an H100 at forward shapes never run, predicted before the run") {
  // The second set kept before its run (bench/results/h100/2026-12-06-h100-unseen2-*): the
  // four kernels at N = 3,000 and 6,144 over 2 and 6 heads, d = 64 and 128, both masks; fa2
  // and fa3 at one head, N = 36,864 and 53,248 (about the onset), and over 4 and 10 heads at
  // N = 10,240, both masks. Into and out of the SMs flashlab's own kernels to the byte and the
  // naive kernel (cuBLAS inside) within 10%; DRAM reads within 15% at all 76 rows.
  const TargetFor h100("h100");
  const char* const predicted = "h100/2026-12-06-h100-unseen2-fwd-predicted.csv";
  const std::initializer_list<H100Run> runs = {
      {"h100/2026-12-06-h100-unseen2-fwd-d128-h2.csv", predicted, 16},
      {"h100/2026-12-06-h100-unseen2-fwd-d128-h6.csv", predicted, 16},
      {"h100/2026-12-06-h100-unseen2-fwd-d64-h2.csv", predicted, 16},
      {"h100/2026-12-06-h100-unseen2-fwd-d64-h6.csv", predicted, 16},
      {"h100/2026-12-06-h100-unseen2-onset.csv", "h100/2026-12-06-h100-unseen2-onset-predicted.csv",
       4},
      {"h100/2026-12-06-h100-unseen2-mid.csv", "h100/2026-12-06-h100-unseen2-mid-predicted.csv",
       8}};
  int own = 0;
  const auto at_the_sms = [&](const Row& row, const Row& kept, const app::Prediction& p) {
    CHECK(p.sm_read() == std::stod(kept.at("sm_read_predicted")));
    CHECK(p.sm_written() == std::stod(kept.at("sm_written_predicted")));
    const double read = std::stod(row.at("sm_read_measured")),
                 written = std::stod(row.at("sm_written_measured"));
    if (row.at("kernel") == "naive") {
      CHECK(std::abs(read / p.sm_read() - 1) <= 0.10);
      CHECK(std::abs(written / p.sm_written() - 1) <= 0.10);
    } else {
      CHECK(read == p.sm_read());
      CHECK(written == p.sm_written());
      ++own;
    }
  };
  CHECK(h100_dram_within(runs, at_the_sms) == 76);
  CHECK(own == 60);
}

TEST_CASE("targets: the naive kernel's DRAM writes on an H100, predicted before the run") {
  // One and 4 heads at N = 3,072, 3,584 and 5,000, d = 128, in application replay
  // (bench/results/h100/2026-12-06-h100-naive-writes*.csv): the mirror's whole L2, home copies
  // and dirty room (the H100's 23.96 MiB) as measured on that card, nothing fitted. The H200
  // missed one head at N = 3,072 in kernel replay (1.48); the H100 writes 19.0 MiB there
  // against 18.1 predicted. Every row's writes within 5%, its reads within 1%.
  const TargetFor h100("h100");
  const H100Run run{"h100/2026-12-06-h100-naive-writes.csv",
                    "h100/2026-12-06-h100-naive-writes-predicted.csv", 6};
  const auto closer = [](const Row& row, const Row&, const app::Prediction& p) {
    CHECK(std::abs(std::stod(row.at("dram_written_measured")) / p.dram_written() - 1) <= 0.05);
    CHECK(std::abs(std::stod(row.at("dram_read_measured")) / p.dram_read() - 1) <= 0.01);
  };
  CHECK(h100_dram_within({run}, closer) == 6);
}

// Whether fa3's order for `run` (its share of the L2, under the mask) takes a partial section
// before a whole one whose K and V fill at least kFillsASide of one side of the L2, where they
// are held on both sides: the orders the model reads too little for (docs/IO-LEVELS.md,
// "Sections that fill a side of the L2"). The stored rows' sections fill 48 to 72% of a side
// where the model holds, 96 to 124% where it misses.
constexpr double kFillsASide = 0.96;
bool partial_before_full(const app::KernelRun& run) {
  const flashlab::sim::HardwareProfile& gpu = app::target_profile();
  const auto elem = flashlab::sim::bytes_of(flashlab::sim::parse_dtype(run.dtype));
  const auto order = flashlab::gpu::fa3::make_tile_order(
      1, run.heads, run.heads, run.n, run.n, run.d, elem, true, gpu.l2_bytes, run.fa3_kv_l2_share);
  const double section_kv = 2.0 * double(run.n * run.d * elem) * order.section_pairs;
  const double side = double(gpu.l2_bytes) / gpu.l2_partitions;
  return order.section_pairs < order.pairs && section_kv >= kFillsASide * side;
}

TEST_CASE("targets: fa3 under the mask on an H100, its sections planned on 25 to 75% of the L2") {
  // bench/results/h100/2026-12-06-h100-fa3-section-shares.csv: fa3 under the mask at d = 128,
  // N = 4,096 over 12 and 16 heads (predicted before the run), d = 64, N = 4,096 over 24 and
  // 32, and d = 128, N = 8,192 over 6 and 8, with flashlab_fa3_options.kv_l2_share 25, 37, 50,
  // 62 and 75 (main plans on a half under the mask). The order moves nothing into or out of
  // the SMs: the mirror predicts every row's reads to the byte. DRAM reads within 15% at 25 of
  // the 30 rows; the five misses (1.21 to 1.43) are all orders whose partial section comes
  // before a whole one that fills a side of the L2 (docs/IO-LEVELS.md, "Sections that fill a
  // side of the L2").
  const TargetFor h100("h100");
  const auto rows = results_csv("h100/2026-12-06-h100-fa3-section-shares.csv");
  CHECK(rows.size() == 30);
  int within = 0;
  for (const Row& row : rows) {
    app::KernelRun run = stored_run(row);
    run.fa3_kv_l2_share = std::stoi(row.at("kv_share_pct"));
    const std::string shape = shape_of(run) + ", share " + row.at("kv_share_pct") + "%";
    CAPTURE(shape);
    const app::Prediction p = app::predict(run);
    CHECK(p.sm_read() == std::stod(row.at("sm_read_measured")));
    CHECK(p.sm_read() == std::stod(row.at("sm_read_predicted")));
    CHECK(p.dram_read() == std::stod(row.at("dram_read_predicted")));
    CHECK(p.dram_written() == std::stod(row.at("dram_written_predicted")));
    const double read = std::stod(row.at("dram_read_measured")) / p.dram_read();
    CAPTURE(read);
    CHECK(read >= 0.99);
    CHECK(read <= (partial_before_full(run) ? 1.45 : 1.15));
    within += read <= 1.15;
  }
  CHECK(within == 25);
  // The switch on the device, through `compare --fa3-kv-l2-share 37` (the runner plugin's
  // flashlab_forward_fa3): the 37% rows again, 12 and 16 heads at d = 128, N = 4,096.
  const auto again = results_csv("h100/2026-12-06-h100-fa3-kv-l2-share-37-compare.csv");
  CHECK(again.size() == 2);
  for (const Row& row : again) {
    app::KernelRun run = stored_run(row);
    run.fa3_kv_l2_share = 37;
    const std::string shape = shape_of(run);
    CAPTURE(shape);
    const app::Prediction p = app::predict(run);
    CHECK(p.sm_read() == std::stod(row.at("sm_read_measured")));
    CHECK(p.dram_read() == std::stod(row.at("dram_read_predicted")));
    const double read = std::stod(row.at("dram_read_measured")) / p.dram_read();
    CAPTURE(read);
    CHECK(read >= 1.0);
    CHECK(read <= 1.08);
  }
  // N = 1,024 under the mask, batch 16 (a batch of heads is more heads to the order and the
  // model), at the kernel's half and a quarter: d = 128 over 16 heads, d = 64 over 32
  // (`-fa3-kv-l2-share-n1024-dram.csv`). Into the SMs to the byte; DRAM within 15% at three,
  // and at d = 64's half (100 pairs a section, 25 MiB: a side, after a partial one) 1.150;
  // the half reading more than the quarter at both d, as the model says; writes within 3 MiB.
  const auto short_n = results_csv("h100/2026-12-06-h100-fa3-kv-l2-share-n1024-dram.csv");
  CHECK(short_n.size() == 4);
  int short_within = 0;
  for (const Row& row : short_n) {
    const app::KernelRun run{.kernel = "fa3",
                             .n = std::stoll(row.at("N")),
                             .d = std::stoll(row.at("d")),
                             .heads = std::stoll(row.at("B")) * std::stoll(row.at("H")),
                             .causal = true,
                             .fa3_kv_l2_share = std::stoi(row.at("kv_share_pct"))};
    const std::string shape = shape_of(run) + ", share " + row.at("kv_share_pct") + "%";
    CAPTURE(shape);
    const app::Prediction p = app::predict(run);
    CHECK(p.sm_read() == std::stod(row.at("sm_read_measured")));
    const double read = std::stod(row.at("dram_read_measured")) / p.dram_read();
    CAPTURE(read);
    CHECK(read >= 1.0);
    CHECK(read <= 1.16);
    short_within += read <= 1.15;
    CHECK(std::abs(std::stod(row.at("dram_written_measured")) - p.dram_written()) <= kWrittenSlack);
  }
  CHECK(short_within == 3);
  CHECK(std::stod(short_n[0].at("dram_read_measured")) >
        1.2 * std::stod(short_n[1].at("dram_read_measured")));
}

namespace {

// fa3 under the mask at N = 4,096 with the evened sections (tile_schedule.hpp,
// even_section_pairs), each measured row of `measured` + d + ".csv" beside the prediction kept
// before the run in `kept` + d + "-predicted.csv", d = 128 and 64: into the SMs to the byte, out
// of them to the byte or a claim's sector over, DRAM reads within [0.98, 1.15] of the model.
// Returns the rows checked.
int check_even_sections(const std::string& measured_stem, const std::string& kept_stem) {
  int rows = 0;
  for (const std::string d : {"128", "64"}) {
    const auto measured = results_csv(measured_stem + d + ".csv");
    const auto kept_rows = results_csv(kept_stem + d + "-predicted.csv");
    REQUIRE(measured.size() == kept_rows.size());
    for (const Row& row : measured) {
      const Row& kept = same_shape(kept_rows, row);
      app::KernelRun run = stored_run(row);
      run.fa3_kv_l2_share = FLASHLAB_FA3_AUTO;  // run with the evened plan
      const std::string shape = shape_of(run);
      CAPTURE(shape);
      const app::Prediction p = app::predict(run);
      CHECK(p.dram_read() == std::stod(kept.at("dram_read_predicted")));
      CHECK(p.dram_written() == std::stod(kept.at("dram_written_predicted")));
      CHECK(p.sm_read() == std::stod(row.at("sm_read_measured")));
      const double out = std::stod(row.at("sm_written_measured"));
      CHECK(p.sm_written() >= out);
      CHECK(p.sm_written() <= out + flashlab::sim::kClaimBytes);
      const double read = std::stod(row.at("dram_read_measured")) / p.dram_read();
      CAPTURE(read);
      CHECK(read >= 0.98);
      CHECK(read <= 1.15);
      ++rows;
    }
  }
  return rows;
}

}  // namespace

TEST_CASE(
    "targets: fa3's sections evened out under the mask, on an H100, predicted before the run") {
  // bench/results/h100/2026-12-06-h100-fa3-even-sections-d{128,64}.csv: `flashlab compare` of
  // fa3 under the mask at N = 4,096 over 12, 16, 20 and 24 heads (d = 128) and 32 and 40 (d =
  // 64), run after the automatic order began to even its sections out (8 and 8 at 16 heads, 16
  // and 16 at 32), its predictions kept before the run (-predicted.csv). DRAM reads within 15%
  // at all six: 16 heads 1.015 and 32 heads 0.995, where the plans that filled a section first
  // (4 and 12; 7 and 25) read 1.21 and 1.22 of the model (the shares' test above); 12 heads
  // (one section, as before) 1.125.
  const TargetFor h100("h100");
  CHECK(check_even_sections("h100/2026-12-06-h100-fa3-even-sections-d",
                            "h100/2026-12-06-h100-fa3-even-sections-d") == 6);
  // compare names the plan in fa3's row.
  const auto sixteen = run_flashlab(
      "compare --profile h100 --kernels fa3 --d 128 --n 4096 --heads 16 --causal --no-ncu "
      "--no-color 2>&1");
  REQUIRE(sixteen.status == 0);
  CHECK(contains(sixteen.output, "stages, sections of 8 heads)"));
}

TEST_CASE(
    "targets: fa3's sections evened out under the mask, on the H200, predicted before the run") {
  // The same six shapes on the H200 (bench/results/2026-12-07-h200-fa3-even-sections-d{128,64}
  // .csv), whose predictions were kept the day before (2026-12-06-h200-...-predicted.csv): 16
  // heads, which the filled plan ran as 1 and 15 (the model 55.2 MiB), now 8 and 8, read 1.004
  // of the model; the six from 1.002 to 1.074.
  const TargetFor h200("h200");
  CHECK(check_even_sections("2026-12-07-h200-fa3-even-sections-d",
                            "2026-12-06-h200-fa3-even-sections-d") == 6);
}

TEST_CASE("targets: the one-head onset on the H200 in steps of 2,048, predicted before the run") {
  // bench/results/2026-12-07-h200-onset-ramp.csv: fa2 and fa3 at one head, d = 128, N = 32,768
  // to 53,248 in steps of 2,048, against the profile's predictions kept before the run
  // (-predicted.csv). Into the SMs to the byte; DRAM reads within 15% at 19 of 22 rows, the
  // misses at the ramp's top: fa2 at N = 51,200 (1.152), fa3 at 51,200 and 53,248 (1.215,
  // 1.170).
  const TargetFor h200("h200");
  const auto measured = results_csv("2026-12-07-h200-onset-ramp.csv");
  const auto kept = results_csv("2026-12-07-h200-onset-ramp-predicted.csv");
  REQUIRE(measured.size() == 22);
  int within = 0;
  std::vector<std::string> misses;
  for (const Row& row : measured) {
    const app::KernelRun run = stored_run(row);
    const std::string shape = shape_of(run);
    CAPTURE(shape);
    const app::Prediction p = app::predict(run);
    CHECK(p.dram_read() == std::stod(same_shape(kept, row).at("dram_read_predicted")));
    CHECK(p.sm_read() == std::stod(row.at("sm_read_measured")));
    const double read = std::stod(row.at("dram_read_measured")) / p.dram_read();
    CAPTURE(read);
    CHECK(read >= 0.9);
    CHECK(read <= 1.25);
    if (std::abs(read - 1) <= 0.15)
      ++within;
    else
      misses.push_back(row.at("kernel") + " " + row.at("N"));
  }
  CHECK(within == 19);
  CHECK(misses == std::vector<std::string>{"fa2 51200", "fa3 51200", "fa3 53248"});
}

TEST_CASE("compare --profile: predictions for the part named, and a clear refusal") {
  const auto h100 =
      run_flashlab("compare --profile h100 --kernels fa2 --d 128 --sweep n=45056 --no-ncu 2>&1");
  REQUIRE(h100.status == 0);
  CHECK(contains(h100.output,
                 "\nPredicted for h100: NVIDIA H100 SXM5 80GB (datasheet ceilings; "
                 "its L2 measured), 132 SMs, 50.0 MiB of L2 in 2 partitions\n"));
  CHECK(contains(h100.output, "against the 25.00 MiB of one of the L2's 2 partitions"));
  const auto h200 =
      run_flashlab("compare --profile h200 --kernels fa2 --d 128 --sweep n=45056 --no-ncu 2>&1");
  REQUIRE(h200.status == 0);
  CHECK(contains(h200.output, "\nPredicted for h200: NVIDIA H200 SXM 141GB"));
  CHECK(contains(h200.output, "against the 30.00 MiB of one of the L2's 2 partitions"));
  // The single comparison and the passes, single and swept, say it too.
  for (const char* compare :
       {"--kernels fa2 --n 64", "--pass decode --sweep n=256 --heads 4 --kv-heads 1",
        "--pass decode --n 256 --heads 4 --kv-heads 1"}) {
    CAPTURE(compare);
    const auto run =
        run_flashlab("compare --profile h100 " + std::string(compare) + " --no-ncu 2>&1");
    REQUIRE(run.status == 0);
    CHECK(contains(run.output, "\nPredicted for h100: "));
  }
  const auto bad = run_flashlab("compare --profile b200 --n 64 2>&1");
  CHECK(bad.status == kUsageError);
  CHECK(contains(bad.output,
                 "--profile b200: the kernels' mirrors predict for a GPU the kernels "
                 "are built for (sm_90a) whose L2 has been measured: h100, h200"));
  // The passes take it too.
  const auto pass = run_flashlab("compare --pass decode --profile a100 --n 64 2>&1");
  CHECK(pass.status == kUsageError);
  CHECK(contains(pass.output, "--profile a100: "));
}

TEST_CASE("compare --fa3-kv-l2-share: fa3's order and its prediction on that share, or a refusal") {
  // 12 heads, N = 4,096, d = 128 under the mask on the H100: its own half plans all 12 heads
  // in one section (43.3 MiB predicted from DRAM), a quarter sections of 6 (36.0, the floor).
  const std::string sweep =
      "compare --profile h100 --kernels fa2,fa3 --d 128 --sweep n=4096 --sweep heads=12 "
      "--sweep causal=yes --no-ncu --no-color --fa3-kv-l2-share ";
  const auto quarter = run_flashlab(sweep + "25 2>&1");
  REQUIRE(quarter.status == 0);
  const TargetFor h100("h100");
  app::KernelRun run{.kernel = "fa3", .n = 4096, .d = 128, .heads = 12, .causal = true};
  const double own = app::predict(run).dram_read();
  run.fa3_kv_l2_share = 25;
  const double on_a_quarter = app::predict(run).dram_read();
  CHECK(on_a_quarter < 0.9 * own);
  CHECK(contains(quarter.output, "\t" + flashlab::sim::format_bytes(on_a_quarter) + "\t"));
  CHECK_FALSE(contains(quarter.output, "\t" + flashlab::sim::format_bytes(own) + "\t"));
  // fa2 has no such order: its row is as without the option.
  const auto plain = run_flashlab(sweep.substr(0, sweep.find(" --fa3-kv-l2-share")) + " 2>&1");
  REQUIRE(plain.status == 0);
  const std::size_t fa2_row = plain.output.find("\nfa2\t");
  REQUIRE(fa2_row != std::string::npos);
  CHECK(contains(quarter.output,
                 plain.output.substr(fa2_row, plain.output.find('\n', fa2_row + 1) - fa2_row)));
  for (const char* bad : {"0", "101", "x"}) {
    CAPTURE(bad);
    const auto refused = run_flashlab(sweep + bad + " 2>&1");
    CHECK(refused.status == kUsageError);
    CHECK(contains(refused.output, "--fa3-kv-l2-share: `" + std::string(bad) +
                                       "` is not a whole number from 1 to 100"));
  }
  // The single comparison names the sections and the share in fa3's row.
  const auto single = run_flashlab(
      "compare --kernels fa3 --n 256 --d 64 --heads 2 --causal --no-ncu --fa3-kv-l2-share 10 2>&1");
  REQUIRE(single.status == 0);
  CHECK(contains(single.output, "4 stages, sections of 2 heads on 10% of the L2)"));
  const auto decode = run_flashlab("compare --pass decode --n 256 --fa3-kv-l2-share 37 2>&1");
  CHECK(decode.status == kUsageError);
  CHECK(contains(decode.output,
                 "--fa3-kv-l2-share is an option of the forward comparison, not of --pass decode"));
  run.kernel = "fa3";
  run.fa3_kv_l2_share = 0;
  CHECK_THROWS_WITH_AS(app::predict(run),
                       "fa3's share of the L2 for its order is 0: give a percent from 1 to 100, "
                       "or FLASHLAB_FA3_AUTO (-1) for the kernel's own",
                       flashlab::cpu::InvalidArgument);
}

TEST_CASE("targets: the passes on an H100 against its profile, predicted before the run") {
  // `flashlab compare --pass` on an H100 (bench/results/h100/2026-12-06-h100-unseen-
  // {backward,decode}.csv), predicted before it ran (-predicted.csv) and predicted again here
  // through --profile h100: the backward at N = 4,096 and 8,192 over 4 and 16 heads, d = 128,
  // both masks; decode at L = 8,192 and 65,536, batch 2, 32 query heads over 8. The store
  // sectors issued exact; DRAM read by the grid (the backward) or the floor
  // (decode) within 1%; the backward's writes by the grid within 15% where it writes 1 MiB or
  // more (8 to 199 MiB; 0.1 to 0.2 MiB at N = 4,096 over 4 heads).
  struct Pass {
    const char* args;
    const char* name;
  };
  for (const Pass pass :
       {Pass{"--pass backward --sweep n=4096,8192 --sweep heads=4,16 --sweep causal=no,yes",
             "backward"},
        Pass{"--pass decode --sweep n=8192,65536 --sweep batch=2 --heads 32 --kv-heads 8",
             "decode"}}) {
    CAPTURE(pass.name);
    const auto csv = scratch_path(std::string("h100-unseen-") + pass.name + ".csv");
    const auto run = run_flashlab("compare --profile h100 " + std::string(pass.args) +
                                  " --d 128 --no-ncu --csv " + csv.string() + " 2>&1");
    REQUIRE(run.status == 0);
    const std::string stem = std::string("h100/2026-12-06-h100-unseen-") + pass.name;
    const auto now = results_csv(csv.string());
    const auto before = results_csv(stem + "-predicted.csv");
    const auto measured = results_csv(stem + ".csv");
    REQUIRE(now.size() == (pass.name == std::string("backward") ? 8u : 2u));
    REQUIRE(before.size() == now.size());
    REQUIRE(measured.size() == now.size());
    const bool backward = pass.name == std::string("backward");
    for (std::size_t k = 0; k < now.size(); ++k) {
      const auto& m = measured[k];
      CAPTURE(m.at("N"));
      CAPTURE(m.at("heads"));
      CAPTURE(m.at("causal"));
      const auto at = [](const auto& row, const char* name) { return std::stod(row.at(name)); };
      for (const char* column : {"stores_predicted", "dram_read_grid", "dram_written_grid"})
        CHECK(now[k].at(column) == before[k].at(column));
      // Decode's lengths are booked since this run (found in it: one sector an SM into the
      // SMs, docs/IO-LEVELS.md, "Decode's lengths"; from DRAM the sector of the batch's 2
      // lengths); the rest as predicted before.
      const double sector = double(flashlab::sim::kSectorBytes),
                   sms = flashlab::sim::find_profile("h100").sm_count;
      CHECK(at(now[k], "sm_read_predicted") ==
            at(before[k], "sm_read_predicted") + (backward ? 0 : sms * sector));
      CHECK(at(now[k], "dram_read_predicted") ==
            at(before[k], "dram_read_predicted") + (backward ? 0 : sector));
      // Into the SMs: decode exact; the backward without the mask at N = 8,192 read 18 and 66
      // KiB fewer (its L and D, by 4-byte copies through the L1, docs/IO-LEVELS.md), exact at
      // the other six rows.
      const double sm_read = at(m, "sm_read_measured"),
                   sm_read_predicted = at(now[k], "sm_read_predicted");
      if (backward)
        CHECK(std::abs(sm_read - sm_read_predicted) <= 2e-5 * sm_read_predicted);
      else
        CHECK(sm_read == sm_read_predicted);
      CHECK(at(m, "stores_issued_measured") == at(now[k], "stores_predicted"));
      const double dram = at(now[k], backward ? "dram_read_grid" : "dram_read_predicted");
      CHECK(std::abs(at(m, "dram_read_measured") / dram - 1) <= 0.01);
      if (backward && at(m, "dram_written_measured") >= double(1 << 20))
        CHECK(std::abs(at(m, "dram_written_measured") / at(now[k], "dram_written_grid") - 1) <=
              0.15);
    }
  }
}

// The row of `rows` whose cells in `columns` are those of `row`.
std::vector<Row>::const_iterator row_alike(const std::vector<Row>& rows, const Row& row,
                                           std::initializer_list<const char*> columns) {
  return std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
    return std::all_of(columns.begin(), columns.end(),
                       [&](const char* c) { return r.at(c) == row.at(c); });
  });
}

TEST_CASE(
    "targets: the backward's crossover on an H100, predicted before the run with 16 and 64 ways a "
    "set") {
  // `flashlab compare --pass backward` on an H100, causal, d = 128: GQA 16 / 4 at N = 6,144 to
  // 12,288 (twice) and 16 heads at N = 40,960, 49,152 and 57,344
  // (bench/results/h100/2026-12-07-h100-backward-*crossover*.csv), both predicted before the
  // run by the grid model with 16 ways a set, the profile's, and with 64, the ways the
  // forward's onset reads (-predicted-16-ways.csv, -predicted.csv; docs/IO-LEVELS.md, "Ways
  // from the edges"). With GQA the H100 reads 1.29 to 2.05 of the floor: 0.95 to 1.17 of the
  // 16-way grid, 7 of the 8 within 15%, and 1.23 to 1.75 of the 64-way one, none within. At
  // 16 heads both within 4%.
  const auto& h100 = flashlab::sim::find_profile("h100");
  CHECK(h100.l2_ways == 16);
  const std::string stem = "h100/2026-12-07-h100-backward-";
  struct Set {
    std::string measured, predicted;
  };
  int gqa_rows = 0, gqa_within = 0;
  for (const Set& set : {Set{"gqa-crossover-1", "gqa-crossover-predicted"},
                         Set{"gqa-crossover-2", "gqa-crossover-predicted"},
                         Set{"crossover", "crossover-predicted"}}) {
    const auto measured = results_csv(stem + set.measured + ".csv");
    const auto sixteen = results_csv(stem + set.predicted + "-16-ways.csv");
    const auto sixty_four = results_csv(stem + set.predicted + ".csv");
    REQUIRE(measured.size() == sixteen.size());
    REQUIRE(measured.size() == sixty_four.size());
    for (std::size_t k = 0; k < measured.size(); ++k) {
      const Row& m = measured[k];
      CAPTURE(set.measured);
      CAPTURE(m.at("N"));
      REQUIRE(m.at("N") == sixteen[k].at("N"));
      REQUIRE(m.at("N") == sixty_four[k].at("N"));
      // Into the SMs to the byte with GQA; at 16 heads 0.4 to 1.5 MiB of 52 to 101 GiB fewer
      // (L and D by 4-byte copies through the L1, as in the passes' test above).
      const double sm_read = std::stod(m.at("sm_read_measured")),
                   sm_predicted = std::stod(sixteen[k].at("sm_read_predicted"));
      if (m.at("kv_heads") == "4")
        CHECK(sm_read == sm_predicted);
      else
        CHECK(std::abs(sm_read - sm_predicted) <= 2e-5 * sm_predicted);
      const double read = std::stod(m.at("dram_read_measured"));
      const double by16 = read / std::stod(sixteen[k].at("dram_read_grid")),
                   by64 = read / std::stod(sixty_four[k].at("dram_read_grid"));
      CAPTURE(by16);
      CAPTURE(by64);
      if (m.at("kv_heads") == "4") {
        ++gqa_rows;
        CHECK(by16 >= 0.95);
        CHECK(by16 <= 1.17);
        gqa_within += by16 <= 1.15;
        CHECK(by64 >= 1.22);
      } else {
        CHECK(std::abs(by16 - 1) <= 0.03);
        CHECK(std::abs(by64 - 1) <= 0.04);
      }
    }
  }
  CHECK(gqa_rows == 8);
  CHECK(gqa_within == 7);
  // Other groups, predicted before the run with the profile alone (-gqa-groups-predicted.csv,
  // -gqa-16-2-n10240-predicted.csv): 8 query heads a KV head (16 / 2) at N = 8,192, 10,240
  // (twice) and 12,288 (four times), 4 over 8 KV heads (32 / 8) at 4,096 and 8,192. Into the
  // SMs to the byte but one run's 3.2 KB of 4.8 GiB. DRAM read 1.3 to 9.4 times the floor,
  // within 15% of the grid at three of the nine: 16 / 2 from N = 10,240 on reads 0.64 to 0.79 of
  // it, the runs of a shape up to 14% apart (the model over, and the card's spread wide).
  auto groups = results_csv(stem + "gqa-groups-predicted.csv");
  for (const Row& r : results_csv(stem + "gqa-16-2-n10240-predicted.csv")) groups.push_back(r);
  int group_rows = 0, group_within = 0;
  for (const char* name :
       {"gqa-16-2", "gqa-16-2-again", "gqa-16-2-r1", "gqa-16-2-r2", "gqa-32-8"}) {
    for (const Row& m : results_csv(stem + name + ".csv")) {
      CAPTURE(name);
      CAPTURE(m.at("N"));
      const auto kept = row_alike(groups, m, {"N", "heads", "kv_heads"});
      REQUIRE(kept != groups.end());
      const double sm_predicted = std::stod(kept->at("sm_read_predicted"));
      CHECK(std::abs(std::stod(m.at("sm_read_measured")) - sm_predicted) <= 1e-6 * sm_predicted);
      const double by16 =
          std::stod(m.at("dram_read_measured")) / std::stod(kept->at("dram_read_grid"));
      CAPTURE(by16);
      CHECK(by16 >= 0.64);
      CHECK(by16 <= 1.14);
      group_within += std::abs(by16 - 1) <= 0.15;
      ++group_rows;
    }
  }
  CHECK(group_rows == 9);
  CHECK(group_within == 3);
  // GQA 16 / 4 at d = 64 (N = 8,192, 16,384) and in the deterministic mode (d = 128, N =
  // 8,192, where the atomic mode reads 1.29 of the floor): the grid puts all three at 1.00 to
  // 1.03 of the floor, before the run; measured 0.991 to 1.011 of it, into the SMs to the byte.
  const auto more = results_csv(stem + "gqa-d64-deterministic-predicted.csv");
  int more_rows = 0;
  for (const char* name : {"gqa-d64", "gqa-deterministic"}) {
    for (const Row& m : results_csv(stem + name + ".csv")) {
      CAPTURE(name);
      CAPTURE(m.at("N"));
      const auto kept = row_alike(more, m, {"N", "d", "deterministic"});
      REQUIRE(kept != more.end());
      CHECK(m.at("sm_read_measured") == kept->at("sm_read_predicted"));
      CHECK(std::abs(std::stod(m.at("dram_read_measured")) / std::stod(kept->at("dram_read_grid")) -
                     1) <= 0.015);
      ++more_rows;
    }
  }
  CHECK(more_rows == 3);
  // The stored 16-way predictions are the profile's: the two shorter GQA rows again (seconds).
  const auto csv = scratch_path("h100-backward-gqa-again.csv");
  const auto run = run_flashlab(
      "compare --profile h100 --pass backward --sweep n=6144,8192 --d 128 --heads 16 "
      "--kv-heads 4 --causal --no-ncu --csv " +
      csv.string() + " 2>&1");
  REQUIRE(run.status == 0);
  const auto again = results_csv(csv.string());
  const auto kept = results_csv(stem + "gqa-crossover-predicted-16-ways.csv");
  REQUIRE(again.size() == 2);
  for (std::size_t k = 0; k < again.size(); ++k) {
    CAPTURE(again[k].at("N"));
    CHECK(again[k].at("N") == kept[k].at("N"));
    CHECK(again[k].at("dram_read_grid") == kept[k].at("dram_read_grid"));
    CHECK(again[k].at("dram_written_grid") == kept[k].at("dram_written_grid"));
  }
}

TEST_CASE("targets: the GQA backward at Nsight Compute's base clock on an H100, predicted before") {
  // `flashlab compare --pass backward --ncu-clocks base`, causal, d = 128: 16 / 2 at N =
  // 10,240 and 12,288 twice, 16 / 4 at N = 6,144 to 12,288 once
  // (bench/results/h100/2026-12-07-h100-backward-gqa-base-clocks-*.csv), against the grid
  // model's predictions kept before (the 16-way -predicted files of the test above). At the
  // base clock the blocks of a KV head keep step, as the model's do, and every row reads within
  // 15% of the grid (16 / 2 0.893 to 0.926, 16 / 4 0.946 to 1.113); at the card's own clocks, in
  // the same call (-own-clocks-16-2.csv) as in the rows above, 16 / 2 reads 0.711 and 0.735 of
  // it (docs/IO-LEVELS.md, "The backward's blocks logged"). Into the SMs to the byte.
  const std::string stem = "h100/2026-12-07-h100-backward-";
  auto kept = results_csv(stem + "gqa-groups-predicted.csv");
  for (const char* name :
       {"gqa-16-2-n10240-predicted", "gqa-crossover-predicted-16-ways"})
    for (const Row& r : results_csv(stem + name + ".csv")) kept.push_back(r);
  // The kept prediction of a measured row's shape.
  const auto kept_for = [&](const Row& m) {
    const auto k = row_alike(kept, m, {"N", "heads", "kv_heads"});
    REQUIRE(k != kept.end());
    return *k;
  };
  const auto by_grid = [&](const Row& m) {
    return std::stod(m.at("dram_read_measured")) / std::stod(kept_for(m).at("dram_read_grid"));
  };
  int rows = 0;
  for (const char* name :
       {"gqa-base-clocks-16-2-1", "gqa-base-clocks-16-2-2", "gqa-base-clocks-16-4"}) {
    for (const Row& m : results_csv(stem + name + ".csv")) {
      CAPTURE(name);
      CAPTURE(m.at("N"));
      CHECK(m.at("sm_read_measured") == kept_for(m).at("sm_read_predicted"));
      const double ratio = by_grid(m);
      CAPTURE(ratio);
      CHECK(std::abs(ratio - 1) <= 0.15);
      ++rows;
    }
  }
  CHECK(rows == 8);
  for (const Row& m : results_csv(stem + "gqa-own-clocks-16-2.csv")) {
    CAPTURE(m.at("N"));
    const double ratio = by_grid(m);
    CAPTURE(ratio);
    CHECK(ratio >= 0.70);
    CHECK(ratio <= 0.74);
  }
}
TEST_CASE("decode into the SMs to the byte at every stored row, its lengths booked") {
  // Every `compare --pass decode` row kept in bench/results (32 query heads over 8, d = 128,
  // but the two of d = 64 below): the H200's sweeps of 2026-12-04 (B = 1, L = 1,024 to
  // 131,072; B = 8, L = 1,024 to 65,536; pages of 64 at L = 4,096 and 32,768), an H100's of
  // 2026-12-05 and 2026-12-06 (B = 2; B = 16 and 64 at L = 4,096, whose lengths are 2 and 8
  // sectors; L = 4,096 and 32,768 over B = 1 and 8; the last three sets predicted before). Before
  // the lengths were booked each read 512 to 4,224 bytes more than the mirror (one sector a split
  // block, at most one an SM: docs/IO-LEVELS.md, "Decode's lengths").
  struct Stored {
    const char* csv;
    const char* profile;
    const char* options;
    std::size_t rows;
  };
  std::size_t rows = 0;
  for (const Stored stored :
       {Stored{"2026-12-04-h200-compare-pass-sweep-decode-b1.csv", "h200", "", 8},
        Stored{"2026-12-04-h200-compare-pass-sweep-decode-b8.csv", "h200", "", 7},
        Stored{"2026-12-04-h200-compare-pass-sweep-decode-paged.csv", "h200", "--page-size 64", 2},
        Stored{"h100/2026-12-05-h100-app-replay-compare-decode.csv", "h100", "", 4},
        Stored{"h100/2026-12-06-h100-unseen-decode.csv", "h100", "", 2},
        // Past one sector, predicted before the run: B = 16 (two sectors), exact.
        Stored{"h100/2026-12-06-h100-decode-lengths.csv", "h100", "", 2},
        // d = 64, 16 query heads over 4, B = 4, L = 12,288, contiguous and in pages of 64 (whose
        // block table, 48 bytes a split over two sectors, is booked by its sectors since).
        Stored{"h100/2026-12-06-h100-unseen2-dec.csv", "h100", "", 1},
        Stored{"h100/2026-12-06-h100-unseen2-dec-paged.csv", "h100", "--page-size 64", 1},
        // L = 4,096 and 32,768 over B = 1 and 8, predicted before the run (application replay:
        // 0 to 472 KiB written against the floor's 0).
        Stored{"h100/2026-12-06-h100-decode-writes.csv", "h100", "", 4}}) {
    const std::string file = stored.csv;
    CAPTURE(file);
    const auto measured = results_csv(stored.csv);
    CHECK(measured.size() == stored.rows);
    for (const auto& m : measured) {
      CAPTURE(m.at("N"));
      CAPTURE(m.at("batch"));
      const auto csv = scratch_path("decode-stored-row.csv");
      const auto run = run_flashlab(
          "compare --profile " + std::string(stored.profile) +
          " --pass decode --sweep n=" + m.at("N") + " --sweep batch=" + m.at("batch") +
          " --heads " + m.at("heads") + " --kv-heads " + m.at("kv_heads") + " --d " + m.at("d") +
          " " + stored.options + " --no-ncu --csv " + csv.string() + " 2>&1");
      REQUIRE(run.status == 0);
      const auto now = results_csv(csv.string());
      REQUIRE(now.size() == 1);
      CHECK(now[0].at("splits") == m.at("splits"));
      if (m.at("batch") == "64") {
        // Eight sectors of lengths, 64 blocks each, 512 blocks on 132 SMs: the rule's 512
        // sectors an upper bound; the H100 read 457 (an SM's blocks shared 55 sectors).
        const double over =
            std::stod(now[0].at("sm_read_predicted")) - std::stod(m.at("sm_read_measured"));
        CHECK(over == 55 * double(flashlab::sim::kSectorBytes));
      } else {
        CHECK(now[0].at("sm_read_predicted") == m.at("sm_read_measured"));
      }
      ++rows;
    }
  }
  CHECK(rows == 31);
}
