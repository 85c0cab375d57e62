// FlashAttention-4's conditional rescaling: the same output as the standard algorithm,
// most rescales skipped on ordinary inputs, tau = 0 exactly the standard algorithm, and
// the invariant l = l(r), U = U(r) that a careless change of base breaks.
#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
// ANCHORS.md's rule, applied to fp32 against fp32: the conditional variant may be at most
// twice as far from the fp64 result as the standard algorithm on the same inputs. The
// floor of a few fp32 ulps of the output's scale (max|V|) covers the case where the
// standard algorithm happens to land almost exactly on the fp64 value.
constexpr double kRule = 2.0;
constexpr double kUlpFloor = 4.0;
constexpr double kEps32 = std::numeric_limits<float>::epsilon();

double max_abs(const Matrix<double>& X) { return X.size() ? X.cwiseAbs().maxCoeff() : 0.0; }

// Largest |a - b| over entries, where two -inf (a row with no valid key) count as equal.
double max_diff(const Vector<double>& a, const Vector<double>& b) {
  double worst = 0;
  for (Index i = 0; i < a.size(); ++i)
    if (!(std::isinf(a[i]) && a[i] == b[i])) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

double finite_max_abs(const Vector<double>& x) {
  double worst = 0;
  for (double v : x) if (std::isfinite(v)) worst = std::max(worst, std::abs(v));
  return worst;
}

struct Inputs {
  Matrix<float> Q, K, V;
};

// Checks conditional rescaling (tau = 8) against the standard forward by the rule above,
// for O and L, and returns the conditional result for further checks.
ConditionalResult<float> check_like_standard(const Inputs& in, const AttentionOptions& options) {
  const auto reference = naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                                 in.V.cast<double>(), options);
  const auto standard = forward_q_outer(in.Q, in.K, in.V, options);
  const auto conditional = forward_conditional(in.Q, in.K, in.V, options);
  const double floor_O = kUlpFloor * kEps32 * std::max(max_abs(in.V.cast<double>()), 1.0);
  const double floor_L = kUlpFloor * kEps32 * std::max(finite_max_abs(reference.L), 1.0);
  const double err_std = max_abs(standard.O.cast<double>() - reference.O);
  const double err_cond = max_abs(conditional.O.cast<double>() - reference.O);
  const double err_std_L = max_diff(standard.L.cast<double>(), reference.L);
  const double err_cond_L = max_diff(conditional.L.cast<double>(), reference.L);
  CAPTURE(err_std);
  CAPTURE(err_cond);
  CAPTURE(err_std_L);
  CAPTURE(err_cond_L);
  CHECK(err_cond <= kRule * err_std + floor_O);
  CHECK(err_cond_L <= kRule * err_std_L + floor_L);
  CHECK(conditional.tiles.computed == standard.tiles.computed);
  CHECK(conditional.tiles.skipped == standard.tiles.skipped);
  return conditional;
}

// Scores S[r, j] = slope * j + (ordinary N(0, 1) noise), with the softmax scale 1: the
// first column of Q is 1 and the first column of K carries the ramp.
Inputs rising_scores(Index n_q, Index n_k, Index d, double slope, std::mt19937_64& rng) {
  Inputs in{random_matrix<float>(n_q, d, rng, 1.0 / std::sqrt(double(d))),
            random_matrix<float>(n_k, d, rng), random_matrix<float>(n_k, d, rng)};
  in.Q.col(0).setOnes();
  for (Index j = 0; j < n_k; ++j) in.K(j, 0) = static_cast<float>(slope * double(j));
  return in;
}

AttentionOptions unit_scale(Index Br, Index Bc, Causal causal = Causal::none) {
  AttentionOptions options;
  options.scale = 1.0;
  options.tiles = {Br, Bc};
  options.causal = causal;
  return options;
}
}  // namespace

