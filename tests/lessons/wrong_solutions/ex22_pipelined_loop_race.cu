// Exercise 22 gone wrong in the barrier order: the barrier after compute_tile() is missing, so
// a thread that is ahead starts copying tile j + 2 into the stage that slower threads are
// still reading for tile j. The waits are right, so the numbers are usually right too: the
// race shows under compute-sanitizer's racecheck (bench/gpu/run_device.sh, step exercises).
#include "kernels/ex22_pipelined_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void kv_tile_loop(Pipeline& p) {
  if (p.num_tiles == 0) return;
  p.load_tile_async(0);
  cp_async_commit();
  for (int j = 0; j < p.num_tiles; ++j) {
    if (j + 1 < p.num_tiles) p.load_tile_async(j + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    p.compute_tile(j);  // no barrier after it
  }
}

}  // namespace flashlab::kernel_exercises
