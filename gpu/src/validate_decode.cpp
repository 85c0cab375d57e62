// Checks of a decode call's arguments before anything touches the GPU: pure arithmetic on
// the parameters, no CUDA. The lengths and the block table live on the device and are
// checked by the kernel itself (decode.h says how). Each failure names what was wrong and
// what would be right.
#include "validate_parts.hpp"

#include "flashlab/gpu/decode.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <cmath>
#include <string>

namespace flashlab::gpu {
namespace {

using namespace validation;
using std::to_string;

void check_enums(const flashlab_decode_params& p) {
  if (!is_known_dtype(p.dtype))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "dtype = " + to_string(p.dtype) + " is unknown: use " + text::known_dtypes());
  if (!decode::supports_dtype(p.dtype))
    fail(FLASHLAB_ERROR_UNSUPPORTED, "dtype " + std::string(dtype_name(flashlab_dtype(p.dtype))) +
                                         " is not supported by the decode kernels: they take " +
                                         text::describe(DtypeSet{decode::kDtypeBits}));
  if (!decode::supports_head_dim(p.d))
    fail(FLASHLAB_ERROR_UNSUPPORTED, "d = " + to_string(p.d) +
                                         " is not supported by the decode kernels: they take " +
                                         "d in {" + to_string(decode::kHeadDims[0]) + ", " +
                                         to_string(decode::kHeadDims[1]) + "}");
  if (!decode::is_kv_l2_policy(p.kv_l2_policy))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "kv_l2_policy = " + to_string(p.kv_l2_policy) +
             " is unknown: give FLASHLAB_DECODE_L2_AUTO (" + to_string(FLASHLAB_DECODE_L2_AUTO) +
             "), FLASHLAB_DECODE_L2_EVICT_NORMAL (" + to_string(FLASHLAB_DECODE_L2_EVICT_NORMAL) +
             ") or FLASHLAB_DECODE_L2_EVICT_FIRST (" + to_string(FLASHLAB_DECODE_L2_EVICT_FIRST) +
             ")");
  if (!decode::is_grid(p.grid))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "grid = " + to_string(p.grid) + " is unknown: give FLASHLAB_DECODE_GRID_AUTO (" +
             to_string(FLASHLAB_DECODE_GRID_AUTO) + "), FLASHLAB_DECODE_GRID_SPLITS (" +
             to_string(FLASHLAB_DECODE_GRID_SPLITS) + ") or FLASHLAB_DECODE_GRID_QUEUE (" +
             to_string(FLASHLAB_DECODE_GRID_QUEUE) + ")");
  if (p.scale < 0 || std::isinf(p.scale))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT, "scale = " + general(p.scale) +
                                          " is not allowed: give a finite scale > 0, or 0 "
                                          "(or NaN) for the default 1/sqrt(d)");
  check_scale_fits_fp32(p.scale);
  if (p.num_splits < 0 || p.num_splits > decode::kMaxSplits)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "num_splits = " + to_string(p.num_splits) + " is out of range: give 0 (automatic) or " +
             "a forced count in [1, " + to_string(decode::kMaxSplits) + "]");
}

void check_shapes(const flashlab_decode_params& p) {
  check_size("batch", p.batch, kMaxGridDim);
  check_size("heads_q", p.heads_q, kMaxGridDim);
  check_size("heads_kv", p.heads_kv, kMaxGridDim);
  check_size("n_q", p.n_q, decode::kMaxQueryRows);
  check_size("max_seq_len", p.max_seq_len, kMaxIndex);
  if (p.heads_q % p.heads_kv != 0)
    fail(FLASHLAB_ERROR_BAD_SHAPE,
         "heads_q = " + to_string(p.heads_q) +
             " is not a multiple of heads_kv = " + to_string(p.heads_kv) +
             ": with grouped-query attention every KV head serves the same number of query "
             "heads, so heads_kv must divide heads_q");
  const int64_t blocks_y = p.heads_kv * decode::row_blocks(p.heads_q / p.heads_kv, p.n_q);
  if (blocks_y > kMaxGridDim)
    fail(FLASHLAB_ERROR_BAD_SHAPE, "heads_kv x row blocks = " + to_string(blocks_y) +
                                       " is more than the grid's " + to_string(kMaxGridDim) +
                                       ": use fewer heads or fewer query rows per call");
}

