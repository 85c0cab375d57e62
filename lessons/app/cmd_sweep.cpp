// `flashlab sweep`: count naive attention, FA1 and FA2 over grids of N, d and SRAM size,
// write the counts as CSV and plot HBM bytes on log-log axes.
//   flashlab sweep --n 1024..65536 --d 128 --sram 192KiB --csv sweep.csv --plot sweep.png
#include "commands.hpp"
#include "output_file.hpp"
#include "plot_output.hpp"
#include "progress.hpp"

#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/sweep.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <memory>

namespace flashlab::app {

namespace {

struct SweepArgs {
  std::string n = "1024..65536", d = "128", sram, algorithms = "naive,fa1,fa2";
  std::string dtype = "bf16", profile = "h200", l2, csv, plot;
  bool causal = false;
  TileOptions tile_options;
};

// A sweep counts every combination of its N, d and SRAM values: this many at most.
constexpr std::size_t kMaxPoints = 4096;
constexpr std::int64_t kPointsWorthShowing = 64;  // fewer are counted before anyone waits

sim::SweepSpec spec_of(const SweepArgs& a, const sim::HardwareProfile& hw) {
  sim::SweepSpec spec;
  spec.N = parse_size_list("--n", a.n);
  spec.d = parse_size_list("--d", a.d);
  spec.dtype = sim::parse_dtype(a.dtype);
  spec.sram_bytes = a.sram.empty()
                        ? std::vector<sim::Bytes>{hw.sram_per_sm}
                        : parse_list<sim::Bytes>("--sram", a.sram, [&](std::string_view s) {
                            return sim::parse_capacity(s, spec.dtype);
                          });
  spec.algorithms = sim::parse_algorithms(a.algorithms);
  spec.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
  spec.tiles = a.tile_options.tiles();
  if (!a.l2.empty()) spec.l2_bytes = sim::parse_capacity(a.l2, spec.dtype);
  const std::size_t points = spec.N.size() * spec.d.size() * spec.sram_bytes.size();
  if (points > kMaxPoints)
    throw cpu::InvalidArgument(fmt::format(
        "the sweep has {} x {} x {} = {} points (N x d x SRAM), more than the {} it takes; "
        "shorten a list",
        spec.N.size(), spec.d.size(), spec.sram_bytes.size(), points, kMaxPoints));
  // Every point is checked before the first is counted, so a bad one is not found an hour in.
  for (const cpu::Index N : spec.N)
    for (const cpu::Index d : spec.d)
      for (const sim::Bytes sram : spec.sram_bytes)
        sim::check(sim::Problem{.N = N,
                                .d = d,
                                .dtype = spec.dtype,
                                .causal = spec.causal,
                                .sram_bytes = sram,
                                .tiles = spec.tiles,
                                .l2_bytes = spec.l2_bytes});
  return spec;
}

void sweep(const SweepArgs& args) {
  const sim::HardwareProfile& hw = sim::find_profile(args.profile);
  const sim::SweepSpec spec = spec_of(args, hw);
  check_distinct_outputs({{"--csv", args.csv},
                          {"--plot", args.plot},
                          {"--plot", args.plot.empty() ? "" : PlotOutput::script_path(args.plot)}});
  if (!args.plot.empty() && !sim::plottable(spec))
    throw cpu::InvalidArgument(
        "--plot: nothing to plot: give more than one value of N, d or the SRAM size");
  OutputFile csv("--csv", args.csv);
  std::optional<PlotOutput> plot;
  if (!args.plot.empty()) plot.emplace(args.plot);

  const std::size_t points =
      spec.N.size() * spec.d.size() * spec.sram_bytes.size() * spec.algorithms.size();
  ProgressLine progress("sweep, points counted", std::int64_t(points), kPointsWorthShowing);
  const auto reports = sim::run_sweep(spec, [&](std::size_t done, std::size_t total) {
    progress(std::int64_t(done), std::int64_t(total));
  });
  sim::write_csv(csv.stream(), reports, &hw);
  csv.commit();
  fmt::print("wrote {} rows to {}\n", reports.size(), args.csv);
  if (plot) plot->draw(sim::gnuplot_script(spec, reports));
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Count naive, FA1 and FA2 over N, d and SRAM sizes; write CSV and plots");
  auto& args = arguments_of<SweepArgs>(cmd, sweep);
  cmd->add_option("--n", args.n, "sequence lengths: a,b,c or a..b (doubling)")
      ->capture_default_str();
  cmd->add_option("--d", args.d, "head dimensions: a,b,c or a..b")->capture_default_str();
  cmd->add_option("--sram", args.sram,
                  "SRAM sizes: 96KiB,192KiB or 48KiB..768KiB (or in elements: 49152el); default: "
                  "the profile's")
      ->capture_default_str();
  cmd->add_option("--algo", args.algorithms, "programs: naive,fa1,fa2 (the paper's), naive-kernel")
      ->capture_default_str();
  cmd->add_option("--dtype", args.dtype, "fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option("--profile", args.profile, "profile for the bound column: a100, h100, h200, b200")
      ->capture_default_str();
  cmd->add_flag("--causal", args.causal, "causal mask (top-left)");
  cmd->add_option("--l2", args.l2, "an L2 of this size (e.g. 60MiB): adds DRAM bytes past it");
  args.tile_options.add_to(cmd);
  cmd->add_option("--csv", args.csv, "where to write the CSV")->required();
  cmd->add_option("--plot", args.plot, "where to draw the log-log plot (PNG, needs gnuplot)");
}

}  // namespace flashlab::app
