// Dropout on the GPU against the CPU reference's rule: the exported mask bit for bit
// (cpu::DropoutMask), fa2's forward with dropout under the 2x rule against the fp64
// reference with the same mask, p = 0 bitwise the kernel without dropout, and every bad
// dropout argument a status with a message.
#include "checks.hpp"

#include "flashlab/cpu/dropout.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace flashlab::gpu::test {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// A (batch, heads, rows, cols) uint8 mask in device memory, poisoned before each export.
struct DeviceMask {
  flashlab_dropout_mask_params params{};
  size_t bytes = 0;
  DeviceMask(int64_t batch0, int64_t batch, int64_t head0, int64_t heads, int64_t row0,
             int64_t rows, int64_t col0, int64_t cols) {
    bytes = size_t(batch * heads * rows * cols);
    void* ptr = nullptr;
    check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc mask");
    params.mask = static_cast<uint8_t*>(ptr);
    params.batch0 = batch0, params.batch = batch, params.head0 = head0, params.heads = heads;
    params.row0 = row0, params.rows = rows, params.col0 = col0, params.cols = cols;
  }
  ~DeviceMask() { cudaFree(params.mask); }
  DeviceMask(const DeviceMask&) = delete;
  DeviceMask& operator=(const DeviceMask&) = delete;

  std::vector<uint8_t> run() {
    constexpr int kPoison = 0xee;  // neither 0 nor 1: an entry left unwritten shows
    check_cuda(cudaMemset(params.mask, kPoison, bytes), "poison mask");
    const flashlab_status status = flashlab_dropout_mask(&params);
    if (status != FLASHLAB_OK)
      throw std::runtime_error(std::string("flashlab_dropout_mask: ") + flashlab_last_error());
    check_cuda(cudaDeviceSynchronize(), "dropout_mask_kernel");
    std::vector<uint8_t> host(bytes);
    check_cuda(cudaMemcpy(host.data(), params.mask, bytes, cudaMemcpyDeviceToHost), "mask");
    return host;
  }
};

// Entries where the GPU's mask differs from cpu::DropoutMask::keep (an unwritten one too).
int64_t mismatches(DeviceMask& m, double p, uint64_t seed, uint32_t offset) {
  m.params.p = p, m.params.seed = seed, m.params.offset = offset;
  const std::vector<uint8_t> gpu = m.run();
  const flashlab_dropout_mask_params& r = m.params;
  int64_t wrong = 0, at = 0;
  for (int64_t b = 0; b < r.batch; ++b)
    for (int64_t h = 0; h < r.heads; ++h) {
      const cpu::DropoutMask cpu_mask({p, seed, offset}, r.batch0 + b, r.head0 + h);
      for (int64_t row = 0; row < r.rows; ++row)
        for (int64_t col = 0; col < r.cols; ++col, ++at)
          wrong += gpu[at] != uint8_t(cpu_mask.keep(r.row0 + row, r.col0 + col));
    }
  return wrong;
}

TEST_CASE("the GPU's dropout mask is the CPU reference's, bit for bit") {
  std::mt19937_64 rng(fresh_seed());
  struct Region {
    int64_t batch0, batch, head0, heads, row0, rows, col0, cols;
  };
  // Ragged extents and starts (columns not a multiple of 4 on either side), batch and head
  // up to 2^16 - 1, rows and column groups near the top of their 32-bit counter words.
  constexpr int64_t kTopRow = (int64_t{1} << 32) - 3;
  constexpr int64_t kTopColumn = (int64_t{1} << 34) - 7;
  const Region regions[] = {{0, 1, 0, 1, 0, 1, 0, 1},           {0, 2, 0, 3, 0, 17, 0, 97},
                            {65534, 2, 65533, 3, 5, 13, 3, 29}, {7, 1, 65535, 1, 0, 113, 1, 113},
                            {1, 2, 2, 2, kTopRow, 3, 0, 11},    {3, 1, 4, 1, 9, 5, kTopColumn, 7}};
  for (const Region& g : regions) {
    DeviceMask m(g.batch0, g.batch, g.head0, g.heads, g.row0, g.rows, g.col0, g.cols);
    for (double p : {0.1, 0.5, 0.9}) {
      const uint64_t seed = rng();
      const uint32_t offset = uint32_t(rng());
      INFO("region batch0=", g.batch0, " head0=", g.head0, " row0=", g.row0, " col0=", g.col0,
           " rows=", g.rows, " cols=", g.cols, " p=", p, " seed=", seed, " offset=", offset);
      CHECK(mismatches(m, p, seed, offset) == 0);
    }
  }
}

TEST_CASE("the exported mask keeps about 1 - p of the weights, and p = 0 keeps them all") {
  // A mask could match the CPU's and still be wrong if both were, e.g. all ones: the kept
  // fraction over 2^20 weights lies within 5 standard deviations of 1 - p.
  std::mt19937_64 rng(fresh_seed());
  DeviceMask m(0, 1, 0, 4, 0, 512, 0, 512);
  for (double p : {0.0, 0.2, 0.7}) {
    m.params.p = p, m.params.seed = rng(), m.params.offset = uint32_t(rng());
    const std::vector<uint8_t> mask = m.run();
    double kept = 0;
    for (uint8_t x : mask) kept += x;
    const double n = double(mask.size()), sigma = std::sqrt(p * (1 - p) / n);
    INFO("p=", p, " kept fraction=", kept / n);
    if (p == 0)
      CHECK(kept == n);
    else
      CHECK(std::abs(kept / n - (1 - p)) <= 5 * sigma);
  }
}

