// The naive program's traffic against the closed form its three operators imply.
#include "helpers.hpp"

#include <doctest/doctest.h>

namespace flashlab::sim::test {

TEST_CASE("naive: the three operators move 4N^2 + 4Nd elements") {
  struct Shape { Index N, d; };
  for (const auto [N, d] : {Shape{1, 1}, Shape{97, 59}, Shape{1023, 64}, Shape{4096, 128}}) {
    for (const DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
      CAPTURE(N);
      CAPTURE(d);
      const Report r = count(Algorithm::naive, problem(N, d, dtype, 192 * kKiB));
      // Operator 1 reads Q and K and writes S; operator 2 reads S and writes P;
      // operator 3 reads P and V and writes O.
      const Index op1 = (N * d + N * d) + N * N;
      const Index op2 = N * N + N * N;
      const Index op3 = (N * N + N * d) + N * d;
      const Bytes e = bytes_of(dtype);
      CHECK(op1 + op2 + op3 == 4 * N * N + 4 * N * d);
      CHECK(r.bytes_total() == (op1 + op2 + op3) * e);
      CHECK(r.bytes_read() == (2 * N * d + N * N + N * N + N * d) * e);
      CHECK(r.tensor("S").written == N * N * e);
      CHECK(r.tensor("S").read == N * N * e);
      CHECK(r.tensor("P").written == N * N * e);
      CHECK(r.tensor("P").read == N * N * e);
      CHECK(r.tensor("O").written == N * d * e);
      CHECK(r.tensor("O").read == 0);
      CHECK(r.ops.matrix_flops == 2 * (2 * N * N * d));  // Q K^T and P V
    }
  }
}

TEST_CASE("naive at N = 8192, d = 128, bf16: S and P are 128 MiB each, 512 MiB of traffic") {
  constexpr Bytes kMiB = 1024 * 1024;
  const Report r = count(Algorithm::naive, problem(8192, 128, DType::bf16, 192 * kKiB));
  CHECK(r.tensor("S").elements * bytes_of(DType::bf16) == 128 * kMiB);
  CHECK(r.tensor("P").elements * bytes_of(DType::bf16) == 128 * kMiB);
  const Bytes intermediate = r.tensor("S").written + r.tensor("S").read +
                             r.tensor("P").written + r.tensor("P").read;
  CHECK(intermediate == 512 * kMiB);
}

TEST_CASE("naive under a causal mask still materialises all of S and P") {
  const Index N = 257, d = 32;
  const Report full = count(Algorithm::naive, problem(N, d, DType::bf16, 64 * kKiB));
  const Report causal =
      count(Algorithm::naive, problem(N, d, DType::bf16, 64 * kKiB, cpu::Causal::top_left));
  CHECK(causal.bytes_total() == full.bytes_total());
}

}  // namespace flashlab::sim::test
