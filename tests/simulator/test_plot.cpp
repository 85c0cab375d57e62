// The sweep's plot: what plot_sweep says when it cannot write its script, and the paths it
// refuses (gnuplot need not be installed for either).
#include "helpers.hpp"

#include "flashlab/sim/sweep.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>

namespace flashlab::sim::test {

namespace {

// A grid with two values of N, so that there is something to plot.
SweepSpec two_point_spec() {
  SweepSpec spec;
  spec.N = {256, 512};
  spec.d = {64};
  spec.sram_bytes = {192 * kKiB};
  spec.algorithms = {Algorithm::fa2};
  return spec;
}

// A directory name in the temporary folder that does not exist.
std::filesystem::path missing_directory() {
  auto rng = fresh_rng();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("flashlab-no-such-dir-" + std::to_string(rng()));
  REQUIRE_FALSE(std::filesystem::exists(dir));
  return dir;
}

}  // namespace

TEST_CASE("plot: a script that cannot be written is reported, not ignored") {
  const SweepSpec spec = two_point_spec();
  const std::string png = (missing_directory() / "sweep.png").string();
  const PlotOutcome outcome = plot_sweep(spec, run_sweep(spec), png);
  CHECK_FALSE(outcome.drawn);
  CHECK(outcome.message.find("could not write the gnuplot script " + png + ".gp") !=
        std::string::npos);
}

TEST_CASE("plot: a path with a single quote is refused before anything is written") {
  const SweepSpec spec = two_point_spec();
  const std::string name = "flashlab-it's-" + std::to_string(fresh_rng()()) + ".png";
  const std::filesystem::path png = std::filesystem::temp_directory_path() / name;
  const PlotOutcome outcome = plot_sweep(spec, run_sweep(spec), png.string());
  CHECK_FALSE(outcome.drawn);
  CHECK(outcome.message.find("contains a single quote") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(png.string() + ".gp"));
}

}  // namespace flashlab::sim::test
