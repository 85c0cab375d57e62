// What every decode test does: fresh random Q and a KV cache with a length per sequence,
// the cache's unused rows poisoned with NaN (a kernel that reads past a length fails),
// contiguous or paged with the pages shuffled in memory; O and LSE poisoned before each run;
// the result measured against the fp64 CPU reference decode beside the error of naive
// attention in the same precision (ANCHORS.md's 2x rule).
#pragma once

#include "flashlab/flashlab.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace flashlab::gpu::test {

struct DecodeCase {
  flashlab_dtype dtype = FLASHLAB_BF16;
  int heads_q = 4, heads_kv = 1, n_q = 1, d = 128;
  std::vector<int> lens = {97};  // one per batch entry; the batch is lens.size()
  int capacity = 0;              // max_seq_len; 0: the largest length rounded up to 256
  int page_size = 0;             // 0: contiguous cache; else paged with shuffled pages
  int num_splits = 0;            // 0: automatic
  int grid = FLASHLAB_DECODE_GRID_AUTO;  // a split grid or the queue's persistent blocks

  std::string describe() const;
};

struct DecodeOutcome {
  double err = 0;               // max |O - O_ref|, O_ref from the fp64 reference decode
  double err_naive = 0;         // the same for naive attention in the case's dtype
  double lse_err = 0;           // max |L - L_ref| over rows with a finite L_ref
  bool lse_inf_matches = true;  // L = -inf exactly where L_ref = -inf
  bool empty_rows_zero = true;  // O = 0 on every row whose L_ref = -inf
  int64_t unwritten = 0;        // elements of O still NaN (poison) after the run
  double bound = 0;             // 2 x err_naive
  int splits = 0;               // the split count the call used
};

// The raw bits of one run, for bitwise comparisons.
struct DecodeBits {
  std::vector<uint16_t> o;
  std::vector<float> lse;
  bool operator==(const DecodeBits& other) const;
};

// One case's inputs on the host and the device; runs and compares as often as asked.
class DecodeRun {
 public:
  DecodeRun(const DecodeCase& c, uint64_t seed);
  ~DecodeRun();
  DecodeRun(const DecodeRun&) = delete;
  DecodeRun& operator=(const DecodeRun&) = delete;

  // Runs flashlab_decode with `num_splits` (0: automatic) and checks the error word.
  DecodeBits run(int num_splits);
  // Runs and compares with the references (computed once per DecodeRun).
  DecodeOutcome run_and_compare(int num_splits);
  flashlab_decode_params& params();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

DecodeOutcome run_decode_case(const DecodeCase& c, uint64_t seed);

}  // namespace flashlab::gpu::test
