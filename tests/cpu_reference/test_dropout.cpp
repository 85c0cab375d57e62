// Dropout from Philox: the mask is a pure function of (seed, offset, batch, head, row,
// column), so the forward and the backward see the same mask whatever their tiles, two
// runs with one seed agree bit for bit, and p = 0 changes nothing at all.
#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "test_backward_support.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <tuple>
#include <utility>

using namespace flashlab::cpu;
using namespace flashlab::test;

namespace {

Dropout random_dropout(double p, std::mt19937_64& rng) {
  return {p, rng(), static_cast<std::uint32_t>(rng())};
}

Matrix<double> full_mask(const DropoutMask& mask, Index rows, Index cols) {
  return mask.multipliers<double>(0, rows, 0, cols);
}

}  // namespace

TEST_CASE("a tile of the mask is the same slice of the whole mask wherever the tile lies") {
  std::mt19937_64 rng(fresh_seed());
  const DropoutMask mask(random_dropout(0.3, rng), 3, 5);
  const Index n_q = 70, n_k = 83;
  const Matrix<double> Z = full_mask(mask, n_q, n_k);  // (N_q, N_k)
  for (const auto& [Br, Bc] : {std::pair<Index, Index>{1, 1}, {7, 13}, {16, 3}, {64, 64}})
    for (Index q0 = 0; q0 < n_q; q0 += Br)
      for (Index k0 = 0; k0 < n_k; k0 += Bc) {
        const Index rows = std::min(Br, n_q - q0), cols = std::min(Bc, n_k - k0);
        CHECK(mask.multipliers<double>(q0, rows, k0, cols) == Z.block(q0, k0, rows, cols));
      }
  for (Index r = 0; r < n_q; ++r)
    for (Index c = 0; c < n_k; ++c) CHECK(mask.keep(r, c) == (Z(r, c) != 0));
}

TEST_CASE("the forward and the backward use the same mask whatever their tiles") {
  // With V = I (N_k = d) the forward's output is O = P o Z itself, and with dO = I
  // (N_q = d) the backward's dV = (P o Z)^T dO is its transpose: both masks can be read off.
  std::mt19937_64 rng(fresh_seed());
  const Index n = 61;
  const DropoutMask mask(random_dropout(0.4, rng), 1, 2);
  const Matrix<double> Q = random_matrix<double>(n, n, rng), K = random_matrix<double>(n, n, rng);
  const Matrix<double> I = Matrix<double>::Identity(n, n);
  AttentionOptions forward_options, backward_options;
  forward_options.tiles = {16, 24};
  backward_options.tiles = {7, 5};
  const Matrix<double> Z = full_mask(mask, n, n);
  const auto naive = naive_backward(Q, K, I, I, forward_options, &mask);  // P, materialised

  for (const auto& f : {forward_q_outer(Q, K, I, forward_options, {}, &mask),
                        forward_kv_outer(Q, K, I, forward_options, {}, &mask)}) {
    CHECK(relative_error(f.O, naive.P.cwiseProduct(Z)) <= kGradientTolerance);
    for (const auto& g :
         {backward_kv_outer(Q, K, I, f.O, f.L, I, backward_options, &mask),
          backward_q_outer(Q, K, I, f.O, f.L, I, backward_options, &mask)}) {
      const Matrix<double> dV_t = g.dV.transpose();
      for (Index r = 0; r < n; ++r)
        for (Index c = 0; c < n; ++c) {
          CAPTURE(r);
          CAPTURE(c);
          REQUIRE((f.O(r, c) != 0) == mask.keep(r, c));  // the forward's mask
          REQUIRE((dV_t(r, c) != 0) == mask.keep(r, c));  // the backward's mask
        }
      CHECK(relative_error(dV_t, f.O) <= kGradientTolerance);
    }
  }
}

