// The mirror of the GPU backward (backward_kernel_program.cpp): every tensor's bytes and the
// work against the closed form of its header, with the step sums QR, A, KR found here by
// classifying every (query tile, KV tile) pair with cpu::Mask (not the program's first-tile
// rule); the shapes awkward (N_q != N_k, N = 1, 97, both causal alignments, GQA, MQA).
#include "helpers.hpp"

#include "flashlab/sim/backward_kernel.hpp"

#include <doctest/doctest.h>

#include <initializer_list>
#include <fmt/core.h>

#include <chrono>

namespace flashlab::sim::test {

namespace {

struct Sums {
  Index QR = 0, A = 0, KR = 0, UK = 0;  // UK: keys of the KV tiles no query tile sees
  Index QB = 0, KB = 0;  // as whole boxes of Br (Bc) rows: a step's Br, a seen KV tile's Bc
};

// Every (i, j) pair of one (query head, KV head), classified by the CPU reference's mask.
Sums brute_force(const BackwardShape& s, Index Br, Index Bc) {
  const cpu::Mask mask{s.causal, s.n_q, s.n_k};
  Sums sums;
  for (Index j = 0; j * Bc < s.n_k; ++j) {
    const Index c = std::min(Bc, s.n_k - j * Bc);
    bool seen = false;
    for (Index i = 0; i * Br < s.n_q; ++i) {
      const Index r = std::min(Br, s.n_q - i * Br);
      if (mask.classify(i * Br, r, j * Bc, c) == cpu::TileKind::skipped) continue;
      seen = true;
      sums.QR += r;
      sums.QB += Br;
      sums.A += r * c;
      sums.KR += c;
    }
    if (!seen) sums.UK += c;
    if (seen) sums.KB += Bc;
  }
  return sums;
}

void check_closed_form(const BackwardShape& s, const BackwardKernelFacts& f) {
  CAPTURE(s.n_q);
  CAPTURE(s.n_k);
  CAPTURE(s.d);
  CAPTURE(cpu::to_string(s.causal));
  CAPTURE(s.heads_q);
  CAPTURE(s.heads_kv);
  CAPTURE(f.deterministic);
  CAPTURE(f.skips_unseen_kv);
  CAPTURE(f.tma_boxes);
  const PassReport r = count_backward_kernel(s, f);
  const Sums x = brute_force(s, f.Br, f.Bc);
  // The dQ kernel's steps, in its own tiles (the main kernel's where the facts give none).
  const Index dq_Br = f.dq_Br > 0 ? f.dq_Br : f.Br, dq_Bc = f.dq_Bc > 0 ? f.dq_Bc : f.Bc;
  const Sums y = brute_force(s, dq_Br, dq_Bc);
  const Index b = bytes_of(f.dtype), fp = 4, d = s.d;
  const Index Hq = s.batch * s.heads_q, Hkv = s.batch * s.heads_kv;
  const Index own = f.deterministic ? x.QR + s.n_q : x.QR;
  const Index kv_rows = f.tma_boxes ? x.KB : f.skips_unseen_kv ? s.n_k - x.UK : s.n_k;
  const Index kv = Hkv * kv_rows * d * b + (f.deterministic ? Hq * y.KR * d * b : 0);
  const Index boxes = f.tma_boxes ? x.QB : own;  // Q and dO as the copies move them
  CHECK(r.tensor("Q").read == Hq * boxes * d * b);
  CHECK(r.tensor("K").read == kv);
  CHECK(r.tensor("V").read == kv);
  CHECK(r.tensor("O").read == Hq * s.n_q * d * b);
  CHECK(r.tensor("dO").read == Hq * (s.n_q + boxes) * d * b);
  CHECK(r.tensor("L").read == Hq * own * fp);
  CHECK(r.tensor("D").read == Hq * own * fp);
  CHECK(r.tensor("D").written == Hq * s.n_q * fp);
  CHECK(r.tensor("dQ").written == Hq * s.n_q * d * b);
  CHECK(r.tensor("dK").written == Hkv * s.n_k * d * b);
  CHECK(r.tensor("dV").written == Hkv * s.n_k * d * b);
  for (const char* name : {"Q", "K", "V", "O", "dO", "L"}) CHECK(r.tensor(name).written == 0);
  for (const char* name : {"dQ", "dK", "dV"}) CHECK(r.tensor(name).read == 0);
  if (f.deterministic) {
    CHECK_THROWS_AS(r.tensor("dQ accumulator"), std::out_of_range);
    CHECK(r.launch("dQ").blocks == Hq * ceil_div(s.n_q, dq_Br));
  } else {
    // Read into the SMs by the post-kernel alone: the main kernel's reductions are done at
    // the L2 and bring nothing back.
    CHECK(r.tensor("dQ accumulator").read == Hq * s.n_q * d * fp);
    CHECK(r.tensor("dQ accumulator").written == Hq * (s.n_q + x.QR) * d * fp);
  }
  CHECK(r.launch("main").blocks == Hkv * ceil_div(s.n_k, f.Bc));
  // Atomic: 5 products over the main kernel's scores; deterministic: 4 there and the dQ
  // kernel's 3 (S, dP, dQ) over its own.
  const Index dq_scores = f.deterministic ? Hq * y.A : 0;
  const Index products = f.deterministic ? 4 : 5, ds_scores = Hq * x.A + dq_scores;
  CHECK(r.ops.matrix_flops == 2 * (products * Hq * x.A + 3 * dq_scores) * d);
  CHECK(r.ops.exp == ds_scores);
  CHECK(r.ops.rescale == ds_scores + Hq * s.n_q * d);
  CHECK(r.ops.sum == ds_scores + Hq * s.n_q * d + (f.deterministic ? 0 : Hq * x.QR * d));
}

// Every (N_q, N_k) of the awkward lengths under each of `causals`: 2 batch entries of 4
// query heads over 2 KV heads, d = 64.
template <class F>
void for_awkward_shapes(std::initializer_list<cpu::Causal> causals, F&& f) {
  const Index lengths[] = {1, 17, 97, 113, 256};
  for (const auto causal : causals)
    for (const Index n_q : lengths)
      for (const Index n_k : lengths)
        f(BackwardShape{.batch = 2,
                        .heads_q = 4,
                        .heads_kv = 2,
                        .n_q = n_q,
                        .n_k = n_k,
                        .d = 64,
                        .causal = causal});
}

}  // namespace

TEST_CASE("backward mirror: every tensor and the work match the closed form on awkward shapes") {
  for (const bool deterministic : {false, true})
    for_awkward_shapes(
        {cpu::Causal::none, cpu::Causal::top_left, cpu::Causal::bottom_right},
        [&](const BackwardShape& s) {
          check_closed_form(
              s, {.Br = 64, .Bc = 32, .dtype = DType::bf16, .deterministic = deterministic});
          check_closed_form(
              s, {.Br = 16, .Bc = 48, .dtype = DType::fp16, .deterministic = deterministic});
          // As built: the dQ kernel's tiles (64, 64) are not the main kernel's (64, 128).
          check_closed_form(s, {.Br = 64,
                                .Bc = 128,
                                .dtype = DType::bf16,
                                .deterministic = deterministic,
                                .dq_Br = 64,
                                .dq_Bc = 64});
          if (!deterministic) {  // v3's main kernel: no loads where no query sees the keys
            check_closed_form(s, {.Br = 64,
                                  .Bc = 128,
                                  .dtype = DType::bf16,
                                  .skips_unseen_kv = true,
                                  .main_kernel = "v3"});
            // and as built, its TMA copies whole boxes
            check_closed_form(s, {.Br = 64,
                                  .Bc = 128,
                                  .dtype = DType::bf16,
                                  .skips_unseen_kv = true,
                                  .tma_boxes = true,
                                  .main_kernel = "v3"});
          }
        });
}

// The kernels' stores as their sources write them (kernel_info.hpp's fa2_backward::), at
// d = 64 in bf16, written out by hand here: v3's dK and dV from mma fragments (4 bytes a lane,
// 8 rows; v2 stages them in SRAM, as the dQ kernel does dQ), 16-byte
// reductions over 16 rows, D's 8 consecutive floats by 8 lanes, lanes along a row, and the dQ
// kernel's rows staged in SRAM (16 bytes a lane, 4 whole rows of 128 bytes).
const BackwardStores kAsBuilt{.dk_dv = WarpStore{4, 32, 8},
                              .dq_reduction = WarpStore{16, 32, 16},
                              .d = WarpStore{4, 8, 1},
                              .accumulator_zeros = WarpStore{4, 32, 1},
                              .dq = WarpStore{2, 32, 1},
                              .dq_kernel = WarpStore{16, 32, 4}};

TEST_CASE("backward mirror: writes out of the SMs are the sectors of the kernels' stores") {
  for (const bool deterministic : {false, true})
    for_awkward_shapes({cpu::Causal::none, cpu::Causal::top_left}, [&](const BackwardShape& s) {
      const Index n_q = s.n_q, n_k = s.n_k;
      const BackwardKernelFacts f{.Br = 64,
                                  .Bc = 128,
                                  .dtype = DType::bf16,
                                  .deterministic = deterministic,
                                  .stores = kAsBuilt};
      CAPTURE(n_q);
      CAPTURE(n_k);
      CAPTURE(deterministic);
      const PassReport r = count_backward_kernel(s, f);
      BackwardKernelFacts data = f;
      data.stores = {};
      const PassReport plain = count_backward_kernel(s, data);
      const Index Hq = 8, Hkv = 4, d = 64, b = 2;
      const Sums x = brute_force(s, f.Br, f.Bc);
      // Reads do not change; every 16-byte row run of a fragment costs a whole sector.
      CHECK(r.bytes_read() == plain.bytes_read());
      CHECK(r.tensor("dK").written == 2 * Hkv * n_k * d * b);
      CHECK(r.tensor("dV").written == 2 * Hkv * n_k * d * b);
      // D: one array of Hq n_q floats, 8 a sector, the last sector partly written.
      CHECK(r.tensor("D").written == (Hq * n_q + 7) / 8 * 32);
      // The pre-kernel before: one float a row by one lane, a sector a row (8x its data).
      BackwardKernelFacts one_lane = f;
      one_lane.stores.d = WarpStore{4, 1, 1};
      CHECK(count_backward_kernel(s, one_lane).tensor("D").written == Hq * n_q * 32);
      CHECK(r.tensor("dQ").written == Hq * n_q * d * b);
      // The dQ kernel before: dQ from the fragments, a sector for each 16-byte row run.
      BackwardKernelFacts fragments = f;
      fragments.stores.dq_kernel = WarpStore{4, 32, 8};
      CHECK(count_backward_kernel(s, fragments).tensor("dQ").written ==
            (deterministic ? 2 : 1) * Hq * n_q * d * b);
      if (!deterministic)  // zeros and reductions: whole sectors, exactly their data
        CHECK(r.tensor("dQ accumulator").written == Hq * (n_q + x.QR) * d * 4);
    });
}

TEST_CASE("backward mirror: the pre- and post-kernels' grids, a block per 8 rows of the array") {
  // 2 x 3 query heads of 1023 rows: 6138 rows, 768 blocks of 8 (the last one 2 rows); the
  // main kernel a block per (KV head, KV tile): 2 x 3 x ceil(1000 / 128) = 48.
  const BackwardShape s{.batch = 2, .heads_q = 3, .heads_kv = 3, .n_q = 1023, .n_k = 1000};
  BackwardKernelFacts f{.Br = 64, .Bc = 128, .threads = 256};
  f.pre_post_rows_per_block = 8;
  f.pre_post_threads = 256;
  const PassReport r = count_backward_kernel(s, f);
  REQUIRE(r.launches.size() == 3);
  CHECK(r.launches[0].name == "pre (D)");
  CHECK(r.launches[0].blocks == 768);
  CHECK(r.launches[0].threads == 256);
  CHECK(r.launches[1].blocks == 48);
  CHECK(r.launches[2].name == "post (dQ)");
  CHECK(r.launches[2].blocks == 768);
  // Not described: a block per query tile, 6 x ceil(1023 / 64) = 96.
  f.pre_post_rows_per_block = 0;
  CHECK(count_backward_kernel(s, f).launches[0].blocks == 96);
  f.pre_post_rows_per_block = -8;
  CHECK_THROWS_WITH_AS(count_backward_kernel(s, f),
                       doctest::Contains("pre_post_rows_per_block = -8"), cpu::InvalidArgument);
}

TEST_CASE("backward mirror: an impossible store is refused with what would be right") {
  const BackwardKernelFacts f{.stores = {.dq_reduction = WarpStore{32, 32, 16}}};
  CHECK_THROWS_WITH_AS(count_backward_kernel({}, f), doctest::Contains("a lane stores 1 to 16"),
                       cpu::InvalidArgument);
}

TEST_CASE("backward mirror: the device's causal GQA shape, reads and writes in closed form") {
  // B = 1, 16 query heads over 4 KV heads, N = 4096, d = 128, causal (the compare run of
  // 2026-12-01): the SMs read 608.2 MiB and wrote 593.6 MiB there with v2, 608.2 and
  // 593.7 MiB with v3 (every KV tile is seen in a square causal problem: the same bytes).
  const BackwardShape s{.batch = 1,
                        .heads_q = 16,
                        .heads_kv = 4,
                        .n_q = 4096,
                        .n_k = 4096,
                        .d = 128,
                        .causal = cpu::Causal::top_left};
  const BackwardKernelFacts f{.Br = 64, .Bc = 128, .dtype = DType::bf16, .stores = kAsBuilt};
  const PassReport r = count_backward_kernel(s, f);
  const Index QR = brute_force(s, 64, 128).QR, Hq = 16, Hkv = 4, N = 4096, d = 128;
  CHECK(QR == 32 * 4096 - 128 * (31 * 32 / 2));  // KV tile j is seen by N - 128 j rows
  // Q, dO (once more in the pre-kernel), L, D per main-kernel row; O; K, V; the accumulator
  // by the post-kernel.
  const Index read =
      Hq * QR * (2 * d * 2 + 2 * 4) + Hq * N * d * 2 * 2 + 2 * Hkv * N * d * 2 + Hq * N * d * 4;
  CHECK(r.bytes_read() == read);  // 608.25 MiB
  const Index written =
      Hq * N / 8 * 32 + Hq * (N + QR) * d * 4 + Hq * N * d * 2 + 2 * 2 * Hkv * N * d * 2;
  CHECK(r.bytes_written() == written);  // 592.3 MiB (594.0 when D took a sector a row)
  BackwardKernelFacts v3 = f;
  v3.skips_unseen_kv = true;
  v3.main_kernel = "v3";
  const PassReport r3 = count_backward_kernel(s, v3);
  CHECK(r3.bytes_read() == read);
  CHECK(r3.bytes_written() == written);
}

TEST_CASE(
    "backward mirror: a dQ reduced twice a step (warpgroups each adding all of d) writes "
    "its sectors twice") {
  const BackwardShape s{.heads_q = 4,
                        .heads_kv = 2,
                        .n_q = 113,
                        .n_k = 97,
                        .d = 64,
                        .causal = cpu::Causal::bottom_right};
  BackwardKernelFacts once{.Br = 64, .Bc = 128, .stores = kAsBuilt, .skips_unseen_kv = true};
  BackwardKernelFacts twice = once;
  twice.stores.dq_reduction_passes = 2;
  const Index QR = brute_force(s, 64, 128).QR, Hq = 4, d = 64;
  const Bytes zeros = Hq * s.n_q * d * 4, reductions = Hq * QR * d * 4;
  CHECK(count_backward_kernel(s, once).tensor("dQ accumulator").written == zeros + reductions);
  CHECK(count_backward_kernel(s, twice).tensor("dQ accumulator").written == zeros + 2 * reductions);
  twice.stores.dq_reduction_passes = 3;
  CHECK(contains(message_of([&] { count_backward_kernel(s, twice); }), "once or twice (1 or 2)"));
}

TEST_CASE("backward mirror, v3: K and V of blocks no query sees are not read, and it is named") {
  // Top-left, N_q = 100, N_k = 700, Bc = 128: keys past 99 are in every query's future;
  // KV tiles 1..5 (keys 128..699, 572 keys) are seen by no query.
  const BackwardShape s{.heads_q = 2,
                        .heads_kv = 1,
                        .n_q = 100,
                        .n_k = 700,
                        .d = 64,
                        .causal = cpu::Causal::top_left};
  BackwardKernelFacts v3{.Br = 64, .Bc = 128, .skips_unseen_kv = true, .main_kernel = "v3"};
  const PassReport r = count_backward_kernel(s, v3);
  CHECK(r.tensor("K").read == (700 - 572) * 64 * 2);
  CHECK(r.tensor("V").read == (700 - 572) * 64 * 2);
  CHECK(r.tensor("dK").written == 700 * 64 * 2);  // zeros are written for the unseen keys
  CHECK(contains(r.label, "Br 64, Bc 128"));
  CHECK(contains(r.label, "main kernel v3"));
  BackwardKernelFacts v2 = v3;
  v2.skips_unseen_kv = false;
  v2.main_kernel = "v2";
  CHECK(count_backward_kernel(s, v2).tensor("K").read == 700 * 64 * 2);
  // Without a mask every KV tile is seen: v3 and v2 read the same bytes.
  BackwardShape full = s;
  full.causal = cpu::Causal::none;
  CHECK(count_backward_kernel(full, v3).bytes_total() ==
        count_backward_kernel(full, v2).bytes_total());
  // As built, v3's TMA moves whole boxes: the 100 queries (top-left) see keys 0 .. 99, KV
  // tile 0 alone, which both query tiles see: Q in two boxes of 64 rows, 28 of them zeros.
  BackwardKernelFacts boxes = v3;
  boxes.tma_boxes = true;
  const PassReport rb = count_backward_kernel(s, boxes);
  CHECK(rb.tensor("K").read == 128 * 64 * 2);
  CHECK(rb.tensor("Q").read == 2 * (2 * 64) * 64 * 2);  // 2 heads, two boxes of 64 rows each
  CHECK(rb.tensor("L").read == r.tensor("L").read);     // L and D by cp.async: rows inside
  // v3 has no deterministic mode, with its boxes or without.
  v3.deterministic = true;
  CHECK(contains(message_of([&] { count_backward_kernel(s, v3); }), "deterministic"));
  boxes.skips_unseen_kv = false;  // so that the boxes' own refusal speaks
  boxes.deterministic = true;
  CHECK(contains(message_of([&] { count_backward_kernel(s, boxes); }), "tma_boxes"));
}

TEST_CASE("backward mirror: without a mask, QR = Tc N_q, A = N_q N_k, KR = Tr N_k") {
  const BackwardShape s{.batch = 1, .heads_q = 8, .heads_kv = 1, .n_q = 97, .n_k = 1023, .d = 128};
  const BackwardKernelFacts f{.Br = 64, .Bc = 128, .dtype = DType::bf16};
  const PassReport r = count_backward_kernel(s, f);
  const Index Tc = ceil_div(1023, 128);  // 8
  CHECK(r.tensor("Q").read == 8 * Tc * 97 * 128 * 2);
  CHECK(r.ops.matrix_flops == 2 * 5 * 8 * 97 * 1023 * 128);
  BackwardKernelFacts det = f;
  det.deterministic = true;
  const PassReport rd = count_backward_kernel(s, det);
  CHECK(rd.tensor("K").read == 1023 * 128 * 2 + 8 * ceil_div(97, 64) * 1023 * 128 * 2);
}

TEST_CASE("backward mirror: the dQ kernel walks its own KV tiles, as the H200 measured") {
  // 16 heads, N = 4096, d = 128, causal, deterministic; the main kernel's KV tiles are 128
  // keys, the dQ kernel's 64. Query tile i (64 rows, last row 64 i + 63) sees 64 (i + 1)
  // keys in tiles of 64, and in tiles of 128 64 more where i is even: 32 of the 64 query
  // tiles, each 64 more keys of K and of V, 128 x 2 bytes a key.
  const BackwardShape s{.heads_q = 16,
                        .heads_kv = 16,
                        .n_q = 4096,
                        .n_k = 4096,
                        .d = 128,
                        .causal = cpu::Causal::top_left};
  BackwardKernelFacts own{.Br = 64, .Bc = 128, .deterministic = true, .dq_Br = 64, .dq_Bc = 64};
  own.dq_threads = 128;
  own.dq_blocks_per_sm = 2;
  BackwardKernelFacts main_tiles = own;
  main_tiles.dq_Br = main_tiles.dq_Bc = 0;
  const PassReport r = count_backward_kernel(s, own);
  const Bytes extra = 16 * 32 * 64 * 2 * 128 * 2;  // 16 MiB
  CHECK(count_backward_kernel(s, main_tiles).bytes_read() - r.bytes_read() == extra);
  // What Nsight Compute counted into the SMs on the H200 (2026-12-04, the deterministic
  // pass's sweep): 1,754,005,504 bytes, which these tiles give to the byte.
  CHECK(r.bytes_read() == 1'754'005'504);
  CHECK(r.launch("dQ").threads == 128);
  CHECK(r.launch("dQ").per_sm == 2);
  CHECK(r.launch("dQ").blocks == 16 * 64);
  own.dq_blocks_per_sm = 0;
  CHECK(contains(message_of([&] { count_backward_kernel(s, own); }), "dq_blocks_per_sm = 0"));
}

TEST_CASE("backward mirror: causal square problems skip about half the steps") {
  const BackwardShape full{.n_q = 4096, .n_k = 4096, .d = 64};
  BackwardShape causal = full;
  causal.causal = cpu::Causal::top_left;
  const BackwardKernelFacts f{.Br = 64, .Bc = 64};
  const Index T = 4096 / 64;
  // Whole tiles on the diagonal are computed: T (T + 1) / 2 of the T^2 steps.
  CHECK(count_backward_kernel(causal, f).ops.exp * 2 * T ==
        count_backward_kernel(full, f).ops.exp * (T + 1));
  // Both alignments agree when N_q = N_k.
  causal.causal = cpu::Causal::bottom_right;
  CHECK(count_backward_kernel(causal, f).ops.exp * 2 * T ==
        count_backward_kernel(full, f).ops.exp * (T + 1));
}

TEST_CASE("backward mirror: the group's query heads each stream past the KV tile once") {
  BackwardShape s{.heads_q = 8, .heads_kv = 8, .n_q = 512, .n_k = 512, .d = 64};
  const BackwardKernelFacts f{.Br = 64, .Bc = 64};
  const PassReport mha = count_backward_kernel(s, f);
  s.heads_kv = 1;  // MQA: one KV head for all eight
  const PassReport mqa = count_backward_kernel(s, f);
  CHECK(mqa.tensor("K").read * 8 == mha.tensor("K").read);
  CHECK(mqa.tensor("dV").written * 8 == mha.tensor("dV").written);
  CHECK(mqa.tensor("Q").read == mha.tensor("Q").read);
  CHECK(mqa.ops.matrix_flops == mha.ops.matrix_flops);
  CHECK(mqa.launch("main").blocks * 8 == mha.launch("main").blocks);
}

TEST_CASE("backward mirror: count-only is fast at N = 2^22") {
  const BackwardShape s{.batch = 4,
                        .heads_q = 32,
                        .heads_kv = 8,
                        .n_q = Index{1} << 22,
                        .n_k = Index{1} << 22,
                        .d = 128,
                        .causal = cpu::Causal::top_left};
  const auto t0 = std::chrono::steady_clock::now();
  const PassReport r = count_backward_kernel(s, {.Br = 64, .Bc = 64, .deterministic = true});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.bytes_total() > 0);
  CHECK(seconds < 0.5);  // 2^16 KV tiles and query tiles, a few additions each
}

TEST_CASE("backward mirror: bad shapes are refused with what would be right") {
  const BackwardKernelFacts f{};
  CHECK(contains(message_of([&] { count_backward_kernel({.heads_q = 6, .heads_kv = 4}, f); }),
                 "heads_q must be a multiple of heads_kv"));
  CHECK(contains(message_of([&] { count_backward_kernel({.heads_q = 2, .heads_kv = 4}, f); }),
                 "heads_kv = 4 is out of range"));
  CHECK(contains(message_of([&] { count_backward_kernel({.n_q = 0}, f); }),
                 "N_q = 0 is out of range: the backward mirror takes 1 <= N_q"));
  CHECK(contains(message_of([&] { count_backward_kernel({}, {.Br = 0}); }), "Br = 0"));
  CHECK(contains(message_of([&] { count_backward_kernel({.d = 5000}, f); }), "d = 5000"));
  CHECK(contains(
      message_of([&] { count_backward_kernel({.causal = static_cast<cpu::Causal>(7)}, f); }),
      "causal"));
}

TEST_CASE("backward mirror: DRAM from a cold L2, launch by launch, worked by hand") {
  // 4 query heads over 2 KV heads, N_q = 97, N_k = 113, d = 64, bf16, no mask.
  const BackwardShape s{.heads_q = 4, .heads_kv = 2, .n_q = 97, .n_k = 113, .d = 64};
  const Bytes q = 4 * 97 * 64 * 2, kv = 2 * 113 * 64 * 2, rows = 4 * 97 * 4;
  const Bytes accumulator = 4 * 97 * 64 * 4;
  const Bytes all_room = Bytes{1} << 30;
  {
    const PassReport r = count_backward_kernel(s, {.Br = 64, .Bc = 32});
    REQUIRE(r.launches.size() == 3);
    // pre: O and dO in, D and the accumulator's zeros out.
    CHECK(compulsory_dram(r.launch("pre (D)"), all_room).read == 2 * q);
    // main: Q, K, V, dO, L, D once each, though each of its 2 x 4 blocks reads every query
    // tile of its group; and the accumulator's lines its reductions add to.
    CHECK(compulsory_dram(r.launch("main"), all_room).read ==
          q + 2 * kv + q + 2 * rows + accumulator);
    CHECK(r.tensor("Q").read == 4 * q);  // into the SMs: once a KV tile
    CHECK(compulsory_dram(r.launch("post (dQ)"), all_room).read == accumulator);
    const auto all = compulsory_dram(r, all_room);
    REQUIRE(all);
    CHECK(all->read == 2 * q + (2 * q + 2 * kv + 2 * rows + accumulator) + accumulator);
    CHECK(all->written == 0);
    // An L2 that holds 10,000 bytes dirty: pre writes D and the zeros, main dK, dV and the
    // accumulator, post dQ, each beyond the room.
    CHECK(compulsory_dram(r, 10'000)->written ==
          (rows + accumulator - 10'000) + (2 * kv + accumulator - 10'000) + (q - 10'000));
  }
  {
    // Deterministic: no accumulator; the dQ kernel reads the inputs again from a cold L2.
    const PassReport r = count_backward_kernel(s, {.Br = 64, .Bc = 32, .deterministic = true});
    const Bytes inputs = 2 * q + 2 * kv + 2 * rows;
    CHECK(compulsory_dram(r, all_room)->read == 2 * q + inputs + inputs);
    CHECK(compulsory_dram(r.launch("dQ"), 0).written == q);
  }
  {
    // v3 under the mask, top-left N_q = 100, N_k = 700: only the 128 keys of KV tile 0 are
    // seen, so only they are read; dK and dV are written whole.
    const BackwardShape m{.heads_q = 2,
                          .heads_kv = 1,
                          .n_q = 100,
                          .n_k = 700,
                          .d = 64,
                          .causal = cpu::Causal::top_left};
    const PassReport r = count_backward_kernel(
        m, {.Br = 64, .Bc = 128, .skips_unseen_kv = true, .main_kernel = "v3"});
    const Bytes mq = 2 * 100 * 64 * 2, mrows = 2 * 100 * 4, macc = 2 * 100 * 64 * 4;
    CHECK(compulsory_dram(r.launch("main"), all_room).read ==
          2 * mq + 2 * 128 * 64 * 2 + 2 * mrows + macc);
    CHECK(compulsory_dram(r.launch("main"), 0).written == 2 * 700 * 64 * 2 + macc);
  }
}

}  // namespace flashlab::sim::test
