#include "compare_sweep.hpp"

#include "commands.hpp"
#include "progress.hpp"
#include "sweep_plot.hpp"

#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/ncu_bytes.hpp"
#include "kit/terminal.hpp"

#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

namespace flashlab::app {

namespace {

// Each measured point runs a kernel under Nsight Compute (seconds each): a sweep takes at
// most this many (kernel, N, d, heads) points.
constexpr std::size_t kMaxSweepPoints = 512;

struct Point {
  KernelRun run;
  Prediction predicted;
  std::optional<MeasuredBytes> measured;
  std::string note;  // why a measured or predicted figure is missing, or what it assumes
};

std::string bytes_text(double b) { return sim::format_bytes(b); }

// The prediction, or a row that says why there is none (a problem the simulator refuses).
Prediction predict_or_say(const KernelRun& run) {
  try {
    return predict(run);
  } catch (const cpu::InvalidArgument& e) {
    return {run.kernel, run.kernel, std::nullopt, run.heads, e.what()};
  }
}

std::vector<KernelRun> runs_of(const CompareSweepRequest& r) {
  std::vector<KernelRun> runs;
  for (const std::string& kernel : r.kernels)
    for (const bool causal : r.grid.causal)
      for (Index d : r.grid.d)
        for (Index heads : r.grid.heads)
          for (Index n : r.grid.n) {
            KernelRun run = r.base;
            run.kernel = kernel, run.n = n, run.n_q = 0, run.d = d, run.heads = heads;
            run.causal = causal;
            runs.push_back(run);
          }
  return runs;
}

// A point's figures, each absent where nothing was predicted or measured: what both the
// table and the CSV show.
// Written: the mirror's store sectors (its writes less its TMA stores) against the store
// sectors the L1 issued (stores_issued), and what left the SMs (sm_written_measured), their
// merge ratio beside it (not shown where TMA stores carry some of the writes).
// DRAM predicted: written is what the kernel writes while it runs (its counter's figure);
// left_dirty what stays dirty in the L2 after it (the grid model only).
struct Figures {
  std::optional<double> sm_read_predicted, sm_read_measured, sm_written_predicted,
      stores_issued_measured, sm_written_measured, merge_ratio, l2_measured, lrc_to_sms_measured,
      lrc_from_slices_measured, coalescing, dram_predicted, dram_read_predicted,
      dram_read_measured, dram_written_predicted, dram_written_measured, left_dirty_predicted,
      crossover_n;
};

Figures figures_of(const Point& p) {
  Figures f;
  if (p.predicted.modelled()) {
    f.sm_read_predicted = p.predicted.sm_read();
    f.sm_written_predicted = p.predicted.sm_written();
  }
  if (p.predicted.modelled() && p.predicted.dram_modelled()) {
    f.dram_predicted = p.predicted.dram();
    f.dram_read_predicted = p.predicted.dram_read();
    f.dram_written_predicted = p.predicted.dram_written();
    f.left_dirty_predicted = p.predicted.left_dirty();
  }
  if (const auto& c = p.predicted.crossover) f.crossover_n = double(c->first_N);
  if (const auto& m = p.measured) {
    f.sm_read_measured = m->sm_read;
    f.stores_issued_measured = m->stores_issued;
    f.sm_written_measured = m->sm_written;
    f.merge_ratio = m->merge_ratio();
    f.l2_measured = m->l2;
    f.lrc_to_sms_measured = m->lrc_to_sms;
    f.lrc_from_slices_measured = m->lrc_from_slices;
    f.coalescing = m->coalescing();
    f.dram_read_measured = m->dram_read;
    f.dram_written_measured = m->dram_written;
  }
  return f;
}

std::string optional_bytes(std::optional<double> b) { return b ? bytes_text(*b) : "-"; }
std::string csv_number(std::optional<double> b) { return b ? fmt::format("{:.0f}", *b) : ""; }

// Bytes out of the SMs over the store sectors issued; where TMA stores carry some of the
// writes (fa3's O) those leave beside the sectors, and the ratio says nothing of merging.
std::string merge_text(const Point& p, const Figures& f) {
  if (p.predicted.sm_written_by_tma() > 0) return "TMA";
  return f.merge_ratio ? fmt::format("{:.3f}", *f.merge_ratio) : "-";
}

void print_table(const std::vector<Point>& points, const Style& style) {
  Table t({"kernel",
           "N",
           "d",
           "heads",
           "causal",
           "SM read pred.",
           "SM read meas.",
           "ratio",
           "SM write pred.",
           "stores issued meas.",
           "ratio",
           "left the SMs",
           "merge",
           "L2 slices meas.",
           "coalesced",
           "DRAM read pred.",
           "DRAM read meas.",
           "ratio",
           "DRAM write pred.",
           "DRAM write meas.",
           "note"},
          {true,  false, false, false, true,  false, false, false, false, false, false,
           false, false, false, false, false, false, false, false, false, true});
  for (const Point& p : points) {
    const Figures f = figures_of(p);
    t.add({p.run.kernel,
           fmt::format("{}", p.run.n),
           fmt::format("{}", p.run.d),
           fmt::format("{}", p.run.heads),
           p.run.causal ? "yes" : "no",
           optional_bytes(f.sm_read_predicted),
           optional_bytes(f.sm_read_measured),
           ratio_text(f.sm_read_measured, p.predicted.sm_read()),
           optional_bytes(f.sm_written_predicted),
           optional_bytes(f.stores_issued_measured),
           ratio_text(f.stores_issued_measured, p.predicted.sm_stores_issued()),
           optional_bytes(f.sm_written_measured),
           merge_text(p, f),
           optional_bytes(f.l2_measured),
           f.coalescing ? fmt::format("{:.2f}", *f.coalescing) : "-",
           optional_bytes(f.dram_read_predicted),
           optional_bytes(f.dram_read_measured),
           ratio_text(f.dram_read_measured, p.predicted.dram_read()),
           optional_bytes(f.dram_written_predicted),
           optional_bytes(f.dram_written_measured),
           p.note});
  }
  t.print(std::cout, style);
}

// Where each (kernel, d, heads) of the sweep stops keeping K and V in the L2 between waves, by
// the closed form (sim::l2_crossover: LRU, lockstep, each L2 partition's own heads and tiles
// under the grid's placement, here the profile's measured one); the DRAM columns come from the
// grid run with the profile's replacement and measured placement.
void print_crossovers(const std::vector<Point>& points) {
  std::vector<std::string> seen;
  for (const Point& p : points) {
    const auto& c = p.predicted.crossover;
    const std::string key =
        fmt::format("{} {} {} {}", p.run.kernel, p.run.d, p.run.heads, p.run.causal);
    if (!c || std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    fmt::print(
        "L2 crossover, {} at d = {}, {} head{} (the closed form: an LRU L2, blocks in lockstep, "
        "each L2 partition its own blocks', {}): K and V re-read from DRAM from N = {} ({} KV "
        "head{} live between waves: {:.2f} MiB against the {:.2f} MiB of one of the L2's {} "
        "partition{}); by every wave from N = {}\n",
        p.run.kernel, p.run.d, p.run.heads, p.run.heads > 1 ? "s" : "",
        p.predicted.grid->problem.slot_partitions.empty() ? "block b on partition b mod 2"
                                                          : "blocks where the GPU placed them",
        c->first_N, c->heads_live,
        c->heads_live > 1 ? "s" : "", double(c->live) / double(1 << 20),
        double(p.predicted.grid->problem.partition_bytes()) / double(1 << 20),
        p.predicted.grid->problem.l2_partitions,
        p.predicted.grid->problem.l2_partitions > 1 ? "s" : "", c->one_head_N);
  }
}

void write_csv(OutputFile& out, const std::vector<Point>& points) {
  out.write(
      "kernel,N,d,heads,causal,dtype,sm_read_predicted,sm_read_measured,sm_written_predicted,"
      "sm_written_measured,l2_measured,dram_predicted,dram_read_measured,dram_written_measured,"
      "dram_read_predicted,dram_written_predicted,left_dirty_predicted,l2_crossover_n,"
      "stores_issued_measured,lrc_to_sms_measured,lrc_from_slices_measured\n");
  for (const Point& p : points) {
    const Figures f = figures_of(p);
    out.write(fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                          p.run.kernel, p.run.n, p.run.d, p.run.heads, p.run.causal ? 1 : 0,
                          p.run.dtype, csv_number(f.sm_read_predicted),
                          csv_number(f.sm_read_measured), csv_number(f.sm_written_predicted),
                          csv_number(f.sm_written_measured), csv_number(f.l2_measured),
                          csv_number(f.dram_predicted), csv_number(f.dram_read_measured),
                          csv_number(f.dram_written_measured), csv_number(f.dram_read_predicted),
                          csv_number(f.dram_written_predicted), csv_number(f.left_dirty_predicted),
                          csv_number(f.crossover_n), csv_number(f.stores_issued_measured),
                          csv_number(f.lrc_to_sms_measured),
                          csv_number(f.lrc_from_slices_measured)));
  }
  out.commit();
}

// What a point predicts and measures at each level the plot draws, a panel each.
struct LevelFigures {
  PlotLevel level;
  std::optional<double> Figures::*predicted;
  std::optional<double> Figures::*measured;
};
constexpr LevelFigures kLevelFigures[] = {
    {PlotLevel::into_sms, &Figures::sm_read_predicted, &Figures::sm_read_measured},
    // The mirror books the sectors its stores touch; what leaves the SMs is those or fewer
    // (partly written sectors may merge after the L1's store pipe: docs/IO-LEVELS.md).
    {PlotLevel::out_of_sms, &Figures::sm_written_predicted, &Figures::sm_written_measured},
    {PlotLevel::dram_read, &Figures::dram_read_predicted, &Figures::dram_read_measured},
    {PlotLevel::dram_written, &Figures::dram_written_predicted, &Figures::dram_written_measured}};

// Bytes against N at the grid's first d, heads and mask, a panel per level (kLevelFigures): per
// kernel the prediction as a line and the measurement as points, in the kernel's colour.
std::string plot_script(const CompareSweepRequest& r, const std::vector<Point>& points) {
  std::vector<PlotPanel> panels;
  for (const LevelFigures& level : kLevelFigures) {
    PlotPanel panel{plot_level_title(level.level), {}};
    for (std::size_t k = 0; k < r.kernels.size(); ++k) {
      const int colour = int(k) + 1;
      PlotSeries predicted{r.kernels[k] + " predicted", "lines", colour, {}};
      PlotSeries measured{r.kernels[k] + " measured", "points pt 7", colour, {}};
      for (const Point& p : points) {
        if (p.run.kernel != r.kernels[k] || p.run.d != r.grid.d.front() ||
            p.run.heads != r.grid.heads.front() || p.run.causal != r.grid.causal.front())
          continue;
        const Figures f = figures_of(p);
        if (const auto v = f.*level.predicted) predicted.points.emplace_back(p.run.n, *v);
        if (const auto v = f.*level.measured) measured.points.emplace_back(p.run.n, *v);
      }
      panel.series.push_back(std::move(predicted));
      panel.series.push_back(std::move(measured));
    }
    panels.push_back(std::move(panel));
  }
  return sweep_plot_script(
      fmt::format("d = {}, heads = {}, causal = {}, {}: predicted (lines) against measured "
                  "(points)",
                  r.grid.d.front(), r.grid.heads.front(), causal_text({r.grid.causal.front()}),
                  r.base.dtype),
      panels);
}

}  // namespace

namespace {

// "no,yes", "yes", "no": the mask's values in a sweep, each once.
std::vector<bool> parse_causal_list(const std::string& item, const std::string& list) {
  std::vector<bool> values;
  std::stringstream in(list);
  for (std::string v; std::getline(in, v, ',');) {
    if (v != "no" && v != "yes")
      throw cpu::InvalidArgument(fmt::format(
          "--sweep {}: the mask's values are no and yes (causal=no,yes for both), not '{}'", item,
          v));
    const bool causal = v == "yes";
    if (std::find(values.begin(), values.end(), causal) != values.end())
      throw cpu::InvalidArgument(
          fmt::format("--sweep {}: {} is named twice: name each value once", item, v));
    values.push_back(causal);
  }
  if (values.empty() || list.back() == ',')
    throw cpu::InvalidArgument(
        fmt::format("--sweep {}: give no, yes or no,yes after causal=", item));
  return values;
}

}  // namespace

std::string causal_text(const std::vector<bool>& causal) {
  if (causal.size() > 1) return "no and yes";
  return !causal.empty() && causal.front() ? "yes" : "no";
}

SweepGrid parse_sweep(const std::vector<std::string>& items, SweepGrid grid, SweepAxes axes) {
  std::vector<std::string> named;  // the axes given so far
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    const std::string axis = item.substr(0, eq);
    if (std::find(named.begin(), named.end(), axis) != named.end())
      throw cpu::InvalidArgument(fmt::format(
          "--sweep {}: {} is swept twice; give each axis once, with all its values", item, axis));
    named.push_back(axis);
    if (axis == "batch" && !axes.batch)
      throw cpu::InvalidArgument(fmt::format(
          "--sweep {}: batch is an axis of --pass backward or decode; the forward comparison "
          "sweeps n, d, heads and causal",
          item));
    if (axis == "causal" && !axes.causal)
      throw cpu::InvalidArgument(fmt::format(
          "--sweep {}: decode has no mask to sweep (its queries are the last of their "
          "sequences); causal is an axis of the forward comparison and of --pass backward",
          item));
    if (eq == std::string::npos ||
        (axis != "n" && axis != "d" && axis != "heads" && axis != "batch" && axis != "causal"))
      throw cpu::InvalidArgument(fmt::format(
          "--sweep {}: give an axis and its values, such as n=1024..65536, d=64,128, "
          "heads=1,16{}{}",
          item, axes.causal ? ", causal=no,yes" : "", axes.batch ? " or batch=1,8" : ""));
    if (axis == "causal") {
      grid.causal = parse_causal_list(item, item.substr(eq + 1));
      continue;
    }
    const Index max = axis == "n"       ? sim::kMaxLength
                      : axis == "d"     ? sim::kMaxHeadDim
                      : axis == "heads" ? kMaxHeads
                                        : axes.max_batch;
    auto values = parse_size_list("--sweep " + axis, item.substr(eq + 1), max);
    (axis == "n"       ? grid.n
     : axis == "d"     ? grid.d
     : axis == "heads" ? grid.heads
                       : grid.batch) = std::move(values);
  }
  return grid;
}

