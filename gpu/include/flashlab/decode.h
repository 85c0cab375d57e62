/* flashlab's C ABI for decoding: a few new query rows per sequence (one token, or up to 16
 * speculated ones) against a KV cache with a length per sequence, split over the cache
 * (flash-decoding) and merged, with GQA packing and an optional paged cache. Included by
 * flashlab.h; the conventions there hold (strides in elements, the last dimension
 * contiguous, a status per call, flashlab_last_error() for the message).
 *
 * The kernels (gpu/kernels/05_decode_split_kv.cu, 05_decode_combine.cu; 05_decode_queue.cu):
 *   split:   grid (split, KV head x row block, batch entry). A block takes the query rows of
 *            every query head that reads its KV head (GQA packing: each byte of K and V is
 *            read once per step) over the keys of its split, and writes that split's state
 *            (m, l, U), fp32, U unnormalised, to the workspace. With one split it ends the
 *            rows itself (O and LSE, as the combine would) and no combine is launched.
 *   combine: merges the splits' states of each query row with the reference's merge, then
 *            O = U / l (in the input dtype) and LSE = m + log l (fp32, natural log).
 *   queue:   with grid = FLASHLAB_DECODE_GRID_QUEUE, in place of the split kernel: persistent
 *            blocks that take pieces of the sequences from a queue, each piece's state for
 *            the combine.
 * Why (m, l, U) and not (O_split, LSE_split): it is the reference's state, merged by the
 * reference's algebra without a division per split; O_split and its LSE carry the same
 * information but cost a division in every split and a multiplication back in the combine.
 *
 * Tensors (strides are (dim0, head, row, column), in elements, column stride 1):
 *   q        (batch, heads_q, n_q, d), the new rows; row i of n_q is the token at position
 *            seq_len - n_q + i: it sees keys j <= seq_len - n_q + i (bottom-right causal).
 *   o        (batch, heads_q, n_q, d), same dtype as q.
 *   lse      optional (batch, heads_q, n_q) contiguous fp32; NULL to skip.
 *   contiguous cache (block_table == NULL): k_cache, v_cache (batch, heads_kv, max_seq_len,
 *            d); dim0 is the batch entry.
 *   paged cache (block_table != NULL): k_cache, v_cache (num_pages, heads_kv, page_size,
 *            d) through the strides: dim0 is the page, `row` the token within the page (so
 *            vLLM-style (num_pages, page_size, heads_kv, d) storage is strides
 *            {page_size*heads_kv*d, d, heads_kv*d, 1}). Key j of sequence b is row
 *            j % page_size of page block_table[b * block_table_stride + j / page_size].
 *            max_seq_len is the table's capacity: max_pages_per_seq * page_size.
 *   seq_lens (batch) int32 on the device: the valid keys of each entry, in [0, max_seq_len].
 *            A length of 0 gives O = 0 and LSE = -inf, as does a row that sees no key.
 *
 * Lengths and page indices live on the device, so they are not checked before the launch
 * (that would cost a copy and a synchronisation). The kernel never reads outside the cache:
 * a length outside [0, max_seq_len] is clamped to it and a page index outside
 * [0, num_pages) reads zeros, and either sets an error word in the workspace's header.
 * flashlab_decode_check() reads that word back (it waits for the stream) and returns
 * FLASHLAB_ERROR_BAD_ARGUMENT with the entry and what was wrong; call it after the decode
 * whenever the lengths or the table come from outside.
 */
#ifndef FLASHLAB_DECODE_H
#define FLASHLAB_DECODE_H

#include <stdint.h>

#include "flashlab/flashlab.h" /* flashlab_status; flashlab.h includes this file last */