TEST_CASE("two runs with the same seed and offset draw the same mask and others differ") {
  std::mt19937_64 rng(fresh_seed());
  const Dropout dropout = random_dropout(0.2, rng);
  const Index n = 97;
  const Matrix<double> Z = full_mask(DropoutMask(dropout, 0, 0), n, n);
  CHECK(full_mask(DropoutMask(dropout, 0, 0), n, n) == Z);

  const Matrix<double> Q = random_matrix<double>(n, 59, rng), K = random_matrix<double>(n, 59, rng),
                       V = random_matrix<double>(n, 59, rng);
  const DropoutMask mask(dropout);
  const auto first = forward_q_outer(Q, K, V, {}, {}, &mask);
  const auto second = forward_q_outer(Q, K, V, {}, {}, &mask);
  CHECK(first.O == second.O);

  // Any change of seed, offset, batch or head gives another mask: about 2 p (1 - p) of the
  // entries, 32% here, differ. More than 20% is a margin of many standard deviations.
  const double kMinDiffering = 0.2;
  Dropout other_seed = dropout, other_offset = dropout;
  other_seed.seed ^= 1;
  other_offset.offset ^= 1;
  for (const DropoutMask& other : {DropoutMask(other_seed), DropoutMask(other_offset),
                                   DropoutMask(dropout, 1, 0), DropoutMask(dropout, 0, 1)}) {
    const Matrix<double> Y = full_mask(other, n, n);
    const double differing = (Y.array() != Z.array()).cast<double>().mean();
    CHECK(differing > kMinDiffering);
  }
}

TEST_CASE("the kept fraction is 1 - p and kept weights are scaled by exactly 1/(1 - p)") {
  std::mt19937_64 rng(fresh_seed());
  const Index n = 1024;
  // N^2 = 2^20 draws: the kept fraction's standard deviation is below 0.0005, so 0.01 is
  // a margin of 20 of them.
  constexpr double kFractionTolerance = 0.01;
  for (double p : {0.1, 0.17, 0.5}) {
    CAPTURE(p);
    const DropoutMask mask(random_dropout(p, rng), 0, 0);
    const Matrix<double> Z = full_mask(mask, n, n);
    const double kept = (Z.array() != 0).cast<double>().mean();
    CHECK(std::abs(kept - (1 - p)) <= kFractionTolerance);
    const double scale = 1 / (1 - p);
    CHECK(((Z.array() == 0) || (Z.array() == scale)).all());
  }
}

TEST_CASE("p = 0 gives bitwise the results without dropout") {
  std::mt19937_64 rng(fresh_seed());
  const DropoutMask none(random_dropout(0.0, rng), 0, 0);
  for (Causal causal : {Causal::none, Causal::top_left}) {
    AttentionOptions options;
    options.causal = causal;
    options.tiles = {16, 24};
    const Problem p = random_problem(97, 113, 59, rng);
    const auto plain = forward_q_outer(p.Q, p.K, p.V, options);
    const auto dropped = forward_q_outer(p.Q, p.K, p.V, options, {}, &none);
    CHECK(dropped.O == plain.O);
    CHECK(dropped.L == plain.L);
    const auto plain_kv = forward_kv_outer(p.Q, p.K, p.V, options);
    CHECK(forward_kv_outer(p.Q, p.K, p.V, options, {}, &none).O == plain_kv.O);

    const auto g = backward_kv_outer(p.Q, p.K, p.V, plain.O, plain.L, p.dO, options);
    const auto gd = backward_kv_outer(p.Q, p.K, p.V, plain.O, plain.L, p.dO, options, &none);
    CHECK(gd.dQ == g.dQ);
    CHECK(gd.dK == g.dK);
    CHECK(gd.dV == g.dV);
    const auto q = backward_q_outer(p.Q, p.K, p.V, plain.O, plain.L, p.dO, options);
    const auto qd = backward_q_outer(p.Q, p.K, p.V, plain.O, plain.L, p.dO, options, &none);
    CHECK(qd.dQ == q.dQ);
    CHECK(qd.dK == q.dK);
    CHECK(qd.dV == q.dV);
  }
}

