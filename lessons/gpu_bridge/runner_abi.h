/* The boundary between the `flashlab` program and its GPU runner, a plugin
 * (libflashlab_gpu_runner.so) that the program loads with dlopen the first time a GPU step
 * runs. Only the plugin links CUDA, cuBLAS and gpu/'s libflashlab.so, so every command that
 * needs no GPU starts without loading them, and one program serves machines with and
 * without CUDA. Plain C types only: nothing here depends on how either side was compiled.
 */
#ifndef FLASHLAB_GPU_RUNNER_ABI_H
#define FLASHLAB_GPU_RUNNER_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a struct below changes; the program refuses a plugin of another version.
 * 3: the backward and decode calls. 4: the rescale-count call. 6: fa3_kv_l2_share. */
#define FLASHLAB_RUNNER_VERSION 6

/* The four counts of the rescale-count call, in flashlab_rescale_count's order (first,
 * rescaled, skipped, kept: flashlab/fa3.h); the plugin checks that the two agree. */
#define FLASHLAB_RUNNER_RESCALE_COUNTS 4

/* One forward call of one kernel on host matrices: batch 1, `heads` heads, each head given
 * the same Q, K and V in memory of its own (so that its traffic is a separate head's). */
typedef struct flashlab_runner_call {
  const float* q; /* (n_q, d) row-major, host memory; rounded to dtype on the way in */
  const float* k; /* (n_k, d) */
  const float* v; /* (n_k, d) */
  float* o;       /* (n_q, d): head 0's O, read back and widened to fp32 */
  int64_t n_q, n_k, d;
  int64_t heads;   /* >= 1 */
  int32_t dtype;   /* flashlab_dtype */
  int32_t causal;  /* flashlab_causal */
  int32_t kernel;  /* flashlab_kernel */
  int32_t warmups; /* untimed calls first (module loading, cuBLAS set-up) */
  int32_t repeats; /* timed calls, >= 1 */
  int32_t fa3_kv_l2_share; /* fa3: flashlab_fa3_options.kv_l2_share (flashlab/fa3.h), its
                              tile order's share of the L2 in percent, or -1
                              (FLASHLAB_FA3_AUTO) for its default; -1 for other kernels */
} flashlab_runner_call;

typedef struct flashlab_runner_result {
  int32_t ran;       /* 1 when O holds the kernel's output */
  double median_ms;  /* CUDA events around each call, median of the repeats */
  char message[512]; /* why it did not run ("" when it ran) */
} flashlab_runner_result;

/* The backward pass on host tensors, batch 1: flashlab_forward (fa2, writing LSE) once,
 * then flashlab_backward `warmups + repeats` times on the same inputs. Heads are stored one
 * after another, each (rows, d) row-major; query head h reads KV head h / (heads_q /
 * heads_kv) (GQA), and dK, dV of a KV head are summed over its query heads. */
typedef struct flashlab_runner_backward_call {
  const float* q;    /* (heads_q, n_q, d), host; rounded to dtype on the way in */
  const float* k;    /* (heads_kv, n_k, d) */
  const float* v;    /* (heads_kv, n_k, d) */
  const float* dout; /* (heads_q, n_q, d), dO */
  float* dq;         /* (heads_q, n_q, d): the last run's dQ, widened to fp32 */
  float* dk;         /* (heads_kv, n_k, d) */
  float* dv;         /* (heads_kv, n_k, d) */
  int64_t n_q, n_k, d;
  int64_t heads_q, heads_kv; /* heads_kv >= 1 divides heads_q */
  int32_t dtype;             /* flashlab_dtype: fp16 or bf16 */
  int32_t causal;            /* flashlab_causal */
  int32_t deterministic;     /* flashlab_backward_params.deterministic */
  int32_t warmups;           /* untimed backward calls first */
  int32_t repeats;           /* timed backward calls, >= 1 */
} flashlab_runner_backward_call;

typedef struct flashlab_runner_backward_result {
  int32_t ran;             /* 1 when dQ, dK and dV hold the kernel's output */
  int32_t bitwise_repeats; /* 1 when every timed run's dQ, dK and dV equal the first's bit
                              for bit */
  double median_ms;        /* the backward alone (CUDA events), median of the repeats */
  int64_t workspace_bytes; /* flashlab_backward_workspace_bytes for the call */
  char message[512];       /* why it did not run ("" when it ran) */
} flashlab_runner_backward_result;

