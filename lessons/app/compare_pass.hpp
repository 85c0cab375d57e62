// `flashlab compare --pass backward|decode`: the mirror's prediction of the GPU pass beside
// what the GPU measured (compare_pass.cpp). The forward's comparison is cmd_compare.cpp's.
#pragma once

#include "simulate_pass.hpp"

#include "gpu_bridge/ncu_bytes.hpp"
#include "gpu_bridge/pass_kernels.hpp"

#include "flashlab/cpu/types.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace flashlab::app {

struct ComparePassArgs {
  std::string pass = "forward";
  cpu::Index batch = 1, kv_heads = 0, splits = 0, page_size = 0;
  std::string grid = "splits";  // decode: "splits" or "queue"
  bool deterministic = false;
  bool no_grid_model = false;  // backward: leave the grid model's DRAM out (minutes at N >= 32,768)
};

// Adds --pass, --batch, --kv-heads, --deterministic, --no-grid-model, --splits, --page-size and
// --grid to `compare`.
void add_compare_pass_options(CLI::App* cmd, ComparePassArgs& args);

// Throws cpu::InvalidArgument for --pass fa3 (the forward comparison's kernel), for an option
// given on the command line that `pass` does not take (one pass's, or the forward's --kernels
// and --large), saying which takes it.
void check_compare_pass_options(const CLI::App* cmd, Pass pass);

// Throws cpu::InvalidArgument for an option of --pass backward or decode given to the
// forward comparison.
void check_forward_options(const CLI::App* cmd);

// The problem as compare's common options give it: N keys (decode: every sequence's cache
// length), N_q queries (0: N; decode: 0 means 1), d, heads (query heads), dtype, causal; and
// how the GPU's row is made: the inputs' seed, the timed repeats, whether Nsight Compute
// measures the bytes, and compare's hidden --gpu-only (the pass's name: run it once, print
// nothing; what ncu runs).
struct CompareProblem {
  cpu::Index n = 1024, n_q = 0, d = 64, heads = 1;
  std::string dtype = "bf16";
  bool causal = false, no_colour = false;
  std::uint64_t seed = 0;
  int repeats = 10;
  bool no_ncu = false;
  std::string gpu_only;
  bool large = false;  // --large: past the grid models' time limit (kernel_bytes.hpp)
};

// What a pass's GPU run gives: whether it ran (else why not) and its median time.
struct PassRun {
  bool ran = false;
  std::string message;
  double median_ms = 0;
};

// One pass on one problem: the mirror's prediction, the options as resolved (decode's split
// count chosen by the kernel's rule where --splits left it open: the run under ncu takes
// it), the problem in one line, and the pass's GPU run (warmups, repeats).
struct PassCase {
  PassPrediction prediction;
  ComparePassArgs resolved;
  std::string header;
  std::function<PassRun(int, int)> run;
};
// Throws cpu::InvalidArgument where --kv-heads does not divide the query heads.
PassCase pass_case(Pass pass, const ComparePassArgs& args, const CompareProblem& problem);

// The pass's bytes under Nsight Compute (compare's --gpu-only run of the same pass), or why
// there are none.
NcuOutcome measure_pass(Pass pass, const ComparePassArgs& resolved, const CompareProblem& problem);

// The mirror's DRAM bytes from a cold L2 on the target GPU (sim::compulsory_dram), or nothing
// where it books no footprint.
std::optional<sim::CompulsoryDram> compulsory_dram(const PassPrediction& prediction);
// The DRAM bytes the grid model predicts for the pass on the target GPU, summed over its
// launches (sim::predicted_dram: each launch's grid run through the L2's partitions, the floor
// for a launch without one), or nothing where no launch has a grid (decode). About a second
// for each GiB the pass moves into the SMs; says so on stderr past 8 GiB.
std::optional<sim::CompulsoryDram> grid_dram(const PassPrediction& prediction);
// Whether the pass's DRAM comes from a grid model as well (the backward's, unless
// --no-grid-model), whose time check_grid_model_time bounds.
bool runs_grid_model(Pass pass, const ComparePassArgs& a);

// Throws cpu::InvalidArgument for an option given on the command line that the pass does not
// take; then prints the pass's table: the mirror's row, and the GPU's (the pass run on fresh
// random inputs of the shape, timed by CUDA events, its bytes measured by Nsight Compute
// where ncu is present), or why the GPU's row is empty.
void run_compare_pass(const CLI::App* cmd, Pass pass, const ComparePassArgs& args,
                      const CompareProblem& problem);

}  // namespace flashlab::app
