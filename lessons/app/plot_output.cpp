#include "plot_output.hpp"

#include "kit/process.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/core.h>

namespace flashlab::app {

PlotOutput::PlotOutput(const std::string& png_path)
    : png_("--plot", png_path), script_("--plot", script_path(png_path)) {
  if (!run_program({"gnuplot", "--version"}).succeeded())
    throw cpu::InvalidArgument(
        "--plot needs gnuplot, which is not installed (Debian: apt-get install "
        "gnuplot-nox); leave out --plot to write the CSV alone");
}

void PlotOutput::draw(const std::string& script) {
  script_.write(script);
  script_.commit();
  const ProcessResult run = run_program({"gnuplot", script_.path()}, png_.writing_to());
  if (!run.succeeded()) {
    constexpr std::size_t kShown = 300;  // the end of what gnuplot said
    const std::string said =
        run.output.size() > kShown ? run.output.substr(run.output.size() - kShown) : run.output;
    throw cpu::InvalidArgument(fmt::format("--plot {}: gnuplot failed ({}{}); the CSV is complete",
                                           png_.path(), run.message, said));
  }
  png_.commit();
  fmt::print("drew {} (gnuplot script: {})\n", png_.path(), script_.path());
}

}  // namespace flashlab::app
