/* The switches of the fa3 kernel (FLASHLAB_KERNEL_FA3), so that each idea of
 * FlashAttention-3 can be timed alone: flashlab_forward() runs fa3 with the defaults below;
 * flashlab_forward_fa3() takes them from the caller. Plain C, beside flashlab.h. */
#ifndef FLASHLAB_FA3_H
#define FLASHLAB_FA3_H

#include "flashlab/flashlab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* flashlab_fa3_options.stages and .ping_pong: the kernel's own choice for the head dimension;
 * .kv_l2_share: the tile order's own share of the L2 for the mask. */
#define FLASHLAB_FA3_AUTO (-1)

typedef struct flashlab_fa3_options {
  int32_t warp_specialized; /* 1: a producer warpgroup issues every TMA load and gives its
                               registers to the consumer warpgroups (setmaxnreg; two at
                               d = 128, three at d = 64: fa3::consumer_warpgroups);
                               0: no producer, the first consumer warp issues the loads
                               itself between its tiles. Default 1. */
  int32_t stages;           /* K and V buffers in SRAM: 1 to 4 at d = 64, 1 to 3 at d = 128
                               (fa3::max_stages), or FLASHLAB_FA3_AUTO:
                               the default for the call's head dimension
                               (fa3::default_stages, kernel_info.hpp; what a call resolves
                               to: flashlab_fa3_resolve_options). Default FLASHLAB_FA3_AUTO. */
  int32_t ping_pong;        /* 1: the consumer warpgroups take turns issuing their
                               matmuls (named barriers), so one's softmax runs under the
                               others' wgmma; 0: each issues when ready, and at d = 64,
                               where items run apart, each computes only the KV tiles its
                               own rows see (fa3::consumers_skip_unseen, kernel_info.hpp);
                               FLASHLAB_FA3_AUTO: the default for the call's head dimension
                               (fa3::default_ping_pong). Default FLASHLAB_FA3_AUTO. */
  int32_t intra_overlap;    /* 1: S_j = Q K_j^T is issued before U += W_{j-1} V_{j-1}, and
                               the softmax of S_j runs while that product is still on the
                               tensor cores; 0: U += W_{j-1} V_{j-1}, then S_j, and the
                               softmax only once both have landed. Default 1. */
  int32_t conditional_rescale; /* 1: FlashAttention-4's rule: a row keeps its base m until
                               its max outgrows it by more than tau = 8 in log2 units
                               (flashlab/cpu/rescale_rule.hpp), so most tiles multiply
                               neither l nor U by alpha, and a warp none of whose rows moved
                               its base skips the U rescale; 0: the base follows the max on
                               every tile (FlashAttention-2 and -3). Default 0. */
  int64_t* rescale_counts;  /* NULL, or device memory for FLASHLAB_RESCALE_COUNTS int64:
                               what every (row, KV tile) update did, counted on the device
                               and written there (zeroed first, on the call's stream). */
  int32_t grid;             /* how blocks take query tiles (flashlab_fa3_grid): one block
                               per tile, one persistent block per SM in fixed turns or
                               from a work queue, or the one of these that suits the
                               problem. Default FLASHLAB_FA3_GRID_AUTO. */
  int32_t software_exp2;    /* 1: FlashAttention-4's software exponential: on the tiles that
                               need no mask, 1 in fa3::kSoftwareExp2Period (kernel_info.hpp)
                               of the softmax's exponentials is computed on the FMA pipe
                               (flashlab/gpu/exp2_software.hpp) instead of the special-
                               function unit, which at d = 64 takes as long as the matmuls;
                               0: every one on the special-function unit. Compiled with
                               warp_specialized = 1, intra_overlap = 1 and
                               conditional_rescale = 0 only. Default 0. */
  int32_t overlap_items;    /* 1: a persistent block's consumers run from one work item into
                               the next: the item's last U += W V is issued together with
                               the next item's S_0 = Q K_0^T (its Q already in a second SRAM
                               buffer), whose softmax runs once this item's O is written
                               (where both items have KV tiles);
                               0: each item starts on its own after the last one's O. The
                               same bits either way (at d = 64 with ping_pong = 0, items that
                               run apart also let each consumer leave out the KV tiles its
                               rows do not see, fa3::consumers_skip_unseen in kernel_info.hpp,
                               which moves no bit either). It takes effect with
                               warp_specialized = 1, conditional_rescale = 0 and a second Q
                               buffer in SRAM (every setting but stages = 3 at d = 128);
                               elsewhere items run one after the other. Default 0
                               (fa3::kDefaultOverlapItems, kernel_info.hpp: measured, it
                               gains at most 2% and loses up to 8% where the next item's
                               Q or K_0 lands late). */
  int32_t kv_l2_share;      /* the share of the L2, in percent (1 to 100), that the tile order
                               plans a section's K and V on (flashlab/gpu/tile_schedule.hpp:
                               the heads whose K and V fit it go together, so their K and V
                               stay in the L2 while those heads' query tiles go by), or
                               FLASHLAB_FA3_AUTO: fa3::auto_kv_l2_share (kernel_info.hpp), a
                               quarter, and a half under the causal mask but at d = 128 for
                               heads of at most 12 query tiles; under the mask the automatic
                               plan evens its sections out (as few as fit, of equal size),
                               while a share given takes as many heads as fit. The order moves no
                               bit of the output, only where K and V are found: an experiment
                               on the L2 (docs/IO-LEVELS.md, "Sections that fill a side of
                               the L2"). Default FLASHLAB_FA3_AUTO. */
} flashlab_fa3_options;

