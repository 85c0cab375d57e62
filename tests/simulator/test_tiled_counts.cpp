// FA1's and FA2's traffic against the closed forms their loops imply, causal skipping,
// and the block sizes the paper's rule gives.
#include "helpers.hpp"

#include <doctest/doctest.h>

namespace flashlab::sim::test {

namespace {

struct Case {
  Index N, d;
  Bytes sram;
};
constexpr Case kCases[] = {{1, 16, 4 * kKiB},     {97, 59, 32 * kKiB},   {1023, 128, 192 * kKiB},
                           {1024, 64, 64 * kKiB}, {4096, 32, 16 * kKiB}, {2000, 100, 100 * kKiB}};

}  // namespace

TEST_CASE("fa1: Nd + 2N to initialise, then 2Nd + Tc (3Nd + 4N) elements") {
  for (const Case& c : kCases) {
    for (const DType dtype : {DType::fp32, DType::bf16}) {
      CAPTURE(c.N);
      CAPTURE(c.d);
      CAPTURE(c.sram);
      const Index N = c.N, d = c.d;
      const Report r = count(Algorithm::fa1, problem(N, d, dtype, c.sram));
      const Index Tc = ceil_div(N, r.tiles->tiles.Bc);
      // O, l, m initialised once; K_j, V_j loaded once each; at each of the Tc KV tiles,
      // every query tile reads Q_i, O_i, l_i, m_i and writes O_i, l_i, m_i.
      const Index elements = (N * d + 2 * N) + 2 * N * d + Tc * (3 * N * d + 4 * N);
      if (dtype == DType::fp32) CHECK(r.bytes_total() == elements * 4);
      // Q, K, V are in the input type; the running O, l and m are fp32.
      const Bytes e = bytes_of(dtype), e_acc = bytes_of(DType::fp32);
      const Bytes bytes = e * (2 * N * d + Tc * N * d) +
                          e_acc * ((N * d + 2 * N) + Tc * (2 * N * d + 4 * N));
      CHECK(r.bytes_total() == bytes);
      CHECK(r.tensor("K").read == N * d * e);
      CHECK(r.tensor("Q").read == Tc * N * d * e);
      CHECK(r.tile_counts.computed == Tc * ceil_div(N, r.tiles->tiles.Br));
      CHECK(r.peak_sram <= c.sram);
    }
  }
}

TEST_CASE("fa2: Q, O, L once, K and V once per query tile") {
  for (const Case& c : kCases) {
    CAPTURE(c.N);
    CAPTURE(c.d);
    const Index N = c.N, d = c.d;
    const Report r = count(Algorithm::fa2, problem(N, d, DType::bf16, c.sram));
    const Index Tr = ceil_div(N, r.tiles->tiles.Br);
    const Bytes e = 2, e_L = 4;
    CHECK(r.tensor("Q").read == N * d * e);
    CHECK(r.tensor("K").read == Tr * N * d * e);
    CHECK(r.tensor("V").read == Tr * N * d * e);
    CHECK(r.tensor("O").written == N * d * e);
    CHECK(r.tensor("L").written == N * e_L);
    CHECK(r.bytes_total() == e * (N * d + 2 * Tr * N * d + N * d) + e_L * N);
    CHECK(r.peak_sram <= c.sram);
  }
}

TEST_CASE("fa2 as a kernel: O and L written are the sectors of its epilogue's stores") {
  // The scalar kernel (a lane per row, one element a store; its L lane by lane along the
  // rows) and fa2 (mma fragments: 4 bytes a lane over 8 rows; L by one lane of each quad,
  // 8 rows a sector), by hand; N awkward so that the last query tile is ragged.
  struct Kernel {
    WarpStore o, l;
    Index Br, Bc;
  };
  const Kernel scalar{{2, 32, 32}, {4, 32, 1}, 64, 32}, fa2{{4, 32, 8}, {4, 8, 1}, 128, 64};
  for (const Index N : {1, 17, 97, 113, 1023, 1024})
    for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left}) {
      CAPTURE(N);
      const Index d = 64;
      Problem p{.N = N, .d = d, .dtype = DType::bf16, .causal = causal};
      const auto sectors = [](Index bytes) { return ceil_div(bytes, 32) * 32; };
      for (const Kernel& k : {scalar, fa2}) {
        p.tiles = cpu::TileSizes{k.Br, k.Bc};
        const Report data = count(Algorithm::fa2, p);
        p.o_store = k.o;
        p.l_store = k.l;
        const Report r = count(Algorithm::fa2, p);
        CHECK(r.bytes_read() == data.bytes_read());
        CHECK(r.dram_written() == data.dram_written());  // DRAM takes the data
        // O: each store's run is one element (scalar: 16x) or 16 bytes (fa2: 2x).
        CHECK(r.tensor("O").written == (k.o.runs == 32 ? 16 : 2) * N * d * 2);
        // L: each query tile's stretch of floats in runs of 128 (scalar) or 32 bytes (fa2).
        Index l = 0;
        for (Index q0 = 0; q0 < N; q0 += k.Br) {
          const Index rows = std::min(k.Br, N - q0), run = k.l.run_bytes();
          l += (rows * 4 / run) * run + sectors(rows * 4 % run);
        }
        CHECK(r.tensor("L").written == l);
        p.o_store.reset();
        p.l_store.reset();
      }
    }
}

