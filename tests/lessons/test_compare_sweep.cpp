// `flashlab compare --sweep`: the mirrors' predictions over a grid, in closed form, as a table,
// a CSV and a plot; without a GPU the measured columns say why they are empty.
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/warp_store.hpp"
#include "run_flashlab.hpp"
#include "sweep_plot.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using flashlab::test::contains;
using flashlab::test::count_of;
using flashlab::test::kUsageError;
using flashlab::test::read_file;
using flashlab::test::run_flashlab;
namespace fs = std::filesystem;

namespace {

std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("compare --sweep: fa2's bytes into the SMs are its closed form, times the heads") {
  const fs::path csv = flashlab::test::scratch_path("compare-sweep.csv");
  const auto run = run_flashlab(
      "compare --kernels fa2 --sweep n=256..1024 --sweep d=64,128 --sweep heads=1,3 "
      "--no-ncu --csv " +
      csv.string() + " 2>&1");
  REQUIRE(run.status == 0);
  const auto rows = read_csv(csv);
  REQUIRE(rows.size() == 1 + 3 * 2 * 2);
  // The columns this test reads, by the header's names (the CSV's first line).
  constexpr std::size_t kN = 1, kD = 2, kHeads = 3, kSmRead = 6, kSmReadMeasured = 7,
                        kSmWritten = 8;
  CHECK(rows[0][kSmRead] == "sm_read_predicted");
  CHECK(rows[0][kSmReadMeasured] == "sm_read_measured");
  CHECK(rows[0][kSmWritten] == "sm_written_predicted");
  for (std::size_t k = 1; k < rows.size(); ++k) {
    const auto& r = rows[k];
    CAPTURE(r[kN]);
    const double N = std::stod(r[kN]), d = std::stod(r[kD]), heads = std::stod(r[kHeads]);
    const auto c = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, int64_t(d), FLASHLAB_BF16);
    const double matrix = N * d * 2;  // one (N, d) bf16 matrix
    const double query_tiles = std::ceil(N / c.Br);
    CHECK(std::stod(r[kSmRead]) ==
          heads * (matrix + query_tiles * 2 * matrix));  // Q once, K and V per tile
    // O staged in SRAM and stored as whole rows (its data exactly); L a sector per 8 rows
    // (exact: N is a multiple of 8 here).
    CHECK(c.o_store.bytes_per_thread * c.o_store.threads / c.o_store.runs == d * 2);
    CHECK(c.lse_store.threads == flashlab::gpu::kFragmentLseStore.threads);
    CHECK(std::stod(r[kSmWritten]) == heads * (matrix + N * 4));
    CHECK(r[kSmReadMeasured].empty());  // not measured
    CHECK(r.size() == rows[0].size());
    CHECK(r.back().empty());  // the Coalescer's sectors: not measured either
  }
  // The last three columns: store sectors issued, the Coalescer's sectors to the SMs and
  // from the slices.
  REQUIRE(rows[0].size() >= 3);
  CHECK(rows[0][rows[0].size() - 3] == "stores_issued_measured");
  CHECK(rows[0][rows[0].size() - 2] == "lrc_to_sms_measured");
  CHECK(rows[0].back() == "lrc_from_slices_measured");
  fs::remove(csv);
  CHECK(contains(run.output, "not measured (--no-ncu)"));
  // The writes' counters named with their levels (ncu_bytes.hpp's table).
  CHECK(contains(run.output,
                 "store sectors the L1 issued: "
                 "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"));
  CHECK(contains(run.output, "out of the SMs: l1tex__m_l1tex2xbar_write_bytes.sum"));
  CHECK(contains(run.output,
                 "read sectors the Coalescer asked of the L2 slices: "
                 "lrc__lts2lrc_sectors_op_read.sum"));
}

