// The sweep's plots, drawn by gnuplot (Debian's gnuplot-nox) from a script that carries
// its own data.
#include "flashlab/sim/sweep.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
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

std::string script(const SweepSpec& spec, const std::vector<Report>& reports,
                   const std::string& png) {
  std::vector<const Axis*> axes;
  for (const Axis& axis : kAxes)
    if (swept(spec, axis.name)) axes.push_back(&axis);
  std::string out;
  for (const Axis* axis : axes) out += datablocks(spec, reports, *axis);
  constexpr int kPanelWidth = 640, kPanelHeight = 480;
  out += fmt::format(
      "set terminal pngcairo size {},{}\nset output '{}'\n"
      "set logscale xy 2\nset format x '2^{{%L}}'\nset format y '%.0b %BB'\n"
      "set ylabel 'bytes (read + written)'\nset key top left\nset grid\n"
      "set multiplot layout 1,{}\n",
      kPanelWidth * static_cast<int>(axes.size()), kPanelHeight, png, axes.size());
  for (const Axis* axis : axes) out += panel(spec, *axis);
  return out + "unset multiplot\n";
}

}  // namespace

PlotOutcome plot_sweep(const SweepSpec& spec, const std::vector<Report>& reports,
                       const std::string& png_path) {
  if (spec.N.size() < 2 && spec.sram_bytes.size() < 2 && spec.d.size() < 2)
    return {false, "nothing to plot: give more than one value of N, d or the SRAM size"};
  // The path goes into the script and the shell command between single quotes, where
  // nothing but another single quote has a meaning.
  if (png_path.find('\'') != std::string::npos)
    return {false, fmt::format("the plot path {} contains a single quote, which gnuplot's "
                               "script cannot carry; choose a name without one",
                               png_path)};
  const std::string script_path = png_path + ".gp";
  std::ofstream script_file(script_path);
  script_file << script(spec, reports, png_path);
  script_file.close();
  if (!script_file)
    return {false, fmt::format("could not write the gnuplot script {}: check that its "
                               "directory exists and is writable; the CSV is complete",
                               script_path)};
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    return {false, fmt::format("gnuplot is not installed, so {} was not drawn; install it "
                               "(Debian: apt-get install gnuplot-nox) and run: gnuplot {}",
                               png_path, script_path)};
  if (std::system(fmt::format("gnuplot '{}'", script_path).c_str()) != 0)
    return {false, fmt::format("gnuplot failed on {}; the CSV is complete", script_path)};
  return {true, fmt::format("drew {} (gnuplot script: {})", png_path, script_path)};
}

}  // namespace flashlab::sim