void open_sweep_outputs(const SweepGrid& grid, const std::string& csv_path,
                        const std::string& plot_path, std::optional<OutputFile>& csv,
                        std::optional<PlotOutput>& plot) {
  if (!plot_path.empty() && grid.n.size() < 2)
    throw cpu::InvalidArgument("--plot draws bytes against N: give --sweep n= more than one value");
  check_distinct_outputs(
      {{"--csv", csv_path},
       {"--plot", plot_path},
       {"--plot", plot_path.empty() ? "" : PlotOutput::script_path(plot_path)}});
  if (!csv_path.empty()) csv.emplace("--csv", csv_path);
  if (!plot_path.empty()) plot.emplace(plot_path);
}

std::string why_unmeasured(bool no_ncu) {
  if (no_ncu) return "not measured (--no-ncu)";
  const GpuStatus gpu = gpu_status();
  if (!gpu.available) return "the measured columns need a GPU: " + gpu.description;
  if (!find_ncu()) return "the measured columns need Nsight Compute (ncu), which is not installed";
  return "";
}

void run_compare_sweep(const CompareSweepRequest& r) {
  const std::size_t count = r.kernels.size() * r.grid.n.size() * r.grid.d.size() *
                            r.grid.heads.size() * r.grid.causal.size();
  if (count > kMaxSweepPoints)
    throw cpu::InvalidArgument(
        fmt::format("--sweep: {} points (kernels x N x d x heads x masks), more than the {} a "
                    "sweep takes; shorten a list",
                    count, kMaxSweepPoints));
  double grid_bytes = 0;
  for (const KernelRun& run : runs_of(r)) grid_bytes += grid_model_bytes(run);
  check_grid_model_time(grid_bytes, kMaxSweepGridModelSeconds, r.large, "this sweep",
                        "the largest N or heads");
  std::optional<OutputFile> csv;
  std::optional<PlotOutput> plot;
  open_sweep_outputs(r.grid, r.csv, r.plot, csv, plot);

  const std::string unmeasured = why_unmeasured(r.no_ncu);
  std::vector<Point> points;
  ProgressLine progress("compare sweep", std::int64_t(count), /*worth_showing=*/2);
  for (const KernelRun& run : runs_of(r)) {
    Point p{run, predict_or_say(run), std::nullopt, ""};
    // What the prediction has to say: why there is none, or what it assumes.
    const std::string& predicted_note =
        p.predicted.modelled() ? p.predicted.assumption : p.predicted.why_not;
    if (!unmeasured.empty()) {
      p.note = predicted_note;
    } else if (const std::string refusal =
                   kernel_refusal(run.kernel, run.d, sim::parse_dtype(run.dtype));
               !refusal.empty()) {
      p.note = refusal;
    } else {
      const NcuOutcome m = measure(run, /*no_ncu=*/false);
      p.measured = m.bytes;
      p.note = m.bytes ? predicted_note : m.message;
    }
    points.push_back(std::move(p));
    progress(std::int64_t(points.size()), std::int64_t(count));
  }
  std::cout << fmt::format(
      "{}, causal = {}, seed {}: bytes of one forward per (kernel, N, d, heads);\n"
      "predicted by the simulator's mirror of each kernel (per head, times the heads; fa3's\n"
      "mirror counts every head; DRAM for fa2 and fa3 by the whole grid through the shared L2,\n"
      "DRAM writes as the kernel's counter sees them, without what it leaves dirty), measured\n"
      "by Nsight Compute in {} replay {}, after a kernel of compare's own that the sums\n"
      "leave out (docs/IO-LEVELS.md says which counter is which level, and why). SM writes are\n"
      "the store sectors the L1 issued; what left the SMs is those or fewer (merge: their\n"
      "ratio). The counters:\n{}",
      r.base.dtype, causal_text(r.grid.causal), r.base.seed, kNcuReplayMode, describe(ncu_clocks()),
      ncu_levels_text());
  std::cout << target_line();
  if (!unmeasured.empty())
    std::cout << unmeasured << ".\n";
  else
    std::cout << gpu_line(gpu_status());
  std::cout << "\n";
  print_table(points, Style::for_stdout(r.no_colour));
  print_crossovers(points);
  refuse_unpredicted_sweep(
      std::size_t(std::count_if(points.begin(), points.end(),
                                [](const Point& p) { return p.predicted.modelled(); })),
      points.front().predicted.why_not);
  if (csv) {
    write_csv(*csv, points);
    fmt::print("wrote {} rows to {}\n", points.size(), csv->path());
  }
  if (plot) draw_sweep_plot(*plot, plot_script(r, points), r.grid);
}

