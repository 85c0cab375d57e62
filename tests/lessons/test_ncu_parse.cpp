// The parser of Nsight Compute's --csv output: metrics summed over kernels, units converted.
#include "app/kernel_bytes.hpp"
#include "gpu_bridge/ncu_bytes.hpp"
#include "run_flashlab.hpp"

#include <doctest/doctest.h>

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

TEST_CASE("ncu CSV: three metrics of two kernels, in mixed units, are summed in bytes") {
  const double read1 = 1.5, read2 = 250, write1 = 3.25, l2_1 = 12.5, l2_2 = 0.75;  // as printed
  const std::string csv = fmt::format(
      "==PROF== Connected to process 1\n"
      "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"softmax\",\"dram__bytes_read.sum\",\"Mbyte\",\"{}\"\n"
      "\"0\",\"softmax\",\"dram__bytes_write.sum\",\"Kbyte\",\"{}\"\n"
      "\"0\",\"softmax\",\"lts__t_bytes.sum\",\"Gbyte\",\"{}\"\n"
      "\"1\",\"gemm\",\"dram__bytes_read.sum\",\"byte\",\"{}\"\n"
      "\"1\",\"gemm\",\"dram__bytes_write.sum\",\"byte\",\"0\"\n"
      "\"1\",\"gemm\",\"lts__t_bytes.sum\",\"Gbyte\",\"{}\"\n",
      read1, write1, l2_1, read2, l2_2);
  const auto m = flashlab::app::parse_ncu_csv(csv);
  REQUIRE(m);
  CHECK(m->kernels == 2);
  CHECK(m->dram_read == doctest::Approx(read1 * 1e6 + read2));
  CHECK(m->dram_written == doctest::Approx(write1 * 1e3));
  CHECK(m->l2 == doctest::Approx((l2_1 + l2_2) * 1e9));
}

TEST_CASE("ncu CSV: the bytes into and out of the SMs are read as well") {
  const auto m = flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"l1tex__m_xbar2l1tex_read_bytes.sum\",\"Mbyte\",\"68.16\"\n"
      "\"0\",\"l1tex__m_l1tex2xbar_write_bytes.sum\",\"Kbyte\",\"1,048.58\"\n"
      "\"1\",\"l1tex__m_xbar2l1tex_read_bytes.sum\",\"byte\",\"4096\"\n");
  REQUIRE(m);
  CHECK(m->kernels == 2);
  CHECK(m->sm_read == doctest::Approx(68.16e6 + 4096));
  CHECK(m->sm_written == doctest::Approx(1048.58e3));
  CHECK(m->l2 == 0);
}

TEST_CASE("ncu CSV: the L2 Request Coalescer's read sectors, and how many SM reads a slice read served") {
  // One head of fa2 at N = 16384 as the H200 counted it: 33.7 million sectors to the SMs,
  // 16.8 million asked of the slices (in two kernels here, one in Msector).
  const auto m = flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"lrc__xbar2gpc_sectors_op_read.sum\",\"sector\",\"33,695,942\"\n"
      "\"0\",\"lrc__lts2lrc_sectors_op_read.sum\",\"sector\",\"16,000,000\"\n"
      "\"1\",\"lrc__lts2lrc_sectors_op_read.sum\",\"Msector\",\"0.770166\"\n");
  REQUIRE(m);
  CHECK(m->lrc_to_sms == doctest::Approx(32.0 * 33695942));
  CHECK(m->lrc_from_slices == doctest::Approx(32.0 * 16770166));
  REQUIRE(m->coalescing());
  CHECK(*m->coalescing() == doctest::Approx(33695942.0 / 16770166));
  CHECK(flashlab::app::measured_text(flashlab::app::NcuOutcome{*m, ""})
            .find("(each slice read served 2.01 SM reads)") != std::string::npos);
  // Not counted (another GPU, or an older ncu): no ratio, and the text says nothing of it.
  const auto none = flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"lts__t_bytes.sum\",\"byte\",\"4096\"\n");
  REQUIRE(none);
  CHECK_FALSE(none->coalescing());
  CHECK(flashlab::app::measured_text(flashlab::app::NcuOutcome{*none, ""}).find("served") ==
        std::string::npos);
}

TEST_CASE("ncu CSV: thousands separators are read, unknown units refused, no header is no data") {
  const auto m = flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"dram__bytes_read.sum\",\"byte\",\"1,048,576\"\n");
  REQUIRE(m);
  CHECK(m->dram_read == doctest::Approx(1 << 20));
  CHECK_FALSE(flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"dram__bytes_read.sum\",\"furlong\",\"3\"\n"));
  CHECK_FALSE(flashlab::app::parse_ncu_csv("==ERROR== no kernels were profiled\n"));
}

