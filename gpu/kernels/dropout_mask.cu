// The dropout mask written out: for a (batch, head, row, column) region, 1 where the rule of
// dropout.cuh keeps the weight and 0 where it drops it, one byte each. Not a rung of the
// ladder: it lets tests and lessons set the GPU's mask beside the CPU reference's
// (flashlab::cpu::DropoutMask) bit for bit, through the same functions fa2 draws it with.
// One thread per group of four columns (one Philox call), its row's columns in the region.
#include "common.cuh"
#include "dropout.cuh"
#include "launch.hpp"

#include <algorithm>
#include <cstdint>

namespace flashlab::gpu {
namespace {

constexpr int kMaskThreads = 256;
constexpr int64_t kMaxMaskBlocks = 65536;  // a grid-stride loop covers the rest

__global__ void __launch_bounds__(kMaskThreads) dropout_mask_kernel(MaskRegion region,
                                                                    DropoutRule rule) {
  constexpr int64_t kGroup = cpu::kColumnsPerPhiloxCall;
  const int64_t first_group = region.col0 / kGroup;
  const int64_t groups = (region.col0 + region.cols - 1) / kGroup - first_group + 1;  // per row
  const int64_t items = int64_t(region.batch) * region.heads * region.rows * groups;
  for (int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += int64_t(gridDim.x) * blockDim.x) {
    const int64_t group = first_group + item % groups;
    const int64_t row = item / groups % region.rows;
    const int64_t head = item / groups / region.rows % region.heads;
    const int64_t batch = item / groups / region.rows / region.heads;
    const unsigned keep = dropout_keep4(
        rule, dropout_head_word(int(region.batch0 + batch), int(region.head0 + head)),
        uint32_t(region.row0 + row), uint32_t(group));
    // (batch, head, row) of the region, then its columns: (B, H, rows, cols) contiguous.
    uint8_t* gRow = region.mask + ((batch * region.heads + head) * region.rows + row) * region.cols;
    for (int i = 0; i < kGroup; ++i) {
      const int64_t column = group * kGroup + i - region.col0;
      if (column >= 0 && column < region.cols) gRow[column] = (keep >> i) & 1u;
    }
  }
}

}  // namespace

void launch_dropout_mask(const MaskRegion& region, const DropoutRule& rule,
                         cudaStream_t stream) {
  const int64_t groups = (region.col0 + region.cols - 1) / cpu::kColumnsPerPhiloxCall -
                         region.col0 / cpu::kColumnsPerPhiloxCall + 1;
  const int64_t items = region.batch * region.heads * region.rows * groups;
  const int64_t blocks = std::min(kMaxMaskBlocks, (items + kMaskThreads - 1) / kMaskThreads);
  dropout_mask_kernel<<<unsigned(blocks), kMaskThreads, 0, stream>>>(region, rule);
  check_launch("dropout_mask_kernel");
}

}  // namespace flashlab::gpu
