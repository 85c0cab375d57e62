// The mirror of flashlab's naive kernel (Algorithm::naive_kernel): its traffic against the
// closed form in naive_kernel_program.cpp, the paper's naive program as its special case,
// its facts refused when wrong, and the paths that show a report.
#include "helpers.hpp"

#include "flashlab/cpu/naive.hpp"

#include <nlohmann/json.hpp>

#include <doctest/doctest.h>
#include <fmt/core.h>

#include <chrono>
#include <sstream>
#include <string>

namespace flashlab::sim::test {

namespace {

// T(x, t): tiles of t along a dimension of x; one when t = 0.
Index tiles(Index x, Index t) { return t == 0 ? 1 : ceil_div(x, t); }

// The closed form of naive_kernel_program.cpp's header, tensor by tensor.
struct Expected {
  Bytes Q_read, K_read, S_written, S_read, P_written, P_read, L_written, V_read, O_written;
};

Expected closed_form(const Problem& p) {
  const Index N = p.N, d = p.d;
  const Bytes b = bytes_of(p.dtype), s = bytes_of(p.score_dtype);
  const Bytes w = bytes_of(p.weight_dtype.value_or(p.dtype));
  const Index seen = p.causal == cpu::Causal::none ? N * N : N * (N + 1) / 2;
  return {.Q_read = tiles(N, p.score_gemm.n) * N * d * b,
          .K_read = tiles(N, p.score_gemm.m) * N * d * b,
          .S_written = N * N * s,
          .S_read = p.score_reads * seen * s,
          .P_written = N * N * w,
          .P_read = tiles(d, p.output_gemm.n) * N * N * w,
          .L_written = 4 * N,
          .V_read = tiles(N, p.output_gemm.m) * N * d * b,
          .O_written = N * d * b};
}

void check_closed_form(const Report& r, const Problem& p) {
  const Expected e = closed_form(p);
  CHECK(r.tensor("Q").read == e.Q_read);
  CHECK(r.tensor("K").read == e.K_read);
  CHECK(r.tensor("V").read == e.V_read);
  CHECK(r.tensor("S").written == e.S_written);
  CHECK(r.tensor("S").read == e.S_read);
  CHECK(r.tensor("P").written == e.P_written);
  CHECK(r.tensor("P").read == e.P_read);
  CHECK(r.tensor("L").written == e.L_written);
  CHECK(r.tensor("O").written == e.O_written);
  for (const char* name : {"Q", "K", "V"}) CHECK(r.tensor(name).written == 0);
  for (const char* name : {"L", "O"}) CHECK(r.tensor(name).read == 0);
  CHECK(r.bytes_total() == e.Q_read + e.K_read + e.V_read + e.S_written + e.S_read +
                               e.P_written + e.P_read + e.L_written + e.O_written);
}

DType random_dtype(std::mt19937_64& rng) {
  constexpr DType kAll[] = {DType::fp32, DType::bf16, DType::fp16};
  return kAll[std::uniform_int_distribution<int>(0, 2)(rng)];
}

// A tile size along a dimension of x: 0 (the whole dimension), or 1 .. x + 7, which
// mostly leaves a ragged last tile.
Index random_tile(Index x, std::mt19937_64& rng) {
  return std::uniform_int_distribution<Index>(0, x + 7)(rng);
}

Problem random_kernel_problem(std::mt19937_64& rng) {
  Problem p = problem(std::uniform_int_distribution<Index>(1, 300)(rng),
                      std::uniform_int_distribution<Index>(1, 130)(rng), random_dtype(rng),
                      192 * kKiB);
  p.score_dtype = random_dtype(rng);
  if (rng() % 2) p.weight_dtype = random_dtype(rng);
  p.score_reads = std::uniform_int_distribution<Index>(1, 4)(rng);
  p.score_gemm = {random_tile(p.N, rng), random_tile(p.N, rng)};
  p.output_gemm = {random_tile(p.N, rng), random_tile(p.d, rng)};
  // The softmax's rows in flight order its passes and move no byte on the SMs' side.
  p.softmax_rows_in_flight = std::uniform_int_distribution<Index>(1, p.N + 3)(rng);
  constexpr cpu::Causal kCausal[] = {cpu::Causal::none, cpu::Causal::top_left,
                                     cpu::Causal::bottom_right};
  p.causal = kCausal[rng() % 3];
  return p;
}

}  // namespace

TEST_CASE("naive-kernel: each tensor's bytes are the closed form, counted, traced or computed") {
  auto rng = fresh_rng();
  for (int trial = 0; trial < 40; ++trial) {
    const Problem p = random_kernel_problem(rng);
    CAPTURE(p.N);
    CAPTURE(p.d);
    CAPTURE(to_string(p.dtype));
    CAPTURE(to_string(p.score_dtype));
    CAPTURE(p.score_reads);
    CAPTURE(p.score_gemm.m);
    CAPTURE(p.score_gemm.n);
    CAPTURE(p.output_gemm.m);
    CAPTURE(p.output_gemm.n);
    CAPTURE(cpu::to_string(p.causal));
    const Report grouped = count(Algorithm::naive_kernel, p);
    check_closed_form(grouped, p);
    std::int64_t events = 0;
    const Report traced =
        count(Algorithm::naive_kernel, p, [&](const Event& e) { events += e.times; });
    check_closed_form(traced, p);
    CHECK(traced.steps == events);
    CHECK(grouped.steps == events);  // grouping books the same steps
    CHECK(estimate(Algorithm::naive_kernel, p).steps == events);
    CHECK(grouped.peak_sram == 0);
    CHECK_FALSE(grouped.tiles.has_value());
  }
}

TEST_CASE("naive-kernel: tiles that do not divide N re-read the ragged last panel whole") {
  // N = 100 in tiles of 32: 4 rows of tiles (the last of 4 rows) and 4 columns.
  Problem p = problem(100, 16, DType::bf16, 192 * kKiB);
  p.score_gemm = {32, 32};
  p.output_gemm = {48, 8};  // 3 rows of tiles (the last of 4 rows), 2 columns over d = 16
  const Report r = count(Algorithm::naive_kernel, p);
  CHECK(r.tensor("Q").read == 4 * 100 * 16 * 2);
  CHECK(r.tensor("K").read == 4 * 100 * 16 * 2);
  CHECK(r.tensor("P").read == 2 * 100 * 100 * 2);
  CHECK(r.tensor("V").read == 3 * 100 * 16 * 2);
  p.score_gemm = {0, 100};  // one tile along each dimension: the paper's count
  p.output_gemm = {1000, 0};
  const Report once = count(Algorithm::naive_kernel, p);
  CHECK(once.tensor("Q").read == 100 * 16 * 2);
  CHECK(once.tensor("K").read == 100 * 16 * 2);
  CHECK(once.tensor("P").read == 100 * 100 * 2);
  CHECK(once.tensor("V").read == 100 * 16 * 2);
}

TEST_CASE("naive-kernel with the paper's facts is the paper's naive program, plus L") {
  auto rng = fresh_rng();
  for (int trial = 0; trial < 10; ++trial) {
    Problem p = problem(std::uniform_int_distribution<Index>(1, 2000)(rng),
                        std::uniform_int_distribution<Index>(1, 256)(rng), random_dtype(rng),
                        192 * kKiB);
    p.score_dtype = p.dtype;
    CAPTURE(p.N);
    CAPTURE(p.d);
    const Report paper = count(Algorithm::naive, p);
    const Report kernel = count(Algorithm::naive_kernel, p);
    for (const TensorTraffic& t : paper.tensors) {
      CAPTURE(t.name);
      CHECK(kernel.tensor(t.name).read == t.read);
      CHECK(kernel.tensor(t.name).written == t.written);
      CHECK(kernel.tensor(t.name).dtype == t.dtype);
    }
    CHECK(kernel.tensors.size() == paper.tensors.size() + 1);
    CHECK(kernel.bytes_total() == paper.bytes_total() + 4 * p.N);
    CHECK(kernel.ops.matrix_flops == paper.ops.matrix_flops);
    CHECK(kernel.ops.non_matrix() == paper.ops.non_matrix());
  }
}

TEST_CASE("naive-kernel as flashlab's kernel is built: fp32 S read three times") {
  // N = 4096, d = 128, bf16, GEMMs counted as the paper does: S is 64 MiB, written once and
  // read three times; P is 32 MiB, written once and read once; Q, K, V, O 1 MiB each.
  constexpr Bytes kMiB = 1024 * 1024;
  Problem p = problem(4096, 128, DType::bf16, 192 * kKiB);
  p.score_reads = 3;
  const Report r = count(Algorithm::naive_kernel, p);
  CHECK(r.tensor("S").written == 64 * kMiB);
  CHECK(r.tensor("S").read == 3 * 64 * kMiB);
  CHECK(r.tensor("P").written + r.tensor("P").read == 2 * 32 * kMiB);
  CHECK(r.bytes_total() == (4 * 64 + 2 * 32 + 4) * kMiB + 4 * 4096);
}

TEST_CASE("naive-kernel through an L2 emptied between its kernels, as Nsight Compute measures") {
  // N = 64, d = 16, bf16, fp32 S: Q, K, V, O 2 KiB each, S 16 KiB, P 8 KiB, L 256 bytes.
  constexpr Bytes kRow = 16 * 2;
  const Bytes qkv = 64 * kRow, S = 64 * 64 * 4, P = 64 * 64 * 2, L = 64 * 4;
  Problem p = problem(64, 16, DType::bf16, 192 * kKiB);
  p.l2_bytes = 1 << 20;  // holds everything
  // One L2 from kernel to kernel: S and P are read back from it; all is written at the end.
  const Report carried = count(Algorithm::naive_kernel, p);
  CHECK(carried.dram_read() == 3 * qkv);
  CHECK(carried.dram_written() == S + P + L + qkv);
  // Emptied between the kernels: each reads its operands from DRAM (Q and K; S; P and V),
  // and nothing it writes fits out of the L2 while it runs, so no kernel writes DRAM.
  p.l2_emptied_between_kernels = true;
  const Report cold = count(Algorithm::naive_kernel, p);
  CHECK(cold.dram_read() == 3 * qkv + S + P);
  CHECK(cold.dram_written() == 0);
  CHECK(cold.bytes_total() == carried.bytes_total());  // the SMs' side is the same
  // An L2 of 8 KiB (LRU: at the end of a kernel it holds the longest run of its latest
  // accesses that fits). The GEMM writes S's 64 rows of 256 bytes after reading Q and K: the
  // last 32 rows stay dirty and are emptied uncounted, the first 32 were written back while
  // it ran. The softmax reads a row of S (256 bytes, clean), writes its P (128, dirty) and
  // its L (4, dirty), 388 bytes a row: the last 21 rows and row 42's L stay (8152 bytes),
  // the rest of P and L was written back. The reads do not change.
  p.l2_bytes = 8 * kKiB;
  const Report small = count(Algorithm::naive_kernel, p);
  CHECK(small.dram_read() == 3 * qkv + S + P);
  CHECK(small.tensor("S").dram_written == S - 32 * 256);
  CHECK(small.tensor("P").dram_written == P - 21 * 128);
  CHECK(small.tensor("L").dram_written == L - 22 * 4);
  CHECK(small.tensor("O").dram_written == 0);  // O (2 KiB) stays in the L2 of the last GEMM
}

TEST_CASE("naive-kernel: the softmax's L, one float a row by one thread, costs a sector a row") {
  for (const Index N : {1, 17, 97, 1023})
    for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left}) {
      CAPTURE(N);
      Problem p = problem(N, 64, DType::bf16, 192 * kKiB, causal);
      p.score_reads = 3;
      const Report data = count(Algorithm::naive_kernel, p);
      p.l_store = WarpStore{4, 1, 1};
      const Report r = count(Algorithm::naive_kernel, p);
      CHECK(data.tensor("L").written == 4 * N);
      CHECK(r.tensor("L").written == 32 * N);
      CHECK(r.bytes_written() - r.tensor("L").written ==
            data.bytes_written() - data.tensor("L").written);
      CHECK(r.dram_written() == data.dram_written());
    }
}