void refuse_unpredicted_sweep(std::size_t predicted_points, const std::string& first_reason) {
  if (predicted_points == 0)
    throw cpu::InvalidArgument(fmt::format(
        "--sweep: no point of the sweep could be predicted (the first: {}); the table above "
        "says why at each point, and nothing was written",
        first_reason));
}

void draw_sweep_plot(PlotOutput& plot, const std::string& script, const SweepGrid& grid) {
  plot.draw(script);
  std::vector<std::string> first;
  if (grid.d.size() > 1) first.push_back(fmt::format("d = {}", grid.d.front()));
  if (grid.heads.size() > 1) first.push_back(fmt::format("heads = {}", grid.heads.front()));
  if (grid.batch.size() > 1) first.push_back(fmt::format("batch = {}", grid.batch.front()));
  if (grid.causal.size() > 1)
    first.push_back(fmt::format("causal = {}", causal_text({grid.causal.front()})));
  if (first.empty()) return;
  std::string list;
  for (std::size_t k = 0; k < first.size(); ++k)
    list += (k == 0 ? "" : k + 1 == first.size() ? " and " : ", ") + first[k];
  std::cout << fmt::format(
      "the plot draws the points of {} (the first of each swept axis); the table "
      "and the CSV hold them all\n",
      list);
}

}  // namespace flashlab::app
