#include "compare_pass_sweep.hpp"

#include "kernel_bytes.hpp"
#include "progress.hpp"
#include "sweep_plot.hpp"

#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/ncu_bytes.hpp"
#include "kit/terminal.hpp"

#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iostream>
#include <optional>

namespace flashlab::app {

namespace {

// Each measured point runs the pass under Nsight Compute (seconds each, a minute for the
// largest backward): a sweep takes at most this many (N, d, heads, batch) points.
constexpr std::size_t kMaxPassSweepPoints = 256;

struct Point {
  CompareProblem problem;
  PassCase pass;  // its resolved options hold the point's batch
  std::optional<sim::CompulsoryDram> grid;  // the grid model's DRAM, where it runs the pass
  std::optional<MeasuredBytes> measured;
  std::string note;  // why a measured or predicted figure is missing
};

// A point's figures, each absent where nothing was predicted or measured: what both the table
// and the CSV show. Stores: the mirror's writes less its TMA stores, against the store sectors
// the L1 issued; written: all its writes, against what left the SMs.
struct Figures {
  std::optional<double> sm_read_predicted, sm_read_measured, stores_predicted,
      stores_issued_measured, sm_written_predicted, sm_written_measured, l2_measured,
      dram_read_predicted, dram_read_measured, dram_written_predicted, dram_written_measured,
      kernels_measured, dram_read_grid, dram_written_grid;
};

Figures figures_of(const Point& p) {
  Figures f;
  if (const auto& r = p.pass.prediction.report) {
    f.sm_read_predicted = double(r->bytes_read());
    f.stores_predicted = double(r->bytes_stores_issued());
    f.sm_written_predicted = double(r->bytes_written());
  }
  if (const auto dram = compulsory_dram(p.pass.prediction)) {
    f.dram_read_predicted = double(dram->read);
    f.dram_written_predicted = double(dram->written);
  }
  if (p.grid) {
    f.dram_read_grid = double(p.grid->read);
    f.dram_written_grid = double(p.grid->written);
  }
  if (const auto& m = p.measured) {
    f.sm_read_measured = m->sm_read;
    f.stores_issued_measured = m->stores_issued;
    f.sm_written_measured = m->sm_written;
    f.l2_measured = m->l2;
    f.dram_read_measured = m->dram_read;
    f.dram_written_measured = m->dram_written;
    f.kernels_measured = double(m->kernels);
  }
  return f;
}

std::string bytes_text(std::optional<double> b) { return b ? sim::format_bytes(*b) : "-"; }
std::string ratio(std::optional<double> measured, std::optional<double> predicted) {
  return ratio_text(measured, predicted ? *predicted : 0);
}
std::string csv_number(std::optional<double> b) { return b ? fmt::format("{:.0f}", *b) : ""; }

// The point's query rows: the backward's N_q (N where not given), decode's per sequence.
cpu::Index queries_of(Pass pass, const Point& p) {
  if (pass == Pass::decode) return p.problem.n_q > 0 ? p.problem.n_q : 1;
  return p.problem.n_q > 0 ? p.problem.n_q : p.problem.n;
}

// Decode's split count (or queue pieces), as the kernel's rule or --splits gave it.
std::string splits_text(Pass pass, const Point& p) {
  return pass == Pass::decode ? fmt::format("{}", p.pass.resolved.splits) : "-";
}

std::vector<Point> points_of(const PassSweepRequest& r) {
  std::vector<Point> points;
  for (const bool causal : r.grid.causal)
    for (cpu::Index d : r.grid.d)
      for (cpu::Index heads : r.grid.heads)
        for (cpu::Index batch : r.grid.batch)
          for (cpu::Index n : r.grid.n) {
            Point p;
            p.problem = r.base;
            p.problem.n = n, p.problem.d = d, p.problem.heads = heads, p.problem.causal = causal;
            ComparePassArgs args = r.args;
            args.batch = batch;
            p.pass = pass_case(r.pass, args, p.problem);
            points.push_back(std::move(p));
          }
  return points;
}

void print_table(Pass pass, const std::vector<Point>& points, const Style& style) {
  Table t({"N",
           "d",
           "heads",
           "batch",
           "causal",
           "splits",
           "SM read pred.",
           "SM read meas.",
           "ratio",
           "stores pred.",
           "stores issued meas.",
           "ratio",
           "out of the SMs meas.",
           "ratio",
           "DRAM read floor",
           "DRAM read meas.",
           "ratio",
           "DRAM read grid",
           "ratio",
           "DRAM write floor",
           "DRAM write grid",
           "DRAM write meas.",
           "note"},
          {false, false, false, false, true,  false, false, false, false, false, false, false,
           false, false, false, false, false, false, false, false, false, false, true});
  for (const Point& p : points) {
    const Figures f = figures_of(p);
    t.add({fmt::format("{}", p.problem.n),
           fmt::format("{}", p.problem.d),
           fmt::format("{}", p.problem.heads),
           fmt::format("{}", p.pass.resolved.batch),
           p.problem.causal ? "yes" : "no",
           splits_text(pass, p),
           bytes_text(f.sm_read_predicted),
           bytes_text(f.sm_read_measured),
           ratio(f.sm_read_measured, f.sm_read_predicted),
           bytes_text(f.stores_predicted),
           bytes_text(f.stores_issued_measured),
           ratio(f.stores_issued_measured, f.stores_predicted),
           bytes_text(f.sm_written_measured),
           ratio(f.sm_written_measured, f.sm_written_predicted),
           bytes_text(f.dram_read_predicted),
           bytes_text(f.dram_read_measured),
           ratio(f.dram_read_measured, f.dram_read_predicted),
           bytes_text(f.dram_read_grid),
           ratio(f.dram_read_measured, f.dram_read_grid),
           bytes_text(f.dram_written_predicted),
           bytes_text(f.dram_written_grid),
           bytes_text(f.dram_written_measured),
           p.note});
  }
  t.print(std::cout, style);
}

void write_csv(OutputFile& out, Pass pass, const std::vector<Point>& points) {
  out.write(
      "pass,N,d,heads,kv_heads,batch,splits,causal,dtype,sm_read_predicted,sm_read_measured,"
      "stores_predicted,stores_issued_measured,sm_written_predicted,sm_written_measured,"
      "l2_measured,dram_read_predicted,dram_read_measured,dram_written_predicted,"
      "dram_written_measured,kernels_measured,dram_read_grid,dram_written_grid,n_q,"
      "deterministic\n");
  for (const Point& p : points) {
    const Figures f = figures_of(p);
    const ComparePassArgs& a = p.pass.resolved;
    out.write(
        fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                    to_string(pass), p.problem.n, p.problem.d, p.problem.heads,
                    a.kv_heads > 0 ? a.kv_heads : p.problem.heads, a.batch,
                    pass == Pass::decode ? fmt::format("{}", a.splits) : "",
                    p.problem.causal ? 1 : 0, p.problem.dtype, csv_number(f.sm_read_predicted),
                    csv_number(f.sm_read_measured), csv_number(f.stores_predicted),
                    csv_number(f.stores_issued_measured), csv_number(f.sm_written_predicted),
                    csv_number(f.sm_written_measured), csv_number(f.l2_measured),
                    csv_number(f.dram_read_predicted), csv_number(f.dram_read_measured),
                    csv_number(f.dram_written_predicted), csv_number(f.dram_written_measured),
                    csv_number(f.kernels_measured), csv_number(f.dram_read_grid),
                    csv_number(f.dram_written_grid), queries_of(pass, p), a.deterministic ? 1 : 0));
  }
  out.commit();
}

// Bytes against N at the grid's first d, heads, batch and mask, a panel per level: into and
// out of the SMs, each predicted as a line and measured as points; DRAM read and written, the
// cold-L2 floor dashed (where the points leave it, lines the L2 dropped are read again, or
// written back early), the grid model's dotted where it runs the pass, the measured points.
std::string plot_script(const PassSweepRequest& r, const std::vector<Point>& points) {
  using Value = std::optional<double> Figures::*;
  const auto series = [&](const char* title, const char* style, int colour, Value value) {
    PlotSeries s{title, style, colour, {}};
    for (const Point& p : points) {
      if (p.problem.d != r.grid.d.front() || p.problem.heads != r.grid.heads.front() ||
          p.pass.resolved.batch != r.grid.batch.front() ||
          p.problem.causal != r.grid.causal.front())
        continue;
      if (const auto v = figures_of(p).*value) s.points.emplace_back(p.problem.n, *v);
    }
    return s;
  };
  const std::vector<PlotPanel> panels = {
      {plot_level_title(PlotLevel::into_sms),
       {series("predicted", "lines", 1, &Figures::sm_read_predicted),
        series("measured", "points pt 7", 1, &Figures::sm_read_measured)}},
      {plot_level_title(PlotLevel::out_of_sms),
       {series("predicted", "lines", 1, &Figures::sm_written_predicted),
        series("measured", "points pt 7", 1, &Figures::sm_written_measured)}},
      {plot_level_title(PlotLevel::dram_read),
       {series("cold-L2 floor", "lines dt 2", 2, &Figures::dram_read_predicted),
        series("the grid model", "lines dt 3", 3, &Figures::dram_read_grid),
        series("measured", "points pt 5", 2, &Figures::dram_read_measured)}},
      {plot_level_title(PlotLevel::dram_written),
       {series("cold-L2 floor", "lines dt 2", 2, &Figures::dram_written_predicted),
        series("the grid model", "lines dt 3", 3, &Figures::dram_written_grid),
        series("measured", "points pt 5", 2, &Figures::dram_written_measured)}}};
  return sweep_plot_script(
      fmt::format("{} pass, d = {}, heads = {}, batch = {}, causal = {}, {}", to_string(r.pass),
                  r.grid.d.front(), r.grid.heads.front(), r.grid.batch.front(),
                  causal_text({r.grid.causal.front()}), r.base.dtype),
      panels);
}

}  // namespace

