// Split-KV decode: every split count and every merge tree gives naive attention's result;
// empty and wholly masked segments are the merge identity; a batch whose KV-cache entries
// have different lengths; GQA and MQA head sharing; and the errors for bad splits/lengths.
#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
// fp64 holds 16 digits; splitting and merging reorders sums of at most ~1000 terms of size
// ~1, which costs a few digits at most.
constexpr double kFp64Tolerance = 1e-12;
constexpr MergeOrder kOrders[] = {MergeOrder::left_to_right, MergeOrder::balanced_tree,
                                  MergeOrder::random_tree};

// O equal within tol; L equal within tol where finite, and -inf exactly where the
// reference has no valid key.
void check_result(const Matrix<double>& O, const Vector<double>& L, const NaiveResult<double>& ref,
                  double tol) {
  REQUIRE(O.rows() == ref.O.rows());
  CHECK((O - ref.O).cwiseAbs().maxCoeff() <= tol);
  for (Index r = 0; r < L.size(); ++r) {
    if (std::isinf(ref.L[r])) CHECK(L[r] == ref.L[r]);
    else CHECK(std::abs(L[r] - ref.L[r]) <= tol);
  }
}

template <class T>
HeadTensor<T> random_heads(Index batch, Index heads, Index rows, Index cols, std::mt19937_64& rng) {
  HeadTensor<T> X(batch, heads, rows, cols);
  std::normal_distribution<double> normal;
  for (T& x : X.data) x = static_cast<T>(normal(rng));
  return X;
}
}  // namespace

TEST_CASE("segments cover the KV exactly once, the last ones possibly empty") {
  for (Index n_k : {1, 5, 97, 1023})
    for (Index n_splits = 1; n_splits <= std::min<Index>(n_k, 64); ++n_splits) {
      Index next = 0;
      for (Index s = 0; s < n_splits; ++s) {
        const Segment seg = kv_segment(s, n_splits, n_k);
        CHECK(seg.k0 == next);  // contiguous, in order
        CHECK(seg.keys >= 0);
        next += seg.keys;
      }
      CHECK(next == n_k);
    }
  CHECK(kv_segment(3, 4, 5).keys == 0);  // 5 keys in 4 segments of ceil(5/4) = 2: 2, 2, 1, 0
}

TEST_CASE("any split count 1..64 and any merge order gives naive attention (fp64)") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (Index n_k : {1, 97, 1023}) {
    const Index d = 59;
    const Matrix<double> Q = random_matrix<double>(1, d, rng), K = random_matrix<double>(n_k, d, rng),
                         V = random_matrix<double>(n_k, d, rng);
    AttentionOptions options;
    options.tiles.Bc = 16;  // each segment is swept in tiles of 16 keys
    const auto ref = naive_attention(Q, K, V, options);
    for (Index n_splits = 1; n_splits <= std::min<Index>(n_k, 64); ++n_splits)
      for (MergeOrder order : kOrders) {
        CAPTURE(n_k);
        CAPTURE(n_splits);
        CAPTURE(int(order));
        const auto r = decode(Q, K, V, {n_splits, order, rng()}, options);
        check_result(r.O, r.L, ref, kFp64Tolerance);
      }
  }
}

TEST_CASE("fp32 decode: split counts and merge orders differ only by rounding") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index n_k = 1023, d = 64;
  const Matrix<float> Q = random_matrix<float>(1, d, rng), K = random_matrix<float>(n_k, d, rng),
                      V = random_matrix<float>(n_k, d, rng);
  const auto ref = naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>());
  const double naive_error =
      (naive_attention(Q, K, V).O.cast<double>() - ref.O).cwiseAbs().maxCoeff();
  // ANCHORS.md's rule against fp32 naive attention, with a floor of a few fp32 ulps of the
  // output's scale (max|V| ~ 4) for when the naive result lands almost on the fp64 one.
  const double floor = 4 * std::numeric_limits<float>::epsilon() * 4.0;
  for (Index n_splits : {1, 2, 3, 7, 16, 33, 64})
    for (MergeOrder order : kOrders) {
      CAPTURE(n_splits);
      CAPTURE(int(order));
      const auto r = decode(Q, K, V, {n_splits, order, rng()});
      CHECK((r.O.cast<double>() - ref.O).cwiseAbs().maxCoeff() <= 2 * naive_error + floor);
    }
}

