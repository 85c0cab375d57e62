// Solution to exercise 22: one commit per iteration (empty on the last), so that "all but the
// newest group" is always "everything up to tile j"; a barrier after the wait, because each
// thread waited only for its own copies; a barrier after the compute, because the next
// iteration's copies overwrite the stage just read.
#include "kernels/ex22_pipelined_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void kv_tile_loop(Pipeline& p) {
  if (p.num_tiles == 0) return;
  p.load_tile_async(0);
  cp_async_commit();
  for (int j = 0; j < p.num_tiles; ++j) {
    if (j + 1 < p.num_tiles) p.load_tile_async(j + 1);  // into the stage tile j - 1 used
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of tile j have landed (j + 1's may fly on)
    __syncthreads();     // and so have every other thread's
    p.compute_tile(j);
    __syncthreads();  // nobody still reads stage j % 2 when tile j + 2 is copied into it
  }
}

}  // namespace flashlab::kernel_exercises
