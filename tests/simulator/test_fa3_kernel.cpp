// The mirror of the Hopper forward (fa3_kernel_program.cpp): every tensor's bytes, the work
// and the block's SRAM against the closed form of its header, with the keys each block loads
// found here by classifying every (query tile, KV tile) pair with cpu::Mask (not the
// program's last-row rule); the shapes awkward (N = 1, 97, 1023, N_q != N_k both ways, both
// causal alignments, GQA, MQA).
#include "helpers.hpp"

#include "flashlab/sim/fa3_kernel.hpp"

#include <doctest/doctest.h>

#include <tuple>

namespace flashlab::sim::test {

namespace {

struct Loaded {
  Index keys = 0;     // KL: key rows of K (and of V) loaded by one query head's blocks
  Index tiles = 0;    // KV tiles loaded
  Index working = 0;  // blocks that load a KV tile
};

// A block loads every KV tile that is not wholly in the future of all its rows: the tiles
// cpu::Mask does not classify as skipped, each a whole box of Bc rows (TMA's rows past N_k
// are zero-filled, and counted into the SMs as the rest).
Loaded brute_force(const Fa3Shape& s, Index Br, Index Bc) {
  const cpu::Mask mask{s.causal, s.n_q, s.n_k};
  Loaded x;
  for (Index i = 0; i * Br < s.n_q; ++i) {
    const Index rows = std::min(Br, s.n_q - i * Br);
    Index tiles = 0;
    for (Index j = 0; j * Bc < s.n_k; ++j) {
      const Index cols = std::min(Bc, s.n_k - j * Bc);
      if (mask.classify(i * Br, rows, j * Bc, cols) == cpu::TileKind::skipped) continue;
      x.keys += Bc;
      ++tiles;
    }
    x.tiles += tiles;
    x.working += tiles > 0 ? 1 : 0;
  }
  return x;
}

Fa3KernelFacts facts(Index stages, DType dtype) {
  return {.Br = 128,
          .Bc = 128,
          .consumers = 2,
          .stages = stages,
          .threads = 384,
          .align_slack = 1024,
          .barrier_bytes = 1024,
          .dtype = dtype};
}

void check_closed_form(const Fa3Shape& s, const Fa3KernelFacts& f) {
  CAPTURE(s.n_q);
  CAPTURE(s.n_k);
  CAPTURE(s.d);
  CAPTURE(cpu::to_string(s.causal));
  CAPTURE(s.heads_q);
  CAPTURE(s.heads_kv);
  CAPTURE(f.Bc);
  const PassReport r = count_fa3_kernel(s, f);
  const Loaded x = brute_force(s, f.Br, f.Bc);
  const Index b = bytes_of(f.dtype), d = s.d, Hq = s.batch * s.heads_q;
  const Index Tr = ceil_div(s.n_q, f.Br);
  CHECK(r.tensor("Q").read == Hq * Tr * f.Br * d * b);  // whole boxes of Br rows
  CHECK(r.tensor("K").read == Hq * x.keys * d * b);
  CHECK(r.tensor("V").read == Hq * x.keys * d * b);
  CHECK(r.tensor("O").written == Hq * s.n_q * d * b);
  CHECK(r.tensor("L").written == Hq * s.n_q * 4);
  for (const char* name : {"Q", "K", "V"}) CHECK(r.tensor(name).written == 0);
  for (const char* name : {"O", "L"}) CHECK(r.tensor(name).read == 0);
  CHECK(r.launch("fa3").blocks == Hq * Tr);
  CHECK(r.launch("fa3").working == Hq * x.working);
  const Index tiles = Hq * x.tiles, scores = tiles * f.Br * f.Bc;
  CHECK(r.ops.matrix_flops == 2 * 2 * scores * d);
  CHECK(r.ops.exp == scores + tiles * f.Br + Hq * Tr * f.Br);
  CHECK(r.ops.rescale == tiles * f.Br * (d + 1));
  CHECK(r.ops.divide == Hq * Tr * f.Br * d);
  CHECK(r.peak_sram ==
        1024 + f.Br * d * b + f.stages * 2 * f.Bc * d * b + 1024 + (f.stages_o ? f.Br * d * b : 0));
}

}  // namespace

TEST_CASE("fa3 mirror: every tensor and the work match the closed form on awkward shapes") {
  const Index lengths[] = {1, 97, 128, 129, 1023};
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left, cpu::Causal::bottom_right})
    for (const Index n_q : lengths)
      for (const Index n_k : lengths) {
        const Fa3Shape s{.batch = 2,
                         .heads_q = 4,
                         .heads_kv = 2,
                         .n_q = n_q,
                         .n_k = n_k,
                         .d = 128,
                         .causal = causal};
        check_closed_form(s, facts(2, DType::bf16));
        Fa3Shape d64 = s;
        d64.d = 64;
        Fa3KernelFacts narrow = facts(3, DType::fp16);
        narrow.Bc = 48;  // tiles that do not divide the lengths another way
        check_closed_form(d64, narrow);
      }
}

