// `flashlab simulate --pass backward|decode|fa3`: the options of the GPU passes and their run,
// the mirror of the GPU kernels as built (gpu_bridge/pass_kernels.hpp; fa3, the Hopper forward
// kernel, gpu_bridge/kernels.hpp), printed as a table of launches and bytes per tensor, or as
// JSON. --pass forward (the paper's programs) is cmd_simulate.cpp's own.
#pragma once

#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/profiles.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace flashlab::app {

// fa3: the Hopper forward kernel's own mirror (any N_q, GQA, its ring of stages), beside the
// forward programs that --pass forward runs.
enum class Pass { forward, backward, decode, fa3 };

// "forward", "backward", "decode" or "fa3"; otherwise cpu::InvalidArgument listing them.
// takes_fa3: the command's --pass takes fa3 too (simulate's; compare runs fa3 as a kernel of
// its forward comparison), which the message for an unknown name says.
Pass parse_pass(std::string_view name, bool takes_fa3);
std::string_view to_string(Pass pass);

struct PassArgs {
  cpu::Index n_q = 0, batch = 1, heads = 1, kv_heads = 0, page_size = 0;
  cpu::Index kv_len = 4096;
  cpu::Index stages = 0;  // fa3: K and V buffers of its ring; 0: the kernel's default
  std::string splits;     // "16", or a list "1..64" for a table over them; "": the kernel's rule
  std::string lengths;    // "0,1,4096": one cache length per sequence (decode)
  std::string grid = "splits";  // decode: "splits" or "queue" (FLASHLAB_DECODE_GRID_QUEUE)
  bool deterministic = false;
  // backward: each launch's grid through the profile's L2 too (sim::predicted_dram: seconds to
  // minutes at large N)
  bool grid_model = false;
};

// Adds --n-q, --batch, --heads, --kv-heads, --deterministic, --grid-model, --splits,
// --page-size, --kv-len, --lengths, --grid and --stages to `simulate`.
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
