// The sweeps' plot script: sweep_plot.hpp.
#include "sweep_plot.hpp"

#include "gpu_bridge/ncu_bytes.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <string_view>

namespace flashlab::app {

namespace {
constexpr std::size_t kPanelsPerRow = 2;
constexpr std::size_t kPanelWidth = 600, kPanelHeight = 450;  // pixels of the PNG

// The counter that measures `field`, without the ".sum" that ncu's query adds.
std::string_view counter_of(double MeasuredBytes::*field) {
  for (const NcuMetric& m : kNcuMetrics)
    if (m.field == field) {
      std::string_view name = m.name;
      if (name.ends_with(".sum")) name.remove_suffix(4);
      return name;
    }
  throw std::logic_error("no Nsight Compute metric for a plotted level");
}

}  // namespace

std::string plot_level_title(PlotLevel level) {
  switch (level) {
    case PlotLevel::into_sms:
      return fmt::format("into the SMs ({})", counter_of(&MeasuredBytes::sm_read));
    case PlotLevel::out_of_sms:
      return fmt::format("out of the SMs ({})", counter_of(&MeasuredBytes::sm_written));
    case PlotLevel::dram_read:
      return fmt::format("DRAM read ({})", counter_of(&MeasuredBytes::dram_read));
    case PlotLevel::dram_written:
      return fmt::format("DRAM written during the run ({})",
                         counter_of(&MeasuredBytes::dram_written));
  }
  throw std::logic_error("an unknown plot level");
}

std::string sweep_plot_script(const std::string& title, const std::vector<PlotPanel>& panels) {
  std::string data, body;
  for (std::size_t p = 0; p < panels.size(); ++p) {
    std::string plots;
    for (std::size_t s = 0; s < panels[p].series.size(); ++s) {
      const PlotSeries& series = panels[p].series[s];
      std::string rows;
      for (const auto& [n, bytes] : series.points)
        if (bytes > 0) rows += fmt::format("{} {:.0f}\n", n, bytes);
      if (rows.empty()) continue;
      const std::string name = fmt::format("$series_{}_{}", p, s);
      data += fmt::format("{} << EOD\n{}EOD\n", name, rows);
      plots += fmt::format("{}{} using 1:2 with {} lc {} title '{}'", plots.empty() ? "" : ", ",
                           name, series.style, series.colour, series.title);
    }
    body += fmt::format("set title '{}' noenhanced\n", panels[p].title);
    body += plots.empty() ? "set label 1 'no bytes at this level' at graph 0.5, 0.5 center\n"
                            "unset xtics\nunset ytics\nplot [1:2] [1:2] NaN notitle\n"
                            "unset label 1\nset xtics\nset ytics\n"
                          : "plot " + plots + "\n";
  }
  const std::size_t columns = std::clamp<std::size_t>(panels.size(), 1, kPanelsPerRow);
  const std::size_t rows = (panels.size() + columns - 1) / columns;
  return data + fmt::format(
                    "set terminal pngcairo size {},{}\nset output\n"
                    "set multiplot layout {}, {} title '{}' noenhanced\n"
                    "set logscale xy 2\nset format x '2^{{%L}}'\nset format y '%.0b %BB'\n"
                    "set xlabel 'N'\nset ylabel 'bytes'\nset key top left\nset grid\n{}"
                    "unset multiplot\n",
                    kPanelWidth * columns, kPanelHeight * rows, rows, columns, title, body);
}

}  // namespace flashlab::app