TEST_CASE("naive-kernel under a causal mask: the softmax reads only the scores rows see") {
  auto rng = fresh_rng();
  const Index N = std::uniform_int_distribution<Index>(2, 700)(rng), d = 40;
  Problem p = problem(N, d, DType::fp16, 64 * kKiB);
  p.score_reads = 3;
  const Report full = count(Algorithm::naive_kernel, p);
  for (const cpu::Causal causal : {cpu::Causal::top_left, cpu::Causal::bottom_right}) {
    p.causal = causal;
    const Report masked = count(Algorithm::naive_kernel, p);
    CAPTURE(N);
    CHECK(masked.tensor("S").read == 3 * N * (N + 1) / 2 * 4);
    // Everything else is the unmasked run's: the GEMMs compute all of S and P V, and P's
    // masked entries are written as 0.
    CHECK(masked.bytes_total() - masked.tensor("S").read ==
          full.bytes_total() - full.tensor("S").read);
    CHECK(masked.ops.matrix_flops == full.ops.matrix_flops);
    CHECK(masked.ops.exp == N * (N + 1) / 2);
  }
}

TEST_CASE("naive-kernel's numbers are cpu_reference's naive attention, with L") {
  auto rng = fresh_rng();
  const Index N = 113, d = 59;
  for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left}) {
    Problem p = problem(N, d, DType::bf16, 192 * kKiB, causal);
    p.score_reads = 3;
    p.score_gemm = {64, 128};
    const auto Q = random_matrix<cpu::bf16>(N, d, rng), K = random_matrix<cpu::bf16>(N, d, rng),
               V = random_matrix<cpu::bf16>(N, d, rng);
    const auto kernel = simulate<cpu::bf16>(Algorithm::naive_kernel, p, Q, K, V);
    const auto paper = simulate<cpu::bf16>(Algorithm::naive, p, Q, K, V);
    cpu::AttentionOptions options;
    options.causal = causal;
    const auto reference = cpu::naive_attention<cpu::bf16>(Q, K, V, options);
    CHECK(kernel.O == paper.O);
    REQUIRE(kernel.L.size() == N);
    CHECK(kernel.L == reference.L.template cast<float>());
    check_closed_form(kernel.report, p);
  }
}

