// bench_scalar_block_log: the scalar kernel's grid as a GPU runs it, block by block: the SM
// each block ran on and its start and end (%globaltimer), for the grid model's replay
// (sim::GridSchedule::logged) and for what its blocks do beside each other.
//
// It builds the scalar kernel (gpu/kernels/02_tiled_scalar.cu, the library's own source) with
// its block log on (block_log.cuh) and with plain loads (FLASHLAB_SCALAR_PLAIN_LOADS), where the
// library's loads bypass the L1: so K and V pass the L1, and blocks of a head that share an SM
// share its tiles as often as they run in step (docs/IO-LEVELS.md, "The L1: plain loads").
// Its logs at 16 heads gave the catch_up schedule and the step logs that show what the L1's
// sharing follows. It runs the kernel on random bf16 inputs (block_log_run.cuh: the calls, the
// CSV); bench/gpu/block_log.py runs it under Nsight Compute.
//
//   bench_scalar_block_log --heads 16 --n 8192 [--d 128] [--calls 2] [--causal] --csv log.csv
//       [--steps-csv steps.csv]
#define FLASHLAB_BLOCK_LOG
#define FLASHLAB_SCALAR_PLAIN_LOADS
#include "../../gpu/kernels/02_tiled_scalar.cu"

#include "block_log_run.cuh"

int main(int argc, char** argv) {
  namespace gpu = flashlab::gpu;
  return flashlab::bench::run_block_log(
      argc, argv,
      {"bench_scalar_block_log",
       "the scalar kernel's grid block by block: each block's SM, start and end, and with "
       "--steps-csv when it began each step",
       gpu::scalar::kBr, gpu::scalar::kCausalLongestFirst, gpu::scalar::kBc},
      [](const gpu::Problem& p) { gpu::launch_scalar(p, nullptr); });
}
