// The words a kernel needs zeroed before it starts (programmatic_launch.cuh says why this is a
// kernel and not a cudaMemsetAsync): one block, which lets the kernel after it launch first.
#include "programmatic_launch.cuh"

namespace flashlab::gpu {
namespace {

constexpr int kZeroThreads = 32;

__global__ void __launch_bounds__(kZeroThreads) zero_words_kernel(uint32_t* words, int count) {
  // The dependent may launch now; its cudaGridDependencySynchronize still waits for this
  // grid's end, so it sees the zeros.
  cudaTriggerProgrammaticLaunchCompletion();
  for (int i = int(threadIdx.x); i < count; i += kZeroThreads) words[i] = 0u;
}

}  // namespace

void launch_zero_words(uint32_t* words, int count, cudaStream_t stream) {
  zero_words_kernel<<<1, kZeroThreads, 0, stream>>>(words, count);
  check_launch("zero_words");
}

}  // namespace flashlab::gpu
