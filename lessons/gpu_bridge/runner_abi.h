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

/* Raised whenever a struct below changes; the program refuses a plugin of another version. */
#define FLASHLAB_RUNNER_VERSION 2

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
} flashlab_runner_call;

typedef struct flashlab_runner_result {
  int32_t ran;       /* 1 when O holds the kernel's output */
  double median_ms;  /* CUDA events around each call, median of the repeats */
  char message[512]; /* why it did not run ("" when it ran) */
} flashlab_runner_result;

/* FLASHLAB_RUNNER_VERSION of the plugin. */
typedef int (*flashlab_runner_version_fn)(void);
/* 1 when a CUDA device is present; description gets its name, or why there is none. */
typedef int (*flashlab_runner_device_fn)(char* description, size_t size);
typedef void (*flashlab_runner_forward_fn)(const flashlab_runner_call* call,
                                           flashlab_runner_result* result);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_GPU_RUNNER_ABI_H */
