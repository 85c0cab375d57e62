// `flashlab compare --pass backward|decode`: the mirror's prediction of the GPU pass beside
// what the GPU measured (compare_pass.cpp). The forward's comparison is cmd_compare.cpp's.
#pragma once

#include "simulate_pass.hpp"

#include "flashlab/cpu/types.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace flashlab::app {

struct ComparePassArgs {
  std::string pass = "forward";
  cpu::Index batch = 1, kv_heads = 0, splits = 0, page_size = 0;
  std::string grid = "splits";  // decode: "splits" or "queue"
  bool deterministic = false;
};

// Adds --pass, --batch, --kv-heads, --deterministic, --splits, --page-size and --grid to
// `compare`.
void add_compare_pass_options(CLI::App* cmd, ComparePassArgs& args);

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
};

// Throws cpu::InvalidArgument for an option given on the command line that the pass does not
// take; then prints the pass's table: the mirror's row, and the GPU's (the pass run on fresh
// random inputs of the shape, timed by CUDA events, its bytes measured by Nsight Compute
// where ncu is present), or why the GPU's row is empty.
void run_compare_pass(const CLI::App* cmd, Pass pass, const ComparePassArgs& args,
                      const CompareProblem& problem);

}  // namespace flashlab::app
