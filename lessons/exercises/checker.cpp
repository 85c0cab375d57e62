#include "checker.hpp"

#include "kernel_checker.hpp"

#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "flashlab/cpu/softmax.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>

namespace flashlab::exercises {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Both sides compute in fp64 in a different order: sums of up to ~1000 terms of size ~1
// differ by a few hundred ulps at most, far below 1e-10; a wrong formula is off by > 1e-3.
constexpr double kTolerance = 1e-10;
constexpr std::uint64_t kSeed = 2024;
constexpr int kShownEntries = 4;

constexpr std::string_view kContract = "lessons/exercises/exercises.hpp";
constexpr auto kCpu = ExerciseKind::cpu;
constexpr auto kKernel = ExerciseKind::kernel;

constexpr std::array kExercises{
    ExerciseInfo{1, 1, kCpu, "stable softmax", "lessons/exercises/student/ex01_stable_softmax.cpp",
                 kContract,
                 "Write stable_softmax(x): subtract the row max before exp, so that scores\n"
                 "of 1e300 give finite probabilities, and a row of all -inf gives zeros."},
    ExerciseInfo{2, 2, kCpu, "merging two online-softmax states",
                 "lessons/exercises/student/ex02_merge.cpp", kContract,
                 "Write merge(a, b) for states (m, l, U): move both to the base\n"
                 "m = max(m_a, m_b) with alpha = exp(m_a - m), beta = exp(m_b - m), then add.\n"
                 "Empty states (m = -inf) must merge without NaN."},
    ExerciseInfo{3, 3, kCpu, "one query tile of the tiled forward pass",
                 "lessons/exercises/student/ex03_forward_query_tile.cpp", kContract,
                 "Write forward_query_tile(Q_i, K, V, Bc): sweep the KV tiles of Bc keys\n"
                 "keeping (m, l, U), then return O_i = U / l and L_i = m + log l."},
    ExerciseInfo{6, 6, kCpu, "D and the score gradient of the backward pass",
                 "lessons/exercises/student/ex06_backward.cpp", kContract,
                 "Write compute_D(dO, O) = rowsum(dO o O) and\n"
                 "score_gradient(P, dP, D) = P o (dP - D)."},
    ExerciseInfo{10, 10, kCpu, "split-KV decode", "lessons/exercises/student/ex10_decode.cpp",
                 kContract,
                 "Write decode_split_kv(q, K, V, splits): one state per segment of keys,\n"
                 "merged, then o = U / l."},
    ExerciseInfo{21, 3, kKernel, "CUDA: the online-softmax update in the scalar kernel",
                 "lessons/exercises/student/ex21_scalar_update.cu",
                 "lessons/exercises/kernels/ex21_scalar_forward.cuh",
                 "Write online_softmax_update(state, sS_row, sV, d), the device function each\n"
                 "thread of the scalar kernel calls once per KV tile: m' = max(m, rowmax S),\n"
                 "alpha = exp(m - m'), W = exp(S - m'), l = alpha l + rowsum W,\n"
                 "U = alpha U + W V, m = m'. A wholly masked tile leaves the state alone."},
    ExerciseInfo{22, 8, kKernel, "CUDA: a tile loop double buffered with cp.async",
                 "lessons/exercises/student/ex22_pipelined_loop.cu",
                 "lessons/exercises/kernels/ex22_pipelined_forward.cuh",
                 "Write kv_tile_loop(p): start the copies of KV tile j + 1 into the other SRAM\n"
                 "stage, then compute tile j. You choose the order of load_tile_async,\n"
                 "cp_async_commit, cp_async_wait<n>, __syncthreads and compute_tile."},
    ExerciseInfo{23, 10, kKernel, "CUDA: the split-KV combine kernel",
                 "lessons/exercises/student/ex23_combine.cu",
                 "lessons/exercises/kernels/ex23_combine.cuh",
                 "Write ex23_combine_kernel(a): one block per row merges the splits' (O_s, LSE_s)\n"
                 "into LSE = log sum_s exp(LSE_s) and O = sum_s exp(LSE_s - LSE) O_s, with\n"
                 "empty splits (LSE_s = -inf) and rows where every split is empty."},
};

std::string entries(const auto& v) {
  std::string s;
  const Index n = static_cast<Index>(v.size());
  for (Index k = 0; k < std::min<Index>(n, kShownEntries); ++k)  // a NaN's sign means nothing here
    s += (k ? ", " : "") + (std::isnan(v(k)) ? std::string("nan") : fmt::format("{:.6g}", v(k)));
  return n > kShownEntries ? s + ", ..." : s;
}

// Runs each case in a child process (child_process.hpp) and records how it ended.
class Cases {
 public:
  Cases(CheckReport& report, const CaseLimits& limits) : report_(&report), limits_(&limits) {}
  // body returns "" when the case passed, else what differed. It runs the student's code, so
  // whatever it needs from the reference is computed before, here in the checker.
  void run(std::string name, const std::function<std::string()>& body) {
    if (!report_->not_written.empty()) return;  // nothing to learn from the other cases
    CaseOutcome outcome = run_in_child(body, *limits_);
    if (outcome.verdict == CaseOutcome::Verdict::not_written) {
      report_->not_written = std::move(outcome.detail);
      return;
    }
    report_->cases.push_back({std::move(name), outcome.verdict == CaseOutcome::Verdict::passed,
                              std::move(outcome.detail), std::move(outcome.output)});
  }