// The (R, Bc) tiles the consumers compute, R = Br / consumers, found by classifying each
// consumer's rows against each tile its block loads: with skips_unseen, those that are not
// wholly in the future of the consumer's rows (none where its rows start past N_q), else all.
Index consumer_tiles_brute_force(const Fa3Shape& s, const Fa3KernelFacts& f) {
  const cpu::Mask mask{s.causal, s.n_q, s.n_k};
  const Index R = f.Br / f.consumers;
  Index count = 0;
  for (Index i = 0; i * f.Br < s.n_q; ++i) {
    const Index block_rows = std::min(f.Br, s.n_q - i * f.Br);
    for (Index j = 0; j * f.Bc < s.n_k; ++j) {
      const Index cols = std::min(f.Bc, s.n_k - j * f.Bc);
      if (mask.classify(i * f.Br, block_rows, j * f.Bc, cols) == cpu::TileKind::skipped) continue;
      for (Index c = 0; c < f.consumers; ++c) {
        const Index first = i * f.Br + c * R;
        if (!f.skips_unseen) {
          ++count;
        } else if (first < s.n_q) {
          const Index rows = std::min(R, s.n_q - first);
          count += mask.classify(first, rows, j * f.Bc, cols) != cpu::TileKind::skipped;
        }
      }
    }
  }
  return count;
}

TEST_CASE("fa3 mirror: three consumers that compute only the tiles their rows see (d = 64)") {
  Fa3KernelFacts f = facts(3, DType::bf16);
  f.Br = 192;
  f.consumers = 3;
  f.threads = 512;
  // Worked by hand, one head of N = 1024, d = 64: six query tiles of 192 rows (the last one
  // rows 960..1151, consumers 1 and 2 past N), eight KV tiles. Top-left mask: the item of
  // query tile t loads min(8, ceil(192 (t + 1) / 128)) = 2 3 5 6 8 8 tiles; consumer c needs
  // ceil((192 t + 64 (c + 1)) / 128): 1 1 2 | 2 3 3 | 4 4 5 | 5 6 6 | 7 7 8 | 8 - -, 72 in all
  // against 3 x 32 = 96. Without the mask: 16 consumers with rows x 8 = 128 against 144.
  const Index d = 64, R = 64, Bc = 128;
  for (const auto& [causal, skipping, all] :
       {std::tuple{cpu::Causal::top_left, Index{72}, Index{96}},
        std::tuple{cpu::Causal::none, Index{128}, Index{144}}}) {
    const Fa3Shape s{.n_q = 1024, .n_k = 1024, .d = d, .causal = causal};
    f.skips_unseen = true;
    const PassReport skip = count_fa3_kernel(s, f);
    f.skips_unseen = false;
    const PassReport every = count_fa3_kernel(s, f);
    CHECK(fa3_consumer_tiles(s, f) == all);
    f.skips_unseen = true;
    CHECK(fa3_consumer_tiles(s, f) == skipping);
    CHECK(skip.ops.matrix_flops == 2 * 2 * skipping * R * Bc * d);
    CHECK(every.ops.matrix_flops == 2 * 2 * all * R * Bc * d);
    CHECK(skip.ops.exp == skipping * R * Bc + skipping * R + 6 * 192);
    CHECK(skip.ops.rescale == skipping * R * (d + 1));
    // The bytes do not change: the producer loads every tile some row of the item sees.
    for (const char* name : {"Q", "K", "V", "O", "L"}) {
      CHECK(skip.tensor(name).read == every.tensor(name).read);
      CHECK(skip.tensor(name).written == every.tensor(name).written);
    }
  }
  // Against the brute force on awkward shapes, both alignments, N_q != N_k both ways.
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left, cpu::Causal::bottom_right})
    for (const Index n_q : {1, 97, 193, 1023})
      for (const Index n_k : {1, 97, 700, 1023})
        for (const bool skips : {false, true}) {
          const Fa3Shape s{.heads_q = 2, .heads_kv = 1, .n_q = n_q, .n_k = n_k, .d = d,
                           .causal = causal};
          f.skips_unseen = skips;
          CAPTURE(n_q);
          CAPTURE(n_k);
          CAPTURE(cpu::to_string(causal));
          CAPTURE(skips);
          CHECK(count_fa3_kernel(s, f).ops.matrix_flops ==
                2 * 2 * 2 * consumer_tiles_brute_force(s, f) * R * Bc * d);
        }
}

