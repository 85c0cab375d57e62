// Programmatic dependent launch (Hopper): a kernel launched as the programmatic dependent of
// the kernel before it on the stream may start while that one still runs, once every block
// of the first has executed cudaTriggerProgrammaticLaunchCompletion (or ended). Its blocks
// then take the SMs' spare room at once instead of after the first grid's end and a launch
// gap; what the first grid writes, they may read only after cudaGridDependencySynchronize,
// which waits, in the thread that calls it, until the first grid has ended and its writes
// are visible. Work enqueued before the first kernel has ended before that kernel started,
// so the dependent reads it freely.
//
// flashlab uses it twice: the decode's combine after its split kernel (05_decode_combine.cu),
// and the words a kernel needs zeroed before it starts (decode's error word and queue
// counter, fa3's work queue): a one-block kernel zeroes them (launch_zero_words) and the
// kernel that uses them is launched as its dependent, waiting only where it first touches
// them. A cudaMemsetAsync in its place runs on its own between the two kernels: its time and
// one launch gap more on every call (bench/gpu/NOTES.md, "Zeroed words without a memset").
#pragma once

#include "common.cuh"
#include "zero_words.hpp"

#include <cstdint>
#include <utility>

namespace flashlab::gpu {

// kernel<<<grid, block, sram_bytes, stream>>>(args...) as the programmatic dependent of the
// kernel enqueued before it on `stream`; `what` names it in the error a failed launch throws.
template <class... Params, class... Args>
void launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t sram_bytes,
                         cudaStream_t stream, const char* what, Args&&... args) {
  cudaLaunchAttribute dependent{};
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = sram_bytes;
  config.stream = stream;
  config.attrs = &dependent;
  config.numAttrs = 1;
  throw_if_cuda_error(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), what);
  check_launch(what);
}

}  // namespace flashlab::gpu
