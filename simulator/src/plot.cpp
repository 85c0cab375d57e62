// The sweep's plots: a gnuplot script (for Debian's gnuplot-nox) that carries its own data
// and writes the PNG to its standard output.
#include "flashlab/sim/sweep.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <vector>

namespace flashlab::sim {

namespace {

struct Axis {
  std::string_view name;   // for the datablock's name
  std::string_view title;  // the x axis
  double (*x)(const Report&);
  // Whether the report sits on this axis's line: every other swept value at its first.
  bool (*on_line)(const SweepSpec&, const Report&);
};

const Axis kAxes[] = {
    {"N", "N (sequence length)", [](const Report& r) { return double(r.problem.N); },
     [](const SweepSpec& s, const Report& r) {
       return r.problem.d == s.d.front() && r.problem.sram_bytes == s.sram_bytes.front();
     }},
    {"M", "M (SRAM, elements)", [](const Report& r) { return double(r.problem.M()); },
     [](const SweepSpec& s, const Report& r) {
       return r.problem.N == s.N.front() && r.problem.d == s.d.front();
     }},
    {"d", "d (head dimension)", [](const Report& r) { return double(r.problem.d); },
     [](const SweepSpec& s, const Report& r) {
       return r.problem.N == s.N.front() && r.problem.sram_bytes == s.sram_bytes.front();
     }},
};

bool swept(const SweepSpec& spec, std::string_view axis) {
  if (axis == "N") return spec.N.size() > 1;
  if (axis == "M") return spec.sram_bytes.size() > 1;
  return spec.d.size() > 1;
}

// One datablock per (axis, algorithm): x, HBM bytes and the bytes past the L2.
std::string datablocks(const SweepSpec& spec, const std::vector<Report>& reports,
                       const Axis& axis) {
  std::string out;
  for (const Algorithm a : spec.algorithms) {
    out += fmt::format("${}_{} << EOD\n", axis.name, to_string(a));
    for (const Report& r : reports)
      if (r.algorithm == a && axis.on_line(spec, r))
        out += fmt::format("{} {} {}\n", axis.x(r), r.bytes_total(), r.dram_total());
    out += "EOD\n";
  }
  return out;
}

std::string panel(const SweepSpec& spec, const Axis& axis) {
  std::string out = fmt::format("set xlabel '{}'\nplot ", axis.title);
  for (std::size_t k = 0; k < spec.algorithms.size(); ++k) {
    const std::string_view a = to_string(spec.algorithms[k]);
    out += fmt::format("{}${}_{} using 1:2 with linespoints lc {} title '{}'", k ? ", " : "",
                       axis.name, a, k + 1, a);
    if (spec.l2_bytes > 0)  // dashed, in the same colour: what still reaches DRAM
      out += fmt::format(", ${}_{} using 1:3 with linespoints lc {} dt 2 title '{} past L2'",
                         axis.name, a, k + 1, a);
  }
  return out + "\n";
}

}  // namespace

bool plottable(const SweepSpec& spec) {
  return std::any_of(std::begin(kAxes), std::end(kAxes),
                     [&](const Axis& axis) { return swept(spec, axis.name); });
}

std::string gnuplot_script(const SweepSpec& spec, const std::vector<Report>& reports) {
  if (!plottable(spec))
    throw cpu::InvalidArgument("nothing to plot: give more than one value of N, d or the SRAM size");
  std::vector<const Axis*> axes;
  for (const Axis& axis : kAxes)
    if (swept(spec, axis.name)) axes.push_back(&axis);
  std::string out;
  for (const Axis* axis : axes) out += datablocks(spec, reports, *axis);
  constexpr int kPanelWidth = 640, kPanelHeight = 480;
  out += fmt::format(
      "set terminal pngcairo size {},{}\nset output\n"
      "set logscale xy 2\nset format x '2^{{%L}}'\nset format y '%.0b %BB'\n"
      "set ylabel 'bytes (read + written)'\nset key top left\nset grid\n"
      "set multiplot layout 1,{}\n",
      kPanelWidth * static_cast<int>(axes.size()), kPanelHeight, axes.size());
  for (const Axis* axis : axes) out += panel(spec, *axis);
  return out + "unset multiplot\n";
}

}  // namespace flashlab::sim
