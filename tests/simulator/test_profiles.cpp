// Hardware profiles turn counts into t >= max(FLOPs / throughput, bytes / bandwidth).
#include "helpers.hpp"

#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace flashlab::sim::test {

TEST_CASE("each profile is found by name and has every figure") {
  CHECK(profiles().size() >= 4);
  for (const auto& hw : profiles()) {
    CAPTURE(hw.name);
    CHECK(&find_profile(hw.name) == &hw);
    CHECK(hw.sm_count > 0);
    CHECK(hw.sram_per_sm > 0);
    CHECK(hw.hbm_bytes_per_s > 0);
    CHECK(hw.matrix_flops_per_s > hw.exp_per_s);  // why exp can bind at small d
    CHECK(hw.l2_bytes_per_s > hw.hbm_bytes_per_s);  // why re-reads from the L2 are cheaper
  }
}

TEST_CASE("the GH100's first waves are the measured placement, block by block, on both parts") {
  // The profiles' digits against the CSVs bench_l2_partitions wrote on the H200 and on an H100:
  // for each block of each first wave, the partition of the SM it ran on.
  struct Measured {
    const char* profile;
    const char* csv;
  };
  for (const Measured m : {Measured{"h200", "/2026-12-03-h200-l2-partitions.csv"},
                           Measured{"h100", "/h100/2026-12-06-h100-l2-partitions.csv"}}) {
    CAPTURE(m.profile);
    std::ifstream csv(std::string(FLASHLAB_RESULTS_DIR) + m.csv);
    REQUIRE(csv);
    std::string line;
    std::getline(csv, line);
    REQUIRE(line == "kind,per_sm,index,sm,reference,cycles_after_reference,cycles_again,partition");
    std::map<int, std::vector<int>> sm_of_block;  // per_sm -> the SM of each block
    std::map<int, int> partition_of_sm;
    while (std::getline(csv, line)) {
      std::vector<std::string> f;
      std::stringstream fields(line);
      for (std::string field; std::getline(fields, field, ',');) f.push_back(field);
      REQUIRE(f.size() >= 4);
      if (f[0] == "block") sm_of_block[std::stoi(f[1])].push_back(std::stoi(f[3]));
      if (f[0] == "sm" && f[4] == "0") partition_of_sm[std::stoi(f[3])] = std::stoi(f[7]);
    }
    const HardwareProfile& gpu = find_profile(m.profile);
    REQUIRE(partition_of_sm.size() == std::size_t(gpu.sm_count));
    for (const int per_sm : {1, 2}) {
      CAPTURE(per_sm);
      const std::vector<cpu::Index> slots = measured_slot_partitions(gpu, per_sm);
      REQUIRE(slots.size() == std::size_t(gpu.sm_count * per_sm));
      REQUIRE(sm_of_block[per_sm].size() == slots.size());
      for (std::size_t b = 0; b < slots.size(); ++b)
        CHECK(slots[b] == partition_of_sm.at(sm_of_block[per_sm][b]));
      // Half the SMs on each side.
      CHECK(std::count(slots.begin(), slots.end(), 1) == gpu.sm_count * per_sm / 2);
    }
    // No measurement for other occupancies: the model's own placement.
    CHECK(measured_slot_partitions(gpu, 3).empty());
    CHECK(measured_slot_partitions(gpu, 0).empty());
  }
  // Nor for a profile whose placement was never measured.
  CHECK(measured_slot_partitions(find_profile("a100"), 1).empty());
}

TEST_CASE("on_gpu: the profile's L2 and placement, the kernel's own fields kept") {
  for (const auto& hw : profiles()) {
    for (const Index per_sm : {Index{1}, Index{2}, Index{3}}) {
      CAPTURE(hw.name);
      CAPTURE(per_sm);
      const GridProblem g = on_gpu(
          hw, {.N = 97, .d = 64, .heads = 3, .kv_heads = 1, .Br = 64, .Bc = 32,
               .blocks_per_sm = per_sm, .sm_count = 5, .l2_bytes = 1024, .l1_bytes = 4096});
      CHECK(g.sm_count == hw.sm_count);
      CHECK(g.l2_bytes == hw.l2_bytes);
      CHECK(g.l2_partitions == hw.l2_partitions);
      CHECK(g.replacement == hw.l2_replacement);
      CHECK(g.slot_partitions == measured_slot_partitions(hw, int(per_sm)));
      CHECK((g.N == 97 && g.d == 64 && g.heads == 3 && g.kv_heads == 1 && g.Br == 64 &&
             g.Bc == 32 && g.blocks_per_sm == per_sm && g.l1_bytes == 4096));
    }
  }
  // The H200's measured placement reaches the grid at the occupancies it was measured for.
  CHECK(on_gpu(find_profile("h200"), {.blocks_per_sm = 2}).slot_partitions.size() == 264);
}

TEST_CASE("l2_dirty_room: the cap where the model applies one, else what was measured, else the L2") {
  // The H200: no cap applied, 28.39 MiB measured over both partitions.
  const HardwareProfile& h200 = find_profile("h200");
  CHECK(h200.l2_dirty_cap == 0);
  CHECK(l2_dirty_room(h200) == 2 * kH200MeasuredL2DirtyCap);
  CHECK(double(l2_dirty_room(h200)) / double(1 << 20) == doctest::Approx(28.39).epsilon(0.001));
  HardwareProfile capped = h200;
  capped.l2_dirty_cap = 1000;
  CHECK(l2_dirty_room(capped) == 2000);  // 1000 in each of the 2 partitions
  HardwareProfile unmeasured = h200;
  unmeasured.l2_dirty_measured = 0;
  CHECK(l2_dirty_room(unmeasured) == h200.l2_bytes);
  // The H100: 23.96 MiB measured over both partitions.
  const HardwareProfile& h100 = find_profile("h100");
  CHECK(l2_dirty_room(h100) == 2 * kH100MeasuredL2DirtyCap);
  CHECK(double(l2_dirty_room(h100)) / double(1 << 20) == doctest::Approx(23.96).epsilon(0.001));
}

TEST_CASE("the bound is the largest of its three terms, and names it") {
  for (const auto& hw : profiles()) {
    for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
      for (const Index d : {Index{16}, Index{128}}) {
        const Report r = count(a, problem(4096, d, DType::bf16, hw.sram_per_sm));
        const Bound b = roofline(r, hw);
        CHECK(b.matrix_s == doctest::Approx(double(r.ops.matrix_flops) / hw.matrix_flops_per_s));
        CHECK(b.exp_s == doctest::Approx(double(r.ops.exp) / hw.exp_per_s));
        CHECK(b.memory_s == doctest::Approx(double(r.bytes_total()) / hw.hbm_bytes_per_s));
        const double largest = std::max({b.matrix_s, b.exp_s, b.memory_s});
        CHECK(b.seconds() == largest);
        const double named = b.binding() == "memory" ? b.memory_s
                             : b.binding() == "matrix" ? b.matrix_s
                                                       : b.exp_s;
        CHECK(named == largest);
      }
    }
  }
}

TEST_CASE("on an H200, the naive program's bound is set by memory") {
  // S and P cost 4 N^2 bytes-of-element moves against 4 N^2 d FLOPs: at bf16 that is
  // 8 bytes per 4d FLOPs, far below the chip's FLOPs-per-byte balance for d = 64.
  const Report r = count(Algorithm::naive, problem(8192, 64, DType::bf16, 192 * kKiB));
  CHECK(roofline(r, find_profile("h200")).binding() == "memory");
}

}  // namespace flashlab::sim::test
