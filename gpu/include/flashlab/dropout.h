/* flashlab's C ABI, dropout: the keep mask of the dropout rule as the GPU draws it, written
 * out for tests and lessons to compare with the CPU reference bit for bit. Part of
 * flashlab.h (which includes it at its end); the same conventions: statuses, and
 * flashlab_last_error() for the message of a failure.
 *
 * The rule (cpu_reference dropout.hpp): weight (row, column) of (batch, head) is kept exactly
 * when word column % 4 of
 *   Philox4x32-10(counter = (column / 4, row, batch * 2^16 + head, offset),
 *                 key     = (seed & 0xffffffff, seed >> 32))
 * is at least floor(p * 2^32). The forward kernel (fa2) draws the same words.
 */
#ifndef FLASHLAB_DROPOUT_H
#define FLASHLAB_DROPOUT_H

#include <stdint.h>

#include "flashlab/flashlab.h" /* flashlab_status */

#ifdef __cplusplus
extern "C" {
#endif

/* A region of the mask: batches [batch0, batch0 + batch), heads [head0, head0 + heads),
 * rows [row0, row0 + rows), columns [col0, col0 + cols). */
typedef struct flashlab_dropout_mask_params {
  uint8_t* mask;           /* device memory, (batch, heads, rows, cols) contiguous:
                              1 where the weight is kept, 0 where it is dropped */
  int64_t batch0, batch;   /* batch0 + batch <= 2^16: batch fills 16 bits of the counter */
  int64_t head0, heads;    /* head0 + heads <= 2^16 (the query head, under GQA) */
  int64_t row0, rows;      /* row0 + rows <= 2^32 */
  int64_t col0, cols;      /* col0 + cols <= 2^34 (a counter word counts groups of four) */
  double p;                /* in [0, 1) */
  uint64_t seed;
  uint32_t offset;
  int32_t reserved;        /* must be 0 */
  void* stream;            /* cudaStream_t; NULL is the legacy default stream */
} flashlab_dropout_mask_params;

/* Enqueues the kernel that writes the mask on params->stream and returns without waiting.
 * FLASHLAB_ERROR_NULL_POINTER for a NULL params or mask; FLASHLAB_ERROR_BAD_SHAPE for an
 * extent < 1, a negative start, a region past the counter's limits above, or more than
 * 2^63 - 1 entries; FLASHLAB_ERROR_BAD_ARGUMENT for p outside [0, 1), reserved != 0, or a
 * mask that is not device memory. */
flashlab_status flashlab_dropout_mask(const flashlab_dropout_mask_params* params);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_DROPOUT_H */