TEST_CASE("compare --sweep causal=no,yes: both masks in one sweep, each row its closed form") {
  const fs::path csv = flashlab::test::scratch_path("compare-sweep-causal.csv");
  const auto run = run_flashlab(
      "compare --kernels fa2 --sweep n=256,1000 --sweep causal=no,yes --sweep heads=1,3 --d 64 "
      "--no-ncu --csv " +
      csv.string() + " 2>&1");
  REQUIRE(run.status == 0);
  CHECK(contains(run.output, "causal = no and yes"));
  const auto rows = read_csv(csv);
  REQUIRE(rows.size() == 1 + 2 * 2 * 2);
  constexpr std::size_t kN = 1, kHeads = 3, kCausal = 4, kSmRead = 6;
  REQUIRE(rows[0][kCausal] == "causal");
  const auto c = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 64, FLASHLAB_BF16);
  int masked = 0;
  for (std::size_t k = 1; k < rows.size(); ++k) {
    const auto& r = rows[k];
    const long N = std::stol(r[kN]), heads = std::stol(r[kHeads]);
    const bool causal = r[kCausal] == "1";
    CAPTURE(N);
    CAPTURE(causal);
    masked += causal;
    // Q once; each query tile's K and V up to its last row's key (top-left), or all of them.
    double keys = 0;
    for (long q0 = 0; q0 < N; q0 += c.Br) {
      const long last = std::min(q0 + c.Br, N);  // one past the tile's last row
      keys += causal ? double(std::min(N, (last + c.Bc - 1) / c.Bc * c.Bc)) : double(N);
    }
    CHECK(std::stod(r[kSmRead]) == double(heads) * (double(N) + 2 * keys) * 64 * 2);
  }
  CHECK(masked == 4);
  fs::remove(csv);
  // The backward's sweep takes the axis too; decode's refuses it.
  const auto pass = run_flashlab(
      "compare --pass backward --sweep n=256 --sweep causal=no,yes --no-grid-model --no-ncu "
      "--csv " +
      csv.string() + " 2>&1");
  REQUIRE(pass.status == 0);
  const auto p = read_csv(csv);
  REQUIRE(p.size() == 3);
  const auto column = std::find(p[0].begin(), p[0].end(), "causal") - p[0].begin();
  const auto read = std::find(p[0].begin(), p[0].end(), "sm_read_predicted") - p[0].begin();
  CHECK(p[1][std::size_t(column)] == "0");
  CHECK(p[2][std::size_t(column)] == "1");
  CHECK(std::stod(p[2][std::size_t(read)]) < std::stod(p[1][std::size_t(read)]));
  fs::remove(csv);
}

TEST_CASE("compare --sweep without a GPU: predictions, and why the measured columns are empty") {
  const auto run = run_flashlab("compare --sweep n=128,256 --sweep d=64 2>&1");
  REQUIRE(run.status == 0);
  CHECK(
      (contains(run.output, "the measured columns need") || contains(run.output, "SM read meas.")));
  for (const char* kernel : {"naive", "scalar", "fa2"})
    CHECK(contains(run.output, std::string(kernel) + "\t128"));
}

TEST_CASE(
    "compare --gpu-only computes nothing on the CPU, so the CPU's cost limit does not apply") {
  // With a GPU it runs its first kernel (ncu_bytes.hpp, kNcuFirstKernels) and the kernel once
  // and prints nothing. Without one it fails at the first and says why (under ncu a kernel
  // that did not run would otherwise leave an empty measurement and no word of the reason).
  // Either way N = 16384 is not refused for the CPU's sake.
  const auto run = run_flashlab("compare --gpu-only fa2 --n 16384 --d 128 2>&1");
  CHECK_FALSE(contains(run.output, "on this CPU"));
  if (run.status != 0) {
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "--gpu-only fa2: the first kernel did not run: "));
  } else {
    CHECK(run.output.empty());
  }
  // The same for a pass.
  const auto pass = run_flashlab("compare --pass decode --gpu-only decode --n 256 --d 64 2>&1");
  if (pass.status != 0) {
    CHECK(pass.status == kUsageError);
    CHECK(contains(pass.output, "--gpu-only decode: the first kernel did not run: "));
  } else {
    CHECK(pass.output.empty());
  }
}

TEST_CASE("the sweeps' plot script: zero bytes left out, empty series and panels said so") {
  using flashlab::app::PlotPanel;
  using flashlab::app::PlotSeries;
  const std::vector<PlotPanel> panels = {
      {"into the SMs", {{"fa2 predicted", "lines", 1, {{1024, 4.0e6}, {2048, 0.0}}}}},
      {"DRAM written", {{"fa2 predicted", "lines", 1, {{1024, 0.0}, {2048, 0.0}}}}},
      {"DRAM read", {}}};
  const std::string script = flashlab::app::sweep_plot_script("a sweep", panels);
  // Two panels a row: three take two rows.
  CHECK(contains(script, "set multiplot layout 2, 2 title 'a sweep'"));
  // The point at 0 bytes is left out; the point beside it stays.
  CHECK(contains(script, "$series_0_0 << EOD\n1024 4000000\nEOD\n"));
  CHECK_FALSE(contains(script, "2048 0"));
  // A series with no point left is not drawn, and its panel, like one with no series, says so.
  CHECK_FALSE(contains(script, "$series_1_0"));
  CHECK(count_of(script, "'no bytes at this level'") == 2);
  CHECK(contains(script, "unset multiplot"));
  CHECK(contains(flashlab::app::sweep_plot_script("one", {panels[0]}),
                 "set multiplot layout 1, 1 title 'one'"));
}

