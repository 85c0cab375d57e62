#include "device_pointers.hpp"

#include "flashlab/gpu/forward.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace flashlab::gpu {
namespace {

void check_pointer(const char* name, const void* ptr, int device) {
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // the failed query must not fail the next launch
    throw Error(FLASHLAB_ERROR_CUDA, std::string("cudaPointerGetAttributes(") + name +
                                         "): " + cudaGetErrorName(err));
  }
  const std::string where =
      std::string(name) + " = " + std::to_string(reinterpret_cast<std::uintptr_t>(ptr));
  switch (attr.type) {
    case cudaMemoryTypeManaged: return;
    case cudaMemoryTypeDevice:
      if (attr.device == device) return;
      throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                  where + " is memory of CUDA device " + std::to_string(attr.device) +
                      ", but the call runs on device " + std::to_string(device) +
                      ": call cudaSetDevice(" + std::to_string(attr.device) + ") first");
    case cudaMemoryTypeHost:
    case cudaMemoryTypeUnregistered:
      throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                  where + " is host memory" +
                      (attr.type == cudaMemoryTypeHost ? " (pinned)" : "") +
                      ": the kernels need device memory (cudaMalloc, a CUDA tensor's "
                      "data_ptr()) or managed memory (cudaMallocManaged)");
  }
  throw Error(FLASHLAB_ERROR_INTERNAL,
              where + ": unknown cudaMemoryType " + std::to_string(int(attr.type)));
}

}  // namespace

int current_device() {
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess)
    throw Error(FLASHLAB_ERROR_CUDA, std::string("cudaGetDevice: ") + cudaGetErrorName(err));
  return device;
}

void check_device_pointer(const char* name, const void* ptr) {
  check_pointer(name, ptr, current_device());
}

void check_device_pointer(const char* name, const void* ptr, int device) {
  check_pointer(name, ptr, device);
}

void check_device_pointers(const flashlab_forward_params& p) {
  const int device = current_device();
  check_pointer("Q", p.q, device);
  check_pointer("K", p.k, device);
  check_pointer("V", p.v, device);
  check_pointer("O", p.o, device);
  if (p.lse != nullptr) check_pointer("LSE", p.lse, device);
}

void check_device_pointers(const flashlab_backward_params& p) {
  const int device = current_device();
  check_pointer("Q", p.q, device);
  check_pointer("K", p.k, device);
  check_pointer("V", p.v, device);
  check_pointer("O", p.o, device);
  check_pointer("dO", p.dout, device);
  check_pointer("LSE", p.lse, device);
  check_pointer("dQ", p.dq, device);
  check_pointer("dK", p.dk, device);
  check_pointer("dV", p.dv, device);
  check_pointer("the workspace", p.workspace, device);
}

}  // namespace flashlab::gpu
