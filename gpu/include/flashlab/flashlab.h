/* flashlab's C ABI: the attention forward pass on an NVIDIA GPU, callable from C, C++ and
 * Python (ctypes). Everything crosses this boundary as plain integers and pointers, so a
 * torch user hands over tensor.data_ptr() and tensor.stride() untouched.
 *
 * Tensors are 4-d: Q and O are (batch, heads_q, N_q, d), K and V are (batch, heads_kv, N_k, d).
 * Each is described by a device pointer and four strides, in ELEMENTS (not bytes), for the
 * batch, head, row and column dimensions, exactly torch's tensor.stride() of a
 * (batch, heads, N, d) view; the last dimension must be contiguous (column stride 1).
 * So BHSD (torch's default for SDPA) and BSHD (flash-attn's layout, seen through
 * .transpose(1, 2)) are both accepted:
 *   BHSD contiguous: strides {H*N*d, N*d, d, 1};   BSHD contiguous: strides {N*H*d, d, H*d, 1}.
 *
 * No function here aborts or throws: each returns a status, and flashlab_last_error() gives
 * the message of the last failure on the calling thread (what was wrong, what would be right).
 */
#ifndef FLASHLAB_FLASHLAB_H
#define FLASHLAB_FLASHLAB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 3: flashlab_backward (backward.h), dropout (dropout.h); 4: flashlab_fa3_options.grid (fa3.h);
 * 5: flashlab_fa3_options.software_exp2, and flashlab_decode_params.kv_l2_policy (decode.h),
 * which was `reserved`; 6: FLASHLAB_FA3_GRID_QUEUE (fa3.h); 7: flashlab_fa3_options.overlap_items;
 * 8: FLASHLAB_FA3_AUTO for flashlab_fa3_options.stages and .ping_pong, their new default;
 * 9: flashlab_fa3_options.kv_l2_share */
#define FLASHLAB_ABI_VERSION 9

typedef enum flashlab_status {
  FLASHLAB_OK = 0,
  FLASHLAB_ERROR_NULL_POINTER = 1,     /* a required pointer was NULL */
  FLASHLAB_ERROR_BAD_SHAPE = 2,        /* a size < 1 or above its limit, batch * heads_q
                                          above INT_MAX, or heads_q not a multiple of
                                          heads_kv */
  FLASHLAB_ERROR_BAD_STRIDE = 3,       /* last dimension not contiguous, a used stride < 0,
                                          a tensor whose extent overflows int64 or the
                                          address space, O's batches, heads or rows
                                          overlapping (Q, K, V may broadcast with stride 0;
                                          O may not), or (naive) a row stride < d.
                                          A dimension of extent 1 may have any stride */
  FLASHLAB_ERROR_MISALIGNED = 4,       /* a pointer or stride breaks the kernel's alignment */
  FLASHLAB_ERROR_UNSUPPORTED = 5,      /* this kernel does not take this d or dtype, or
                                          dropout (only fa2 does) */
  FLASHLAB_ERROR_BAD_ARGUMENT = 6,     /* an unknown enum value, reserved != 0, a scale < 0,
                                          inf, or outside fp32's normal range, a dropout
                                          probability outside [0, 1), O sharing
                                          memory with Q, K, V or LSE, or a pointer that is
                                          host memory or another device's */
  FLASHLAB_ERROR_CUDA = 7,             /* the CUDA runtime reported an error */
  FLASHLAB_ERROR_CUBLAS = 8,           /* cuBLAS reported an error */
  FLASHLAB_ERROR_INTERNAL = 9          /* anything else; the message says what */
} flashlab_status;

typedef enum flashlab_dtype {
  FLASHLAB_FP32 = 0,
  FLASHLAB_FP16 = 1,
  FLASHLAB_BF16 = 2
} flashlab_dtype;