TEST_CASE("compare --sweep: a plot of bytes against N, and every bad request refused") {
  const fs::path png = flashlab::test::scratch_path("compare-sweep.png");
  const auto drawn =
      run_flashlab("compare --sweep n=256,512 --no-ncu --plot " + png.string() + " 2>&1");
  if (contains(drawn.output, "needs gnuplot, which is not installed")) {
    CHECK(drawn.status == kUsageError);
  } else {
    REQUIRE(drawn.status == 0);
    CHECK(fs::file_size(png) > 0);
    CHECK_FALSE(contains(drawn.output, "the plot draws the points of"));
    // A panel per level, each kernel's prediction a line in it (no GPU here: no points).
    const std::string script = read_file(png.string() + ".gp");
    CHECK(contains(script, "set multiplot layout 2, 2"));
    for (const char* level : {"into the SMs", "out of the SMs", "DRAM read", "DRAM written"})
      CHECK_MESSAGE(contains(script, std::string("set title '") + level), level);
    for (const char* kernel : {"naive", "scalar", "fa2", "fa3"})
      CHECK_MESSAGE(contains(script, std::string("title '") + kernel + " predicted'"), kernel);
    CHECK_FALSE(contains(script, " measured'"));
    // With more than one value on another axis the plot takes the first, and says so.
    const auto two = run_flashlab(
        "compare --kernels fa2 --sweep n=256,512 --sweep heads=2,1 "
        "--sweep causal=yes,no --no-ncu --plot " +
        png.string() + " 2>&1");
    REQUIRE(two.status == 0);
    CHECK(contains(two.output, "the plot draws the points of heads = 2 and causal = yes"));
    // fa2 writes nothing to DRAM while it runs at these N: a log axis has no place for 0
    // bytes, so that panel says so instead of failing.
    CHECK(contains(read_file(png.string() + ".gp"), "'no bytes at this level'"));
    fs::remove(png);
    fs::remove(png.string() + ".gp");
  }
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--sweep m=1,2", "give an axis and its values"},
           {"--sweep causal=maybe", "the mask's values are no and yes"},
           {"--sweep causal=yes,yes", "yes is named twice"},
           {"--sweep causal=", "give no, yes or no,yes after causal="},
           {"--sweep causal=no,yes --sweep causal=no", "causal is swept twice"},
           {"--sweep n=64,128 --sweep n=256", "n is swept twice"},
           {"--sweep causal=no,yes --causal", "--causal with --sweep causal=...: "},
           {"--sweep n=64,128 --n-q 32", "--n-q with --sweep: the forward sweep runs as many"},
           {"--sweep n=64..32", "needs 1 <= a <= b"},
           {"--sweep n=1..4194304 --sweep d=1..4096 --sweep heads=1,2",
            "more than the 512 a sweep takes"},
           {"--sweep d=64,128 --plot x.png", "give --sweep n= more than one value"},
           {"--csv x.csv", "give --sweep n=... with them"},
           {"--sweep n=64,128 --csv same --plot same", "--csv and --plot both name"}}) {
    CAPTURE(args);
    const auto run = run_flashlab("compare " + args + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
  }
}

// The passes' sweeps: each row's figures by the column names of the CSV's header.
namespace {

struct CsvTable {
  std::vector<std::vector<std::string>> rows;
  std::size_t column(const std::string& name) const {
    const auto& header = rows.front();
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE_MESSAGE(it != header.end(), "no column " << name);
    return std::size_t(it - header.begin());
  }
  double number(std::size_t row, const std::string& name) const {
    return std::stod(rows[row][column(name)]);
  }
};

}  // namespace

