// Sweeps: the count-only programs over grids of N, d and SRAM size, written as CSV and
// drawn as log-log plots of HBM bytes (with gnuplot, where it is installed).
#pragma once

#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace flashlab::sim {

struct SweepSpec {
  std::vector<cpu::Index> N{};
  std::vector<cpu::Index> d{};
  std::vector<Bytes> sram_bytes{};
  std::vector<Algorithm> algorithms{};
  DType dtype = DType::bf16;
  cpu::Causal causal = cpu::Causal::none;
  std::optional<cpu::TileSizes> tiles{};  // the paper's rule (fitted) when absent
  Bytes l2_bytes = 0;                     // an L2 (see Problem::l2_bytes); 0 for none
};

// Called after each point with the number done and the number in all.
using SweepProgress = std::function<void(std::size_t done, std::size_t total)>;

// Every (N, d, SRAM, algorithm) of the grid, counted. A point that is not valid (M < d,
// tiles that overflow) stops the sweep with cpu::InvalidArgument naming the point.
std::vector<Report> run_sweep(const SweepSpec& spec, const SweepProgress& progress = {});

// One line per report: algorithm, N, d, dtype, causal, sram_bytes, M, Br, Bc, bytes_read,
// bytes_written, bytes_total, matrix_flops, non_matrix_ops, exp, peak_sram_bytes,
// tiles_computed, tiles_skipped, l2_bytes, dram_bytes_total (past the L2; bytes_total
// without one), and with a profile bound_s and binds.
void write_csv(std::ostream& out, const std::vector<Report>& reports,
               const HardwareProfile* profile);

// Whether a sweep has an axis to plot: more than one value of N, d or the SRAM size.
bool plottable(const SweepSpec& spec);

// The gnuplot script that draws HBM bytes against each swept axis (N, M, d: those with
// more than one value) on log-log axes, one line per algorithm, the other swept values
// held at their first, data included. It writes the PNG to gnuplot's standard output:
// no file name is ever part of the script, so none can be read as a gnuplot command.
// Throws cpu::InvalidArgument when the sweep is not plottable.
std::string gnuplot_script(const SweepSpec& spec, const std::vector<Report>& reports);

}  // namespace flashlab::sim