TEST_CASE("naive-kernel at N = 1,048,576: counted fast, causal too") {
  Problem p = problem(Index{1} << 20, 128, DType::bf16, 192 * kKiB);
  p.score_reads = 3;
  p.score_gemm = {128, 256};
  p.output_gemm = {128, 64};
  for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left}) {
    p.causal = causal;
    const auto start = std::chrono::steady_clock::now();
    const Report r = count(Algorithm::naive_kernel, p);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check_closed_form(r, p);
    // Grouped, the whole run is a handful of bookings, or three per row under the mask.
    CHECK(seconds < 2.0);
    CHECK(estimate(Algorithm::naive_kernel, p).steps == r.steps);
  }
}

TEST_CASE("naive-kernel through an L2") {
  auto rng = fresh_rng();
  Problem p = random_kernel_problem(rng);
  CAPTURE(p.N);
  CAPTURE(p.d);
  const Report two_level = count(Algorithm::naive_kernel, p);
  SUBCASE("one that holds everything: each input read from DRAM once, each output written once") {
    p.l2_bytes = Bytes{1} << 30;
    const Report r = count(Algorithm::naive_kernel, p);
    check_closed_form(r, p);
    for (const char* name : {"Q", "K", "V"}) {
      CAPTURE(name);
      CHECK(r.tensor(name).dram_read == r.tensor(name).elements * bytes_of(p.dtype));
    }
    // S and P are read back while the L2 still holds them (a causal row's visible scores
    // are the leading part of the row written), and leave it once, at the end.
    for (const char* name : {"S", "P", "L", "O"}) {
      CAPTURE(name);
      CHECK(r.tensor(name).dram_read == 0);
      CHECK(r.tensor(name).dram_written == r.tensor(name).written);
    }
  }
  SUBCASE("one smaller than any piece moved: DRAM sees every byte") {
    p.l2_bytes = 1;
    const Report r = count(Algorithm::naive_kernel, p);
    for (const TensorTraffic& t : r.tensors) {
      CAPTURE(t.name);
      CHECK(t.dram_read == two_level.tensor(t.name).read);
      CHECK(t.dram_written == two_level.tensor(t.name).written);
    }
  }
  SUBCASE("operands held: the same bytes into the SMs, K and V from DRAM once") {
    // An L2 far smaller than K or V: without gemm_operands_held each row of output tiles
    // reads K (and V) from DRAM again; with it only the first row does, and the later rows'
    // reads are booked into the SMs as the L2's.
    p.l2_bytes = 64;
    p.gemm_operands_held = true;
    const Report held = count(Algorithm::naive_kernel, p);
    p.gemm_operands_held = false;
    const Report each = count(Algorithm::naive_kernel, p);
    for (const char* name : {"K", "V"}) {
      CAPTURE(name);
      const Bytes once = held.tensor(name).elements * bytes_of(p.dtype);
      CHECK(held.tensor(name).read == two_level.tensor(name).read);
      CHECK(held.tensor(name).dram_read == once);
      CHECK(each.tensor(name).dram_read == two_level.tensor(name).read);
    }
    for (const char* name : {"Q", "S", "P", "L", "O"}) {
      CAPTURE(name);
      CHECK(held.tensor(name).read == each.tensor(name).read);
      CHECK(held.tensor(name).dram_read == each.tensor(name).dram_read);
    }
  }
  SUBCASE("the H200's at N = 65,536: K stays, S is fetched once for its three passes") {
    const auto& hw = find_profile("h200");
    Problem big = problem(65536, 128, DType::bf16, hw.sram_per_sm);
    big.score_reads = 3;
    big.score_gemm = {128, 128};
    big.l2_bytes = hw.l2_bytes;
    const Report r = count(Algorithm::naive_kernel, big);
    check_closed_form(r, big);
    // K (16 MiB) stays beside a Q panel and the 128 rows of S (32 MiB) that each row of
    // output tiles writes: read from DRAM once, as Q is.
    CHECK(r.tensor("K").dram_read == big.N * big.d * 2);
    CHECK(r.tensor("Q").dram_read == big.N * big.d * 2);
    // S (16 GiB) is written whole before the softmax reads it, so all but the rows still in
    // the L2 come back from DRAM, once: a row's second and third passes hit.
    const Bytes S_bytes = r.tensor("S").written;
    CHECK(r.tensor("S").dram_read <= S_bytes);
    CHECK(r.tensor("S").dram_read >= S_bytes - big.l2_bytes);
    CHECK(r.tensor("S").dram_written == S_bytes);
  }
}