void check_paging(const flashlab_decode_params& p) {
  if (p.block_table == nullptr) {
    if (p.page_size != 0 || p.num_pages != 0)
      fail(FLASHLAB_ERROR_BAD_ARGUMENT,
           "page_size = " + to_string(p.page_size) + " and num_pages = " + to_string(p.num_pages) +
               " without a block_table: a contiguous cache takes 0 for both; a paged one "
               "needs its block_table");
    return;
  }
  if (!decode::is_page_size(p.page_size))
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "page_size = " + to_string(p.page_size) + " is not accepted: it must be a power of " +
             "two in [" + to_string(decode::kMinPageSize) + ", " + to_string(decode::kMaxPageSize) +
             "] (16, 64 and 256 are the usual ones)");
  check_size("num_pages", p.num_pages, kMaxInt);
  if (p.max_seq_len % p.page_size != 0)
    fail(FLASHLAB_ERROR_BAD_SHAPE,
         "max_seq_len = " + to_string(p.max_seq_len) +
             " is not a multiple of page_size = " + to_string(p.page_size) +
             ": with a block table it is the capacity, pages per sequence x page_size");
  const int64_t pages_per_seq = p.max_seq_len / p.page_size;
  if (p.block_table_stride < pages_per_seq)
    fail(FLASHLAB_ERROR_BAD_STRIDE, "block_table_stride = " + to_string(p.block_table_stride) +
                                        " is less than the " + to_string(pages_per_seq) +
                                        " pages per sequence (max_seq_len / page_size): the " +
                                        "table's rows would overlap");
  if (reinterpret_cast<std::uintptr_t>(p.block_table) % alignof(int32_t) != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "block_table is not 4-byte aligned: it is an int32 array");
}

// Q, K and V are read in 16-byte vectors: 16-byte aligned pointers and strides of a
// multiple of 8 elements in every dimension that is used.
void check_alignment(const TensorArg& t) {
  const int64_t elements = decode::kAlignBytes / 2;
  const auto address = reinterpret_cast<std::uintptr_t>(t.ptr);
  if (address % decode::kAlignBytes != 0)
    fail(FLASHLAB_ERROR_MISALIGNED,
         std::string(t.name) + " = " + to_string(address) + " is not " +
             to_string(decode::kAlignBytes) +
             "-byte aligned, which the decode kernels need: they load 16-byte vectors");
  for (int i = 0; i < 3; ++i)
    if (t.extent[i] > 1 && t.stride[i] % elements != 0)
      fail(FLASHLAB_ERROR_MISALIGNED,
           std::string(t.name) + "'s " + kDimNames[i] + " stride " + to_string(t.stride[i]) +
               " is not a multiple of " + to_string(elements) +
               " elements: the decode kernels need every row to start 16-byte aligned");
}

}  // namespace

int decode_num_splits(const flashlab_decode_params& p, int64_t sm_count) {
  check_enums(p);
  check_shapes(p);
  if (p.num_splits > 0) return p.num_splits;
  if (decode::uses_queue(p.grid)) return decode::auto_pieces(p.max_seq_len);
  return decode::auto_splits(p.batch, p.heads_kv, p.heads_q / p.heads_kv, p.n_q, p.max_seq_len,
                             /*paged=*/p.block_table != nullptr, sm_count);
}

int64_t decode_workspace_bytes(const flashlab_decode_params& p, int64_t sm_count) {
  const int splits = decode_num_splits(p, sm_count);
  // Each factor is bounded by check_shapes; the product still goes through checked_mul.
  const int64_t rows = checked_mul(checked_mul(p.batch, p.heads_q, "batch * heads_q"), p.n_q,
                                   "batch * heads_q * n_q");
  const int64_t floats = checked_mul(checked_mul(rows, splits, "rows * splits"),
                                     decode::state_floats(p.d), "states * state_floats(d)");
  return checked_add(decode::kWorkspaceHeaderBytes, checked_mul(floats, 4, "state bytes"),
                     "workspace bytes");
}

