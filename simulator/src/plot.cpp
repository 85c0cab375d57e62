// The sweep's plots, drawn by gnuplot (Debian's gnuplot-nox) from the sweep's own CSV.
#include "flashlab/sim/sweep.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

namespace flashlab::sim {

namespace {

// The CSV's columns, counted from 1 as gnuplot counts them.
constexpr int kColAlgorithm = 1, kColN = 2, kColD = 3, kColSram = 6, kColM = 7, kColBytes = 12;

struct Axis {
  const char* title;  // the x axis
  int column;         // the x column
};

// One line per algorithm: the rows of that algorithm whose other swept values are the
// grid's first, so that only this axis varies along the line.
std::string panel(const SweepSpec& spec, const std::string& csv, const Axis& x) {
  std::string out = fmt::format("set xlabel '{}'\nplot ", x.title);
  for (std::size_t k = 0; k < spec.algorithms.size(); ++k) {
    std::string keep = fmt::format("strcol({}) eq '{}'", kColAlgorithm, to_string(spec.algorithms[k]));
    if (x.column != kColN) keep += fmt::format(" && ${} == {}", kColN, spec.N.front());
    if (x.column != kColD) keep += fmt::format(" && ${} == {}", kColD, spec.d.front());
    if (x.column != kColM) keep += fmt::format(" && ${} == {}", kColSram, spec.sram_bytes.front());
    out += fmt::format("{}'{}' using ({} ? ${} : 1/0):{} with linespoints title '{}'",
                       k ? ", " : "", csv, keep, x.column, kColBytes, to_string(spec.algorithms[k]));
  }
  return out + "\n";
}

std::string script(const SweepSpec& spec, const std::string& csv, const std::string& png) {
  std::vector<Axis> axes;
  if (spec.N.size() > 1) axes.push_back({"N (sequence length)", kColN});
  if (spec.sram_bytes.size() > 1) axes.push_back({"M (SRAM, elements)", kColM});
  if (spec.d.size() > 1) axes.push_back({"d (head dimension)", kColD});
  constexpr int kPanelWidth = 640, kPanelHeight = 480;
  std::string out = fmt::format(
      "set terminal pngcairo size {},{}\nset output '{}'\nset datafile separator ','\n"
      "set logscale xy 2\nset format y '%.0s %cB'\nset ylabel 'HBM bytes (read + written)'\n"
      "set key top left\nset grid\nset multiplot layout 1,{}\n",
      kPanelWidth * static_cast<int>(axes.size()), kPanelHeight, png, axes.size());
  for (const Axis& x : axes) out += panel(spec, csv, x);
  return out + "unset multiplot\n";
}

}  // namespace

PlotOutcome plot_sweep(const SweepSpec& spec, const std::string& csv_path,
                       const std::string& png_path) {
  if (spec.N.size() < 2 && spec.sram_bytes.size() < 2 && spec.d.size() < 2)
    return {false, "nothing to plot: give more than one value of N, d or the SRAM size"};
  const std::string script_path = png_path + ".gp";
  std::ofstream(script_path) << script(spec, csv_path, png_path);
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    return {false, fmt::format("gnuplot is not installed, so {} was not drawn; install it "
                               "(Debian: apt-get install gnuplot-nox) and run: gnuplot {}",
                               png_path, script_path)};
  if (std::system(fmt::format("gnuplot '{}'", script_path).c_str()) != 0)
    return {false, fmt::format("gnuplot failed on {}; the CSV is complete", script_path)};
  return {true, fmt::format("drew {} (gnuplot script: {})", png_path, script_path)};
}

}  // namespace flashlab::sim