TEST_CASE("compare --pass decode --sweep: the mirror's bytes and its DRAM floor over N and batch") {
  const fs::path csv = flashlab::test::scratch_path("compare-pass-sweep-decode.csv");
  const auto run = run_flashlab(
      "compare --pass decode --sweep n=1,97,1023 --sweep batch=1,3 --heads 8 --kv-heads 2 --d 64 "
      "--no-ncu --no-color --csv " +
      csv.string() + " 2>&1");
  REQUIRE(run.status == 0);
  CHECK(contains(run.output, "decode pass, bf16"));
  CHECK(contains(run.output, "not measured (--no-ncu)"));
  const CsvTable t{read_csv(csv)};
  REQUIRE(t.rows.size() == 1 + 3 * 2);
  for (std::size_t k = 1; k < t.rows.size(); ++k) {
    CAPTURE(t.rows[k][t.column("N")]);
    CAPTURE(t.rows[k][t.column("batch")]);
    const double n = t.number(k, "N"), batch = t.number(k, "batch"), splits = t.number(k, "splits");
    CHECK(t.rows[k][t.column("pass")] == "decode");
    CHECK(t.number(k, "heads") == 8);
    CHECK(t.number(k, "kv_heads") == 2);
    // From a cold L2: every key of K and V once, Q once, the lengths' sectors (8 sequences
    // a sector), and with more than one split the states, padded to whole sectors, read back
    // by the combine.
    const double kv = batch * 2 * n * 64 * 2, q = batch * 8 * 64 * 2;
    const double lengths = double(flashlab::sim::kSectorBytes) * std::ceil(batch / 8);
    const double states =
        splits > 1 ? batch * 8 * splits * double(flashlab::gpu::decode::state_floats(64)) * 4 : 0;
    CHECK(t.number(k, "dram_read_predicted") == 2 * kv + q + lengths + states);
    CHECK(t.number(k, "dram_written_predicted") == 0);  // all of it fits the L2's dirty room
    // Into the SMs no less: Q again for every split with keys.
    CHECK(t.number(k, "sm_read_predicted") >= t.number(k, "dram_read_predicted"));
    CHECK(t.rows[k][t.column("sm_read_measured")].empty());
    CHECK(t.rows[k][t.column("dram_read_measured")].empty());
  }
  fs::remove(csv);
}

TEST_CASE("compare --pass backward --sweep: the DRAM floor, and writes past the L2's dirty room") {
  const fs::path csv = flashlab::test::scratch_path("compare-pass-sweep-backward.csv");
  const auto run = run_flashlab(
      "compare --pass backward --sweep n=97,16384 --sweep heads=1,16 --d 128 --causal --no-ncu "
      "--csv " +
      csv.string() + " 2>&1");
  REQUIRE(run.status == 0);
  const CsvTable t{read_csv(csv)};
  REQUIRE(t.rows.size() == 1 + 2 * 2);
  const double room = double(flashlab::sim::l2_dirty_room(flashlab::sim::find_profile("h200")));
  for (std::size_t k = 1; k < t.rows.size(); ++k) {
    const double n = t.number(k, "N"), heads = t.number(k, "heads");
    CAPTURE(n);
    CAPTURE(heads);
    CHECK(t.number(k, "causal") == 1);
    const double q = heads * n * 128 * 2, kv = q, rows = heads * n * 4, acc = heads * n * 128 * 4;
    // pre: O, dO; main: Q, K, V, dO, L, D and the accumulator's lines (top-left, N_q = N_k:
    // every KV tile is seen); post: the accumulator.
    CHECK(t.number(k, "dram_read_predicted") == 2 * q + (2 * q + 2 * kv + 2 * rows + acc) + acc);
    const auto beyond = [&](double written) { return std::max(0.0, written - room); };
    CHECK(t.number(k, "dram_written_predicted") ==
          beyond(rows + acc) + beyond(2 * kv + acc) + beyond(q));
  }
  // At 16 heads and N = 16384 the accumulator alone (128 MiB) outgrows the room.
  CHECK(t.number(4, "dram_written_predicted") > 0);
  CHECK(t.number(1, "dram_written_predicted") == 0);
  // The grid model: every tile once where the L2 keeps the visits (here all four points: the
  // second wave runs ahead of the first), the floor give or take the sectors two tiles share
  // at N = 97 (its heads' rows of L and D start inside a sector: at most 32 bytes a tile).
  for (std::size_t k = 1; k < t.rows.size(); ++k) {
    CAPTURE(k);
    const double floor = t.number(k, "dram_read_predicted"), grid = t.number(k, "dram_read_grid");
    CHECK(grid >= floor);
    CHECK(grid <= floor * 1.001 + 2 * 16 * 2 * 32);
  }
  // The writes: the accumulator's lines and dK, dV stay dirty in an L2 that holds them.
  CHECK(t.number(1, "dram_written_grid") == 0);
  // 16 heads at N = 16384 move 8.6 GiB into the SMs: the grid model says it takes a while.
  CHECK(contains(run.output, "the grid model runs the pass's 8.6 GiB into the SMs"));
  fs::remove(csv);
  // N_q and the mode, in the header and the CSV: the rows say what ran.
  const auto det = run_flashlab(
      "compare --pass backward --sweep n=256,512 --n-q 100 --deterministic --no-grid-model "
      "--no-ncu --csv " +
      csv.string() + " 2>&1");
  REQUIRE(det.status == 0);
  CHECK(contains(det.output, "causal = no, N_q = 100, deterministic"));
  const CsvTable v{read_csv(csv)};
  REQUIRE(v.rows.size() == 3);
  for (std::size_t k = 1; k < 3; ++k) {
    CHECK(v.number(k, "n_q") == 100);
    CHECK(v.number(k, "deterministic") == 1);
  }
  CHECK(t.number(1, "n_q") == t.number(1, "N"));  // without --n-q: N_q = N
  CHECK(t.number(1, "deterministic") == 0);
  fs::remove(csv);
  // --no-grid-model: the grid's columns empty.
  const auto quick = run_flashlab(
      "compare --pass backward --sweep n=64,128 --no-grid-model --no-ncu "
      "--csv " +
      csv.string() + " 2>&1");
  REQUIRE(quick.status == 0);
  CHECK_FALSE(contains(quick.output, "through the L2 line by line"));
  const CsvTable u{read_csv(csv)};
  REQUIRE(u.rows.size() == 3);
  CHECK(u.rows[1][u.column("dram_read_grid")].empty());
  CHECK(u.rows[2][u.column("dram_written_grid")].empty());
  CHECK(!u.rows[1][u.column("dram_read_predicted")].empty());
  fs::remove(csv);
}