TEST_CASE("ncu CSV: store and reduction sectors the L1 issued, in bytes of 32-byte sectors") {
  // Two kernels (a main kernel with stores and reductions, a post-kernel with stores), in
  // base units and in thousands.
  const double st0 = 2097152, red0 = 33554432, st1 = 524.288, out0 = 1140611008;
  const auto m = flashlab::app::parse_ncu_csv(
      fmt::format("\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
                  "\"0\",\"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum\",\"sector\",\"{}\"\n"
                  "\"0\",\"l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum\",\"sector\",\"{}\"\n"
                  "\"0\",\"l1tex__m_l1tex2xbar_write_bytes.sum\",\"byte\",\"{}\"\n"
                  "\"0\",\"gpu__time_duration.sum\",\"nsecond\",\"1116032\"\n"
                  "\"1\",\"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum\",\"Ksector\",\"{}\"\n",
                  st0, red0, out0, st1));
  REQUIRE(m);
  CHECK(m->kernels == 2);
  CHECK(m->stores_issued == doctest::Approx(32 * (st0 + red0 + st1 * 1e3)));
  CHECK(m->sm_written == doctest::Approx(out0));
  // Not merged in the main kernel; the post-kernel's stores left nothing here.
  REQUIRE(m->merge_ratio());
  CHECK(*m->merge_ratio() == doctest::Approx(out0 / (32 * (st0 + red0 + st1 * 1e3))));
}

TEST_CASE("ncu CSV: a sector counter in bytes is refused, and no stores, no merge ratio") {
  CHECK_FALSE(flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum\",\"byte\",\"64\"\n"));
  CHECK_FALSE(flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"l1tex__m_l1tex2xbar_write_bytes.sum\",\"sector\",\"64\"\n"));
  const auto m = flashlab::app::parse_ncu_csv(
      "\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"l1tex__m_l1tex2xbar_write_bytes.sum\",\"byte\",\"2048\"\n");
  REQUIRE(m);
  CHECK(m->stores_issued == 0);
  CHECK_FALSE(m->merge_ratio());
}

TEST_CASE("ncu metrics: each name once, the sector counters in sectors and the rest in bytes") {
  using flashlab::app::kNcuMetrics;
  using flashlab::app::NcuUnit;
  for (std::size_t a = 0; a < std::size(kNcuMetrics); ++a) {
    const std::string name = kNcuMetrics[a].name;
    CAPTURE(name);
    CHECK(std::string(kNcuMetrics[a].level).size() > 0);
    CHECK((kNcuMetrics[a].unit == NcuUnit::sectors) == (name.find("_sectors_") != name.npos));
    for (std::size_t b = a + 1; b < std::size(kNcuMetrics); ++b) CHECK(name != kNcuMetrics[b].name);
  }
}

TEST_CASE("compare's measured text and ratios: the merge shown for store sectors, not beside TMA") {
  using flashlab::app::MeasuredBytes;
  using flashlab::app::NcuOutcome;
  // fa2-like: 32 MiB of store sectors issued, 18 MiB left the SMs (merged); fa3-like: 256 KiB
  // of sectors (L) and 16.25 MiB out, O's 16 MiB by TMA stores beside them.
  const double MiB = 1024.0 * 1024.0;
  const NcuOutcome fa2{
      MeasuredBytes{.sm_read = 1024 * MiB, .stores_issued = 32 * MiB, .sm_written = 18 * MiB}, ""};
  const NcuOutcome fa3{
      MeasuredBytes{.sm_read = 1024 * MiB, .stores_issued = 0.25 * MiB, .sm_written = 16.25 * MiB},
      ""};
  CHECK(flashlab::app::measured_text(fa2).find("(0.56 of them)") != std::string::npos);
  CHECK(flashlab::app::measured_text(fa3, /*beside_stores=*/true).find("of them") ==
        std::string::npos);
  // A decode on the work queue: 512 claims leave the SMs as 16 KiB beside 609 KiB of store
  // sectors; the ratio would read as merging where there is none, so it is not shown.
  const NcuOutcome queue{
      MeasuredBytes{
          .sm_read = 128 * MiB, .stores_issued = 609 * 1024.0, .sm_written = 625 * 1024.0},
      ""};
  CHECK(flashlab::app::measured_text(queue).find("(1.03 of them)") != std::string::npos);
  CHECK(flashlab::app::measured_text(queue, /*beside_stores=*/true).find("of them") ==
        std::string::npos);
  // read, stores (the prediction's writes less its TMA stores), out (all its writes).
  CHECK(flashlab::app::ratios_text(fa3, 1024 * MiB, 0.25 * MiB, 16.25 * MiB) ==
        "read 1.000, stores 1.000, out 1.000");
  CHECK(flashlab::app::ratios_text(fa2, 1024 * MiB, 32 * MiB, 32 * MiB) ==
        "read 1.000, stores 1.000, out 0.562");
  CHECK(flashlab::app::ratios_text(NcuOutcome{std::nullopt, "no ncu"}, 1, 1, 1) == "-");
}

