// FLASHLAB_HOST_DEVICE marks a function that the kernels call on the device and host code
// (the library, the lessons, the tests) calls on the CPU: the same source for both.
#pragma once

#if defined(__CUDACC__)
#define FLASHLAB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FLASHLAB_HOST_DEVICE inline
#endif