void validate_decode(const flashlab_decode_params& p, int64_t sm_count) {
  check_enums(p);
  check_shapes(p);
  check_paging(p);
  const bool paged = p.block_table != nullptr;
  const int64_t cache_dim0 = paged ? p.num_pages : p.batch;
  const int64_t cache_rows = paged ? p.page_size : p.max_seq_len;
  const TensorArg tensors[] = {
      {"Q", p.q, p.q_stride, {p.batch, p.heads_q, p.n_q, p.d}},
      {"K cache", p.k_cache, p.k_stride, {cache_dim0, p.heads_kv, cache_rows, p.d}},
      {"V cache", p.v_cache, p.v_stride, {cache_dim0, p.heads_kv, cache_rows, p.d}},
      {"O", p.o, p.o_stride, {p.batch, p.heads_q, p.n_q, p.d}}};
  for (const TensorArg& t : tensors) check_tensor(t, p.d);
  if (p.seq_lens == nullptr)
    fail(FLASHLAB_ERROR_NULL_POINTER,
         "seq_lens is NULL: pass the device pointer of the (batch) int32 lengths");
  if (reinterpret_cast<std::uintptr_t>(p.seq_lens) % alignof(int32_t) != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "seq_lens is not 4-byte aligned: it is an int32 array");
  if (p.workspace == nullptr)
    fail(FLASHLAB_ERROR_NULL_POINTER,
         "workspace is NULL: pass device memory of flashlab_decode_workspace_bytes() bytes");
  Span spans[4];
  for (int i = 0; i < 4; ++i) spans[i] = check_span(tensors[i], 2);
  check_output_disjoint(tensors[3]);
  for (int i = 0; i < 3; ++i) check_alignment(tensors[i]);
  if (reinterpret_cast<std::uintptr_t>(p.o) % 2 != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "O is not 2-byte aligned: an element is 2 bytes");

  const int64_t needed = decode_workspace_bytes(p, sm_count);
  if (p.workspace_bytes < needed)
    fail(FLASHLAB_ERROR_BAD_ARGUMENT,
         "workspace_bytes = " + to_string(p.workspace_bytes) + " is too small: this call (" +
             to_string(decode_num_splits(p, sm_count)) + " splits) needs " + to_string(needed) +
             " bytes (flashlab_decode_workspace_bytes)");
  if (reinterpret_cast<std::uintptr_t>(p.workspace) % 16 != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "workspace is not 16-byte aligned: cudaMalloc's is");
  const int64_t one[4] = {1, 1, 1, 1};
  const TensorArg workspace{"workspace", p.workspace, one, {needed, 1, 1, 1}};
  const Span work = check_span(workspace, 1);

  // Outputs: O, LSE, the workspace. None may share a byte with an input or with another.
  const int64_t seq_stride[4] = {1, 1, 1, 1};
  const TensorArg lens{"seq_lens", p.seq_lens, seq_stride, {p.batch, 1, 1, 1}};
  const Span lens_span = check_span(lens, sizeof(int32_t));
  for (int i = 0; i < 3; ++i) {
    check_no_overlap("O", spans[3], tensors[i].name, spans[i]);
    check_no_overlap("workspace", work, tensors[i].name, spans[i]);
  }
  check_no_overlap("O", spans[3], "seq_lens", lens_span);
  check_no_overlap("workspace", work, "seq_lens", lens_span);
  check_no_overlap("workspace", work, "O", spans[3]);
  if (paged) {
    const int64_t table_stride[4] = {p.block_table_stride, 1, 1, 1};
    const TensorArg table{
        "block_table", p.block_table, table_stride, {p.batch, p.max_seq_len / p.page_size, 1, 1}};
    const Span table_span = check_span(table, sizeof(int32_t));
    check_no_overlap("O", spans[3], "block_table", table_span);
    check_no_overlap("workspace", work, "block_table", table_span);
  }
  if (p.lse == nullptr) return;
  if (reinterpret_cast<std::uintptr_t>(p.lse) % alignof(float) != 0)
    fail(FLASHLAB_ERROR_MISALIGNED, "LSE is not 4-byte aligned: it is an fp32 array");
  const int64_t lse_stride[4] = {p.heads_q * p.n_q, p.n_q, 1, 1};
  const TensorArg lse{"LSE", p.lse, lse_stride, {p.batch, p.heads_q, p.n_q, 1}};
  const Span lse_span = check_span(lse, sizeof(float));
  check_no_overlap("O", spans[3], "LSE", lse_span);
  check_no_overlap("workspace", work, "LSE", lse_span);
  for (int i = 0; i < 3; ++i) check_no_overlap("LSE", lse_span, tensors[i].name, spans[i]);
}

}  // namespace flashlab::gpu