TEST_CASE("naive-kernel's facts are refused with what would be right") {
  Problem p = problem(64, 16, DType::bf16, 192 * kKiB);
  for (const Index reads : {Index{0}, Index{-2}, kMaxScoreReads + 1}) {
    p.score_reads = reads;
    const std::string what = message_of([&] { count(Algorithm::naive_kernel, p); });
    CAPTURE(what);
    CHECK(contains(what, "score_reads = " + std::to_string(reads)));
    CHECK(contains(what, "between 1 and 1024 times"));
    CHECK_THROWS_AS(check(p), cpu::InvalidArgument);
  }
  p.score_reads = kMaxScoreReads;
  CHECK_NOTHROW(count(Algorithm::naive_kernel, p));
  p.score_reads = 1;
  p.score_gemm = {-1, 64};
  CHECK(contains(message_of([&] { check(p); }),
                 "the S = Q K^T GEMM's output tile is -1 x 64: give sizes of at least 1, or 0 "
                 "for a whole dimension in one tile"));
  p.score_gemm = {};
  p.output_gemm = {128, -7};
  CHECK(contains(message_of([&] { check(p); }), "the O = P V GEMM's output tile is 128 x -7"));
  p.output_gemm = {};
  p.score_dtype = static_cast<DType>(9);
  CHECK(contains(message_of([&] { count(Algorithm::naive_kernel, p); }), "dtype 9"));
}

