// The mask export's host side: validate, check the mask is device memory, launch.
#include "flashlab/gpu/dropout.hpp"

#include "../kernels/launch.hpp"
#include "device_pointers.hpp"

namespace flashlab::gpu {

void dropout_mask(const flashlab_dropout_mask_params& params) {
  validate_dropout_mask(params);
  check_device_pointer("mask", params.mask);
  const MaskRegion region{params.mask, params.batch0, params.batch, params.head0, params.heads,
                          params.row0, params.rows,   params.col0,  params.cols};
  launch_dropout_mask(region, make_dropout_rule(params.p, params.seed, params.offset),
                      static_cast<cudaStream_t>(params.stream));
}

}  // namespace flashlab::gpu