/* flashlab_fa3_options.grid. The order of the tiles is the same in every case
 * (flashlab/gpu/tile_schedule.hpp): a few heads at a time, so their K and V stay in the L2,
 * and under the causal mask each head's longest tile first. */
typedef enum flashlab_fa3_grid {
  FLASHLAB_FA3_GRID_PER_TILE = 0,   /* one block per query tile (FlashAttention-2's grid) */
  FLASHLAB_FA3_GRID_PERSISTENT = 1, /* one block per SM, each taking tiles in turn, so its
                                       set-up is paid once and the next tile's loads run
                                       under this tile's last matmul and O store */
  FLASHLAB_FA3_GRID_AUTO = 2,       /* with warp_specialized = 1, the work queue under the
                                       causal mask, where tiles differ in work (from
                                       fa3::kAutoQueueMinTiles query tiles a head), and
                                       without it at d = 64 (three consumers); otherwise
                                       persistent up to fa3::kAutoPersistentMaxTiles query
                                       tiles a head and per tile beyond (kernel_info.hpp) */
  FLASHLAB_FA3_GRID_QUEUE = 3       /* one block per SM, each taking the next tile of the
                                       order from a counter in device memory when it is
                                       ready for one (a work queue), so tiles of unequal work
                                       are shared as evenly as dispatch shares them, with the
                                       set-up paid once. Needs warp_specialized = 1. */
} flashlab_fa3_grid;

/* The counts of flashlab_fa3_options.rescale_counts, indexed by these; the same four as
 * flashlab::cpu::RescaleCounts. Rows whose scores in a tile are all masked are not counted. */
typedef enum flashlab_rescale_count {
  FLASHLAB_RESCALE_FIRST = 0,    /* the row's first unmasked tile: the base is set */
  FLASHLAB_RESCALE_RESCALED = 1, /* the base moved and l, U were multiplied by alpha < 1 */
  FLASHLAB_RESCALE_SKIPPED = 2,  /* the max grew, but by at most tau: the base was kept */
  FLASHLAB_RESCALE_KEPT = 3,     /* the max did not grow: neither rule rescales */
  FLASHLAB_RESCALE_COUNTS = 4
} flashlab_rescale_count;

/* Fills *out with the defaults; FLASHLAB_ERROR_NULL_POINTER if out is NULL. */
flashlab_status flashlab_fa3_default_options(flashlab_fa3_options* out);

/* Fills *out with *options as a call at head dimension d runs them: FLASHLAB_FA3_AUTO in
 * stages and ping_pong replaced by d's defaults, every other field as given (kv_l2_share's
 * FLASHLAB_FA3_AUTO depends on the mask, not on d, and stays).
 * FLASHLAB_ERROR_NULL_POINTER if options or out is NULL, FLASHLAB_ERROR_UNSUPPORTED if fa3
 * does not take d. */
flashlab_status flashlab_fa3_resolve_options(int64_t d, const flashlab_fa3_options* options,
                                             flashlab_fa3_options* out);

/* flashlab_forward() for params->kernel == FLASHLAB_KERNEL_FA3, with these switches.
 * FLASHLAB_ERROR_BAD_ARGUMENT for another kernel or a switch out of range;
 * FLASHLAB_ERROR_UNSUPPORTED for a combination that is not compiled (every switch is, at
 * d = 128 bf16; other (d, dtype) run warp_specialized = intra_overlap = 1 only; and
 * software_exp2 = 1 runs with warp_specialized = intra_overlap = 1, conditional_rescale = 0
 * only, at every (d, dtype)). */
flashlab_status flashlab_forward_fa3(const flashlab_forward_params* params,
                                     const flashlab_fa3_options* options);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_FA3_H */
