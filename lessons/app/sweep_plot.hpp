// A sweep's plot as a gnuplot script: bytes against N on log-log axes, a panel per level
// (into the SMs, out of them, DRAM read, DRAM written), in each panel a series per line of
// prediction or set of measured points. One layout for `compare --sweep` and for `compare
// --pass ... --sweep`; plot_output.hpp draws the script.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <string>
#include <utility>
#include <vector>

namespace flashlab::app {

// The levels a sweep's plot draws, a panel each.
enum class PlotLevel { into_sms, out_of_sms, dram_read, dram_written };
// A level's panel title: the level and the Nsight Compute counter that measures it, named as
// gpu_bridge/ncu_bytes.hpp's kNcuMetrics names it ("into the SMs
// (l1tex__m_xbar2l1tex_read_bytes)").
std::string plot_level_title(PlotLevel level);

struct PlotSeries {
  std::string title;  // in the panel's key: "fa2 predicted"
  std::string style;  // gnuplot's "with ...": "lines", "lines dt 2", "points pt 7"
  int colour = 1;     // gnuplot's line colour index: a kernel's (or a level's) colour
  std::vector<std::pair<cpu::Index, double>> points;  // (N, bytes)
};

struct PlotPanel {
  std::string title;  // the level, with the counter that measures it
  std::vector<PlotSeries> series;
};

// The script for these panels under `title`, the data inline (a datablock per series), two
// panels a row. A log axis has no place for 0 bytes (a kernel that writes nothing to DRAM
// while it runs), so such points are left out, a series left with none is not drawn, and a
// panel left with none says "no bytes at this level" instead of failing gnuplot.
std::string sweep_plot_script(const std::string& title, const std::vector<PlotPanel>& panels);

}  // namespace flashlab::app
