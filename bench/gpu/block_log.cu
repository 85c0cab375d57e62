// bench_block_log: fa2's grid as a GPU runs it, block by block: the SM each block ran on and
// its start and end (%globaltimer), for the grid model's replay (sim::GridSchedule::logged).
//
// Past the L2's crossover the grid model, whose blocks step together, books fewer DRAM reads
// than the H200 makes (1.3 to 1.5 times at 16 heads, N = 57,344 to 131,072; docs/IO-LEVELS.md,
// "Past the crossover"): the blocks of a head drift apart over the waves, and those that
// trail the leaders by more than what a partition holds read K and V from DRAM again. Where
// and when the blocks really ran is what the model lacks. This program builds fa2's kernel
// (gpu/kernels/03_fa2.cu, the library's own source) with its block log on (block_log.cuh)
// and runs it on random bf16 inputs (block_log_run.cuh: the calls, the CSV).
//
//   bench_block_log --heads 16 --n 65536 [--d 128] [--calls 2] [--causal] --csv log.csv
#define FLASHLAB_BLOCK_LOG
#include "../../gpu/kernels/03_fa2.cu"

#include "block_log_run.cuh"

int main(int argc, char** argv) {
  namespace gpu = flashlab::gpu;
  return flashlab::bench::run_block_log(
      argc, argv,
      {"bench_block_log",
       "fa2's grid block by block: each block's SM, start and end (the grid model's replay)",
       gpu::fa2::kBr, gpu::fa2::kCausalLongestFirst},
      [](const gpu::Problem& p) { gpu::launch_fa2(p, nullptr); });
}
