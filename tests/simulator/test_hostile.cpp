// Hostile sizes: 2^31 +- 1, 2^63 - 1, negative, NaN, -0.0. Each is refused with a message
// that names the value and the limit, or (tile sizes past N) gives the right answer.
#include "helpers.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/sim/units.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <string>

namespace flashlab::sim::test {

namespace {

constexpr Index kMax = cpu::kMaxIndex;  // 2^63 - 1
constexpr Index kTwo31 = Index{1} << 31;

std::string refusal(const Problem& p, Algorithm a = Algorithm::fa2) {
  try {
    count(a, p);
  } catch (const cpu::InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("N and d outside their limits are refused, naming the value and the limit") {
  for (const Index N : {kTwo31 - 1, kTwo31, kTwo31 + 1, kMax, Index{-1}, Index{0}}) {
    CAPTURE(N);
    const std::string why = refusal(problem(N, 64, DType::bf16, 192 * kKiB));
    CHECK(why.find("N = " + std::to_string(N)) != std::string::npos);
    CHECK(why.find("4194304") != std::string::npos);  // the limit, 2^22
  }
  for (const Index d : {kTwo31 + 1, kMax, Index{-7}}) {
    CAPTURE(d);
    const std::string why = refusal(problem(1024, d, DType::bf16, 192 * kKiB));
    CHECK(why.find("d = " + std::to_string(d)) != std::string::npos);
  }
}

TEST_CASE("tile sizes near 2^63 count the same bytes as one tile of all N rows") {
  for (const Algorithm a : {Algorithm::fa1, Algorithm::fa2}) {
    for (const Index huge : {kTwo31 - 1, kTwo31 + 1, kMax, kMax - 1}) {
      CAPTURE(huge);
      Problem p = problem(97, 16, DType::fp32, 1 << 20);
      p.tiles = cpu::TileSizes{huge, huge};
      const Report r = count(a, p);
      p.tiles = cpu::TileSizes{97, 97};
      const Report whole = count(a, p);
      CHECK(r.bytes_total() == whole.bytes_total());
      CHECK(r.bytes_total() > 0);
      CHECK(r.tile_counts.computed == 1);
    }
  }
}

TEST_CASE("an SRAM or L2 past 1 PiB, or negative, is refused naming the limit") {
  for (const Bytes sram : {kMax, kMaxCapacityBytes + 1, Bytes{-1}}) {
    CAPTURE(sram);
    const std::string why = refusal(problem(1024, 64, DType::bf16, sram));
    CHECK(why.find(std::to_string(sram)) != std::string::npos);
  }
  Problem p = problem(1024, 64, DType::bf16, 192 * kKiB);
  for (const Bytes l2 : {kMax, Bytes{-1}, kMaxCapacityBytes + 1}) {
    p.l2_bytes = l2;
    CAPTURE(l2);
    CHECK(refusal(p).find(std::to_string(kMaxCapacityBytes)) != std::string::npos);
  }
}

TEST_CASE("values cast from bad integers are refused, not read as a neighbour") {
  Problem p = problem(64, 16, DType::bf16, 192 * kKiB);
  p.causal = static_cast<cpu::Causal>(7);
  CHECK(refusal(p).find("causal = 7") != std::string::npos);
  p = problem(64, 16, DType::bf16, 192 * kKiB);
  p.score_dtype = static_cast<DType>(9);
  CHECK(refusal(p).find("dtype 9") != std::string::npos);
  p = problem(64, 16, DType::bf16, 192 * kKiB);
  p.weight_dtype = static_cast<DType>(-1);
  CHECK(refusal(p).find("weight dtype -1") != std::string::npos);
}

TEST_CASE("sizes written as text: NaN, -0.0, 2^63 and negatives are not sizes") {
  for (const char* text : {"nan", "NaN", "-0.0", "-0", "-1", "9223372036854775807",
                           "9223372036854775808", "1e400", "inf", "0.5", ""}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_bytes(text), cpu::InvalidArgument);
  }
  CHECK_THROWS_WITH_AS(parse_capacity("nanel", DType::bf16), doctest::Contains("nanel"),
                       cpu::InvalidArgument);
}

TEST_CASE("the machine refuses a tensor or buffer whose bytes overflow 64 bits") {
  Machine machine(192 * kKiB);
  CHECK_THROWS_WITH_AS(machine.add_tensor("X", Index{1} << 62, 4, DType::fp32),
                       doctest::Contains("exceeds 9223372036854775807"), cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(machine.add_tensor("X", -3, 4, DType::fp32),
                       doctest::Contains("-3"), cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(machine.allocate("sX", "a tile", kMax, kMax, DType::bf16),
                       doctest::Contains("sX"), cpu::InvalidArgument);
  CHECK(machine.peak_sram() == 0);  // nothing was half allocated
}

TEST_CASE("the checked helpers: the largest values that fit, and the first that do not") {
  CHECK(cpu::checked_mul(kTwo31, kTwo31 - 1, "x") == kTwo31 * (kTwo31 - 1));
  CHECK(cpu::checked_add(kMax - 1, 1, "x") == kMax);
  CHECK(cpu::checked_product({Index{1} << 31, Index{1} << 31, 1}, "x") == Index{1} << 62);
  CHECK_THROWS_WITH_AS(cpu::checked_add(kMax, 1, "a sum"),
                       doctest::Contains("a sum: 9223372036854775807 + 1 exceeds"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(cpu::checked_mul(kTwo31 + 1, Index{1} << 32, "a product"),
                       doctest::Contains("a product: 2147483649 x 4294967296 exceeds"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(cpu::checked_product({-1, 4}, "the entries"),
                       doctest::Contains("the entries = -1: a size must be at least 0"),
                       cpu::InvalidArgument);
  // A zero late in a product does not excuse an overflow before it.
  CHECK_THROWS_AS(cpu::checked_product({kMax, 2, 0}, "x"), cpu::InvalidArgument);
  CHECK(cpu::checked_product({0, kMax, 2}, "x") == 0);
}

TEST_CASE("a kernel's S and P dtypes, given as plain fields, set the SRAM its tiles take") {
  Problem p = problem(1000, 64, DType::bf16, 227 * kKiB);
  const cpu::TileSizes tiles{128, 64};
  const Bytes paper = sram_footprint(Algorithm::fa2, p, tiles);  // S fp32, P in place of S
  p.score_dtype = DType::bf16;
  CHECK(sram_footprint(Algorithm::fa2, p, tiles) == paper - 128 * 64 * 2);
  p.score_dtype = DType::fp32;
  p.weight_dtype = DType::bf16;  // P in a buffer of its own, as a kernel converts S for W V
  CHECK(sram_footprint(Algorithm::fa2, p, tiles) == paper + 128 * 64 * 2);
  CHECK(sram_footprint(Algorithm::fa1, p, tiles) ==
        sram_footprint(Algorithm::fa1, problem(1000, 64, DType::bf16, 227 * kKiB), tiles) +
            128 * 64 * 2);
  p.tiles = tiles;
  CHECK(count(Algorithm::fa2, p).peak_sram == paper + 128 * 64 * 2);
}

}  // namespace flashlab::sim::test
