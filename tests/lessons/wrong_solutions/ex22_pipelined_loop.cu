// Exercise 22 gone wrong: the prefetch's bound off by one. Tile j + 1 is loaded only while
// j + 2 < num_tiles, so the last tile is never copied: compute_tile() reads its stage as the
// copy of two tiles before left it (or, with two tiles, as the NaN the kernel filled it with).
// Wrong on every run wherever there are two tiles or more, unlike a missing wait, whose harm
// depends on how fast the copies land (compute-sanitizer's racecheck is the tool for that:
// see ex22_pipelined_loop_race.cu and the device script's exercises step).
#include "kernels/ex22_pipelined_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void kv_tile_loop(Pipeline& p) {
  if (p.num_tiles == 0) return;
  p.load_tile_async(0);
  cp_async_commit();
  for (int j = 0; j < p.num_tiles; ++j) {
    if (j + 2 < p.num_tiles) p.load_tile_async(j + 1);  // should be j + 1 < num_tiles
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    p.compute_tile(j);
    __syncthreads();
  }
  cp_async_wait<0>();
}

}  // namespace flashlab::kernel_exercises