/* Decoding on host tensors: a batch of sequences, each with its own length, against a KV
 * cache, once per entry of `splits` (each warmups + repeats calls). The cache is given
 * contiguous; with page_size > 0 the plugin stores it in pages of page_size keys placed
 * through a shuffled block table (shuffled_block_table() of block_table.hpp, from
 * table_seed), as a serving engine's allocator would leave them. */
typedef struct flashlab_runner_decode_call {
  const float* q;          /* (batch, heads_q, n_q, d), host; rounded to dtype */
  const float* k;          /* (batch, heads_kv, max_seq_len, d) */
  const float* v;          /* (batch, heads_kv, max_seq_len, d) */
  const int32_t* seq_lens; /* (batch), host: the valid keys of each sequence */
  const int32_t* splits;   /* (configs): num_splits of each run, 0 = automatic */
  float* o;                /* (configs, batch, heads_q, n_q, d), widened to fp32 */
  float* lse;              /* (configs, batch, heads_q, n_q) */
  int32_t* splits_used;    /* (configs): the split count each run used */
  double* median_ms;       /* (configs): CUDA events around each call, median of repeats */
  int64_t configs;         /* >= 1 */
  int64_t batch, heads_q, heads_kv, n_q, max_seq_len, d;
  int64_t page_size;   /* 0: contiguous; else a power of two, the keys per page */
  uint64_t table_seed; /* shuffles the block table */
  int32_t dtype;       /* flashlab_dtype: fp16 or bf16 */
  int32_t warmups;
  int32_t repeats; /* >= 1 */
  int32_t grid;    /* flashlab_decode_params.grid: FLASHLAB_DECODE_GRID_AUTO, _SPLITS or _QUEUE */
} flashlab_runner_decode_call;

typedef struct flashlab_runner_decode_result {
  int32_t ran;             /* 1 when every config ran */
  int64_t workspace_bytes; /* the largest config's */
  char message[512];       /* why it did not run ("" when it ran) */
} flashlab_runner_decode_result;

/* fa3 once under FlashAttention-4's conditional rescaling (flashlab_fa3_options with
 * conditional_rescale = 1, the other switches at their defaults), batch 1, one head, the
 * default scale 1 / sqrt(d), counting on the device what every (row, KV tile) update did. */
typedef struct flashlab_runner_rescale_call {
  const float* q; /* (n_q, d) row-major, host memory; rounded to dtype on the way in */
  const float* k; /* (n_k, d) */
  const float* v; /* (n_k, d) */
  float* o;       /* (n_q, d): O, read back and widened to fp32 */
  int64_t n_q, n_k, d;
  int32_t dtype;  /* flashlab_dtype: fp16 or bf16 */
  int32_t causal; /* flashlab_causal */
} flashlab_runner_rescale_call;

typedef struct flashlab_runner_rescale_result {
  int32_t ran; /* 1 when counts and O hold the kernel's */
  int64_t counts[FLASHLAB_RUNNER_RESCALE_COUNTS]; /* first, rescaled, skipped, kept */
  char message[512];                              /* why it did not run ("" when it ran) */
} flashlab_runner_rescale_result;

/* FLASHLAB_RUNNER_VERSION of the plugin. */
typedef int (*flashlab_runner_version_fn)(void);
/* 1 when a CUDA device is present; description gets its name, or why there is none. */
typedef int (*flashlab_runner_device_fn)(char* description, size_t size);
typedef void (*flashlab_runner_forward_fn)(const flashlab_runner_call* call,
                                           flashlab_runner_result* result);
typedef void (*flashlab_runner_backward_fn)(const flashlab_runner_backward_call* call,
                                            flashlab_runner_backward_result* result);
typedef void (*flashlab_runner_decode_fn)(const flashlab_runner_decode_call* call,
                                          flashlab_runner_decode_result* result);
typedef void (*flashlab_runner_rescale_fn)(const flashlab_runner_rescale_call* call,
                                           flashlab_runner_rescale_result* result);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_GPU_RUNNER_ABI_H */
