// flashlab.h's C ABI over the C++ host API: every exception becomes a status, and its
// message is kept per thread for flashlab_last_error().
#include "flashlab/fa3.h"
#include "flashlab/flashlab.h"
#include "flashlab/gpu/backward.hpp"
#include "flashlab/gpu/dropout.hpp"
#include "flashlab/gpu/decode.hpp"
#include "flashlab/gpu/forward.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <exception>
#include <string>

namespace {

thread_local std::string last_error;

// Runs fn; a throw becomes its status, with the message kept for flashlab_last_error().
template <class Fn>
flashlab_status guarded(Fn&& fn) {
  try {
    fn();
    last_error.clear();
    return FLASHLAB_OK;
  } catch (const flashlab::gpu::Error& e) {
    last_error = e.what();
    return e.status;
  } catch (const std::exception& e) {
    last_error = e.what();
    return FLASHLAB_ERROR_INTERNAL;
  } catch (...) {
    last_error = "an unknown exception";
    return FLASHLAB_ERROR_INTERNAL;
  }
}

// out was cleared by the caller.
void fill(flashlab_kernel_info_t* out, const flashlab::gpu::KernelInfo& info) {
  const flashlab::gpu::KernelRecord& k = *info.kernel;
  out->name = k.name.data();  // string literals: NUL-terminated, static storage
  out->summary = k.summary.data();
  out->supported = info.supported ? 1 : 0;
  const flashlab::gpu::KernelConfig& c = info.config;
  out->br = c.Br;
  out->bc = c.Bc;
  out->threads = c.threads;
  out->sram_bytes = c.sram_bytes;
  out->blocks_per_sm = c.blocks_per_sm;
  out->s_level = c.s.level;
  out->s_dtype = c.s.dtype;
  out->w_level = c.w.level;
  out->w_dtype = c.w.dtype;
  out->kv_passes = c.kv_passes;
  out->s_hbm_reads = c.s_hbm_reads;
  out->pointer_align_bytes = c.pointer_align_bytes;
  out->stride_align_elements = c.stride_align_elements;
  out->dtypes = k.dtypes.bits;
  out->head_dim_count = k.head_dims.count;
  for (int i = 0; i < k.head_dims.count; ++i) out->head_dims[i] = k.head_dims.values[i];
  out->max_head_dim = k.head_dims.largest();
}

}  // namespace