TEST_CASE("fa3 mirror: without a mask each query tile reads all of K and V once") {
  const Fa3Shape s{.heads_q = 16, .heads_kv = 4, .n_q = 1023, .n_k = 97, .d = 128};
  const PassReport r = count_fa3_kernel(s, facts(2, DType::bf16));
  const Index Tr = ceil_div(1023, 128);  // 8
  CHECK(r.tensor("K").read == 16 * Tr * 128 * 128 * 2);  // one box of 128 rows, 97 inside
  CHECK(r.tensor("Q").read == 16 * Tr * 128 * 128 * 2);  // 8 boxes of 128 rows, 1023 inside
  CHECK(r.launch("fa3").working == 16 * Tr);
}

TEST_CASE("fa3 mirror: bottom-right causal with N_q > N_k leaves the first blocks without keys") {
  // 1023 queries against 97 keys, bottom-right: row i sees keys 0 .. i - 926. The first
  // seven query tiles (rows 0 .. 895) see none, and load only Q; tile 7 (rows 896 .. 1022)
  // sees all 97 keys.
  const Fa3Shape s{.n_q = 1023, .n_k = 97, .d = 128, .causal = cpu::Causal::bottom_right};
  const PassReport r = count_fa3_kernel(s, facts(2, DType::bf16));
  CHECK(r.launch("fa3").blocks == 8);
  CHECK(r.launch("fa3").working == 1);
  CHECK(r.tensor("K").read == 128 * 128 * 2);      // one box: the 97 keys and 31 zero rows
  CHECK(r.tensor("Q").read == 8 * 128 * 128 * 2);  // eight boxes: 1023 rows and one zero row
  CHECK(r.tensor("O").written == 1023 * 128 * 2);  // stores only the rows inside
}

TEST_CASE("fa3 mirror: causal square problems load T (T + 1) / 2 of the T^2 tiles") {
  const Fa3Shape full{.n_q = 8192, .n_k = 8192, .d = 128};
  Fa3Shape causal = full;
  const Index T = 8192 / 128;
  for (const auto alignment : {cpu::Causal::top_left, cpu::Causal::bottom_right}) {
    causal.causal = alignment;  // N_q = N_k: the two alignments agree
    CHECK(count_fa3_kernel(causal, facts(2, DType::bf16)).tensor("K").read * 2 * T ==
          count_fa3_kernel(full, facts(2, DType::bf16)).tensor("K").read * (T + 1));
  }
}

