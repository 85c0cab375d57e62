/* flashlab's C ABI for the backward pass: given Q, K, V, the forward's O and LSE, and dO
 * (the loss's gradient with respect to O), compute dQ, dK and dV on the GPU with
 * FlashAttention-2's backward (gpu/kernels/04_*.cu). Included by flashlab.h; the same
 * conventions hold: device pointers, (batch, head, row, column) strides in ELEMENTS with a
 * contiguous last dimension, int32 enums, a status per call and flashlab_last_error().
 *
 * The backward recomputes S = Q K^T * scale and P = exp(S - L) from the forward's LSE
 * instead of storing P, so it needs a workspace of fp32 numbers that grows with N_q, never
 * with N_q * N_k: D = rowsum(dO o O) and (unless deterministic) the dQ accumulator. Ask
 * flashlab_backward_workspace_bytes() for its size and pass a device buffer at least
 * that large; its contents need not be initialised.
 */
#ifndef FLASHLAB_BACKWARD_H
#define FLASHLAB_BACKWARD_H

#include <stdint.h>

#include "flashlab/flashlab.h" /* flashlab_status; it includes this file at its end */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flashlab_backward_params {
  const void* q;             /* (batch, heads_q, N_q, d), the forward's input */
  const void* k;             /* (batch, heads_kv, N_k, d) */
  const void* v;             /* (batch, heads_kv, N_k, d) */
  const void* o;             /* (batch, heads_q, N_q, d), the forward's output */
  const void* dout;          /* (batch, heads_q, N_q, d), dO */
  const float* lse;          /* (batch, heads_q, N_q) contiguous fp32, natural log, as
                                flashlab_forward writes it; required */
  void* dq;                  /* (batch, heads_q, N_q, d), written */
  void* dk;                  /* (batch, heads_kv, N_k, d), written: summed over the query
                                heads that share each KV head */
  void* dv;                  /* (batch, heads_kv, N_k, d), written, summed likewise */
  int64_t q_stride[4];       /* (batch, head, row, column) strides, in elements */
  int64_t k_stride[4];
  int64_t v_stride[4];
  int64_t o_stride[4];
  int64_t dout_stride[4];
  int64_t dq_stride[4];
  int64_t dk_stride[4];
  int64_t dv_stride[4];
  int64_t batch;
  int64_t heads_q;
  int64_t heads_kv;          /* must divide heads_q (GQA; 1 is MQA) */
  int64_t n_q;
  int64_t n_k;
  int64_t d;
  double scale;              /* as the forward's: > 0; 0, -0.0 or NaN: 1/sqrt(d) */
  int32_t dtype;             /* flashlab_dtype of every tensor but LSE (fp16 or bf16) */
  int32_t causal;            /* flashlab_causal, as in the forward */
  int32_t deterministic;     /* 0: dQ accumulated with atomics (fast; the order of the
                                sums varies from run to run); 1: dQ summed in a fixed
                                order, bitwise the same every run (slower) */
  int32_t reserved;          /* must be 0 */
  double dropout_p;          /* in [0, 1), the forward's: the mask is drawn again, bit for
                                bit the forward's; 0: bitwise the backward without dropout */
  uint64_t dropout_seed;     /* Philox key, as the CPU reference's dropout.hpp */
  uint64_t dropout_offset;   /* Philox counter offset, the forward's: at most 2^32 - 1 */
  void* workspace;           /* device memory, 256-byte aligned (cudaMalloc's are) */
  int64_t workspace_bytes;   /* its size; at least flashlab_backward_workspace_bytes() */
  void* stream;              /* cudaStream_t; NULL is the legacy default stream */
} flashlab_backward_params;

/* The workspace bytes that flashlab_backward needs for these params: depends on batch,
 * heads_q, n_q, d and deterministic only, which are validated; no pointer is looked at. */
flashlab_status flashlab_backward_workspace_bytes(const flashlab_backward_params* params,
                                                  int64_t* bytes);

/* Enqueues the backward pass on params->stream and returns without waiting for it. */
flashlab_status flashlab_backward(const flashlab_backward_params* params);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_BACKWARD_H */