TEST_CASE("conditional rescaling matches the standard algorithm on random inputs") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index shapes[][3] = {{1, 1, 59}, {97, 97, 59}, {1023, 1023, 64}, {113, 203, 59},
                             {203, 113, 111}, {1, 339, 64}};
  for (const auto& s : shapes)
    for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right}) {
      CAPTURE(s[0]);
      CAPTURE(s[1]);
      CAPTURE(to_string(causal));
      const Inputs in{random_matrix<float>(s[0], s[2], rng), random_matrix<float>(s[1], s[2], rng),
                      random_matrix<float>(s[1], s[2], rng)};
      AttentionOptions options;
      options.causal = causal;
      options.tiles = {64, 48};
      check_like_standard(in, options);
    }
}

TEST_CASE("conditional rescaling matches the standard algorithm on adversarial scores") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);

  SUBCASE("a steadily rising max: some rescales done, some skipped") {
    // 0.05 per key is 0.8 per tile of 16: the max passes r + 8 ln 2 about every 7 tiles.
    // (Bottom-right: every query row sees most of the ramp; top-left rows would see < 5.)
    for (Causal causal : {Causal::none, Causal::bottom_right}) {
      const auto r = check_like_standard(rising_scores(97, 1023, 59, 0.05, rng),
                                         unit_scale(32, 16, causal));
      CHECK(r.rescales.rescaled > 0);
      CHECK(r.rescales.skipped > 0);
    }
  }
  SUBCASE("one huge score in the last key") {
    Inputs in = rising_scores(97, 1023, 59, 0.0, rng);
    in.K(1022, 0) = 1000.0f;  // S[r, 1022] = 1000 + noise: every earlier weight becomes 0
    const auto r = check_like_standard(in, unit_scale(32, 64));
    CHECK(r.rescales.rescaled == 97);  // each row rescales once, at the last tile
  }
  SUBCASE("scores near 1e4: a large common offset") {
    Inputs in = rising_scores(97, 1023, 59, 0.0, rng);
    in.K.col(0).setConstant(1e4f);
    check_like_standard(in, unit_scale(32, 64));
  }
  SUBCASE("scores spread over +-1e4: each row is nearly one-hot") {
    const Inputs in{random_matrix<float>(97, 59, rng, 1e4), random_matrix<float>(1023, 59, rng),
                    random_matrix<float>(1023, 59, rng)};
    AttentionOptions options;
    options.tiles = {32, 64};  // scale 1/sqrt(d): scores of standard deviation 1e4
    check_like_standard(in, options);
  }
}

TEST_CASE("skipped rescales: counted exactly, and most of them on N(0, 1) scores") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index n = 1023, d = 64, Bc = 64, Tc = (n + Bc - 1) / Bc;
  const Matrix<double> Q = random_matrix<double>(n, d, rng), K = random_matrix<double>(n, d, rng),
                       V = random_matrix<double>(n, d, rng);
  AttentionOptions options;
  options.tiles = {64, Bc};
  const auto r = forward_conditional(Q, K, V, options);

  // The standard algorithm rescales a row at a tile when the tile's max beats every earlier
  // score of the row: count that from the full score matrix of naive attention. (fp64: a
  // tie closer than rounding between two maxima is practically impossible.)
  const Matrix<double> S = naive_attention(Q, K, V, options).S;  // (N, N)
  Index standard = 0;
  for (Index i = 0; i < n; ++i) {
    double running = S.row(i).head(Bc).maxCoeff();
    for (Index j = 1; j < Tc; ++j) {
      const double tile_max = S.row(i).segment(j * Bc, std::min(Bc, n - j * Bc)).maxCoeff();
      if (tile_max > running) ++standard;
      running = std::max(running, tile_max);
    }
  }
  CHECK(r.rescales.standard_rescales() == standard);
  CHECK(r.rescales.first == n);  // every row's first tile sets its base
  CHECK(r.rescales.first + r.rescales.rescaled + r.rescales.skipped + r.rescales.kept == n * Tc);
  // Scores q.k / sqrt(d) of N(0, 1) entries are N(0, 1): the max of a row's first 64 is
  // about 2.4 and of all 1023 about 3.2, so the max almost never climbs 8 ln 2 = 5.5 past
  // the first base (that would need a score beyond ~7.9 sigma). The max does grow about
  // H_16 - 1 = 2.4 times per row, each a rescale the standard algorithm pays for.
  CAPTURE(r.rescales.rescaled);
  CAPTURE(r.rescales.skipped);
  CHECK(r.rescales.standard_rescales() >= n);
  CHECK(r.rescales.skipped_fraction() >= 0.99);
}

