/* The boundary between the exercises' checker and a kernel-exercise plugin: a library built
 * from harness.cu and one set of the exercises' kernels (the student's, the solutions, or a
 * test's wrong ones). The checker loads it with dlopen inside the child process of each case
 * (child_process.hpp), so the checker itself never starts CUDA and a crashing kernel ends only
 * its case. Plain C types only. Host arrays in and out; the plugin copies them to and from the
 * GPU.
 */
#ifndef FLASHLAB_KERNEL_EXERCISES_ABI_H
#define FLASHLAB_KERNEL_EXERCISES_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a struct below changes; the checker refuses a plugin of another version. */
#define FLASHLAB_KERNEL_EXERCISES_VERSION 1

/* Exercises 21 and 22: one attention forward, fp32, every matrix row-major (rows of d). */
typedef struct flashlab_kx_forward_call {
  int32_t exercise; /* 21 (scalar) or 22 (double-buffered) */
  const float* q;   /* (n_q, d) */
  const float* k;   /* (n_k, d) */
  const float* v;   /* (n_k, d) */
  float* o;         /* (n_q, d): the kernel's output */
  float* lse;       /* (n_q) */
  int64_t n_q, n_k, d;
  int32_t causal; /* 1: causal, aligned bottom-right (key j visible to row i iff
                     j <= i + n_k - n_q) */
} flashlab_kx_forward_call;

/* Exercise 23: the split-KV combine. */
typedef struct flashlab_kx_combine_call {
  const float* o_splits;   /* (splits, rows, d) */
  const float* lse_splits; /* (splits, rows) */
  float* o;                /* (rows, d): the kernel's output */
  float* lse;              /* (rows) */
  int64_t splits, rows, d;
} flashlab_kx_combine_call;

typedef struct flashlab_kx_result {
  int32_t ran;         /* 1 when the outputs hold what the kernel wrote */
  int32_t not_written; /* 1 when the kernel called not_written_yet() */
  char message[512];   /* why it did not run ("" when it ran) */
} flashlab_kx_result;

/* FLASHLAB_KERNEL_EXERCISES_VERSION of the plugin. */
typedef int (*flashlab_kx_version_fn)(void);
/* 1 when a CUDA device is present; description gets its name, or why there is none. */
typedef int (*flashlab_kx_device_fn)(char* description, size_t size);
typedef void (*flashlab_kx_forward_fn)(const flashlab_kx_forward_call* call,
                                       flashlab_kx_result* result);
typedef void (*flashlab_kx_combine_fn)(const flashlab_kx_combine_call* call,
                                       flashlab_kx_result* result);

#ifdef __cplusplus
}
#endif

#endif /* FLASHLAB_KERNEL_EXERCISES_ABI_H */
