// Exercise 22 gone wrong: a barrier taken for a wait. __syncthreads() orders the threads but
// does not wait for their cp.async copies, so compute_tile() reads stages whose copies have not
// landed: the NaN the kernel filled them with, or the tile before.
#include "kernels/ex22_pipelined_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void kv_tile_loop(Pipeline& p) {
  if (p.num_tiles == 0) return;
  p.load_tile_async(0);
  cp_async_commit();
  for (int j = 0; j < p.num_tiles; ++j) {
    if (j + 1 < p.num_tiles) p.load_tile_async(j + 1);
    cp_async_commit();
    __syncthreads();  // no cp_async_wait before it
    p.compute_tile(j);
    __syncthreads();
  }
  cp_async_wait<0>();  // only at the end, too late
}

}  // namespace flashlab::kernel_exercises
