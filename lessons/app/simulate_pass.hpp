// `flashlab simulate --pass backward|decode`: the options of the two passes and their run,
// the mirror of the GPU kernels as built (gpu_bridge/pass_kernels.hpp), printed as a table
// of launches and bytes per tensor, or as JSON. --pass forward is cmd_simulate.cpp's own.
#pragma once

#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/profiles.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace flashlab::app {

enum class Pass { forward, backward, decode };

// "forward", "backward" or "decode"; otherwise cpu::InvalidArgument listing them.
Pass parse_pass(std::string_view name);
std::string_view to_string(Pass pass);

struct PassArgs {
  cpu::Index n_q = 0, batch = 1, heads = 1, kv_heads = 0, page_size = 0;
  cpu::Index kv_len = 4096;
  std::string splits;   // "16", or a list "1..64" for a table over them; "": the kernel's rule
  std::string lengths;  // "0,1,4096": one cache length per sequence (decode)
  bool deterministic = false;
};

// Adds --n-q, --batch, --heads, --kv-heads, --deterministic, --splits, --page-size, --kv-len
// and --lengths to `simulate`.
void add_pass_options(CLI::App* cmd, PassArgs& args);

// Throws cpu::InvalidArgument naming the first option given on the command line that `pass`
// does not take, and the pass that takes it.
void check_pass_options(const CLI::App* cmd, Pass pass);

// The pass's mirror for N (backward's keys), d, dtype and causal as `simulate` parsed them;
// cmd tells which options were given.
void simulate_pass(const CLI::App* cmd, Pass pass, const PassArgs& args, cpu::Index n, cpu::Index d,
                   const std::string& dtype, bool causal, bool json,
                   const sim::HardwareProfile& profile);

}  // namespace flashlab::app
