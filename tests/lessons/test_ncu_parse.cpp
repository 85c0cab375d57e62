// The parser of Nsight Compute's --csv output: metrics summed over kernels, units converted.
#include "gpu_bridge/ncu_bytes.hpp"

#include <doctest/doctest.h>

#include <fmt/core.h>

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
