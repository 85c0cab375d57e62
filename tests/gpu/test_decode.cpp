// Split-KV decode (gpu/kernels/05_decode_*.cu), the split grid and the queue grid, against
// the fp64 CPU reference decode: ragged
// lengths including 0 and 1 and on both sides of the tile, N_q in {1, 3, 4, 16}, every split
// count, GQA groups of 1 to 32 heads (32/8 and 4/1 among them), d 64 and 128, bf16 and fp16;
// the paged cache bitwise equal to the contiguous one; repeated runs bitwise equal; the
// device-side checks of lengths and page indices; every error status.
#include "checks.hpp"
#include "decode_harness.hpp"

#include "flashlab/gpu/kernel_info.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace flashlab::gpu::test {
namespace {

// Lengths with the awkward cases: empty, one key, shorter than N_q = 16, a ragged tile edge.
const std::vector<int> kRaggedLens = {0, 1, 17, 1023, 97, 113};

void expect_decode_matches(const DecodeCase& c, DecodeRun* run, int num_splits) {
  const DecodeOutcome out = run->run_and_compare(num_splits);
  INFO(c.describe(), " forced splits=", num_splits, " used=", out.splits, " err=", out.err,
       " naive-same-precision err=", out.err_naive, " bound=", out.bound, " LSE err=", out.lse_err);
  CHECK(out.unwritten == 0);
  CHECK(out.err <= out.bound);
  CHECK(out.lse_inf_matches);
  CHECK(out.empty_rows_zero);
  CHECK(out.lse_err <= kLseTolerance);
}

void expect_decode_matches(const DecodeCase& c) {
  const uint64_t seed = fresh_seed();
  DecodeRun run(c, seed);
  INFO("seed=", seed);
  expect_decode_matches(c, &run, c.num_splits);
}

// Both grids: a block per split, and the queue's persistent blocks (05_decode_queue.cu).
constexpr int kGrids[] = {FLASHLAB_DECODE_GRID_SPLITS, FLASHLAB_DECODE_GRID_QUEUE};

TEST_CASE("decode matches the fp64 reference: both grids, dtypes, d, N_q in {1, 4, 16}, GQA") {
  const int kGqa[][2] = {{32, 8}, {4, 1}};
  for (int grid : kGrids)
    for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
      for (int d : decode::kHeadDims)
        for (int n_q : {1, 4, 16})
          for (const auto& gqa : kGqa) {
            DecodeCase c;
            c.grid = grid;
            c.dtype = dtype;
            c.d = d;
            c.n_q = n_q;
            c.heads_q = gqa[0];
            c.heads_kv = gqa[1];
            c.lens = kRaggedLens;
            expect_decode_matches(c);
          }
}

// The packed rows of a block are the 16 rows of an mma tile: groups that fill part of it
// (1, 2, 4, 8 heads with one query), exactly (16), or more than one tile (32 heads; 8 heads
// x 3 queries = 24 rows: a full row block and a ragged one).
TEST_CASE("decode: GQA groups of 1, 2, 4, 8, 16 and 32 query heads per KV head") {
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : decode::kHeadDims)
      for (int group : {1, 2, 4, 8, 16, 32})
        for (int n_q : {1, 3}) {
          DecodeCase c;
          c.dtype = dtype;
          c.d = d;
          c.n_q = n_q;
          c.heads_kv = 2;
          c.heads_q = 2 * group;
          c.lens = {0, 1, 97, 1023};
          expect_decode_matches(c);
        }
}

// Lengths on both sides of the tile (decode::kBc keys) and of a split's share of tiles.
TEST_CASE("decode: lengths that are not a multiple of the tile, every way of splitting them") {
  const int bc = decode::kBc;
  for (int d : decode::kHeadDims)
    for (int splits : {1, 2, 3, 0}) {
      DecodeCase c;
      c.d = d;
      c.heads_q = 8;
      c.heads_kv = 2;
      c.n_q = 2;
      c.lens = {bc - 1, bc, bc + 1, 2 * bc - 1, 2 * bc + 1, 5 * bc + 17, 113};
      c.num_splits = splits;
      expect_decode_matches(c);
    }
}