TEST_CASE("tau = 0 is the standard algorithm, bit for bit") {
  // With tau = 0 the base moves whenever the max grows, to the same new max, and every
  // value is computed by the same expression in the same order as update(): a kept row
  // multiplies by alpha = 1 exactly, as update()'s exp(m - m) = exp(0) = 1 does. So the
  // two results are not merely close but identical.
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  RescaleOptions standard_rescaling;
  standard_rescaling.tau_log2 = 0.0;
  for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right}) {
    AttentionOptions options;
    options.causal = causal;
    options.tiles = {16, 24};
    const Matrix<double> Q = random_matrix<double>(113, 59, rng),
                         K = random_matrix<double>(203, 59, rng),
                         V = random_matrix<double>(203, 59, rng);
    const auto a = forward_conditional(Q, K, V, options, standard_rescaling);
    const auto b = forward_q_outer(Q, K, V, options);
    CHECK(a.O == b.O);
    CHECK(a.L == b.L);
    CHECK(a.rescales.skipped == 0);
    CHECK(a.max_weight <= 1.0);  // every weight is exp(S - max) <= 1
    const Matrix<bf16> Qh = Q.cast<bf16>(), Kh = K.cast<bf16>(), Vh = V.cast<bf16>();
    const auto ah = forward_conditional(Qh, Kh, Vh, options, standard_rescaling);
    const auto bh = forward_q_outer(Qh, Kh, Vh, options);
    CHECK(ah.O == bh.O);
    CHECK(ah.L == bh.L);
    const auto af = forward_conditional<float>(Q.cast<float>(), K.cast<float>(), V.cast<float>(),
                                               options, standard_rescaling);
    const auto bf = forward_q_outer<float>(Q.cast<float>(), K.cast<float>(), V.cast<float>(),
                                           options);
    CHECK(af.O == bf.O);
    CHECK(af.L == bf.L);
  }
}

TEST_CASE("every weight stays below 2^tau, so fp32 cannot overflow") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  // Scores of 1e4 and more, rising by 0.05 a key (0.8 a tile): exp(S) alone would be inf
  // in fp32 (exp(89) already is), and the base lags the max for many tiles at a time.
  Inputs in = rising_scores(33, 1023, 59, 0.05, rng);
  in.K.col(0).array() += 1e4f;
  for (double tau : {0.0, 1.0, kFa4RescaleThresholdLog2, 20.0}) {
    RescaleOptions rescale;
    rescale.tau_log2 = tau;
    const auto r = forward_conditional(in.Q, in.K, in.V, unit_scale(16, 16), rescale);
    CAPTURE(tau);
    // exp(tau ln 2) in fp32 may round a few ulps above 2^tau.
    CHECK(r.max_weight <= std::exp2(tau) * (1 + kUlpFloor * kEps32));
    // The bound is nearly reached: the base really does trail the max by almost tau ln 2.
    if (tau >= kFa4RescaleThresholdLog2) CHECK(r.max_weight >= std::exp2(tau - 2));
    CHECK(r.O.allFinite());
    CHECK(r.L.allFinite());
  }
}