/* Causal masking. With N_q == N_k both alignments are the same mask.
 *   TOP_LEFT:     query i sees keys j <= i                (torch's is_causal=True)
 *   BOTTOM_RIGHT: query i sees keys j <= i + (N_k - N_q)  (flash-attn's; decoding against a
 *                 KV cache needs it: the last query sees every key)
 * A query row that sees no key at all gets O = 0 and LSE = -inf (flashlab's convention). */
typedef enum flashlab_causal {
  FLASHLAB_CAUSAL_NONE = 0,
  FLASHLAB_CAUSAL_TOP_LEFT = 1,
  FLASHLAB_CAUSAL_BOTTOM_RIGHT = 2
} flashlab_causal;

/* The ladder of kernels, simplest first (gpu/kernels/NN_*.cu). Which head dimensions and
 * dtypes each takes, its tiles, threads, shared memory and the alignment it needs:
 * flashlab_kernel_info() below (in C++, flashlab/gpu/kernel_info.hpp, where they are written).
 *   NAIVE:  cuBLAS S = Q K^T, softmax kernel, cuBLAS O = P V; S (fp32) and P live in HBM.
 *   SCALAR: one thread per query row, fp32 arithmetic, online softmax.
 *   FA2:    tensor cores (mma.sync), cp.async double buffering.
 *   FA3:    Hopper (sm_90a): TMA loads, wgmma, a producer warpgroup and two consumer
 *           warpgroups over a pipeline of K/V stages. */
typedef enum flashlab_kernel {
  FLASHLAB_KERNEL_NAIVE = 0,
  FLASHLAB_KERNEL_SCALAR = 1,
  FLASHLAB_KERNEL_FA2 = 2,
  FLASHLAB_KERNEL_FA3 = 3
} flashlab_kernel;

/* Where a kernel keeps an intermediate (flashlab_kernel_info_t's s_level and w_level). */
typedef enum flashlab_memory {
  FLASHLAB_MEMORY_NONE = 0,
  FLASHLAB_MEMORY_HBM = 1,        /* global memory */
  FLASHLAB_MEMORY_SRAM = 2,       /* shared memory, one block's */
  FLASHLAB_MEMORY_REGISTERS = 3   /* one thread's */
} flashlab_memory;

/* The most head dimensions a kernel lists as supported. */
#define FLASHLAB_MAX_HEAD_DIMS 8

/* What one kernel is, for one head dimension d and dtype. */
typedef struct flashlab_kernel_info_t {
  const char* name;              /* "naive", "scalar", "fa2"; static storage */
  const char* summary;           /* one line; static storage */
  int32_t supported;             /* 1 if the kernel takes (d, dtype); else 0, and every field
                                    from br to stride_align_elements is 0 */
  int32_t br;                    /* query rows per block; 0 where the kernel has no tiles */
  int32_t bc;                    /* keys per K/V tile; 0 where the kernel has no tiles */
  int32_t threads;               /* threads per block (naive: of its softmax kernel) */
  int64_t sram_bytes;            /* shared memory per block */
  int32_t blocks_per_sm;         /* the occupancy it is built for; 0 where it asks for none */
  int32_t s_level;               /* flashlab_memory of the scores S = Q K^T * scale */
  int32_t s_dtype;               /* flashlab_dtype of S */
  int32_t w_level;               /* flashlab_memory of P (naive) or W = exp(S - m'), as fed
                                    to the product with V */
  int32_t w_dtype;               /* flashlab_dtype of P or W there */
  int32_t kv_passes;             /* times each query tile streams all of K and V */
  int32_t s_hbm_reads;           /* times S is read back from HBM; 0: never stored there */
  int32_t pointer_align_bytes;   /* alignment of the Q, K, V, O pointers (LSE: 4 bytes) */
  int32_t stride_align_elements; /* every batch, head and row stride that is used (its
                                    extent > 1) must be a multiple of this */
  uint32_t dtypes;               /* the dtypes it takes: bit (1 << dtype) for each */
  int32_t head_dim_count;        /* how many of head_dims hold; 0: any d in [1, max_head_dim] */
  int64_t head_dims[FLASHLAB_MAX_HEAD_DIMS];
  int64_t max_head_dim;
} flashlab_kernel_info_t;

