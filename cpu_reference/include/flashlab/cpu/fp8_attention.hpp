// FlashAttention-3's FP8 forward, emulated on the CPU: what its numbers are, not how fast.
// Three pieces, each a function:
//  - quantise_e4m3: one scale per block of rows, so that the block's largest magnitude maps
//    to e4m3's 448; the block is the tile a kernel loads (Br rows of Q, Bc rows of K or V).
//    One block over the whole matrix is per-tensor scaling, the baseline.
//  - random_hadamard: M = diag(s) H / sqrt(d), H the Sylvester-Hadamard matrix, s random
//    signs. M is orthogonal, so (Q M)(K M)^T = Q K^T exactly, while a channel with large
//    values (an outlier feature) is spread evenly over all d channels: "incoherent
//    processing", which makes the values that e4m3 has to hold less spread out.
//  - fp8_attention: S = (Q8 K8^T) sQ sK * scale in fp32, P's unnormalised weights
//    W = exp(S - m) rounded to e4m3 for the second product (0 < W <= 1 needs no scale),
//    l = rowsum(W) in fp32, O = (W8 V8) sV / l in fp32: e4m3 operands, fp32 accumulation,
//    as on the tensor cores. Not causal; one (Q, K, V) head.
#pragma once

#include "flashlab/cpu/options.hpp"
#include "flashlab/cpu/types.hpp"

#include <cstdint>
#include <vector>

namespace flashlab::cpu {

// A matrix stored as e4m3 codes' values and one fp32 scale per block of rows:
// X ~ scales[r / block_rows] * values.row(r).
struct E4m3Blocks {
  Matrix<float> values;       // (rows, cols), every entry on the e4m3 grid
  std::vector<float> scales;  // one per block: amax / 448 (1 for a block of zeros)
  Index block_rows = 0;

  Matrix<float> dequantised() const;  // (rows, cols) values * their block's scale
};

// Throws InvalidArgument for block_rows < 1 or a non-finite entry of X.
E4m3Blocks quantise_e4m3(const Matrix<float>& X, Index block_rows);

// (d, d) diag(s) H_d / sqrt(d) with s in {-1, +1} drawn from seed. Throws InvalidArgument
// unless d is a power of two (the Sylvester construction doubles H: [[H, H], [H, -H]]).
Matrix<double> random_hadamard(Index d, std::uint64_t seed);

enum class Fp8Scaling { per_tensor, per_block };

struct Fp8Options {
  Fp8Scaling scaling = Fp8Scaling::per_block;
  TileSizes tiles{128, 128};  // the scale blocks under per_block: Br rows of Q, Bc of K, V
  bool incoherent = false;    // rotate Q and K by random_hadamard(d, seed) first
  std::uint64_t hadamard_seed = 0;
};

// O (N_q, d) of the emulated FP8 forward described above, non-causal. Throws
// InvalidArgument for bad shapes (check_shapes), for incoherent processing with d not a
// power of two, and as quantise_e4m3 does.
Matrix<float> fp8_attention(const Matrix<float>& Q, const Matrix<float>& K, const Matrix<float>& V,
                            const Fp8Options& fp8, const AttentionOptions& options = {});

}  // namespace flashlab::cpu