TEST_CASE("U(r) / l(r) does not depend on r, but changing r alone breaks the invariant") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  // A state over 40 keys, its base at the max, as update() leaves it.
  const Matrix<double> S = random_matrix<double>(7, 40, rng, 3.0), V = random_matrix<double>(40, 59, rng);
  const SoftmaxState<double> at_max = tile_state<double, double>(S, V);
  constexpr double kFp64Tolerance = 1e-13;  // 40 fp64 terms of size <= 1: a few ulps
  CHECK(invariant_error<double, double>(at_max, S, V).worst() <= kFp64Tolerance);

  // Move the base by delta and rescale l and U with it: still a valid state, same O and L.
  for (double delta : {-3.0, 0.5, 3.0}) {
    CAPTURE(delta);
    SoftmaxState<double> moved = at_max;
    moved.m.array() += delta;
    const double factor = std::exp(-delta);  // exp(r_old - r_new)
    moved.l *= factor;
    moved.U *= factor;
    CHECK(invariant_error<double, double>(moved, S, V).worst() <= kFp64Tolerance);
    CHECK((finalize(moved).O - finalize(at_max).O).cwiseAbs().maxCoeff() <= kFp64Tolerance);
    CHECK((finalize(moved).L - finalize(at_max).L).cwiseAbs().maxCoeff() <= kFp64Tolerance);

    // Move the base alone: l and U now belong to a different base; the check sees it.
    SoftmaxState<double> broken = at_max;
    broken.m.array() += delta;
    CHECK(invariant_error<double, double>(broken, S, V).l >= 0.3);  // |exp(delta) - 1| >= 0.39
  }
}

TEST_CASE("the forward keeps the invariant, and the variant that forgets to rescale fails it") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index n_k = 300;
  const Inputs in = rising_scores(37, n_k, 59, 0.05, rng);  // rescales happen mid-row
  const AttentionOptions options = unit_scale(16, 8);
  const Matrix<double> O_ref =
      naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(), in.V.cast<double>(), options).O;

  RescaleOptions rescale;
  rescale.verify_invariant = true;
  const auto good = forward_conditional(in.Q, in.K, in.V, options, rescale);
  REQUIRE(good.rescales.rescaled > 0);  // otherwise the wrong variant would not be wrong
  // l sums at most n_k fp32 weights, each with a rounding of its own: relative error at most
  // about (n_k + 2) fp32 epsilons (recursive summation, plus exp's own error).
  const double tolerance = double(n_k + 2) * kEps32;
  CHECK(good.invariant_error <= tolerance);

  rescale.variant = RescaleVariant::base_without_rescale;
  const auto bad = forward_conditional(in.Q, in.K, in.V, options, rescale);
  CAPTURE(bad.invariant_error);
  CHECK(bad.invariant_error >= 0.5);  // l is off by a factor of about 2^8 or more
  const double good_error = max_abs(good.O.cast<double>() - O_ref);
  const double bad_error = max_abs(bad.O.cast<double>() - O_ref);
  CAPTURE(good_error);
  CAPTURE(bad_error);
  CHECK(bad_error > 1000 * good_error);  // and the output it gives is wrong
}

TEST_CASE("conditional rescaling with bf16 inputs keeps the low-precision rule") {
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Matrix<bf16> Q = random_matrix<bf16>(1023, 64, rng), K = random_matrix<bf16>(1023, 64, rng),
                     V = random_matrix<bf16>(1023, 64, rng);
  AttentionOptions options;
  options.causal = Causal::top_left;
  const Matrix<double> O_ref =
      naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>(), options).O;
  const double naive_error = max_abs(naive_attention(Q, K, V, options).O.cast<double>() - O_ref);
  const auto r = forward_conditional(Q, K, V, options);
  const double error = max_abs(round_to<bf16>(r.O).cast<double>() - O_ref);
  CAPTURE(error);
  CAPTURE(naive_error);
  CHECK(error <= kRule * naive_error);  // ANCHORS.md's rule
}