TEST_CASE("fa3 mirror: GQA shares K and V in HBM, not on chip, and stages change SRAM, not bytes") {
  Fa3Shape s{.heads_q = 8, .heads_kv = 8, .n_q = 97, .n_k = 1023, .d = 128};
  const PassReport mha = count_fa3_kernel(s, facts(2, DType::bf16));
  s.heads_kv = 1;  // MQA: one KV head for all eight
  const PassReport mqa = count_fa3_kernel(s, facts(2, DType::bf16));
  CHECK(mqa.tensor("K").read == mha.tensor("K").read);
  CHECK(mqa.tensor("K").elements * 8 == mha.tensor("K").elements);
  const PassReport one = count_fa3_kernel(s, facts(1, DType::bf16));
  const PassReport three = count_fa3_kernel(s, facts(3, DType::bf16));
  CHECK(one.bytes_total() == three.bytes_total());
  CHECK(three.peak_sram - one.peak_sram == 2 * (2 * 128 * 128 * 2));
  // A second Q buffer (consumers running across work items) is one more (Br, d) tile of
  // SRAM and moves no byte: each item's Q is still loaded once.
  Fa3KernelFacts two_q = facts(2, DType::bf16);
  two_q.q_buffers = 2;
  const PassReport across = count_fa3_kernel(s, two_q);
  const PassReport apart = count_fa3_kernel(s, facts(2, DType::bf16));
  CHECK(across.bytes_total() == apart.bytes_total());
  CHECK(across.tensor("Q").read == apart.tensor("Q").read);
  CHECK(across.peak_sram - apart.peak_sram == 128 * 128 * 2);
}

TEST_CASE("fa3 mirror: a shape or facts it cannot take is refused with the reason") {
  const Fa3Shape ok{.heads_q = 4, .heads_kv = 2, .n_q = 97, .n_k = 97, .d = 128};
  Fa3Shape bad = ok;
  bad.heads_kv = 3;
  CHECK_THROWS_WITH_AS(count_fa3_kernel(bad, facts(2, DType::bf16)),
                       doctest::Contains("heads_kv = 3"), cpu::InvalidArgument);
  bad = ok;
  bad.n_q = 0;
  CHECK_THROWS_WITH_AS(count_fa3_kernel(bad, facts(2, DType::bf16)),
                       doctest::Contains("N_q = 0 is out of range"), cpu::InvalidArgument);
  Fa3KernelFacts f = facts(0, DType::bf16);
  CHECK_THROWS_WITH_AS(count_fa3_kernel(ok, f), doctest::Contains("stages = 0"),
                       cpu::InvalidArgument);
  f = facts(2, DType::bf16);
  f.q_buffers = 0;
  CHECK_THROWS_WITH_AS(count_fa3_kernel(ok, f), doctest::Contains("q_buffers = 0"),
                       cpu::InvalidArgument);
  f = facts(2, DType::bf16);
  f.consumers = 3;
  CHECK_THROWS_WITH_AS(count_fa3_kernel(ok, f), doctest::Contains("does not split over 3"),
                       cpu::InvalidArgument);
}

