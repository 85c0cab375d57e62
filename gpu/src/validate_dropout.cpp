// Checks of dropout's arguments before anything touches the GPU: the probability p, and the
// region of a mask export, which must fit the Philox counter of the CPU reference's rule
// (batch and head 16 bits each, a row 32 bits, a group of four columns 32 bits).
#include "flashlab/cpu/philox_rule.hpp"
#include "flashlab/gpu/dropout.hpp"

#include <cstdint>
#include <sstream>
#include <string>

namespace flashlab::gpu {
namespace {

constexpr int64_t kMaxRow = int64_t{1} << 32;
constexpr int64_t kMaxColumn = kMaxRow * cpu::kColumnsPerPhiloxCall;

// One dimension of the region: [start, start + extent) within [0, limit).
void check_range(const char* name,  // plural: "rows"
                 int64_t start, int64_t extent, int64_t limit, const char* limit_text,
                 const char* why) {
  if (extent < 1 || start < 0 || start > limit || extent > limit - start) {
    std::ostringstream what;
    what << name << " [" << start << ", " << start << " + " << extent
         << ") do not fit the dropout rule: the start must be >= 0, the extent >= 1 and the "
         << "end at most " << limit_text << ", because " << why;
    throw Error(FLASHLAB_ERROR_BAD_SHAPE, what.str());
  }
}

}  // namespace

void check_dropout_p(double p, const char* field) {
  if (p >= 0 && p < 1) return;  // false for NaN too
  std::ostringstream what;
  what << field << " = " << p
       << " is outside [0, 1): p is the chance that a weight is dropped, and p = 1 would "
          "drop every weight and scale the survivors by 1/(1 - p) = 1/0; use p = 0 for no "
          "dropout";
  throw Error(FLASHLAB_ERROR_BAD_ARGUMENT, what.str());
}

void validate_dropout_mask(const flashlab_dropout_mask_params& p) {
  if (p.mask == nullptr)
    throw Error(FLASHLAB_ERROR_NULL_POINTER,
                "mask is NULL: pass device memory of batch * heads * rows * cols bytes");
  if (p.reserved != 0)
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT, "reserved = " + std::to_string(p.reserved) +
                                                 ": it must be 0 (it is kept for a later version)");
  check_dropout_p(p.p, "p");
  check_range("batches", p.batch0, p.batch, cpu::kMaxBatchOrHead, "2^16",
              "batch fills 16 bits of a Philox counter word");
  check_range("heads", p.head0, p.heads, cpu::kMaxBatchOrHead, "2^16",
              "head fills 16 bits of a Philox counter word");
  check_range("rows", p.row0, p.rows, kMaxRow, "2^32", "a row fills a Philox counter word");
  check_range("columns", p.col0, p.cols, kMaxColumn, "2^34",
              "a group of four columns fills a Philox counter word");
  int64_t entries = 0;
  if (__builtin_mul_overflow(p.batch * p.heads, p.rows, &entries) ||
      __builtin_mul_overflow(entries, p.cols, &entries))
    throw Error(FLASHLAB_ERROR_BAD_SHAPE,
                "batch * heads * rows * cols = " + std::to_string(p.batch) + " * " +
                    std::to_string(p.heads) + " * " + std::to_string(p.rows) + " * " +
                    std::to_string(p.cols) +
                    " overflows int64: no mask buffer is that large; ask for a smaller region");
}

}  // namespace flashlab::gpu
