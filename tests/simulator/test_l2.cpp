// The optional L2 between HBM and SRAM (LRU over tiles): what reaches HBM's DRAM past it.
#include "helpers.hpp"

#include <doctest/doctest.h>

namespace flashlab::sim::test {

namespace {

constexpr Bytes kHugeL2 = Bytes{1} << 40;  // holds every tensor of these problems

void check_dram_equals_traffic(const Report& r) {
  for (const auto& t : r.tensors) {
    CAPTURE(t.name);
    CHECK(t.dram_read == t.read);
    CHECK(t.dram_written == t.written);
  }
}

}  // namespace

TEST_CASE("without an L2, every byte the SRAM moves reaches HBM's DRAM") {
  for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2})
    check_dram_equals_traffic(count(a, problem(1023, 64, DType::bf16, 64 * kKiB, cpu::Causal::top_left)));
}

TEST_CASE("an L2 that holds everything leaves each tensor read once and written once") {
  const Index N = 1000, d = 48;
  const Bytes e = 2, e_acc = 4;
  Problem p = problem(N, d, DType::bf16, 64 * kKiB);
  p.l2_bytes = kHugeL2;
  const Report fa2 = count(Algorithm::fa2, p);
  CHECK(fa2.dram_read() == 3 * N * d * e);          // Q, K, V
  CHECK(fa2.dram_written() == N * d * e + N * e_acc);  // O, L
  CHECK(fa2.bytes_total() > fa2.dram_total());       // K and V were re-read from the L2
  // FA1 writes O, l, m before it ever reads them, so they are never fetched from DRAM.
  const Report fa1 = count(Algorithm::fa1, p);
  CHECK(fa1.dram_read() == 3 * N * d * e);
  CHECK(fa1.dram_written() == N * d * e_acc + 2 * N * e_acc);
}

TEST_CASE("tiles larger than the L2 bypass it") {
  Problem p = problem(500, 64, DType::bf16, 64 * kKiB);
  p.l2_bytes = 64 * 2 - 1;  // one byte short of one row of Q, K, V or O
  for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2})
    check_dram_equals_traffic(count(a, p));
}

TEST_CASE("naive: S and P larger than the L2 are written to DRAM and read back") {
  const Index N = 512, d = 32;
  Problem p = problem(N, d, DType::bf16, 64 * kKiB);
  p.l2_bytes = N * N * 2 / 4;  // a quarter of S
  const Report r = count(Algorithm::naive, p);
  for (const char* name : {"S", "P"}) {
    CHECK(r.tensor(name).dram_read == r.tensor(name).read);
    CHECK(r.tensor(name).dram_written == r.tensor(name).written);
  }
}

TEST_CASE("LRU: K and V re-read in a cycle larger than the L2 miss every time") {
  const Index N = 1024, d = 64, B = 64;
  const Bytes kv_bytes = 2 * N * d * 2;
  Problem p = problem(N, d, DType::bf16, 256 * kKiB);
  p.tiles = cpu::TileSizes{B, B};
  // Each query tile sweeps all of K and V in the same order: with room for half of them,
  // every tile has been evicted by the time the sweep comes round to it again.
  p.l2_bytes = kv_bytes / 2;
  const Report thrashing = count(Algorithm::fa2, p);
  CHECK(thrashing.tensor("K").dram_read == thrashing.tensor("K").read);
  // With room for K, V and one query tile's Q, O and L, only the first sweep misses.
  p.l2_bytes = kv_bytes + 3 * B * d * 4;
  const Report fitting = count(Algorithm::fa2, p);
  CHECK(fitting.tensor("K").dram_read == N * d * 2);
}

TEST_CASE("with an L2, DRAM traffic never exceeds the SRAM's, and count-only matches full") {
  auto rng = fresh_rng();
  const Index N = 97, d = 16;
  const auto Q = random_matrix<float>(N, d, rng), K = random_matrix<float>(N, d, rng),
             V = random_matrix<float>(N, d, rng);
  for (const Bytes l2 : {Bytes{2} * kKiB, Bytes{8} * kKiB, Bytes{64} * kKiB}) {
    for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
      Problem p = problem(N, d, DType::fp32, 16 * kKiB, cpu::Causal::top_left);
      p.tiles = cpu::TileSizes{8, 12};
      p.l2_bytes = l2;
      const Report counted = count(a, p);
      const Report full = simulate<float>(a, p, Q, K, V).report;
      CAPTURE(l2);
      CAPTURE(to_string(a));
      for (std::size_t k = 0; k < counted.tensors.size(); ++k) {
        CHECK(counted.tensors[k].dram_read <= counted.tensors[k].read);
        CHECK(counted.tensors[k].dram_written <= counted.tensors[k].written);
        CHECK(counted.tensors[k].dram_read == full.tensors[k].dram_read);
        CHECK(counted.tensors[k].dram_written == full.tensors[k].dram_written);
      }
    }
  }
}

TEST_CASE("a negative L2 size is refused") {
  Problem p = problem(64, 16, DType::bf16, 16 * kKiB);
  p.l2_bytes = -1;
  CHECK_THROWS_AS(count(Algorithm::fa2, p), cpu::InvalidArgument);
}

}  // namespace flashlab::sim::test