TEST_CASE("empty and wholly masked segments are the merge identity") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index d = 59;

  SUBCASE("97 keys in 64 segments of 2: the last segments hold no key") {
    const Matrix<double> Q = random_matrix<double>(1, d, rng), K = random_matrix<double>(97, d, rng),
                         V = random_matrix<double>(97, d, rng);
    for (MergeOrder order : kOrders) {
      const auto r = decode(Q, K, V, {64, order, rng()});
      CHECK(r.empty_segments > 0);
      check_result(r.O, r.L, naive_attention(Q, K, V), kFp64Tolerance);
    }
  }
  SUBCASE("top-left causal with 3 query rows: every segment past key 2 is wholly masked") {
    AttentionOptions options;
    options.causal = Causal::top_left;
    const Matrix<double> Q = random_matrix<double>(3, d, rng), K = random_matrix<double>(97, d, rng),
                         V = random_matrix<double>(97, d, rng);
    for (MergeOrder order : kOrders) {
      const auto r = decode(Q, K, V, {16, order, rng()}, options);
      CHECK(r.empty_segments == 15);  // segments of 7 keys: only the first reaches keys 0..2
      check_result(r.O, r.L, naive_attention(Q, K, V, options), kFp64Tolerance);
    }
  }
  SUBCASE("bottom-right causal with 4 query rows: the last segment is masked for 3 of them") {
    AttentionOptions options;
    options.causal = Causal::bottom_right;
    options.tiles.Bc = 1;
    const Matrix<double> Q = random_matrix<double>(4, d, rng), K = random_matrix<double>(97, d, rng),
                         V = random_matrix<double>(97, d, rng);
    for (MergeOrder order : kOrders) {
      const auto r = decode(Q, K, V, {97, order, rng()}, options);
      check_result(r.O, r.L, naive_attention(Q, K, V, options), kFp64Tolerance);
    }
  }
  SUBCASE("merging empty states anywhere changes nothing") {
    const Matrix<double> S = random_matrix<double>(5, 12, rng), V = random_matrix<double>(12, d, rng);
    const auto a = tile_state<double, double>(S.leftCols(6), V.topRows(6));
    const auto b = tile_state<double, double>(S.rightCols(6), V.bottomRows(6));
    const auto e = SoftmaxState<double>::empty(5, d);
    const auto expected = finalize(merge(a, b)).O;
    for (MergeOrder order : kOrders) {
      const auto merged = merge_states<double>({e, a, e, e, b, e}, order, rng());
      CHECK((finalize(merged).O - expected).cwiseAbs().maxCoeff() <= kFp64Tolerance);
    }
  }
}

TEST_CASE("a batch whose KV-cache entries have different lengths") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index B = 5, H = 2, n_cache = 300, d = 59, n_q = 2;
  const std::vector<Index> lengths = {300, 97, 2, 1, 0};
  const auto Q = random_heads<double>(B, H, n_q, d, rng);
  const auto K = random_heads<double>(B, H, n_cache, d, rng);
  const auto V = random_heads<double>(B, H, n_cache, d, rng);
  AttentionOptions options;
  options.causal = Causal::bottom_right;  // two new tokens at the end of each entry
  for (MergeOrder order : kOrders) {
    const auto r = decode_multihead(Q, K, V, {8, order, rng()}, options, lengths);
    CHECK(r.empty_segments > 0);  // entries shorter than 8 keys leave segments empty
    for (Index b = 0; b < B; ++b)
      for (Index h = 0; h < H; ++h) {
        CAPTURE(b);
        CAPTURE(h);
        const Index n_k = lengths[static_cast<size_t>(b)];
        const Matrix<double> O = r.O.head(b, h), L = r.L.head(b, h);
        if (n_k == 0) {  // no key at all: flashlab's convention, O = 0 and L = -inf
          CHECK(O.isZero(0));
          CHECK((L.array() == -std::numeric_limits<double>::infinity()).all());
          continue;
        }
        const auto ref = naive_attention<double>(Q.head(b, h), K.head(b, h).topRows(n_k),
                                                 V.head(b, h).topRows(n_k), options);
        check_result(O, L.col(0), ref, kFp64Tolerance);
      }
  }
}