TEST_CASE("gradients with dropout equal the naive backward with the same mask") {
  std::mt19937_64 rng(fresh_seed());
  for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
    for (const auto& [n_q, n_k, d] : {std::array<Index, 3>{1, 1, 1}, {97, 128, 59}, {128, 97, 64}}) {
      CAPTURE(to_string(causal));
      CAPTURE(n_q);
      AttentionOptions options;
      options.causal = causal;
      options.tiles = {16, 24};
      const DropoutMask mask(random_dropout(0.17, rng), 1, 3);
      const Problem p = random_problem(n_q, n_k, d, rng);
      const auto f = forward_q_outer(p.Q, p.K, p.V, options, {}, &mask);
      const auto naive = naive_backward(p.Q, p.K, p.V, p.dO, options, &mask);
      CHECK(relative_error(f.O, naive.O) <= kGradientTolerance);
      for (const auto& g : {backward_kv_outer(p.Q, p.K, p.V, f.O, f.L, p.dO, options, &mask),
                            backward_q_outer(p.Q, p.K, p.V, f.O, f.L, p.dO, options, &mask)}) {
        CHECK(relative_error(g.dQ, naive.dQ) <= kGradientTolerance);
        CHECK(relative_error(g.dK, naive.dK) <= kGradientTolerance);
        CHECK(relative_error(g.dV, naive.dV) <= kGradientTolerance);
        // D = rowsum(dO o O) still equals rowsum(P o dP) with the dropped output.
        CHECK((g.D - naive.D).cwiseAbs().maxCoeff() <= kGradientTolerance);
      }
    }
}

TEST_CASE("gradients with dropout equal central finite differences (same mask)") {
  std::mt19937_64 rng(fresh_seed());
  for (const auto& [n, d, causal] :
       {std::tuple<Index, Index, Causal>{3, 1, Causal::none}, {97, 59, Causal::top_left},
        {128, 64, Causal::none}}) {
    CAPTURE(n);
    CAPTURE(d);
    AttentionOptions options;
    options.causal = causal;
    options.tiles = {32, 16};
    const DropoutMask mask(random_dropout(0.5, rng), 0, 1);
    const Problem p = random_problem(n, n, d, rng);
    const ForwardFn forward = [&](const Matrix<double>& Q, const Matrix<double>& K,
                                  const Matrix<double>& V) {
      return forward_q_outer(Q, K, V, options, {}, &mask).O;
    };
    const auto f = forward_q_outer(p.Q, p.K, p.V, options, {}, &mask);
    const auto g = backward_q_outer(p.Q, p.K, p.V, f.O, f.L, p.dO, options, &mask);
    check_finite_differences(forward, p, 0, g.dQ, rng);
    check_finite_differences(forward, p, 1, g.dK, rng);
    check_finite_differences(forward, p, 2, g.dV, rng);
  }
}

TEST_CASE("multi-head backward with dropout replays each head's own mask") {
  std::mt19937_64 rng(fresh_seed());
  const Index batch = 2, heads_q = 4, heads_kv = 2, n = 37, d = 6;
  const Dropout dropout = random_dropout(0.3, rng);
  AttentionOptions options;
  options.tiles = {8, 8};
  HeadTensor<double> Q(batch, heads_q, n, d), dO(batch, heads_q, n, d), K(batch, heads_kv, n, d),
      V(batch, heads_kv, n, d), O(batch, heads_q, n, d), L(batch, heads_q, n, 1);
  std::normal_distribution<double> normal;
  for (auto* X : {&Q, &dO, &K, &V})
    for (auto& x : X->data) x = normal(rng);
  for (Index b = 0; b < batch; ++b)  // the forward with dropout, head by head
    for (Index h = 0; h < heads_q; ++h) {
      const DropoutMask mask(dropout, b, h);
      const Index h_kv = kv_head_for(h, heads_q, heads_kv);
      const auto f = forward_q_outer<double>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv),
                                             options, {}, &mask);
      O.head(b, h) = f.O;
      L.head(b, h) = f.L;
    }
  const auto g = backward_multihead(Q, K, V, O, L, dO, options, dropout);
  for (Index b = 0; b < batch; ++b)
    for (Index h_kv = 0; h_kv < heads_kv; ++h_kv) {
      Matrix<double> dK_sum = Matrix<double>::Zero(n, d);
      for (Index h = 0; h < heads_q; ++h) {
        if (kv_head_for(h, heads_q, heads_kv) != h_kv) continue;
        const DropoutMask mask(dropout, b, h);
        const auto naive = naive_backward<double>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv),
                                                  dO.head(b, h), options, &mask);
        CHECK(relative_error(g.dQ.head(b, h), naive.dQ) <= kGradientTolerance);
        dK_sum += naive.dK;
      }
      CHECK(relative_error(g.dK.head(b, h_kv), dK_sum) <= kGradientTolerance);
    }
}

