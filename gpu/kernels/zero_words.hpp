// The words a kernel needs zeroed before it starts, zeroed by a kernel of their own that lets
// the next one launch at once (programmatic_launch.cuh says why; zero_words.cu is the kernel).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace flashlab::gpu {

// Zeroes words[0, count) on `stream` in a kernel of one block that lets its dependent launch
// as soon as it starts. The next kernel on the stream, launched with launch_programmatic,
// calls cudaGridDependencySynchronize before its first access to them.
void launch_zero_words(uint32_t* words, int count, cudaStream_t stream);

}  // namespace flashlab::gpu