#ifdef __cplusplus
extern "C" {
#endif

/* The error word's bits (flashlab_decode_check). */
#define FLASHLAB_DECODE_BAD_LENGTH 1u /* a seq_lens entry outside [0, max_seq_len] */
#define FLASHLAB_DECODE_BAD_PAGE 2u   /* a block_table entry outside [0, num_pages) */

/* kv_l2_policy: how the split kernel's reads of K and V ask the L2 to keep their lines.
 * Decode reads each byte of the cache once per step (GQA packing), so its lines have no
 * reuse in the call. Marked evict-first, they are meant to be the first victims of their L2
 * set, so that they replace one another rather than the lines other work left there
 * (weights, activations, or lines still dirty from an earlier kernel, whose write-back to
 * HBM would otherwise be paid during the decode). The dirty lines do stay (bench/gpu/NOTES.md,
 * "Decode's L2 hint by the cache's size"), a fixed saving of a few us; the hinted copies cost
 * about 2% on long caches. So the
 * library's choice is evict-first for caches of at most a few times the L2, plain loads for
 * longer ones (decode::auto_kv_l2_policy). */
#define FLASHLAB_DECODE_L2_AUTO 0         /* the library's choice (decode::auto_kv_l2_policy) */
#define FLASHLAB_DECODE_L2_EVICT_NORMAL 1 /* plain loads: the L2's usual replacement */
#define FLASHLAB_DECODE_L2_EVICT_FIRST 2  /* K and V lines are the first to be replaced */

/* grid: how the split kernel's work is laid out on the GPU.
 *   SPLITS: one block per (split, KV head x row block, batch entry): num_splits equal splits of
 *           every sequence, the blocks placed by the hardware.
 *   QUEUE:  persistent blocks, a few per SM, each taking work items from a queue in the
 *           workspace: num_splits pieces of every sequence that shrink along it (the first
 *           2 num_splits - 1 times the last), the large ones handed out first, so that SMs that
 *           run faster take more (gpu/kernels/05_decode_queue.cu). The pieces are fixed by the
 *           lengths alone, so the result does not depend on which block took which piece.
 * Both write one state per split or piece, merged by the same combine. */
#define FLASHLAB_DECODE_GRID_AUTO 0   /* the library's choice (decode::kDefaultGrid) */
#define FLASHLAB_DECODE_GRID_SPLITS 1 /* a block per split */
#define FLASHLAB_DECODE_GRID_QUEUE 2  /* persistent blocks, pieces from a queue */
typedef struct flashlab_decode_params {
  const void* q;              /* (batch, heads_q, n_q, d) */
  const void* k_cache;        /* contiguous or paged, see above */
  const void* v_cache;
  void* o;                    /* (batch, heads_q, n_q, d) */
  float* lse;                 /* optional (batch, heads_q, n_q) contiguous fp32 */
  const int32_t* seq_lens;    /* (batch) int32, device */
  const int32_t* block_table; /* (batch, max_seq_len / page_size) int32, device; NULL:
                                 contiguous cache */
  int64_t q_stride[4];
  int64_t k_stride[4];        /* (batch or page, head, row, column) */
  int64_t v_stride[4];
  int64_t o_stride[4];
  int64_t block_table_stride; /* elements between the table's rows, >= max pages per seq */
  int64_t page_size;          /* paged: a power of two in [16, 65536]; contiguous: 0 */
  int64_t num_pages;          /* paged: pages in k_cache and v_cache; contiguous: 0 */
  int64_t batch;
  int64_t heads_q;            /* a multiple of heads_kv */
  int64_t heads_kv;
  int64_t n_q;                /* new rows per sequence, 1..16 */
  int64_t max_seq_len;        /* the cache's capacity per sequence, in keys */
  int64_t d;                  /* 64 or 128 */
  double scale;               /* > 0; 0 or NaN: 1/sqrt(d) */
  int32_t dtype;              /* FLASHLAB_FP16 or FLASHLAB_BF16, q, caches and o alike */
  int32_t num_splits;         /* splits, or the queue's pieces: 0 automatic; 1..64 forced */
  void* workspace;            /* device, flashlab_decode_workspace_bytes() bytes, 16-aligned */
  int64_t workspace_bytes;
  int32_t kv_l2_policy;       /* FLASHLAB_DECODE_L2_AUTO (0), _EVICT_NORMAL or _EVICT_FIRST */
  int32_t grid;               /* FLASHLAB_DECODE_GRID_AUTO (0), _SPLITS or _QUEUE */
  void* stream;               /* cudaStream_t; NULL is the legacy default stream */
} flashlab_decode_params;

/* The split count flashlab_decode would use for params (its num_splits when forced, else
 * the heuristic of kernel_info.hpp's decode::auto_splits on the current device's SMs).
 * Only the sizes of params are read. */
flashlab_status flashlab_decode_num_splits(const flashlab_decode_params* params,
                                           int32_t* out);

/* The workspace bytes flashlab_decode needs for params (header + states of every split). */
flashlab_status flashlab_decode_workspace_bytes(const flashlab_decode_params* params,
                                                int64_t* out);

/* Validates and enqueues the decode on params->stream: the split kernel (or the queue's, with
 * grid = FLASHLAB_DECODE_GRID_QUEUE), then the combine, which one split does without. */
flashlab_status flashlab_decode(const flashlab_decode_params* params);

/* Waits for params->stream and reads the workspace's error word: FLASHLAB_OK when the last
 * flashlab_decode with this workspace met only valid lengths and page indices; else
 * FLASHLAB_ERROR_BAD_ARGUMENT and a message naming the first bad entry. */
flashlab_status flashlab_decode_check(const flashlab_decode_params* params);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_DECODE_H */