TEST_CASE("the paper's block sizes: Bc = ceil(M / 4d), Br = min(Bc, d), halved only to fit") {
  for (const Case& c : kCases) {
    for (const Algorithm a : {Algorithm::fa1, Algorithm::fa2}) {
      const Problem p = problem(c.N, c.d, DType::bf16, c.sram);
      const TileChoice t = choose_tiles(a, p);
      const Index M = c.sram / 2;
      CHECK(t.paper.Bc == ceil_div(M, 4 * c.d));
      CHECK(t.paper.Br == std::min(t.paper.Bc, c.d));
      CHECK(sram_footprint(a, p, t.tiles) <= c.sram);
      if (t.how == "paper") CHECK((t.tiles.Br == t.paper.Br && t.tiles.Bc == t.paper.Bc));
      else CHECK(sram_footprint(a, p, t.paper) > c.sram);
    }
  }
}

TEST_CASE("the FA2 order moves fewer bytes than the FA1 order for the same tiles") {
  struct Tiled { Index N, d, B; };
  for (const auto [N, d, B] : {Tiled{97, 59, 16}, Tiled{1024, 64, 64}, Tiled{4096, 128, 128},
                               Tiled{3000, 16, 200}, Tiled{1, 8, 4}}) {
    Problem p = problem(N, d, DType::bf16, 4096 * kKiB);
    p.tiles = cpu::TileSizes{B, B};
    const Report fa1 = count(Algorithm::fa1, p), fa2 = count(Algorithm::fa2, p);
    CAPTURE(N);
    CHECK(fa2.bytes_total() < fa1.bytes_total());
    CHECK(fa2.ops.matrix_flops == fa1.ops.matrix_flops);  // the same tiles, the same products
    CHECK(fa2.ops.non_matrix() < fa1.ops.non_matrix());   // no merge, one normalisation
  }
}

TEST_CASE("with unequal tiles, the leading terms say which order moves fewer bytes") {
  // FA1 re-reads Q and reads and writes O once per KV tile: about 3Nd (N / Bc) elements.
  // FA2 re-reads K and V once per query tile: about 2Nd (N / Br). FA1 wins when Bc is
  // well above 1.5 Br.
  struct Tiled { Index N, d, Br, Bc; };
  for (const auto [N, d, Br, Bc] : {Tiled{4096, 128, 64, 128}, Tiled{4096, 128, 128, 32},
                                    Tiled{3000, 16, 8, 200}, Tiled{8192, 64, 256, 64}}) {
    Problem p = problem(N, d, DType::fp32, 4096 * kKiB);
    p.tiles = cpu::TileSizes{Br, Bc};
    const double fa1_leading = 3.0 * N * d * ceil_div(N, Bc);
    const double fa2_leading = 2.0 * N * d * ceil_div(N, Br);
    const bool fa1_predicted_smaller = fa1_leading < fa2_leading;
    CAPTURE(Br);
    CAPTURE(Bc);
    CHECK((count(Algorithm::fa1, p).bytes_total() < count(Algorithm::fa2, p).bytes_total()) ==
          fa1_predicted_smaller);
  }
}

TEST_CASE("causal: tiles wholly in the future are skipped and cost nothing") {
  struct Tiled { Index N, d, Br, Bc; };
  for (const auto [N, d, Br, Bc] :
       {Tiled{97, 59, 16, 16}, Tiled{1000, 32, 64, 48}, Tiled{1023, 64, 32, 96}}) {
    Problem p = problem(N, d, DType::bf16, 1024 * kKiB, cpu::Causal::top_left);
    p.tiles = cpu::TileSizes{Br, Bc};
    // Tile (i, j) holds queries [q0, q_last] and keys [k0, ...]: it is needed exactly when
    // its last query may see its first key, k0 <= q_last.
    Index needed = 0, kv_rows_read = 0, query_rows_visited = 0;
    const Index Tr = ceil_div(N, Br), Tc = ceil_div(N, Bc);
    for (Index i = 0; i < Tr; ++i)
      for (Index j = 0; j < Tc; ++j) {
        const Index q_last = std::min(N, (i + 1) * Br) - 1, k0 = j * Bc;
        if (k0 > q_last) continue;
        ++needed;
        kv_rows_read += std::min(Bc, N - k0);
        query_rows_visited += std::min(Br, N - i * Br);
      }
    const Report fa2 = count(Algorithm::fa2, p), fa1 = count(Algorithm::fa1, p);
    CHECK(fa2.tile_counts.computed == needed);
    CHECK(fa2.tile_counts.skipped == Tr * Tc - needed);
    CHECK(fa1.tile_counts.computed == needed);
    CHECK(fa2.tensor("K").read == kv_rows_read * d * 2);
    CHECK(fa1.tensor("Q").read == query_rows_visited * d * 2);
    p.causal = cpu::Causal::none;
    CHECK(fa2.bytes_total() < count(Algorithm::fa2, p).bytes_total());
  }
}

}  // namespace flashlab::sim::test