TEST_CASE("compare --pass --sweep: a plot, and every bad request refused") {
  const fs::path png = flashlab::test::scratch_path("compare-pass-sweep.png");
  const auto drawn = run_flashlab("compare --pass decode --sweep n=256,512 --no-ncu --plot " +
                                  png.string() + " 2>&1");
  if (contains(drawn.output, "needs gnuplot, which is not installed")) {
    CHECK(drawn.status == kUsageError);
  } else {
    REQUIRE(drawn.status == 0);
    CHECK(fs::file_size(png) > 0);
    // A panel per level: the SMs' two, DRAM's two with the cold-L2 floor in each.
    const std::string text = read_file(png.string() + ".gp");
    CHECK(contains(text, "set multiplot layout 2, 2"));
    for (const char* level : {"into the SMs", "out of the SMs", "DRAM read", "DRAM written"})
      CHECK_MESSAGE(contains(text, std::string("set title '") + level), level);
    CHECK(contains(text, "title 'cold-L2 floor'"));
    CHECK_FALSE(contains(text, "title 'measured'"));  // no GPU here
    fs::remove(png);
    fs::remove(png.string() + ".gp");
  }
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--sweep batch=1,2", "batch is an axis of --pass backward or decode"},
           {"--pass decode --sweep batch=0,2", "--sweep batch"},
           {"--pass decode --sweep heads=8,12 --kv-heads 8", "does not divide --heads 12"},
           {"--pass backward --sweep n=1..4194304 --sweep d=64,128 --sweep heads=1,2,4 --sweep "
            "batch=1,2",
            "more than the 256 a pass's sweep takes"},
           {"--pass backward --sweep d=64,128 --plot x.png", "give --sweep n= more than one value"},
           {"--pass decode --csv x.csv", "give --sweep n=... with them"},
           {"--pass backward --sweep n=64,128 --kernels fa2",
            "--kernels is an option of the forward"},
           {"--pass decode --sweep n=64,128 --causal",
            "--causal is an option of the forward comparison and --pass backward, not of --pass "
            "decode"},
           {"--pass decode --sweep causal=no,yes", "decode has no mask to sweep"},
           {"--pass decode --sweep n=64,128 --no-grid-model",
            "--no-grid-model is an option of --pass backward"},
           {"--sweep n=64,128 --no-grid-model",
            "--no-grid-model is an option of --pass backward, not of the forward comparison"},
           {"--sweep n=64,128 --deterministic",
            "--deterministic is an option of --pass backward, not of the forward"},
           {"--sweep n=64,128 --kv-heads 1",
            "--kv-heads is an option of --pass backward or decode"},
           {"--pass decode --sweep n=64,128 --gpu-only decode", "without --sweep"},
           {"--pass fa3 --sweep n=64,128", "--pass fa3 is simulate's"}}) {
    CAPTURE(args);
    const auto run = run_flashlab("compare " + args + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
  }
}