TEST_CASE("ncu CSV: the first kernels a measured command runs are left out of the sums") {
  // Nsight Compute charges the first kernel it profiles in a process writes that are not its
  // own (2.3 MiB on the H200), so a measured command runs one of its own first
  // (kNcuFirstKernels); the backward's pass also leaves out its forward.
  const std::string csv =
      "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"fa2\",\"dram__bytes_write.sum\",\"byte\",\"2411724\"\n"
      "\"0\",\"fa2\",\"dram__bytes_read.sum\",\"byte\",\"4096\"\n"
      "\"1\",\"split\",\"dram__bytes_write.sum\",\"byte\",\"1000\"\n"
      "\"1\",\"split\",\"dram__bytes_read.sum\",\"byte\",\"134217728\"\n"
      "\"2\",\"combine\",\"dram__bytes_write.sum\",\"byte\",\"0\"\n"
      "\"2\",\"combine\",\"dram__bytes_read.sum\",\"byte\",\"300000\"\n";
  const auto all = flashlab::app::parse_ncu_csv(csv);
  REQUIRE(all);
  CHECK(all->kernels == 3);
  CHECK(all->dram_written == 2411724 + 1000);
  const auto call = flashlab::app::parse_ncu_csv(csv, flashlab::app::kNcuFirstKernels);
  REQUIRE(call);
  CHECK(call->kernels == 2);
  CHECK(call->dram_written == 1000);
  CHECK(call->dram_read == 134217728 + 300000);
  const auto last = flashlab::app::parse_ncu_csv(csv, 2);
  REQUIRE(last);
  CHECK(last->kernels == 1);
  CHECK(last->dram_read == 300000);
  // Nothing left: no measurement, rather than zeros.
  CHECK_FALSE(flashlab::app::parse_ncu_csv(csv, 3));
}

TEST_CASE("ncu: a measured command runs in application replay, its first kernel left out") {
  // A stand-in for ncu that writes its arguments one a line and prints a measurement of two
  // kernels: compare's first kernel (2.3 MiB written that are not its own) and the measured one.
  // In kernel replay Nsight Compute charges such writes to every kernel that reads more than
  // the L2; in application replay to the first alone (ncu_bytes.hpp, kNcuReplayMode).
  using flashlab::test::scratch_path;
  const auto script = scratch_path("ncu-stand-in.sh"), args = scratch_path("ncu-args.txt");
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > " << args.string() << "\n"
        << "echo '\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"'\n"
        << "echo '\"0\",\"fa2\",\"dram__bytes_write.sum\",\"byte\",\"2411724\"'\n"
        << "echo '\"1\",\"split\",\"dram__bytes_write.sum\",\"byte\",\"18000\"'\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  const auto outcome =
      flashlab::app::measure_with_ncu(script.string(), {"flashlab", "compare", "--gpu-only"});
  REQUIRE_MESSAGE(outcome.bytes, outcome.message);
  CHECK(outcome.bytes->kernels == 1);
  CHECK(outcome.bytes->dram_written == 18000);
  std::ifstream in(args);
  std::vector<std::string> argv;
  for (std::string line; std::getline(in, line);) argv.push_back(line);
  std::ostringstream joined;
  for (const auto& a : argv) joined << a << " ";
  INFO("ncu was given: ", joined.str());
  const auto at = std::find(argv.begin(), argv.end(), "--replay-mode");
  REQUIRE(at != argv.end());
  REQUIRE(std::next(at) != argv.end());
  CHECK(*std::next(at) == "application");
  CHECK(*std::next(at) == flashlab::app::kNcuReplayMode);
  // The command comes last, word for word, after every option of ncu's.
  REQUIRE(argv.size() >= 3);
  CHECK(argv[argv.size() - 3] == "flashlab");
  CHECK(argv.back() == "--gpu-only");
  // At the card's own clocks unless set_ncu_clocks (compare's --ncu-clocks) says base.
  const auto clock_control = [&] {
    std::ifstream given(args);
    std::vector<std::string> words;
    for (std::string line; std::getline(given, line);) words.push_back(line);
    const auto c = std::find(words.begin(), words.end(), "--clock-control");
    return c == words.end() || std::next(c) == words.end() ? std::string() : *std::next(c);
  };
  CHECK(clock_control() == "none");
  flashlab::app::set_ncu_clocks(flashlab::app::NcuClocks::base);
  REQUIRE(flashlab::app::measure_with_ncu(script.string(), {"flashlab"}).bytes);
  CHECK(clock_control() == "base");
  flashlab::app::set_ncu_clocks(flashlab::app::NcuClocks::own);
  REQUIRE(flashlab::app::measure_with_ncu(script.string(), {"flashlab"}).bytes);
  CHECK(clock_control() == "none");
  std::filesystem::remove(script);
  std::filesystem::remove(args);
}

TEST_CASE("ncu: compare's --ncu-clocks names, and no others") {
  using flashlab::app::NcuClocks;
  CHECK(flashlab::app::parse_ncu_clocks("own") == NcuClocks::own);
  CHECK(flashlab::app::parse_ncu_clocks("base") == NcuClocks::base);
  CHECK_FALSE(flashlab::app::parse_ncu_clocks("boost"));
  CHECK_FALSE(flashlab::app::parse_ncu_clocks(""));
  CHECK(std::string(flashlab::app::ncu_clock_control(NcuClocks::own)) == "none");
  CHECK(std::string(flashlab::app::ncu_clock_control(NcuClocks::base)) == "base");
}