TEST_CASE("bad rescale thresholds are refused with a clear error") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<float> Q = random_matrix<float>(4, 8, rng), K = random_matrix<float>(16, 8, rng),
                      V = random_matrix<float>(16, 8, rng);
  auto with_tau = [](double tau) {
    RescaleOptions r;
    r.tau_log2 = tau;
    return r;
  };
  for (double tau : {-1.0, -1e-9, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CAPTURE(tau);
    CHECK_THROWS_WITH_AS(forward_conditional(Q, K, V, {}, with_tau(tau)),
                         doctest::Contains("must be a finite number >= 0"), InvalidArgument);
  }
  // 2^130 does not fit in fp32 at all; fp64 takes it.
  CHECK_THROWS_WITH_AS(forward_conditional(Q, K, V, {}, with_tau(130.0)),
                       doctest::Contains("would overflow l"), InvalidArgument);
  CHECK_NOTHROW(forward_conditional<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>(),
                                            {}, with_tau(130.0)));
  // Shapes are checked as in every forward.
  CHECK_THROWS_AS(forward_conditional<float>(Q, K.leftCols(7), V, {}), InvalidArgument);
}

TEST_CASE("another executor's counts agree within rounding near the threshold, and no further") {
  // The reference's counts on real inputs, so that the rule is tried on counts it meets.
  const auto seed = flashlab::test::fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const Index n_q = 300, n_k = 1023, d = 32;
  const auto Q = random_matrix<float>(n_q, d, rng), K = random_matrix<float>(n_k, d, rng),
             V = random_matrix<float>(n_k, d, rng);
  AttentionOptions options;
  options.scale = 1.0;  // scores of std ~ sqrt(d): bases move often
  options.tiles = {64, 128};
  const RescaleCounts ref = forward_conditional<float>(Q, K, V, options).rescales;
  REQUIRE(ref.rescaled > 0);
  REQUIRE(ref.skipped > 0);
  const Index slack = std::max<Index>(2, ref.standard_rescales() / 100);

  const RescaleAgreement same = compare_rescale_counts(ref, ref);
  CHECK(same.agree);
  CHECK(same.reason.empty());
  CHECK(same.slack == slack);

  // Decisions that went the other way near the threshold: up to the slack, agreed.
  RescaleCounts near = ref;
  near.rescaled += slack, near.skipped -= slack;
  CHECK(compare_rescale_counts(near, ref).agree);
  near = ref;
  near.skipped += slack, near.kept -= slack;
  CHECK(compare_rescale_counts(near, ref).agree);

  // One more than the slack: refused, naming the count.
  RescaleCounts far = ref;
  far.skipped += slack + 1, far.kept -= slack + 1;
  const RescaleAgreement a = compare_rescale_counts(far, ref);
  CHECK_FALSE(a.agree);
  CHECK(a.reason.find("skipped differs by " + std::to_string(slack + 1)) != std::string::npos);

  // The shape fixes `first` and the number of later updates exactly.
  RescaleCounts extra = ref;
  extra.first += 1;
  CHECK_FALSE(compare_rescale_counts(extra, ref).agree);
  CHECK(compare_rescale_counts(extra, ref).reason.find("first tiles differ") != std::string::npos);
  extra = ref;
  extra.kept += 1;
  CHECK_FALSE(compare_rescale_counts(extra, ref).agree);
  CHECK(compare_rescale_counts(extra, ref).reason.find("later updates differ") !=
        std::string::npos);

  // Zeros from a device that did not count: refused.
  CHECK_FALSE(compare_rescale_counts(RescaleCounts{}, ref).agree);
}

TEST_CASE("the agreement's slack is at least 2 where the reference saw few growths") {
  RescaleCounts ref;
  ref.first = 10, ref.rescaled = 1, ref.skipped = 3, ref.kept = 6;
  RescaleCounts other = ref;
  other.rescaled = 3, other.skipped = 1;
  const RescaleAgreement a = compare_rescale_counts(other, ref);
  CHECK(a.slack == 2);
  CHECK(a.agree);
  other.rescaled = 4, other.skipped = 0, other.kept = 6;
  CHECK_FALSE(compare_rescale_counts(other, ref).agree);
}