extern "C" {

flashlab_status flashlab_forward(const flashlab_forward_params* params) {
  if (params == nullptr) {
    last_error = "params is NULL: pass a filled flashlab_forward_params";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([params] { flashlab::gpu::forward(*params); });
}

flashlab_status flashlab_backward_workspace_bytes(const flashlab_backward_params* params,
                                                  int64_t* bytes) {
  if (params == nullptr || bytes == nullptr) {
    last_error = std::string(params == nullptr ? "params" : "bytes") +
                 " is NULL: pass a filled flashlab_backward_params and an int64_t to fill";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([&] { *bytes = flashlab::gpu::backward_workspace_bytes(*params); });
}

flashlab_status flashlab_backward(const flashlab_backward_params* params) {
  if (params == nullptr) {
    last_error = "params is NULL: pass a filled flashlab_backward_params";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([params] { flashlab::gpu::backward(*params); });
}

flashlab_status flashlab_dropout_mask(const flashlab_dropout_mask_params* params) {
  if (params == nullptr) {
    last_error = "params is NULL: pass a filled flashlab_dropout_mask_params";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([params] { flashlab::gpu::dropout_mask(*params); });
}

flashlab_status flashlab_fa3_default_options(flashlab_fa3_options* out) {
  if (out == nullptr) {
    last_error = "out is NULL: pass a flashlab_fa3_options to fill";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  *out = flashlab::gpu::default_fa3_options();
  last_error.clear();
  return FLASHLAB_OK;
}

flashlab_status flashlab_fa3_resolve_options(int64_t d, const flashlab_fa3_options* options,
                                             flashlab_fa3_options* out) {
  if (options == nullptr || out == nullptr) {
    last_error = options == nullptr ? "options is NULL: pass the flashlab_fa3_options to resolve"
                                    : "out is NULL: pass a flashlab_fa3_options to fill";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  // The options depend on d alone: bf16 stands for every dtype fa3 takes.
  const flashlab::gpu::KernelInfo info =
      flashlab::gpu::kernel_info(FLASHLAB_KERNEL_FA3, d, FLASHLAB_BF16);
  if (!info.supported) {
    last_error = info.reason;
    return FLASHLAB_ERROR_UNSUPPORTED;
  }
  *out = flashlab::gpu::fa3::resolve_options(d, *options);
  last_error.clear();
  return FLASHLAB_OK;
}

flashlab_status flashlab_forward_fa3(const flashlab_forward_params* params,
                                     const flashlab_fa3_options* options) {
  if (params == nullptr || options == nullptr) {
    last_error = params == nullptr ? "params is NULL: pass a filled flashlab_forward_params"
                                   : "options is NULL: pass a flashlab_fa3_options (see "
                                     "flashlab_fa3_default_options)";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([params, options] { flashlab::gpu::forward_fa3(*params, *options); });
}

flashlab_status flashlab_kernel_info(int32_t kernel, int64_t d, int32_t dtype,
                                     flashlab_kernel_info_t* out) {
  if (out == nullptr) {
    last_error = "out is NULL: pass a flashlab_kernel_info_t to fill";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([&] {
    const flashlab::gpu::KernelInfo info = flashlab::gpu::kernel_info(kernel, d, dtype);
    *out = {};
    if (info.kernel == nullptr || !flashlab::gpu::is_known_dtype(dtype))
      throw flashlab::gpu::Error(FLASHLAB_ERROR_BAD_ARGUMENT, info.reason);
    fill(out, info);
    if (!info.supported) throw flashlab::gpu::Error(FLASHLAB_ERROR_UNSUPPORTED, info.reason);
  });
}

flashlab_status flashlab_decode(const flashlab_decode_params* params) {
  if (params == nullptr) {
    last_error = "params is NULL: pass a filled flashlab_decode_params";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([params] { flashlab::gpu::run_decode(*params); });
}

flashlab_status flashlab_decode_num_splits(const flashlab_decode_params* params,
                                           int32_t* out) {
  if (params == nullptr || out == nullptr) {
    last_error = "params or out is NULL: pass a filled flashlab_decode_params and an int32";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([&] {
    *out = flashlab::gpu::decode_num_splits(*params, flashlab::gpu::current_sm_count());
  });
}

flashlab_status flashlab_decode_workspace_bytes(const flashlab_decode_params* params,
                                                int64_t* out) {
  if (params == nullptr || out == nullptr) {
    last_error = "params or out is NULL: pass a filled flashlab_decode_params and an int64";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([&] {
    *out = flashlab::gpu::decode_workspace_bytes(*params, flashlab::gpu::current_sm_count());
  });
}

flashlab_status flashlab_decode_check(const flashlab_decode_params* params) {
  if (params == nullptr) {
    last_error = "params is NULL: pass the flashlab_decode_params of the call to check";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  return guarded([params] { flashlab::gpu::check_decode(*params); });
}

const char* flashlab_last_error(void) { return last_error.c_str(); }

const char* flashlab_status_name(flashlab_status status) {
  switch (status) {
    case FLASHLAB_OK: return "FLASHLAB_OK";
    case FLASHLAB_ERROR_NULL_POINTER: return "FLASHLAB_ERROR_NULL_POINTER";
    case FLASHLAB_ERROR_BAD_SHAPE: return "FLASHLAB_ERROR_BAD_SHAPE";
    case FLASHLAB_ERROR_BAD_STRIDE: return "FLASHLAB_ERROR_BAD_STRIDE";
    case FLASHLAB_ERROR_MISALIGNED: return "FLASHLAB_ERROR_MISALIGNED";
    case FLASHLAB_ERROR_UNSUPPORTED: return "FLASHLAB_ERROR_UNSUPPORTED";
    case FLASHLAB_ERROR_BAD_ARGUMENT: return "FLASHLAB_ERROR_BAD_ARGUMENT";
    case FLASHLAB_ERROR_CUDA: return "FLASHLAB_ERROR_CUDA";
    case FLASHLAB_ERROR_CUBLAS: return "FLASHLAB_ERROR_CUBLAS";
    case FLASHLAB_ERROR_INTERNAL: return "FLASHLAB_ERROR_INTERNAL";
  }
  return "unknown status";
}

int flashlab_abi_version(void) { return FLASHLAB_ABI_VERSION; }

}  // extern "C"