/* Fills *out with what `kernel` is for head dimension d and `dtype`. Returns FLASHLAB_OK
 * when the kernel takes (d, dtype); FLASHLAB_ERROR_UNSUPPORTED when it does not (*out is
 * still filled: name, summary, dtypes and head dims, supported = 0, and flashlab_last_error()
 * says why and which kernel would); FLASHLAB_ERROR_BAD_ARGUMENT for an unknown kernel or
 * dtype; FLASHLAB_ERROR_NULL_POINTER when out is NULL. */
flashlab_status flashlab_kernel_info(int32_t kernel, int64_t d, int32_t dtype,
                                     flashlab_kernel_info_t* out);

/* One forward call. Enums are carried as int32_t so the struct's layout never depends on
 * the compiler's enum size (ctypes mirrors it field for field). */
typedef struct flashlab_forward_params {
  const void* q;             /* (batch, heads_q, N_q, d) */
  const void* k;             /* (batch, heads_kv, N_k, d) */
  const void* v;             /* (batch, heads_kv, N_k, d) */
  void* o;                   /* (batch, heads_q, N_q, d), same dtype as Q */
  float* lse;                /* optional (batch, heads_q, N_q) contiguous fp32, natural log:
                                L = m + log(l), kept for the backward pass; NULL to skip */
  int64_t q_stride[4];       /* (batch, head, row, column) strides of Q, in elements */
  int64_t k_stride[4];
  int64_t v_stride[4];
  int64_t o_stride[4];
  int64_t batch;
  int64_t heads_q;           /* query heads; query head h reads KV head h / (heads_q / heads_kv) */
  int64_t heads_kv;          /* must divide heads_q (GQA; heads_kv = 1 is MQA) */
  int64_t n_q;               /* N_q, query rows */
  int64_t n_k;               /* N_k, key/value rows */
  int64_t d;                 /* head dimension */
  double scale;              /* softmax scale, > 0; 0, -0.0 or NaN: the default 1/sqrt(d) */
  int32_t dtype;             /* flashlab_dtype, for Q, K, V and O alike */
  int32_t causal;            /* flashlab_causal */
  int32_t kernel;            /* flashlab_kernel */
  /* Dropout on the attention weights (fa2 only; the other kernels refuse p != 0): weight
   * (row, column) of (batch, query head) is dropped when its Philox4x32-10 word is below
   * floor(p * 2^32), the CPU reference's rule (cpu_reference dropout.hpp), and the kept ones
   * are scaled by 1/(1 - p). LSE stays the log-sum-exp of the undropped scores. */
  double dropout_p;          /* in [0, 1); 0: no dropout, bit for bit the kernel without it */
  uint64_t dropout_seed;     /* the Philox key */
  uint32_t dropout_offset;   /* which dropout call: distinct offsets give independent masks */
  int32_t reserved;          /* must be 0 */
  void* stream;              /* cudaStream_t; NULL is the legacy default stream */
} flashlab_forward_params;

/* Enqueues the forward pass on params->stream and returns without waiting for it. */
flashlab_status flashlab_forward(const flashlab_forward_params* params);

/* The message of the last failing call on this thread ("" after a success). */
const char* flashlab_last_error(void);

/* A fixed name for a status, e.g. "FLASHLAB_ERROR_MISALIGNED". */
const char* flashlab_status_name(flashlab_status status);

/* FLASHLAB_ABI_VERSION of the library actually loaded. */
int flashlab_abi_version(void);

#ifdef __cplusplus
}
#endif

/* The backward pass: flashlab_backward_params, flashlab_backward(). */
#include "flashlab/backward.h"
/* The dropout mask as the kernels draw it: flashlab_dropout_mask(). */
#include "flashlab/dropout.h"
/* Split-KV decode against a (paged) KV cache: flashlab_decode_params, flashlab_decode(). */
#include "flashlab/decode.h"

#endif /* FLASHLAB_FLASHLAB_H */