TEST_CASE("GQA and MQA: query heads share KV heads") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index B = 2, Hq = 8, n_cache = 339, d = 64;
  for (Index Hkv : {8, 2, 1}) {
    CAPTURE(Hkv);
    const auto Q = random_heads<double>(B, Hq, 1, d, rng);
    const auto K = random_heads<double>(B, Hkv, n_cache, d, rng);
    const auto V = random_heads<double>(B, Hkv, n_cache, d, rng);
    const auto r = decode_multihead(Q, K, V, {13, MergeOrder::balanced_tree});
    for (Index b = 0; b < B; ++b)
      for (Index h = 0; h < Hq; ++h) {
        const Index h_kv = h / (Hq / Hkv);  // consecutive query heads share a KV head
        const auto ref = naive_attention<double>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv));
        const Matrix<double> L = r.L.head(b, h);
        check_result(r.O.head(b, h), L.col(0), ref, kFp64Tolerance);
      }
  }
}

TEST_CASE("bf16 decode keeps the low-precision rule") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Matrix<bf16> Q = random_matrix<bf16>(1, 128, rng), K = random_matrix<bf16>(4096, 128, rng),
                     V = random_matrix<bf16>(4096, 128, rng);
  const Matrix<double> O_ref =
      naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>()).O;
  const double naive_error =
      (naive_attention(Q, K, V).O.cast<double>() - O_ref).cwiseAbs().maxCoeff();
  for (Index n_splits : {1, 16, 64}) {
    const auto r = decode(Q, K, V, {n_splits});
    const double error = (r.O.cast<bf16>().cast<double>() - O_ref).cwiseAbs().maxCoeff();
    CAPTURE(n_splits);
    CAPTURE(error);
    CAPTURE(naive_error);
    CHECK(error <= 2 * naive_error);  // ANCHORS.md's rule
  }
}

TEST_CASE("bad decode inputs are refused with a clear error") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> Q = random_matrix<double>(1, 8, rng), K = random_matrix<double>(10, 8, rng),
                       V = random_matrix<double>(10, 8, rng);
  CHECK_THROWS_WITH_AS(decode(Q, K, V, {0}),
                       doctest::Contains("n_splits must be between 1 and N_k"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(decode(Q, K, V, {11}),
                       doctest::Contains("n_splits = 11 for a KV of N_k = 10"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(decode<double>(Q, K.topRows(0), V.topRows(0), {1}),
                       doctest::Contains("cannot be split"), InvalidArgument);
  CHECK_THROWS_AS(decode<double>(Q, K, V.leftCols(7), {2}), InvalidArgument);  // shapes, as everywhere
  CHECK_THROWS_AS(merge_states<double>({}, MergeOrder::balanced_tree), InvalidArgument);

  const auto Qh = random_heads<double>(2, 4, 1, 8, rng), Kh = random_heads<double>(2, 2, 10, 8, rng),
             Vh = random_heads<double>(2, 2, 10, 8, rng);
  using Lengths = std::vector<Index>;
  CHECK_THROWS_WITH_AS(decode_multihead(Qh, Kh, Vh, {2}, {}, Lengths{10, 11}),
                       doctest::Contains("kv_lengths[1] = 11 does not fit a KV cache of 10 rows"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(decode_multihead(Qh, Kh, Vh, {2}, {}, Lengths{-1, 3}),
                       doctest::Contains("kv_lengths[0] = -1"), InvalidArgument);
  CHECK_THROWS_WITH_AS(decode_multihead(Qh, Kh, Vh, {2}, {}, Lengths{3}),
                       doctest::Contains("one KV length per batch entry"), InvalidArgument);
  CHECK_THROWS_WITH_AS(decode_multihead(Qh, Kh, Vh, {11}), doctest::Contains("n_splits = 11"),
                       InvalidArgument);
  const auto K3 = random_heads<double>(2, 3, 10, 8, rng), V3 = random_heads<double>(2, 3, 10, 8, rng);
  CHECK_THROWS_WITH_AS(decode_multihead(Qh, K3, V3, {2}), doctest::Contains("cannot share 3 KV heads"),
                       InvalidArgument);
}
