// libFuzzer over the CPU API's shape and option checks. Each input is read as a request:
// an entry point, shapes, tile sizes, a scale, a causal value, split counts and HeadTensor
// extents, hostile ones included (negative, 2^31 +- 1, 2^63 - 1, NaN, -0.0, enum values
// cast from bad integers), then values for Q, K, V. The invariants:
//   - a refused request throws cpu::InvalidArgument, and nothing else escapes;
//   - an accepted one returns O of shape (N_q, d) and L of N_q, every O finite, every L
//     finite or -inf exactly where the row saw no key (and then its O row is 0);
//   - the tiled forwards agree with naive attention to rounding (fp64, modest scales).
//
//   build/tests/fuzz/fuzz_cpu_api -max_total_time=30 build/tests/fuzz/corpus_cpu_api tests/fuzz/corpus/cpu_api
#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/naive.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace flashlab::cpu;

namespace {

// Reads the fuzzer's bytes front to back; past the end, every read is 0.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint64_t word() {
    std::uint64_t w = 0;
    for (int k = 0; k < 8; ++k) w = (w << 8) | byte();
    return w;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_, at_ = 0;
};

constexpr Index kMax = std::numeric_limits<Index>::max();
constexpr Index kTwo31 = Index{1} << 31;
constexpr Index kLargestMatrix = 48;  // rows or columns actually allocated: small, fast runs
constexpr double kModestScale = 2;    // at most this, the tiled and naive results must agree
constexpr double kAgreement = 1e-9;   // fp64, |O| <= max|V| <= 4: rounding is ~1e-15

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

// A size: small most of the time, hostile otherwise.
Index size(Bytes& in, Index small_limit) {
  const std::uint8_t kind = in.byte();
  switch (kind % 8) {
    case 0: return -static_cast<Index>(in.byte()) - 1;
    case 1: return kTwo31 + static_cast<Index>(in.byte() % 3) - 1;
    case 2: return kMax - static_cast<Index>(in.byte() % 2);
    case 3: return static_cast<Index>(in.word() & static_cast<std::uint64_t>(kMax));
    default: return static_cast<Index>(in.byte()) % (small_limit + 1);
  }
}

std::optional<double> scale(Bytes& in) {
  switch (in.byte() % 8) {
    case 0: return std::nullopt;
    case 1: return std::nan("");
    case 2: return -0.0;
    case 3: return std::numeric_limits<double>::infinity();
    case 4: return -1.0 * (1 + in.byte());
    case 5: return 1e300;
    default: return (1 + in.byte()) / 128.0;  // (0, 2]
  }
}

Matrix<double> values(Bytes& in, Index rows, Index cols) {
  Matrix<double> X(rows, cols);
  for (Index k = 0; k < X.size(); ++k) X.data()[k] = (static_cast<int>(in.byte()) - 128) / 32.0;
  return X;
}

bool allocatable(Index rows, Index cols) {
  return rows >= 0 && cols >= 0 && rows <= kLargestMatrix && cols <= kLargestMatrix;
}

template <class Result>
void check_result(const Result& r, Index n_q, Index d) {
  if (r.O.rows() != n_q || r.O.cols() != d) fail("O has the wrong shape");
  if (r.L.size() != n_q) fail("L has the wrong length");
  for (Index row = 0; row < n_q; ++row) {
    if (!r.O.row(row).allFinite()) fail("O is not finite");
    if (std::isfinite(r.L[row])) continue;
    if (r.L[row] != -std::numeric_limits<double>::infinity()) fail("L is +inf or NaN");
    if (!r.O.row(row).isZero(0)) fail("a row with L = -inf has a nonzero O");
  }
}

void check_agrees(const Matrix<double>& a, const Matrix<double>& b) {
  if (a.size() > 0 && (a - b).cwiseAbs().maxCoeff() > kAgreement) fail("tiled != naive");
}

void one_head(Bytes& in, std::uint8_t entry) {
  AttentionOptions options;
  const Index n_q = size(in, kLargestMatrix), n_k = size(in, kLargestMatrix);
  const Index d = size(in, 16), d_k = in.byte() % 16 == 0 && d < kMax ? d + 1 : d;
  options.tiles = {size(in, 20), size(in, 20)};
  options.scale = scale(in);
  options.causal = static_cast<Causal>(static_cast<std::int8_t>(in.byte()) % 5);
  if (!allocatable(n_q, d) || !allocatable(n_k, d_k)) return;  // Eigen cannot even hold them
  const Matrix<double> Q = values(in, n_q, d), K = values(in, n_k, d_k), V = values(in, n_k, d);
  const bool modest = !options.scale || *options.scale <= kModestScale;
  try {
    switch (entry % 5) {
      case 0: {
        const auto r = forward_q_outer<double>(Q, K, V, options);
        check_result(r, n_q, d);
        if (modest) check_agrees(r.O, naive_attention<double>(Q, K, V, options).O);
        break;
      }
      case 1: {
        const auto r = forward_kv_outer<double>(Q, K, V, options);
        check_result(r, n_q, d);
        if (modest) check_agrees(r.O, naive_attention<double>(Q, K, V, options).O);
        break;
      }
      case 2: check_result(naive_attention<double>(Q, K, V, options), n_q, d); break;
      case 3: check_result(forward_conditional<double>(Q, K, V, options), n_q, d); break;
      case 4: {
        const DecodeOptions split{size(in, 8), static_cast<MergeOrder>(in.byte() % 4), in.word()};
        check_result(decode<double>(Q, K, V, split, options), n_q, d);
        break;
      }
    }
  } catch (const InvalidArgument&) {
    // refused with a message: what a bad request should get
  }
}

void multi_head(Bytes& in) {
  const Index batch = size(in, 3), heads_q = size(in, 4), heads_kv = size(in, 4);
  const Index n = size(in, 16), d = size(in, 8);
  Index entries = 0;
  const bool representable =
      batch >= 0 && heads_q >= 0 && n >= 0 && d >= 0 &&
      !__builtin_mul_overflow(batch, heads_q, &entries) &&
      !__builtin_mul_overflow(entries, n, &entries) && !__builtin_mul_overflow(entries, d, &entries);
  if (!representable) {  // the constructor must refuse it, never try to allocate
    try {
      HeadTensor<double> refused(batch, heads_q, n, d);
      fail("a HeadTensor with a negative or overflowing extent was built");
    } catch (const InvalidArgument&) {
      return;
    }
  }
  if (batch > 3 || heads_q > 4 || heads_kv > 4 || heads_kv < 0 || n > 16 || d > 8) return;
  HeadTensor<double> Q(batch, heads_q, n, d), K(batch, heads_kv, n, d), V(batch, heads_kv, n, d);
  for (auto* X : {&Q, &K, &V})
    for (auto& x : X->data) x = (static_cast<int>(in.byte()) - 128) / 32.0;
  AttentionOptions options;
  options.tiles = {size(in, 20), size(in, 20)};
  options.causal = static_cast<Causal>(static_cast<std::int8_t>(in.byte()) % 5);
  try {
    const auto r = forward_multihead<double>(Q, K, V, options);
    if (r.O.batch != batch || r.O.heads != heads_q || r.O.rows != n || r.O.cols != d)
      fail("the multi-head O has the wrong shape");
    for (double x : r.O.data)
      if (!std::isfinite(x)) fail("the multi-head O is not finite");
  } catch (const InvalidArgument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size_in_bytes) {
  Bytes in(data, size_in_bytes);
  const std::uint8_t entry = in.byte();
  if (entry % 6 == 5) multi_head(in);
  else one_head(in, entry);
  return 0;
}
