// flashlab.h's C ABI over the C++ host API: every exception becomes a status, and its
// message is kept per thread for flashlab_last_error().
#include "flashlab/flashlab.h"
#include "flashlab/gpu/forward.hpp"

#include <exception>
#include <string>

namespace {
thread_local std::string last_error;
}  // namespace

extern "C" {

flashlab_status flashlab_forward(const flashlab_forward_params* params) {
  if (params == nullptr) {
    last_error = "params is NULL: pass a filled flashlab_forward_params";
    return FLASHLAB_ERROR_NULL_POINTER;
  }
  try {
    flashlab::gpu::forward(*params);
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