 private:
  CheckReport* report_;
  const CaseLimits* limits_;
};

// "" when `got` is (rows, cols); else what the student's code returned and what it should
// have, `why` saying where the right shape comes from ("like P", "one per row of Q_i").
template <class M>
std::string wrong_shape(std::string_view what, const M& got, Index rows, Index cols,
                        std::string_view why) {
  if (got.rows() == rows && got.cols() == cols) return "";
  if constexpr (M::ColsAtCompileTime == 1)
    return fmt::format("{} has {} entries; it should have {}, {}", what, got.rows(), rows, why);
  return fmt::format("{} has shape ({}, {}); it should be ({}, {}) {}", what, got.rows(),
                     got.cols(), rows, cols, why);
}

// "" when got has the shape of expected (see wrong_shape) and its values to kTolerance,
// relative to the size of expected.
std::string compare(std::string_view what, const auto& expected, const auto& got,
                    std::string_view why) {
  if (std::string e = wrong_shape(what, got, expected.rows(), expected.cols(), why); !e.empty())
    return e;
  const auto want = expected.reshaped(), have = got.reshaped();
  double scale = 1.0, error = 0.0;
  Index not_finite = 0;
  for (Index k = 0; k < want.size(); ++k) {
    if (!std::isfinite(want(k))) continue;  // no case expects one; if it did, only == would match
    scale = std::max(scale, std::abs(want(k)));
    not_finite += !std::isfinite(have(k));
  }
  if (not_finite > 0)
    return fmt::format("{}: expected finite values [{}], got [{}] ({} of {} entries NaN or inf)",
                       what, entries(want), entries(have), not_finite, want.size());
  for (Index k = 0; k < want.size(); ++k) {
    const double difference = want(k) == have(k) ? 0.0 : std::abs(have(k) - want(k));
    if (std::isnan(difference) || difference > error) error = difference;  // NaN sticks
  }
  if (error <= kTolerance * scale) return "";
  return fmt::format("{}: expected [{}], got [{}] (max |difference| {:.3g})", what,
                     entries(want), entries(have), error);
}

Matrix random_matrix(std::mt19937_64& gen, Index rows, Index cols, double range = 1.0) {
  std::uniform_real_distribution<double> u(-range, range);
  Matrix X(rows, cols);
  for (Index k = 0; k < X.size(); ++k) X.data()[k] = u(gen);
  return X;
}

void check_softmax(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  const auto against = [&](std::string name, const Vector& x, const Vector& expected) {
    cases.run(std::move(name),
              [&] { return compare("p", expected, set.softmax(x), "one per score in x"); });
  };
  const auto against_reference = [&](std::string name, const Vector& x) {
    against(std::move(name), x, cpu::stable_softmax<double>(x));
  };
  for (Index n : {1, 7, 1000})
    against_reference(fmt::format("random scores, N = {}", n), random_matrix(gen, n, 1, 5.0));
  against_reference("large scores (700, 710, 720): exp overflows without the max",
                    Vector{{700.0, 710.0, 720.0}});
  against_reference("scores up to 1e300", Vector{{1e300, -1e300, 0.0}});
  against_reference("some keys masked (-inf) get p = 0", Vector{{-kInf, 1.0, -kInf, 2.0}});
  against("every key masked: all zeros, not NaN", Vector::Constant(3, -kInf), Vector::Zero(3));
}

cpu::SoftmaxState<double> to_reference(const RowState& s) {
  cpu::SoftmaxState<double> out = cpu::SoftmaxState<double>::empty(1, Index(s.U.size()));
  out.m[0] = s.m, out.l[0] = s.l;
  for (std::size_t k = 0; k < s.U.size(); ++k) out.U(0, Index(k)) = s.U[k];
  return out;
}

// The state of scores x (n) over values V (n, d), from the reference.
RowState state_of(const Vector& x, const Matrix& V) {
  const auto s = cpu::tile_state<double, double>(Matrix(x.transpose()), V);
  return {s.m[0], s.l[0], std::vector<double>(s.U.data(), s.U.data() + s.U.size())};
}

std::string wrong_U_size(const RowState& got, std::size_t d) {
  if (got.U.size() == d) return "";
  return fmt::format("U has {} entries; it should have {}, like a.U and b.U", got.U.size(), d);
}

void check_merge(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  constexpr Index kD = 3;
  const RowState empty{-kInf, 0.0, std::vector<double>(kD, 0.0)};
  const auto random_state = [&](Index keys, double offset) {
    return state_of((random_matrix(gen, keys, 1, 3.0).array() + offset).matrix(),
                    random_matrix(gen, keys, kD));
  };
  const auto merged = [&](std::string name, const RowState& a, const RowState& b) {
    const auto expected = cpu::finalize(cpu::merge(to_reference(a), to_reference(b)));
    cases.run(std::move(name), [&] {
      const RowState got = set.merge_states(a, b);
      if (std::string e = wrong_U_size(got, kD); !e.empty()) return e;
      const auto normalised = cpu::finalize(to_reference(got));
      if (std::string e = compare("O = U / l", expected.O, normalised.O, "like U"); !e.empty())
        return e;
      return compare("L = m + log l", expected.L, normalised.L, "one number");
    });
  };
  const RowState a = random_state(5, 0.0), b = random_state(9, 2.0);
  merged("two random states, the second with the larger max", a, b);
  merged("the same two, the other way round", b, a);
  merged("maxes 1000 apart: nothing may overflow", random_state(4, 0.0), random_state(4, 1000.0));
  merged("empty state on the left", empty, b);
  merged("empty state on the right", a, empty);
  cases.run("two empty states stay empty (l = 0, no NaN)", [&] {
    const RowState got = set.merge_states(empty, empty);
    if (std::string e = wrong_U_size(got, kD); !e.empty()) return e;
    const bool ok = got.l == 0.0 && std::isinf(got.m) && got.m < 0 &&
                    std::all_of(got.U.begin(), got.U.end(), [](double x) { return x == 0.0; });
    const Eigen::Map<const Vector> U(got.U.data(), kD);
    return ok ? std::string()
              : fmt::format("expected m = -inf, l = 0, U = [0, 0, 0]; got m = {}, l = {}, U = [{}]",
                            got.m, got.l, entries(U));
  });
}

void check_query_tile(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  struct Shape { Index Br, N, d, Bc; };
  for (const Shape s : {Shape{4, 24, 4, 4}, Shape{4, 24, 4, 8}, Shape{1, 1, 1, 1},
                        Shape{7, 97, 59, 16}, Shape{5, 97, 59, 200}, Shape{3, 50, 8, 1}}) {
    const double range = 3.0;  // scores of several units, so the max moves between tiles
    const Matrix Q = random_matrix(gen, s.Br, s.d, range), K = random_matrix(gen, s.N, s.d, range),
                 V = random_matrix(gen, s.N, s.d);
    const auto expected = cpu::naive_attention<double>(Q, K, V);
    cases.run(fmt::format("Br = {}, N = {}, d = {}, Bc = {}", s.Br, s.N, s.d, s.Bc), [&] {
      const auto got = set.query_tile(Q, K, V, s.Bc);
      if (std::string e = compare("O_i", expected.O, got.O, "like Q_i"); !e.empty()) return e;
      return compare("L_i", expected.L, got.L, "one per row of Q_i");
    });
  }
}

void check_backward(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  for (const auto& [N, d] : {std::pair<Index, Index>{1, 1}, {24, 4}, {97, 59}}) {
    const Matrix Q = random_matrix(gen, N, d, 2.0), K = random_matrix(gen, N, d, 2.0),
                 V = random_matrix(gen, N, d), dO = random_matrix(gen, N, d);
    const auto ref = cpu::naive_backward<double>(Q, K, V, dO);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    cases.run(fmt::format("D = rowsum(dO o O) equals rowsum(P o dP), N = {}, d = {}", N, d),
              [&] { return compare("D", ref.D, set.D(dO, ref.O), "one per row of dO"); });
    cases.run(fmt::format("dS gives the reference dQ and dK, N = {}, d = {}", N, d), [&] {
      const Matrix dS = set.dS(ref.P, ref.dP, ref.D);
      // dS is multiplied below: a wrong shape must be caught before, not read out of bounds.
      if (std::string e = wrong_shape("dS", dS, ref.P.rows(), ref.P.cols(), "like P"); !e.empty())
        return e;
      if (std::string e = compare("dQ = dS K scale", ref.dQ, Matrix(dS * K * scale), "like Q");
          !e.empty())
        return e;
      return compare("dK = dS^T Q scale", ref.dK, Matrix(dS.transpose() * Q * scale), "like K");
    });
  }
}

void check_decode(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  const auto decoded = [&](std::string name, const Matrix& q, const Matrix& K, const Matrix& V,
                           Index splits) {
    const Vector expected = cpu::naive_attention<double>(q, K, V).O.row(0).transpose();
    cases.run(std::move(name), [&] {
      return compare("o", expected, set.decode(q.row(0).transpose(), K, V, splits),
                     "one per column of V");
    });
  };
  for (const auto& [N, d] : {std::pair<Index, Index>{1, 4}, {97, 59}, {1000, 8}}) {
    const Matrix q = random_matrix(gen, 1, d, 3.0), K = random_matrix(gen, N, d, 3.0),
                 V = random_matrix(gen, N, d);
    for (Index splits : {Index{1}, Index{3}, N})
      if (splits <= N) decoded(fmt::format("N = {}, d = {}, {} splits", N, d, splits), q, K, V, splits);
  }
  const Index N = 5, d = 2;  // 4 splits of ceil(5 / 4) = 2 keys: 2, 2, 1 and an empty one
  const Matrix q = random_matrix(gen, 1, d), K = random_matrix(gen, N, d), V = random_matrix(gen, N, d);
  decoded("N = 5 in 4 splits: the last segment is empty", q, K, V, 4);
}

}  // namespace

