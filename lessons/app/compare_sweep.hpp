// `flashlab compare --sweep`: the bytes of each kernel over a grid of N, d, heads and the mask, set
// side by side as the simulator's mirror predicts them and (on a GPU, with Nsight Compute)
// as measured at the SMs, the L2 slices and DRAM, with measured / predicted per level; as a
// table, a CSV and a log-log plot against N. Without a GPU it prints the predictions and
// says the measured columns need one.
#pragma once

#include "kernel_bytes.hpp"
#include "output_file.hpp"
#include "plot_output.hpp"

#include <optional>
#include <string>
#include <vector>

namespace flashlab::app {

struct SweepGrid {
  std::vector<Index> n, d, heads, batch{1};
  std::vector<bool> causal{false};  // without the mask, with it (top-left: N_q = N_k)
};

// Which axes a sweep takes beside n, d and heads: batch (the passes'), the mask (the forward's
// and the backward's; decode's queries are the last of their sequences).
struct SweepAxes {
  bool batch = false, causal = true;
  Index max_batch = 1;  // where batch is an axis: the most --batch takes
};

// Items "n=LIST", "d=LIST", "heads=LIST" and, where the axes allow, "batch=LIST" (LIST as
// sweep's: a,b,c or a..b doubling, each value once) and "causal=no,yes" (no, yes or both); an
// axis not named keeps its one value in `defaults`. Each value within what the single
// comparison's option takes (N up to sim::kMaxLength, d up to sim::kMaxHeadDim, heads up to
// kMaxHeads, batch up to axes.max_batch). Throws cpu::InvalidArgument naming the item.
SweepGrid parse_sweep(const std::vector<std::string>& items, SweepGrid defaults,
                      SweepAxes axes = {});

// "yes", "no", or "no and yes" where a sweep takes both.
std::string causal_text(const std::vector<bool>& causal);

// Draws a sweep's plot from its gnuplot script; the plot shows bytes against N at the first
// value of every other axis, so where an axis has more than one, a line on stdout says which.
void draw_sweep_plot(PlotOutput& plot, const std::string& script, const SweepGrid& grid);

// A sweep's CSV and plot, checked and opened before any point runs (each empty path: none).
// Throws cpu::InvalidArgument when --plot has fewer than two N to draw, when two outputs name
// one file, or when a path cannot be written.
void open_sweep_outputs(const SweepGrid& grid, const std::string& csv_path,
                        const std::string& plot_path, std::optional<OutputFile>& csv,
                        std::optional<PlotOutput>& plot);

// Why a sweep's measured columns stay empty here (--no-ncu, no GPU, no Nsight Compute), or
// "" when its points can run under ncu.
std::string why_unmeasured(bool no_ncu);

// After a sweep's table, before its CSV and plot: where no point could be predicted, the
// sweep fails (usage status) with the first point's reason, so that an empty table written to a
// CSV is never taken for a result.
void refuse_unpredicted_sweep(std::size_t predicted_points, const std::string& first_reason);

struct CompareSweepRequest {
  KernelRun base;                    // dtype, causal, seed; the grid sets n, d and heads
  std::vector<std::string> kernels;  // from the kernel table
  SweepGrid grid;
  bool no_ncu = false, no_colour = false;
  std::string csv, plot;  // empty: not written
  bool large = false;     // --large: past the grid models' time limit (kernel_bytes.hpp)
};

void run_compare_sweep(const CompareSweepRequest& request);

}  // namespace flashlab::app
