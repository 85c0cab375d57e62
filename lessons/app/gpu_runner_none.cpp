// The GPU runner of a build without CUDA: nothing can run, and it says so.
#include "gpu_runner.hpp"

namespace flashlab::app {

namespace {
constexpr const char* kWhy =
    "this flashlab was built without CUDA (no nvcc found at configure time), so gpu/ is not part of it";
}

GpuStatus gpu_status() { return {false, kWhy}; }

std::vector<std::string> gpu_kernels() { return {"naive", "scalar", "fa2"}; }

GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>&, const cpu::Matrix<float>&,
                       const cpu::Matrix<float>&, GpuDtype, int, int, int) {
  return {kernel, false, kWhy, {}, 0};
}

}  // namespace flashlab::app