std::span<const ExerciseInfo> all_exercises() { return kExercises; }

const ExerciseInfo& find_exercise(int number) {
  std::string numbers;
  for (std::size_t k = 0; k < kExercises.size(); ++k) {
    if (kExercises[k].number == number) return kExercises[k];
    numbers += fmt::format("{}{}", k == 0 ? "" : k + 1 == kExercises.size() ? " and " : ", ",
                           kExercises[k].number);
  }
  throw cpu::InvalidArgument(fmt::format(
      "there is no exercise {}: the exercises are {} (a CPU exercise has its lesson's number, "
      "a CUDA kernel exercise a number from 21); `flashlab exercise N` shows one",
      number, numbers));
}

bool CheckReport::passed() const {
  return not_written.empty() && not_run.empty() && !cases.empty() &&
         std::all_of(cases.begin(), cases.end(), [](const CaseResult& c) { return c.passed; });
}

CheckReport check_exercise(int number, const ExerciseSet& set, const CaseLimits& limits) {
  const ExerciseInfo& info = find_exercise(number);
  validate(limits);
  CheckReport report{number, {}, {}, {}};
  if (info.kind == ExerciseKind::kernel) {
    check_kernel_exercise(number, set.kernel_plugin, limits, report);
    return report;
  }
  Cases cases(report, limits);
  switch (number) {
    case 1: check_softmax(set, cases); break;
    case 2: check_merge(set, cases); break;
    case 3: check_query_tile(set, cases); break;
    case 6: check_backward(set, cases); break;
    case 10: check_decode(set, cases); break;
  }
  return report;
}

}  // namespace flashlab::exercises