// Every count from 1 to 64: splits (more than there are keys included), and the queue
// grid's pieces, from one item a block to many, so that its ring runs on across items with 0,
// 1 and many tiles.
TEST_CASE("decode with every split or piece count from 1 to 64, both grids, d 64 and 128") {
  for (int grid : kGrids)
    for (int d : decode::kHeadDims)
      for (int n_q : {1, 16}) {
        DecodeCase c;
        c.grid = grid;
        c.d = d;
        c.n_q = n_q;
        c.heads_q = 8;
        c.heads_kv = 2;
        c.lens = {0, 1, 40, 700, 3000};
        const uint64_t seed = fresh_seed();
        DecodeRun run(c, seed);
        INFO("seed=", seed);
        for (int count = 1; count <= decode::kMaxSplits; ++count)
          expect_decode_matches(c, &run, count);
      }
}

TEST_CASE("decode at a long cache: L = 32768, GQA 32/8, automatic splits") {
  DecodeCase c;
  c.heads_q = 32;
  c.heads_kv = 8;
  c.lens = {32768, 20000};
  expect_decode_matches(c);
}

TEST_CASE(
    "decode: the paged cache gives the contiguous cache's bits: both grids, pages of 16 to 256") {
  for (int grid : kGrids)
    for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
      for (int d : decode::kHeadDims)
        for (int page_size : {16, 64, 256})
          for (int splits : {1, 5, 0}) {
            DecodeCase c;
            c.grid = grid;
            c.dtype = dtype;
            c.d = d;
            c.n_q = 4;
            c.heads_q = 8;
            c.heads_kv = 2;
            c.lens = {0, 1, 255, 257, 1500};
            c.capacity = 2048;
            c.num_splits = splits;
            const uint64_t seed = fresh_seed();
            DecodeRun contiguous(c, seed);
            c.page_size = page_size;
            DecodeRun paged(c, seed);
            INFO(c.describe(), " seed=", seed);
            const DecodeBits a = contiguous.run(splits), b = paged.run(splits);
            CHECK(a == b);
            expect_decode_matches(c, &paged, splits);
          }
}

TEST_CASE("decode is bitwise deterministic over repeated runs") {
  DecodeCase c;
  c.heads_q = 32;
  c.heads_kv = 8;
  c.n_q = 4;
  c.lens = {5000, 0, 1, 777};
  c.page_size = 64;
  const uint64_t seed = fresh_seed();
  DecodeRun run(c, seed);
  INFO(c.describe(), " seed=", seed);
  const DecodeBits first = run.run(0);
  for (int r = 1; r < 20; ++r) CHECK(run.run(0) == first);
}

TEST_CASE("decode: every kv_l2_policy gives the same bits (a cache hint changes no value)") {
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : decode::kHeadDims)
      for (int page_size : {0, 64}) {
        DecodeCase c;
        c.dtype = dtype;
        c.d = d;
        c.heads_q = 32;
        c.heads_kv = 8;
        c.n_q = 4;
        c.lens = {3000, 1, 0, 1023};
        c.page_size = page_size;
        const uint64_t seed = fresh_seed();
        DecodeRun run(c, seed);
        INFO(c.describe(), " seed=", seed);
        run.params().kv_l2_policy = FLASHLAB_DECODE_L2_EVICT_NORMAL;
        const DecodeBits normal = run.run(0);
        run.params().kv_l2_policy = FLASHLAB_DECODE_L2_EVICT_FIRST;
        CHECK(run.run(0) == normal);
        run.params().kv_l2_policy = FLASHLAB_DECODE_L2_AUTO;
        const DecodeOutcome auto_policy = run.run_and_compare(0);
        CHECK(auto_policy.err <= auto_policy.bound);
        CHECK(auto_policy.unwritten == 0);
        CHECK(run.run(0) == normal);
      }
}