void run_compare_pass_sweep(const PassSweepRequest& r) {
  const std::size_t count = r.grid.n.size() * r.grid.d.size() * r.grid.heads.size() *
                            r.grid.batch.size() * r.grid.causal.size();
  if (count > kMaxPassSweepPoints)
    throw cpu::InvalidArgument(fmt::format(
        "--sweep: {} points (N x d x heads x batch x masks), more than the {} a pass's sweep "
        "takes; shorten a list",
        count, kMaxPassSweepPoints));
  std::vector<Point> points = points_of(r);  // every point's options checked before any run
  if (runs_grid_model(r.pass, r.args)) {
    double bytes = 0;
    for (const Point& p : points)
      if (p.pass.prediction.report) bytes += double(p.pass.prediction.report->bytes_read());
    check_grid_model_time(bytes, kMaxSweepGridModelSeconds, r.base.large, "this sweep",
                          "the largest N, heads or batch, or pass --no-grid-model");
  }
  std::optional<OutputFile> csv;
  std::optional<PlotOutput> plot;
  open_sweep_outputs(r.grid, r.csv, r.plot, csv, plot);

  const std::string unmeasured = why_unmeasured(r.base.no_ncu);
  ProgressLine progress("compare sweep", std::int64_t(count), /*worth_showing=*/2);
  std::int64_t done = 0;
  for (Point& p : points) {
    const PassPrediction& predicted = p.pass.prediction;
    if (!r.args.no_grid_model) p.grid = grid_dram(predicted);
    if (!predicted.report) {
      p.note = "not modelled: " + predicted.why_not;
    } else if (unmeasured.empty()) {
      const NcuOutcome m = measure_pass(r.pass, p.pass.resolved, p.problem);
      p.measured = m.bytes;
      if (!m.bytes) p.note = m.message;
    }
    progress(++done, std::int64_t(count));
  }
  std::cout << fmt::format(
      "{} pass, {}, causal = {}{}{}, seed {}: bytes of one pass per (N, d, heads, batch), summed "
      "over its kernels;\npredicted by the simulator's mirror of the kernels as built: into and "
      "out of the SMs every\nload and store, DRAM from a cold L2 launch by launch (each sector a "
      "launch reads once;\nwritten, what it writes beyond the {} the L2 holds dirty), a floor: "
      "lines\nthe L2 drops and reads again add to it; and where the grid model runs a launch "
      "(the backward's\nkernels), its blocks through "
      "the L2's partitions\nas the GPU places them (DRAM grid). Measured by Nsight Compute, which "
      "empties the L2 before each kernel,\nin {} replay {}, after a kernel of compare's own "
      "that the sums leave out\n(docs/IO-LEVELS.md says which counter is which level, and "
      "why). The counters:\n{}",
      to_string(r.pass), r.base.dtype, causal_text(r.grid.causal),
      r.base.n_q > 0 ? fmt::format(", N_q = {}", r.base.n_q) : "",
      r.args.deterministic ? ", deterministic" : "", r.base.seed,
      sim::format_bytes(double(sim::l2_dirty_room(target_profile()))), kNcuReplayMode,
      describe(ncu_clocks()), ncu_levels_text());
  std::cout << target_line();
  if (!unmeasured.empty())
    std::cout << unmeasured << ".\n";
  else
    std::cout << gpu_line(gpu_status());
  std::cout << "\n";
  print_table(r.pass, points, Style::for_stdout(r.base.no_colour));
  refuse_unpredicted_sweep(
      std::size_t(std::count_if(points.begin(), points.end(),
                                [](const Point& p) { return bool(p.pass.prediction.report); })),
      points.front().pass.prediction.why_not);
  if (csv) {
    write_csv(*csv, r.pass, points);
    fmt::print("wrote {} rows to {}\n", points.size(), csv->path());
  }
  if (plot) draw_sweep_plot(*plot, plot_script(r, points), r.grid);
}

}  // namespace flashlab::app