TEST_CASE("the fp32 scale of a kept weight is 1/(1 - p) rounded once") {
  // In fp32, 1 - p would first round p = 0.999 to 0.99900001 and give 1000.013 instead of
  // the 1000 that 1/(1 - p) is.
  const Dropout dropout{0.999, 11, 0};
  const DropoutMask mask(dropout);
  const Matrix<float> Z = mask.multipliers<float>(0, 64, 0, 4096);
  REQUIRE(Z.maxCoeff() > 0.0f);  // ~262 of the 262144 weights are kept
  CHECK(Z.maxCoeff() == static_cast<float>(1.0 / (1.0 - dropout.p)));
  CHECK(Z.maxCoeff() == 1000.0f);
}

TEST_CASE("naive attention with dropout equals the tiled forwards with the same mask") {
  // The naive baseline takes the same Z as the tiled forwards: (P o Z) V, with P and L
  // those of the softmax (dropout does not change what the normalisation counted).
  std::mt19937_64 rng(fresh_seed());
  for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
    for (const auto& [n_q, n_k] : {std::pair<Index, Index>{1, 1}, {97, 113}, {113, 97}}) {
      CAPTURE(to_string(causal));
      CAPTURE(n_q);
      CAPTURE(n_k);
      AttentionOptions options;
      options.causal = causal;
      options.tiles = {16, 24};
      const DropoutMask mask(random_dropout(0.25, rng), 7, 3);
      const Problem p = random_problem(n_q, n_k, 59, rng);
      const auto plain = naive_attention(p.Q, p.K, p.V, options);
      const auto naive = naive_attention(p.Q, p.K, p.V, options, SoftmaxKind::stable, &mask);
      CHECK(naive.P == plain.P);
      CHECK(naive.L == plain.L);
      const Matrix<double> Z = full_mask(mask, n_q, n_k);
      CHECK(relative_error(naive.O, plain.P.cwiseProduct(Z) * p.V) <= kGradientTolerance);
      const auto tiled = forward_q_outer(p.Q, p.K, p.V, options, {}, &mask);
      CHECK(relative_error(naive.O, tiled.O) <= kGradientTolerance);
      for (Index r = 0; r < n_q; ++r) {  // -inf where a row sees no key (bottom-right)
        CAPTURE(r);
        if (std::isinf(naive.L[r])) CHECK(tiled.L[r] == naive.L[r]);
        else
          CHECK(std::abs(tiled.L[r] - naive.L[r]) <=
                kGradientTolerance * (1 + std::abs(naive.L[r])));
      }
    }
}

TEST_CASE("naive attention in bf16 with dropout: near the fp64 one, and p = 0 changes nothing") {
  std::mt19937_64 rng(fresh_seed());
  const Index n_q = 97, n_k = 113, d = 64;
  const DropoutMask mask(random_dropout(0.3, rng), 2, 5);
  const Matrix<bf16> Q = random_matrix<bf16>(n_q, d, rng);
  const Matrix<bf16> K = random_matrix<bf16>(n_k, d, rng);
  const Matrix<bf16> V = random_matrix<bf16>(n_k, d, rng);
  const auto low = naive_attention<bf16>(Q, K, V, {}, SoftmaxKind::stable, &mask);
  const auto exact = naive_attention<double>(Q.cast<double>(), K.cast<double>(),
                                             V.cast<double>(), {}, SoftmaxKind::stable, &mask);
  // bf16 keeps 8 significant bits: each of the four operators' outputs is off by up to
  // 2^-9 relative, a few of them together stay well under 2^-5. A wrong or missing mask
  // (O computed from P instead of P o Z) is off by far more, about p / (1 - p).
  CHECK(relative_error(low.O.cast<double>(), exact.O) <= 1.0 / 32);
  const auto unmasked =
      naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>());
  CHECK(relative_error(unmasked.O, exact.O) > 1.0 / 32);
  // p = 0: the fourth operator multiplies by exactly 1, and rounding a bf16 value is exact.
  const DropoutMask none(random_dropout(0.0, rng), 2, 5);
  CHECK(naive_attention<bf16>(Q, K, V, {}, SoftmaxKind::stable, &none).O ==
        naive_attention<bf16>(Q, K, V).O);
}
