/* The switches of the fa3 kernel (FLASHLAB_KERNEL_FA3), so that each idea of
 * FlashAttention-3 can be timed alone: flashlab_forward() runs fa3 with the defaults below;
 * flashlab_forward_fa3() takes them from the caller. Plain C, beside flashlab.h. */
#ifndef FLASHLAB_FA3_H
#define FLASHLAB_FA3_H

#include "flashlab/flashlab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flashlab_fa3_options {
  int32_t warp_specialized; /* 1: a producer warpgroup issues every TMA load and gives its
                               registers to the two consumer warpgroups (setmaxnreg);
                               0: no producer, the first consumer thread issues the loads
                               itself between its tiles. Default 1. */
  int32_t stages;           /* K and V buffers in SRAM: 1, 2 or 3. Default 2. */
  int32_t ping_pong;        /* 1: the two consumer warpgroups take turns issuing their
                               matmuls (named barriers), so one's softmax runs under the
                               other's wgmma; 0: each issues when ready. Default 1. */
  int32_t intra_overlap;    /* 1: S_{j+1} = Q K_{j+1}^T is issued before the softmax of S_j
                               and runs under it; 0: one softmax, then the next matmuls.
                               Default 1. */
} flashlab_fa3_options;

/* Fills *out with the defaults; FLASHLAB_ERROR_NULL_POINTER if out is NULL. */
flashlab_status flashlab_fa3_default_options(flashlab_fa3_options* out);

/* flashlab_forward() for params->kernel == FLASHLAB_KERNEL_FA3, with these switches.
 * FLASHLAB_ERROR_BAD_ARGUMENT for another kernel or a switch out of range;
 * FLASHLAB_ERROR_UNSUPPORTED for a combination that is not compiled (every switch is, at
 * d = 128 bf16; other (d, dtype) run warp_specialized = intra_overlap = 1 only). */
flashlab_status flashlab_forward_fa3(const flashlab_forward_params* params,
                                     const flashlab_fa3_options* options);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_FA3_H */
