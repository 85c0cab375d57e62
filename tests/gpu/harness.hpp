// What every GPU test does: draw fresh random Q, K, V, run one kernel through the C ABI on
// device buffers poisoned with NaN, and measure its error against the fp64 CPU reference
// beside the error of naive attention computed in the same precision (ANCHORS.md's rule).
// With dropout, both references apply the CPU reference's mask for the same (p, seed, offset).
#pragma once

#include "flashlab/fa3.h"
#include "flashlab/flashlab.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashlab::gpu::test {

// How Q, K, V and O are laid out in device memory.
//   bhsd:        (batch, heads, N, d) contiguous, torch SDPA's default
//   bshd:        (batch, N, heads, d) contiguous, flash-attn's layout
//   bhsd_padded: BHSD with each row padded to d + kRowPad elements; the padding must stay
//                untouched (still NaN) after the kernel ran
enum class Layout { bhsd, bshd, bhsd_padded };

struct Case {
  flashlab_kernel kernel = FLASHLAB_KERNEL_FA2;
  flashlab_dtype dtype = FLASHLAB_BF16;
  int batch = 1, heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1, d = 64;
  flashlab_causal causal = FLASHLAB_CAUSAL_NONE;
  Layout layout = Layout::bhsd;
  double scale = 0;  // 0: the default 1/sqrt(d)
  // Dropout (fa2): both references draw the same mask, cpu::DropoutMask(b, query head h).
  double dropout_p = 0;
  uint64_t dropout_seed = 0;
  uint32_t dropout_offset = 0;
  // fa3 only: run through flashlab_forward_fa3 with these switches (unset: flashlab_forward,
  // which uses the defaults).
  std::optional<flashlab_fa3_options> fa3;

  std::string describe() const;
};

struct Outcome {
  double err = 0;               // max |O - O_ref| over every element, O_ref in fp64
  double err_naive = 0;         // the same for CPU naive attention in the case's dtype
  double lse_err = 0;           // max |L - L_ref| over the rows with a finite L_ref
  bool lse_inf_matches = true;  // rows with L_ref = -inf have L = -inf, and only those
  int64_t unwritten = 0;        // elements of O still NaN (poison) after the run
  int64_t padding_written = 0;  // padding elements that are no longer NaN
  double bound = 0;             // the error allowed: see error_bound()
};

// Runs the case once on fresh random inputs drawn from `seed`.
Outcome run_case(const Case& c, uint64_t seed);

// Runs fa3 on the case once for each of `each`'s options (c.fa3 ignored), all on the same
// fresh inputs drawn from `seed`, the references computed once: what a test of switches that
// change how the work is scheduled, never the result, needs.
std::vector<Outcome> run_case_each(const Case& c, uint64_t seed,
                                   const std::vector<flashlab_fa3_options>& each);

// The raw output bits of two runs of one case on the same inputs (for determinism).
struct RawRun {
  std::vector<uint8_t> o;
  std::vector<float> lse;
};
std::vector<RawRun> run_repeated(const Case& c, uint64_t seed, int runs);

// fa3 under the conditional rule (c.fa3 with conditional_rescale = 1), counting on the
// device: the counts (flashlab_rescale_count order) beside those of the CPU reference's
// forward_conditional on the same inputs, with the kernel's tiles (fa3::br(d), fa3::kBc) and
// FlashAttention-4's tau, summed over every (batch, head); and the run's Outcome.
struct RescaleCounts {
  int64_t gpu[FLASHLAB_RESCALE_COUNTS] = {};
  int64_t cpu[FLASHLAB_RESCALE_COUNTS] = {};
  Outcome outcome;
};
RescaleCounts run_rescale_counts(const Case& c, uint64_t seed);

// Calls flashlab_forward on a problem whose buffers are valid device memory, after `edit`
// has changed its parameters; returns the status (and the message in *message).
struct ValidCall {
  flashlab_forward_params params{};
  std::vector<void*> owned;  // device buffers, freed by the destructor
  explicit ValidCall(flashlab_kernel kernel, flashlab_dtype dtype = FLASHLAB_BF16, int d = 64);
  ~ValidCall();
  ValidCall(const ValidCall&) = delete;
  ValidCall& operator=(const ValidCall&) = delete;
  flashlab_status call(std::string* message) const;
};

}  // namespace flashlab::gpu::test