TEST_CASE("naive-kernel by name, and in the table, JSON and CSV") {
  CHECK(parse_algorithm("naive-kernel") == Algorithm::naive_kernel);
  CHECK(to_string(Algorithm::naive_kernel) == "naive-kernel");
  CHECK(parse_algorithms("naive,naive-kernel") ==
        std::vector{Algorithm::naive, Algorithm::naive_kernel});
  CHECK(contains(message_of([] { parse_algorithm("naive_kernel"); }),
                 "the simulator runs naive, fa1, fa2 and naive-kernel"));

  Problem p = problem(256, 32, DType::bf16, 192 * kKiB);
  p.score_reads = 3;
  p.score_gemm = {64, 128};
  const std::vector reports{count(Algorithm::naive, p), count(Algorithm::naive_kernel, p)};
  const std::string table = format_table(reports, &find_profile("h200"));
  CAPTURE(table);
  CHECK(contains(table, "\nnaive-kernel "));
  CHECK(contains(table, "\nL "));  // the tensor only the kernel has

  const auto json = to_json(reports[1]);
  CHECK(json["algorithm"] == "naive-kernel");
  CHECK(json["kernel"]["score_dtype"] == "fp32");
  CHECK(json["kernel"]["weight_dtype"] == "bf16");
  CHECK(json["kernel"]["score_reads"] == 3);
  CHECK(json["kernel"]["softmax_rows_in_flight"] == 1);
  CHECK(json["kernel"]["score_gemm_tile"]["m"] == 64);
  CHECK(json["kernel"]["output_gemm_tile"]["n"] == 0);
  CHECK(json["bytes"]["total"] == reports[1].bytes_total());
  CHECK_FALSE(to_json(reports[0]).contains("kernel"));

  std::ostringstream csv;
  write_csv(csv, reports, nullptr);
  CHECK(contains(csv.str(), "\nnaive-kernel,256,32,bf16,none,"));
  const std::string total = std::to_string(reports[1].bytes_total());
  CHECK(contains(csv.str(), fmt::format(",{},", total)));

  SweepSpec spec;
  spec.N = {128, 512};
  spec.d = {32};
  spec.sram_bytes = {192 * kKiB};
  spec.algorithms = {Algorithm::naive_kernel};
  const auto swept = run_sweep(spec);
  REQUIRE(swept.size() == 2);
  CHECK(swept[1].algorithm == Algorithm::naive_kernel);
  CHECK(swept[1].tensor("S").written == 512 * 512 * 4);  // S in fp32, the default score_dtype
}

}  // namespace flashlab::sim::test