Case dropout_case(int n_q, int n_k, int d, flashlab_causal causal, double p, std::mt19937_64& rng) {
  Case c;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;  // GQA: the mask follows the query head
  c.n_q = n_q;
  c.n_k = n_k;
  c.d = d;
  c.causal = causal;
  c.dropout_p = p;
  c.dropout_seed = rng();
  c.dropout_offset = uint32_t(rng());
  return c;
}

TEST_CASE("fa2 with dropout matches the fp64 reference with the same mask (2x rule)") {
  std::mt19937_64 rng(fresh_seed());
  constexpr int kPairs[][2] = {{1, 1}, {97, 97}, {1023, 1023}, {113, 203}, {203, 113}, {1, 339}};
  constexpr flashlab_causal kAll[] = {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT,
                                      FLASHLAB_CAUSAL_BOTTOM_RIGHT};
  for (int d : {64, 128})
    for (const auto& pair : kPairs)
      for (flashlab_causal causal : kAll)
        expect_matches_reference(dropout_case(pair[0], pair[1], d, causal, 0.17, rng));
  for (flashlab_dtype dtype : {FLASHLAB_FP16, FLASHLAB_BF16})
    for (double p : {0.5, 0.9}) {
      Case c = dropout_case(97, 1023, 64, FLASHLAB_CAUSAL_NONE, p, rng);
      c.dtype = dtype;
      c.layout = Layout::bshd;
      expect_matches_reference(c);
    }
}

// One run's raw output bits.
RawRun raw(const Case& c, uint64_t seed) { return run_repeated(c, seed, 1).front(); }

bool same_bits(const RawRun& a, const RawRun& b) {
  return a.o == b.o && a.lse.size() == b.lse.size() &&
         std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

TEST_CASE(
    "p = 0 is bitwise the kernel without dropout, and so is the dropout path that drops nothing") {
  std::mt19937_64 rng(fresh_seed());
  for (int d : {64, 128})
    for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT}) {
      const uint64_t seed = fresh_seed();
      Case plain = dropout_case(113, 203, d, causal, 0.0, rng);
      plain.dropout_seed = plain.dropout_offset = 0;
      const RawRun reference = raw(plain, seed);
      // p = 0 with any seed and offset: the seed must not matter.
      Case zero = plain;
      zero.dropout_seed = rng();
      zero.dropout_offset = uint32_t(rng());
      INFO(zero.describe());
      CHECK(same_bits(raw(zero, seed), reference));
      // p = 1e-12 runs the dropout instantiation, yet floor(p 2^32) = 0 keeps every weight and
      // 1/(1 - p) rounds to 1.0f: its arithmetic must leave W exactly as it was.
      Case tiny = zero;
      tiny.dropout_p = 1e-12;
      CHECK(same_bits(raw(tiny, seed), reference));
    }
}

TEST_CASE("with dropout, L is the log-sum-exp of the undropped scores: bitwise L without dropout") {
  std::mt19937_64 rng(fresh_seed());
  const uint64_t seed = fresh_seed();
  Case plain = dropout_case(203, 113, 128, FLASHLAB_CAUSAL_BOTTOM_RIGHT, 0.0, rng);
  Case dropped = plain;
  dropped.dropout_p = 0.4;
  const RawRun a = raw(plain, seed), b = raw(dropped, seed);
  INFO(dropped.describe());
  CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0);
  CHECK(a.o != b.o);  // and the output did change
}

void expect_status(flashlab_status got, flashlab_status want, const std::string& words) {
  const std::string message = flashlab_last_error();
  INFO("message: ", message);
  CHECK(std::string(flashlab_status_name(got)) == flashlab_status_name(want));
  CHECK(message.find(words) != std::string::npos);
}

TEST_CASE(
    "dropout_p below 0, from 1 on, NaN or inf is refused, and so is dropout in the kernels without "
    "it") {
  for (double p : {1.0, -0.25, 1.5, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity()}) {
    ValidCall call(FLASHLAB_KERNEL_FA2);
    call.params.dropout_p = p;
    std::string message;
    expect_status(call.call(&message), FLASHLAB_ERROR_BAD_ARGUMENT, "is outside [0, 1)");
  }
  for (flashlab_kernel kernel : {FLASHLAB_KERNEL_NAIVE, FLASHLAB_KERNEL_SCALAR}) {
    ValidCall call(kernel);
    call.params.dropout_p = 0.1;
    std::string message;
    expect_status(call.call(&message), FLASHLAB_ERROR_UNSUPPORTED,
                  "kernel does not apply dropout; fa2 does");
  }
}

TEST_CASE("a mask export with bad arguments is a status and a message") {
  DeviceMask m(0, 1, 0, 1, 0, 4, 0, 4);
  m.params.p = 0.5;
  CHECK(flashlab_dropout_mask(nullptr) == FLASHLAB_ERROR_NULL_POINTER);
  {
    flashlab_dropout_mask_params p = m.params;
    p.mask = nullptr;
    expect_status(flashlab_dropout_mask(&p), FLASHLAB_ERROR_NULL_POINTER, "mask is NULL");
  }
  {
    flashlab_dropout_mask_params p = m.params;
    p.p = 1.0;
    expect_status(flashlab_dropout_mask(&p), FLASHLAB_ERROR_BAD_ARGUMENT, "p = 1 is outside");
  }
  {
    flashlab_dropout_mask_params p = m.params;
    p.head0 = 65535;
    p.heads = 2;
    expect_status(flashlab_dropout_mask(&p), FLASHLAB_ERROR_BAD_SHAPE, "heads [65535, 65535 + 2)");
  }
  {
    std::vector<uint8_t> host(16);
    flashlab_dropout_mask_params p = m.params;
    p.mask = host.data();
    expect_status(flashlab_dropout_mask(&p), FLASHLAB_ERROR_BAD_ARGUMENT, "is host memory");
  }
}

}  // namespace
}  // namespace flashlab::gpu::test