TEST_CASE("flashlab_decode_num_splits and _workspace_bytes answer from kernel_info's formulas") {
  DecodeCase c;
  c.heads_q = 32;
  c.heads_kv = 8;
  c.lens = {4096, 4096};
  DecodeRun run(c, fresh_seed());
  flashlab_decode_params& p = run.params();
  int sms = 0;
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  for (int forced : {0, 1, 7, 64}) {
    p.num_splits = forced;
    int32_t splits = -1;
    int64_t bytes = -1;
    REQUIRE(flashlab_decode_num_splits(&p, &splits) == FLASHLAB_OK);
    REQUIRE(flashlab_decode_workspace_bytes(&p, &bytes) == FLASHLAB_OK);
    const int expected = forced ? forced
                                : decode::auto_splits(p.batch, p.heads_kv, p.heads_q / p.heads_kv,
                                                      p.n_q, p.max_seq_len,
                                                      p.block_table != nullptr, sms);
    CHECK(splits == expected);
    CHECK(bytes == decode::workspace_bytes(p.batch, p.heads_q, p.n_q, p.d, expected));
    p.grid = FLASHLAB_DECODE_GRID_QUEUE;  // pieces: the queue's own automatic count
    REQUIRE(flashlab_decode_num_splits(&p, &splits) == FLASHLAB_OK);
    CHECK(splits == (forced ? forced : decode::auto_pieces(p.max_seq_len)));
    p.grid = FLASHLAB_DECODE_GRID_AUTO;
  }
}

