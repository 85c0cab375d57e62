// The host half of tma.cuh: builds a CUtensorMap from the ABI's pointer and element strides.
// cuTensorMapEncodeTiled is a driver API function; it is looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so libflashlab.so links nothing beyond libcudart.
#include "tma.cuh"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <string>

namespace flashlab::gpu::hopper {
namespace {

constexpr unsigned kDriverApiVersion = 12000;  // the version of the encoder's signature

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    throw_if_cuda_error(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, kDriverApiVersion,
                                         cudaEnableDefault, &found),
        "looking up cuTensorMapEncodeTiled");
    if (found != cudaDriverEntryPointSuccess || f == nullptr)
      throw Error(FLASHLAB_ERROR_CUDA,
                  "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 or later)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A dimension of extent 1 is never stepped over, so its stride may be anything in the ABI;
// TMA still wants a multiple of 16 bytes, so such a stride is replaced by the tightly packed
// one (the dimension inside it times its stride).
cuuint64_t describable_stride(const char* name, const char* which, int64_t extent,
                              int64_t stride_bytes, int64_t packed_bytes) {
  if (extent <= 1) return cuuint64_t(packed_bytes);
  if (stride_bytes % kTmaStrideAlign != 0 || stride_bytes <= 0 || stride_bytes >= kTmaMaxStride)
    throw Error(FLASHLAB_ERROR_MISALIGNED,
                std::string(name) + "'s " + which + " stride of " + std::to_string(stride_bytes) +
                    " bytes cannot be described to TMA, which the fa3 kernel loads with: it " +
                    "needs a positive multiple of 16 bytes below 2^40; the fa2 kernel takes " +
                    "strides of any multiple of 16 bytes, the naive and scalar kernels any stride");
  return cuuint64_t(stride_bytes);
}

}  // namespace

TensorMap make_tensor_map(const char* name, const void* base, const Strides& strides, int batch,
                          int heads, int rows, int d, flashlab_dtype dtype, int box_rows) {
  const int64_t e = dtype_bytes(dtype);
  constexpr int kRank = 4;
  if (rows > 1 && strides.row == 0)
    throw Error(FLASHLAB_ERROR_UNSUPPORTED,
                std::string(name) + "'s row stride is 0 (every row the same memory), which TMA " +
                    "cannot describe, and the fa3 kernel loads with TMA; the fa2, naive and " +
                    "scalar kernels take it");
  TensorMap out{};
  out.head_step = heads > 1 && strides.head == 0 ? 0 : 1;
  out.batch_step = batch > 1 && strides.batch == 0 ? 0 : 1;
  const int map_heads = out.head_step ? heads : 1, map_batch = out.batch_step ? batch : 1;
  const cuuint64_t dims[kRank] = {cuuint64_t(d), cuuint64_t(rows), cuuint64_t(map_heads),
                                  cuuint64_t(map_batch)};
  const cuuint64_t row = describable_stride(name, "row", rows, strides.row * e, d * e);
  const cuuint64_t head = describable_stride(name, "head", map_heads, strides.head * e, rows * row);
  const cuuint64_t batch_stride =
      describable_stride(name, "batch", map_batch, strides.batch * e, map_heads * head);
  const cuuint64_t byte_strides[kRank - 1] = {row, head, batch_stride};
  const cuuint32_t box[kRank] = {cuuint32_t(kTmaSlab), cuuint32_t(box_rows), 1, 1};
  const cuuint32_t element_strides[kRank] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      dtype == FLASHLAB_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult result =
      encoder()(&out.map, type, kRank, const_cast<void*>(base), dims, byte_strides, box,
                element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    throw Error(FLASHLAB_ERROR_CUDA,
                std::string("cuTensorMapEncodeTiled refused ") + name + " (CUresult " +
                    std::to_string(int(result)) + ") with sizes (d, rows, heads, batch) = (" +
                    std::to_string(d) + ", " + std::to_string(rows) + ", " +
                    std::to_string(map_heads) + ", " + std::to_string(map_batch) +
                    "), byte strides (row, head, batch) = (" + std::to_string(row) + ", " +
                    std::to_string(head) + ", " + std::to_string(batch_stride) + "), box (" +
                    std::to_string(kTmaSlab) + ", " + std::to_string(box_rows) +
                    "): its pointer must be 16-byte aligned, its sizes below 2^32, its box " +
                    "rows at most 256");
  return out;
}

}  // namespace flashlab::gpu::hopper