TEST_CASE("fa3 mirror: O and L written are the sectors of the epilogue's stores, or TMA's rows") {
  // finalize stores O from the wgmma accumulator as mma.sync fragments: 4 bytes a lane over
  // 8 rows (8 sectors for 128 bytes); L by one lane of each quad, 8 rows a sector from where
  // the head starts. By hand: head h's L starts 4 h n_q bytes in, so with 3 heads at n_q =
  // 17 heads 1 and 2 start 4 and 8 bytes past a sector boundary, and their 2 whole runs take
  // 2 sectors each, their last row 1: 3 + 5 + 5. At 97 (4 and 8 past): 13 + 25 + 25; at 1023
  // (28 and 24 past, 127 runs and 7 rows of 28 bytes, 2 sectors): 128 + 256 + 256.
  const auto l_sectors = [](Index n_q, Index heads) -> Index {
    if (heads == 1 || n_q % 8 == 0) return heads * ceil_div(n_q, 8);
    switch (n_q) {
      case 1: return 3;
      case 17: return 3 + 5 + 5;
      case 97: return 13 + 25 + 25;
      case 1023: return 128 + 256 + 256;
    }
    FAIL("no hand-worked count for n_q = " << n_q);
    return 0;
  };
  for (const Index n_q : {1, 17, 97, 128, 1023})
    for (const Index heads : {1, 3}) {
      CAPTURE(n_q);
      CAPTURE(heads);
      const Fa3Shape s{.heads_q = heads, .heads_kv = 1, .n_q = n_q, .n_k = 300, .d = 128};
      Fa3KernelFacts f{.Br = 128, .Bc = 128, .stages = 2, .dtype = DType::bf16};
      const PassReport data = count_fa3_kernel(s, f);
      f.o_store = WarpStore{4, 32, 8};
      f.lse_store = WarpStore{4, 8, 1};
      const PassReport r = count_fa3_kernel(s, f);
      CHECK(r.bytes_read() == data.bytes_read());
      CHECK(r.tensor("O").written == 2 * heads * n_q * 128 * 2);
      CHECK(r.tensor("L").written == l_sectors(n_q, heads) * 32);
      CHECK(r.bytes_written_by_tma() == 0);
      // O staged in SRAM and sent by TMA stores: its rows whole, its bytes of data, all of
      // them outside the L1's store pipe; L as before; sO in the SRAM.
      f.stages_o = true;
      const PassReport staged = count_fa3_kernel(s, f);
      CHECK(staged.tensor("O").written == heads * n_q * 128 * 2);
      CHECK(staged.tensor("O").written_by_tma == heads * n_q * 128 * 2);
      CHECK(staged.bytes_written_by_tma() == heads * n_q * 128 * 2);
      CHECK(staged.tensor("L").written == r.tensor("L").written);
      CHECK(staged.peak_sram == r.peak_sram + 128 * 128 * 2);
      f.lse_store = WarpStore{4, 32, 5};
      CHECK_THROWS_WITH_AS(count_fa3_kernel(s, f), doctest::Contains("the runs must divide"),
                           cpu::InvalidArgument);
    }
}

TEST_CASE("fa3 mirror: the work queue's claims, a sector out and one back per item") {
  // Blocks take their first items by their index and claim one more after each item they
  // load, the last claim telling them the queue is done: one atomic add per item in all,
  // over every head of the batch, whatever the mask. They are no store instruction.
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left})
    for (const Index n_q : {1, 97, 1023}) {
      CAPTURE(n_q);
      CAPTURE(cpu::to_string(causal));
      const Fa3Shape s{.batch = 2,
                       .heads_q = 3,
                       .heads_kv = 1,
                       .n_q = n_q,
                       .n_k = n_q,
                       .d = 64,
                       .causal = causal};
      Fa3KernelFacts f = facts(2, DType::bf16);
      f.lse_store = WarpStore{4, 8, 1};
      const PassReport fixed = count_fa3_kernel(s, f);
      f.work_queue = true;
      const PassReport queue = count_fa3_kernel(s, f);
      const Index items = 2 * 3 * ceil_div(n_q, Index{128});
      CHECK(queue.tensor("queue counter").read == items * 32);
      CHECK(queue.tensor("queue counter").written == items * 32);
      CHECK(queue.bytes_written_by_atomics() == items * 32);
      CHECK(queue.bytes_read() == fixed.bytes_read() + items * 32);
      CHECK(queue.bytes_written() == fixed.bytes_written() + items * 32);
      CHECK(queue.bytes_stores_issued() == fixed.bytes_stores_issued());
      CHECK(fixed.bytes_written_by_atomics() == 0);
      CHECK_THROWS_AS(static_cast<void>(fixed.tensor("queue counter")), std::out_of_range);
      CHECK(queue.label.find("work queue") != std::string::npos);
      CHECK(fixed.label.find("work queue") == std::string::npos);
    }
}

}  // namespace flashlab::sim::test