// The lengths and the block table live on the device: a bad one is clamped or read as
// zeros, never read out of bounds, and flashlab_decode_check reports it.
TEST_CASE("decode: a length beyond the capacity and a page index out of range are reported") {
  DecodeCase c;
  c.lens = {100, 200};
  c.capacity = 256;
  c.page_size = 64;
  DecodeRun run(c, fresh_seed());
  flashlab_decode_params& p = run.params();

  SUBCASE("length") {
    const int32_t bad[2] = {100, 300};
    REQUIRE(cudaMemcpy(const_cast<int32_t*>(p.seq_lens), bad, sizeof(bad),
                       cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(flashlab_decode(&p) == FLASHLAB_OK);
    CHECK(flashlab_decode_check(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
    const std::string message = flashlab_last_error();
    CHECK(message.find("seq_lens[1]") != std::string::npos);
    CHECK(message.find("max_seq_len = 256") != std::string::npos);
  }
  SUBCASE("negative length") {
    const int32_t bad[2] = {-5, 100};
    REQUIRE(cudaMemcpy(const_cast<int32_t*>(p.seq_lens), bad, sizeof(bad),
                       cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(flashlab_decode(&p) == FLASHLAB_OK);
    CHECK(flashlab_decode_check(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(std::string(flashlab_last_error()).find("seq_lens[0]") != std::string::npos);
  }
  SUBCASE("page index") {
    const int32_t bad_page = int32_t(p.num_pages) + 5;
    int32_t* entry = const_cast<int32_t*>(p.block_table) + p.block_table_stride + 1;
    REQUIRE(cudaMemcpy(entry, &bad_page, 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(flashlab_decode(&p) == FLASHLAB_OK);
    CHECK(flashlab_decode_check(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
    const std::string message = flashlab_last_error();
    CHECK(message.find("block_table row 1") != std::string::npos);
    CHECK(message.find(std::to_string(bad_page)) != std::string::npos);
  }
  SUBCASE("a valid call after a bad one is clean again") {
    REQUIRE(flashlab_decode(&p) == FLASHLAB_OK);
    CHECK(flashlab_decode_check(&p) == FLASHLAB_OK);
  }
}

// The workspace's header (the error word and the queue's counter) is zeroed by the call
// itself (decode.cpp, before the split or queue kernel): a header left at 0xff..., as after
// any other use of the memory, must give a clean check and every piece of every sequence, and
// a call after a bad one on the same workspace must be clean again. Both grids; more pieces
// than the queue has blocks.
TEST_CASE("decode: the call zeroes its workspace's header (a poisoned error word and counter)") {
  for (int grid : kGrids) {
    DecodeCase c;
    c.grid = grid;
    c.heads_q = 8;
    c.heads_kv = 2;
    c.lens = {0, 1, 300, 4097, 1023};
    c.page_size = 64;
    c.num_splits = 9;
    const uint64_t seed = fresh_seed();
    DecodeRun run(c, seed);
    INFO(c.describe(), " seed=", seed);
    flashlab_decode_params& p = run.params();
    REQUIRE(cudaMemset(p.workspace, 0xff, size_t(decode::kWorkspaceHeaderBytes)) == cudaSuccess);
    expect_decode_matches(c, &run, c.num_splits);

    const int32_t bad[5] = {0, 1, 300, 5000, 1023};  // entry 3 beyond the capacity (4352)
    REQUIRE(cudaMemcpy(const_cast<int32_t*>(p.seq_lens), bad, sizeof(bad),
                       cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(flashlab_decode(&p) == FLASHLAB_OK);
    CHECK(flashlab_decode_check(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(std::string(flashlab_last_error()).find("seq_lens[3]") != std::string::npos);
    REQUIRE(cudaMemcpy(const_cast<int32_t*>(p.seq_lens), c.lens.data(), sizeof(bad),
                       cudaMemcpyHostToDevice) == cudaSuccess);
    expect_decode_matches(c, &run, c.num_splits);
  }
}

// More items than the grid has blocks, many times over: blocks race for them, and the bits
// must not depend on who won. 50 runs, paged and contiguous; and the queue with one piece
// gives the split grid's bits with one split (the same keys, the same merge: the queue's
// piece goes through the combine, the lone split ends its rows in the split kernel).
TEST_CASE("decode: the queue grid is bitwise deterministic and one piece is one split") {
  for (int page_size : {0, 64}) {
    DecodeCase c;
    c.grid = FLASHLAB_DECODE_GRID_QUEUE;
    c.heads_q = 32;
    c.heads_kv = 8;
    c.n_q = 4;
    c.lens = {20000, 0, 1, 777, 9000, 64, 65, 12345};
    c.page_size = page_size;
    const uint64_t seed = fresh_seed();
    DecodeRun run(c, seed);
    INFO(c.describe(), " seed=", seed);
    const DecodeBits first = run.run(decode::kMaxSplits);
    for (int r = 1; r < 50; ++r) CHECK(run.run(decode::kMaxSplits) == first);
    const DecodeOutcome out = run.run_and_compare(decode::kMaxSplits);
    CHECK(out.err <= out.bound);
    const DecodeBits one_piece = run.run(1);
    run.params().grid = FLASHLAB_DECODE_GRID_SPLITS;
    CHECK(run.run(1) == one_piece);
  }
}

// LSE is optional: without it the call writes O alone, the same bits, where one split ends
// its rows in the split kernel and where the combine does (3 splits, and the queue's piece).
TEST_CASE("decode without LSE writes the same O and nothing else") {
  DecodeCase c;
  c.heads_q = 8;
  c.heads_kv = 2;
  c.n_q = 3;
  c.lens = {0, 1, 300, 1023};
  const uint64_t seed = fresh_seed();
  DecodeRun run(c, seed);
  INFO(c.describe(), " seed=", seed);
  flashlab_decode_params& p = run.params();
  const size_t o_elems = size_t(c.lens.size()) * c.heads_q * c.n_q * c.d;
  const size_t rows = size_t(c.lens.size()) * c.heads_q * c.n_q;
  for (const int grid : {FLASHLAB_DECODE_GRID_SPLITS, FLASHLAB_DECODE_GRID_QUEUE})
    for (const int splits : {1, 3}) {
      CAPTURE(grid);
      CAPTURE(splits);
      p.grid = grid;
      const DecodeBits with_lse = run.run(splits);
      float* lse = p.lse;
      REQUIRE(cudaMemset(lse, 0x5a, rows * 4) == cudaSuccess);  // a pattern the call must keep
      REQUIRE(cudaMemset(p.o, 0xff, o_elems * 2) == cudaSuccess);
      p.lse = nullptr;
      p.num_splits = splits;
      const flashlab_status status = flashlab_decode(&p);
      p.lse = lse;
      REQUIRE(status == FLASHLAB_OK);
      REQUIRE(flashlab_decode_check(&p) == FLASHLAB_OK);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      std::vector<uint16_t> o(o_elems);
      std::vector<uint32_t> kept(rows);
      REQUIRE(cudaMemcpy(o.data(), p.o, o_elems * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
      REQUIRE(cudaMemcpy(kept.data(), lse, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(o == with_lse.o);
      for (const uint32_t word : kept) CHECK(word == 0x5a5a5a5au);
    }
}

// Small enough for compute-sanitizer (memcheck, racecheck, synccheck): items with 0, 1 and
// many tiles, more items than one block's, two row blocks, paged and contiguous.
TEST_CASE("decode: the queue grid once at small sizes (compute-sanitizer runs this)") {
  for (int d : decode::kHeadDims)
    for (int page_size : {0, 16}) {
      DecodeCase c;
      c.grid = FLASHLAB_DECODE_GRID_QUEUE;
      c.d = d;
      c.n_q = 5;
      c.heads_q = 8;
      c.heads_kv = 2;
      c.lens = {0, 1, 97, 1023, 3000};
      c.page_size = page_size;
      c.num_splits = 7;
      expect_decode_matches(c);
    }
}

TEST_CASE("decode: the queue grid reports a bad length and a bad page as the split grid does") {
  DecodeCase c;
  c.grid = FLASHLAB_DECODE_GRID_QUEUE;
  c.lens = {100, 200};
  c.capacity = 256;
  c.page_size = 64;
  DecodeRun run(c, fresh_seed());
  flashlab_decode_params& p = run.params();
  const int32_t bad[2] = {100, 300};
  REQUIRE(cudaMemcpy(const_cast<int32_t*>(p.seq_lens), bad, sizeof(bad),
                     cudaMemcpyHostToDevice) == cudaSuccess);
  const int32_t bad_page = int32_t(p.num_pages) + 5;
  int32_t* entry = const_cast<int32_t*>(p.block_table) + 1;
  REQUIRE(cudaMemcpy(entry, &bad_page, 4, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(flashlab_decode(&p) == FLASHLAB_OK);
  CHECK(flashlab_decode_check(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
  const std::string message = flashlab_last_error();
  CHECK(message.find("seq_lens[1]") != std::string::npos);
  CHECK(message.find("block_table row 0") != std::string::npos);
}

TEST_CASE("decode refuses host memory and a too-small workspace with a status and a message") {
  DecodeCase c;
  c.lens = {64};
  DecodeRun run(c, fresh_seed());
  flashlab_decode_params& p = run.params();
  SUBCASE("host O") {
    std::vector<uint16_t> host(size_t(p.heads_q) * p.d);
    p.o = host.data();
    p.o_stride[0] = p.heads_q * p.d;  // keep the strides those of a (1, Hq, 1, d) tensor
    CHECK(flashlab_decode(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(std::string(flashlab_last_error()).find("host memory") != std::string::npos);
  }
  SUBCASE("workspace") {
    p.workspace_bytes = 1000;
    CHECK(flashlab_decode(&p) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(std::string(flashlab_last_error()).find("needs") != std::string::npos);
  }
}

}  // namespace
}  // namespace flashlab::gpu::test
