// The GPU tests' entry point: listing test cases works anywhere (CTest discovers them at
// build time, on machines without a GPU too); running them needs a CUDA device, and
// without one the program says so and exits 77, which CTest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string_view>

namespace {

constexpr int kSkipped = 77;

bool only_listing(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.find("--list") == 0 || arg.find("-ltc") == 0 || arg.find("-lts") == 0 ||
        arg.find("--help") == 0 || arg.find("-h") == 0 || arg.find("--version") == 0)
      return true;
  }
  return false;
}

bool has_cuda_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!only_listing(argc, argv) && !has_cuda_device()) {
    std::printf("no CUDA device: GPU tests skipped\n");
    return kSkipped;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
