// The sweep's plot script: its data, its axes, and no file name anywhere in it.
#include "helpers.hpp"

#include "flashlab/sim/sweep.hpp"

#include <doctest/doctest.h>

#include <string>

namespace flashlab::sim::test {

namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("plot: one panel per swept axis, one datablock per program, the PNG to stdout") {
  SweepSpec spec;
  spec.N = {256, 512, 1024};
  spec.d = {64, 128};
  spec.sram_bytes = {192 * kKiB};
  spec.algorithms = {Algorithm::naive, Algorithm::fa2};
  const auto reports = run_sweep(spec);
  const std::string script = gnuplot_script(spec, reports);
  CHECK(count(script, "set multiplot layout 1,2") == 1);  // N and d are swept, M is not
  CHECK(count(script, "<< EOD") == 4);                     // (N, d) x (naive, fa2)
  CHECK(count(script, "\nset output\n") == 1);             // no file name: standard output
  // Each datablock line is "x bytes dram": the N line of fa2 holds the reports' own bytes.
  for (const Report& r : reports)
    if (r.algorithm == Algorithm::fa2 && r.problem.d == 64)
      CHECK(script.find(std::to_string(r.problem.N) + " " + std::to_string(r.bytes_total())) !=
            std::string::npos);
}

TEST_CASE("plot: a sweep with a single point has nothing to plot, and says so") {
  SweepSpec spec;
  spec.N = {256};
  spec.d = {64};
  spec.sram_bytes = {192 * kKiB};
  spec.algorithms = {Algorithm::fa2};
  CHECK_FALSE(plottable(spec));
  CHECK_THROWS_WITH_AS(gnuplot_script(spec, run_sweep(spec)),
                       doctest::Contains("nothing to plot: give more than one value"),
                       cpu::InvalidArgument);
}

}  // namespace flashlab::sim::test
