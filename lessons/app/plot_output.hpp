// A plot a command draws with gnuplot: the PNG and, beside it, the gnuplot script (data
// included) that the learner can edit and run again. Both are output files (whole or not at
// all), opened, with gnuplot's presence checked, before the command does its work. gnuplot
// runs without a shell, and the script names no file: the PNG goes to gnuplot's stdout,
// straight into the plot's file.
#pragma once

#include "output_file.hpp"

#include <string>

namespace flashlab::app {

class PlotOutput {
 public:
  // Throws cpu::InvalidArgument when a path is bad or gnuplot is not installed.
  explicit PlotOutput(const std::string& png_path);
  // The script's path: the PNG's, with ".gp" added.
  static std::string script_path(const std::string& png_path) { return png_path + ".gp"; }
  // Writes the script, runs gnuplot on it and puts the PNG in place; throws with what gnuplot
  // said when it fails.
  void draw(const std::string& script);

 private:
  OutputFile png_, script_;
};

}  // namespace flashlab::app
