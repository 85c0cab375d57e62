// Bad input gets a clear error that says what was wrong and what would be right.
#include "helpers.hpp"

#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <doctest/doctest.h>

#include <string>

namespace flashlab::sim::test {

TEST_CASE("SRAM overflow is an error naming the tile, the capacity and the occupancy") {
  const Index d = 64, Br = 64, Bc = 64;
  const Bytes e = bytes_of(DType::fp32);
  // FA2 allocates sQ (Br, d) first, then sK (Bc, d): an SRAM of exactly one Q tile holds
  // sQ and has no room for sK.
  Problem p = problem(1024, d, DType::fp32, Br * d * e);
  p.tiles = cpu::TileSizes{Br, Bc};
  try {
    count(Algorithm::fa2, p);
    FAIL("an SRAM that holds one tile accepted two");
  } catch (const SramOverflow& overflow) {
    CHECK(overflow.tile == "sK");
    CHECK(overflow.capacity == p.sram_bytes);
    CHECK(overflow.in_use == Br * d * e);
    const std::string what = overflow.what();
    CHECK(contains(what, "sK"));
    CHECK(contains(what, std::to_string(p.sram_bytes)));
    CHECK(contains(what, std::to_string(Br * d * e) + " are already in use"));
  }
}

TEST_CASE("block sizes that overflow are refused by FA1 too, and fit once smaller") {
  Problem p = problem(1000, 128, DType::bf16, 192 * kKiB);
  p.tiles = cpu::TileSizes{128, 256};
  CHECK_THROWS_AS(count(Algorithm::fa1, p), SramOverflow);
  p.tiles = cpu::TileSizes{32, 128};
  CHECK(count(Algorithm::fa1, p).peak_sram <= p.sram_bytes);
}

TEST_CASE("M < d is refused with an explanation") {
  // 100 bytes hold M = 50 bf16 elements: not one row of d = 64.
  const Problem p = problem(256, 64, DType::bf16, 100);
  const std::string why = message_of([&] { count(Algorithm::fa1, p); });
  CHECK(contains(why, "M < d"));
  CHECK(contains(why, "M = 50"));
  CHECK(contains(why, "at least 128 bytes"));
  CHECK_THROWS_AS(count(Algorithm::fa2, p), cpu::InvalidArgument);
}

TEST_CASE("an SRAM too small for even a 1 x 1 tile is refused") {
  // M = d exactly passes the M >= d test, but Q_i, K_j, V_j rows and the fp32 state of one
  // row need more than d elements.
  const Problem p = problem(256, 64, DType::fp32, 64 * 4);
  for (const Algorithm a : {Algorithm::fa1, Algorithm::fa2}) {
    const std::string why = message_of([&] { count(a, p); });
    CHECK(contains(why, "too small for one tile"));
  }
}

TEST_CASE("sizes and names that make no sense are refused") {
  CHECK(contains(message_of([] { count(Algorithm::fa2, problem(-5, 64, DType::bf16, 192 * kKiB)); }),
                 "N = -5"));
  CHECK(contains(message_of([] { count(Algorithm::fa2, problem(0, 64, DType::bf16, 192 * kKiB)); }),
                 "N = 0"));
  CHECK(contains(message_of([] { count(Algorithm::naive, problem(64, 0, DType::bf16, 192 * kKiB)); }),
                 "d = 0"));
  Problem zero_tiles = problem(64, 16, DType::bf16, 192 * kKiB);
  zero_tiles.tiles = cpu::TileSizes{0, 16};
  CHECK(contains(message_of([&] { count(Algorithm::fa1, zero_tiles); }), "Br = 0"));
  CHECK_THROWS_AS(parse_dtype("fp8"), cpu::InvalidArgument);
  CHECK_THROWS_AS(parse_algorithm("fa3"), cpu::InvalidArgument);
  CHECK(parse_algorithms("fa2,naive") == std::vector{Algorithm::fa2, Algorithm::naive});
  CHECK(contains(message_of([] { parse_algorithms("fa1,fa2,fa1"); }),
                 "'fa1' is listed twice in 'fa1,fa2,fa1'"));
  CHECK(contains(message_of([] { find_profile("v100"); }), "a100, h100, h200, b200"));
}

TEST_CASE("simulate refuses inputs of the wrong dtype or shape") {
  auto rng = fresh_rng();
  const auto Q = random_matrix<float>(8, 4, rng);
  const Problem bf16_problem = problem(8, 4, DType::bf16, 16 * kKiB);
  CHECK_THROWS_AS(simulate<float>(Algorithm::fa2, bf16_problem, Q, Q, Q), cpu::InvalidArgument);
  const Problem wrong_N = problem(9, 4, DType::fp32, 16 * kKiB);
  CHECK(contains(message_of([&] { simulate<float>(Algorithm::fa2, wrong_N, Q, Q, Q); }), "N = 9"));
}

TEST_CASE("byte sizes: units parse, nonsense is refused") {
  CHECK(parse_bytes("192KiB") == 192 * 1024);
  CHECK(parse_bytes("1.5MiB") == 3 * 512 * 1024);
  CHECK(parse_bytes("100KB") == 100 * 1000);
  CHECK(parse_bytes("4096") == 4096);
  for (const char* bad : {"", "-5", "0", "12XB", "KiB", "0.5", "1.3B"})
    CHECK_THROWS_AS(parse_bytes(bad), cpu::InvalidArgument);
  CHECK(parse_capacity("98304el", DType::bf16) == 98304 * bytes_of(DType::bf16));
  CHECK(parse_capacity("98304el", DType::fp32) == 98304 * bytes_of(DType::fp32));
  CHECK(parse_capacity("192KiB", DType::fp32) == 192 * 1024);
  for (const char* bad : {"el", "-3el", "1.5el", "12xel", "-99999999999999999999el"})
    CHECK_THROWS_AS(parse_capacity(bad, DType::bf16), cpu::InvalidArgument);
  CHECK(format_bytes(128.0 * 1024 * 1024) == "128.0 MiB");
}

TEST_CASE("byte sizes: infinite and absurdly large sizes are refused, not cast") {
  for (const std::string huge : {"inf", "1e30", "2000000GiB", "1e9GB"}) {
    CAPTURE(huge);
    CHECK(contains(message_of([&] { parse_bytes(huge); }), "more than 1 PiB"));
  }
  CHECK(parse_bytes(std::to_string(kMaxCapacityBytes)) == kMaxCapacityBytes);
  CHECK(contains(message_of([] { parse_capacity("99999999999999999999el", DType::bf16); }),
                 "too many bf16 elements"));
  // One element past the limit, which the product elements * 4 would not overflow: the
  // limit itself is what refuses it.
  const Bytes fp32_limit = kMaxCapacityBytes / bytes_of(DType::fp32);
  CHECK(parse_capacity(std::to_string(fp32_limit) + "el", DType::fp32) == kMaxCapacityBytes);
  CHECK(contains(message_of([&] {
                   parse_capacity(std::to_string(fp32_limit + 1) + "el", DType::fp32);
                 }),
                 "more than 1 PiB"));
  CHECK(format_bytes(512) == "512 B");
}

}  // namespace flashlab::sim::test
