#include "checker.hpp"

#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "flashlab/cpu/softmax.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <fmt/core.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

namespace flashlab::exercises {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Both sides compute in fp64 in a different order: sums of up to ~1000 terms of size ~1
// differ by a few hundred ulps at most, far below 1e-10; a wrong formula is off by > 1e-3.
constexpr double kTolerance = 1e-10;
constexpr std::uint64_t kSeed = 2024;
constexpr int kShownEntries = 4;

constexpr std::array kExercises{
    ExerciseInfo{1, "stable softmax", "lessons/exercises/student/ex01_stable_softmax.cpp",
                 "Write stable_softmax(x): subtract the row max before exp, so that scores\n"
                 "of 1e300 give finite probabilities, and a row of all -inf gives zeros."},
    ExerciseInfo{2, "merging two online-softmax states", "lessons/exercises/student/ex02_merge.cpp",
                 "Write merge(a, b) for states (m, l, u): move both to the base\n"
                 "m = max(m_a, m_b) with alpha = exp(m_a - m), beta = exp(m_b - m), then add.\n"
                 "Empty states (m = -inf) must merge without NaN."},
    ExerciseInfo{3, "one query tile of the tiled forward pass",
                 "lessons/exercises/student/ex03_forward_query_tile.cpp",
                 "Write forward_query_tile(Q_i, K, V, Bc): sweep the KV tiles of Bc keys\n"
                 "keeping (m, l, U), then return O_i = U / l and L_i = m + log l."},
    ExerciseInfo{6, "D and the score gradient of the backward pass",
                 "lessons/exercises/student/ex06_backward.cpp",
                 "Write compute_D(dO, O) = rowsum(dO o O) and\n"
                 "score_gradient(P, dP, D) = P o (dP - D)."},
    ExerciseInfo{10, "split-KV decode", "lessons/exercises/student/ex10_decode.cpp",
                 "Write decode_split_kv(q, K, V, splits): one state per segment of keys,\n"
                 "merged, then o = u / l."},
};

std::string entries(const auto& v) {
  std::string s;
  const Index n = static_cast<Index>(v.size());
  for (Index k = 0; k < std::min<Index>(n, kShownEntries); ++k)
    s += (k ? ", " : "") + fmt::format("{:.6g}", v(k));
  return n > kShownEntries ? s + ", ..." : s;
}

// Runs one case: `body` returns "" when it passed, else what differed.
class Cases {
 public:
  explicit Cases(CheckReport& report) : report_(&report) {}
  void run(std::string name, const std::function<std::string()>& body) {
    if (!report_->not_written.empty()) return;  // nothing to learn from the other cases
    CaseResult result{std::move(name), false, ""};
    try {
      result.detail = body();
      result.passed = result.detail.empty();
    } catch (const NotWrittenYet& e) {
      report_->not_written = e.what();
      return;
    } catch (const std::exception& e) {
      result.detail = fmt::format("threw an exception: {}", e.what());
    }
    report_->cases.push_back(std::move(result));
  }

 private:
  CheckReport* report_;
};

// "" when got matches expected to kTolerance (relative to the size of expected).
std::string compare(std::string_view what, const auto& expected, const auto& got) {
  if (got.rows() != expected.rows() || got.cols() != expected.cols())
    return fmt::format("{}: expected shape ({}, {}), got ({}, {})", what, expected.rows(),
                       expected.cols(), got.rows(), got.cols());
  const double scale = std::max(1.0, expected.cwiseAbs().maxCoeff());
  if (!got.allFinite() && expected.allFinite())
    return fmt::format("{}: expected finite values [{}], got [{}]", what,
                       entries(expected.reshaped()), entries(got.reshaped()));
  const double error = (got - expected).cwiseAbs().maxCoeff();
  if (error <= kTolerance * scale) return "";
  return fmt::format("{}: expected [{}], got [{}] (max |difference| {:.3g})", what,
                     entries(expected.reshaped()), entries(got.reshaped()), error);
}

Matrix random_matrix(std::mt19937_64& gen, Index rows, Index cols, double range = 1.0) {
  std::uniform_real_distribution<double> u(-range, range);
  Matrix X(rows, cols);
  for (Index k = 0; k < X.size(); ++k) X.data()[k] = u(gen);
  return X;
}

void check_softmax(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  const auto against_reference = [&](const Vector& x) {
    return compare("p", cpu::stable_softmax<double>(x), set.softmax(x));
  };
  for (Index n : {1, 7, 1000}) {
    const Vector x = random_matrix(gen, n, 1, 5.0);
    cases.run(fmt::format("random scores, N = {}", n), [&] { return against_reference(x); });
  }
  cases.run("large scores (700, 710, 720): exp overflows without the max", [&] {
    return against_reference(Vector{{700.0, 710.0, 720.0}});
  });
  cases.run("scores up to 1e300", [&] { return against_reference(Vector{{1e300, -1e300, 0.0}}); });
  cases.run("some keys masked (-inf) get p = 0", [&] {
    return against_reference(Vector{{-kInf, 1.0, -kInf, 2.0}});
  });
  cases.run("every key masked: all zeros, not NaN", [&] {
    return compare("p", Vector::Zero(3), set.softmax(Vector::Constant(3, -kInf)));
  });
}

cpu::SoftmaxState<double> to_reference(const RowState& s) {
  cpu::SoftmaxState<double> out = cpu::SoftmaxState<double>::empty(1, Index(s.u.size()));
  out.m[0] = s.m, out.l[0] = s.l;
  for (std::size_t k = 0; k < s.u.size(); ++k) out.U(0, Index(k)) = s.u[k];
  return out;
}

// The state of scores x (n) over values V (n, d), from the reference.
RowState state_of(const Vector& x, const Matrix& V) {
  const auto s = cpu::tile_state<double, double>(Matrix(x.transpose()), V);
  return {s.m[0], s.l[0], std::vector<double>(s.U.data(), s.U.data() + s.U.size())};
}

std::string compare_states(const RowState& a, const RowState& b, const ExerciseSet& set) {
  const auto expected = cpu::finalize(cpu::merge(to_reference(a), to_reference(b)));
  const RowState got = set.merge_states(a, b);
  if (got.u.size() != a.u.size())
    return fmt::format("u: expected {} entries, got {}", a.u.size(), got.u.size());
  const auto normalised = cpu::finalize(to_reference(got));
  if (std::string e = compare("O = u / l", expected.O, normalised.O); !e.empty()) return e;
  return compare("L = m + log l", expected.L, normalised.L);
}

void check_merge(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  constexpr Index kD = 3;
  const RowState empty{-kInf, 0.0, std::vector<double>(kD, 0.0)};
  const auto random_state = [&](Index keys, double offset) {
    return state_of((random_matrix(gen, keys, 1, 3.0).array() + offset).matrix(),
                    random_matrix(gen, keys, kD));
  };
  const RowState a = random_state(5, 0.0), b = random_state(9, 2.0);
  cases.run("two random states, the second with the larger max", [&] { return compare_states(a, b, set); });
  cases.run("the same two, the other way round", [&] { return compare_states(b, a, set); });
  cases.run("maxes 1000 apart: nothing may overflow", [&] {
    return compare_states(random_state(4, 0.0), random_state(4, 1000.0), set);
  });
  cases.run("empty state on the left", [&] { return compare_states(empty, b, set); });
  cases.run("empty state on the right", [&] { return compare_states(a, empty, set); });
  cases.run("two empty states stay empty (l = 0, no NaN)", [&] {
    const RowState got = set.merge_states(empty, empty);
    const bool ok = got.l == 0.0 && std::isinf(got.m) && got.m < 0 && got.u.size() == kD &&
                    std::all_of(got.u.begin(), got.u.end(), [](double x) { return x == 0.0; });
    return ok ? std::string() : fmt::format("expected m = -inf, l = 0, u = 0; got m = {}, l = {}", got.m, got.l);
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
    cases.run(fmt::format("Br = {}, N = {}, d = {}, Bc = {}", s.Br, s.N, s.d, s.Bc), [&] {
      const auto expected = cpu::naive_attention<double>(Q, K, V);
      const auto got = set.query_tile(Q, K, V, s.Bc);
      if (std::string e = compare("O_i", expected.O, got.O); !e.empty()) return e;
      return compare("L_i", expected.L, got.L);
    });
  }
}

void check_backward(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  for (const auto [N, d] : {std::pair<Index, Index>{1, 1}, {24, 4}, {97, 59}}) {
    const Matrix Q = random_matrix(gen, N, d, 2.0), K = random_matrix(gen, N, d, 2.0),
                 V = random_matrix(gen, N, d), dO = random_matrix(gen, N, d);
    const auto ref = cpu::naive_backward<double>(Q, K, V, dO);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    cases.run(fmt::format("D = rowsum(dO o O) equals rowsum(P o dP), N = {}, d = {}", N, d),
              [&] { return compare("D", ref.D, set.D(dO, ref.O)); });
    cases.run(fmt::format("dS gives the reference dQ and dK, N = {}, d = {}", N, d), [&] {
      const Matrix dS = set.dS(ref.P, ref.dP, ref.D);
      if (std::string e = compare("dQ = dS K scale", ref.dQ, Matrix(dS * K * scale)); !e.empty()) return e;
      return compare("dK = dS^T Q scale", ref.dK, Matrix(dS.transpose() * Q * scale));
    });
  }
}

void check_decode(const ExerciseSet& set, Cases& cases) {
  std::mt19937_64 gen(kSeed);
  for (const auto [N, d] : {std::pair<Index, Index>{1, 4}, {97, 59}, {1000, 8}}) {
    const Matrix q = random_matrix(gen, 1, d, 3.0), K = random_matrix(gen, N, d, 3.0),
                 V = random_matrix(gen, N, d);
    const Vector expected = cpu::naive_attention<double>(q, K, V).O.row(0).transpose();
    for (Index splits : {Index{1}, Index{3}, N}) {
      if (splits > N) continue;
      cases.run(fmt::format("N = {}, d = {}, {} splits", N, d, splits), [&] {
        return compare("o", expected, set.decode(q.row(0).transpose(), K, V, splits));
      });
    }
  }
  const Index N = 5, d = 2;  // 4 splits of ceil(5 / 4) = 2 keys: 2, 2, 1 and an empty one
  const Matrix q = random_matrix(gen, 1, d), K = random_matrix(gen, N, d), V = random_matrix(gen, N, d);
  cases.run("N = 5 in 4 splits: the last segment is empty", [&] {
    return compare("o", Vector(cpu::naive_attention<double>(q, K, V).O.row(0).transpose()),
                   set.decode(q.row(0).transpose(), K, V, 4));
  });
}

}  // namespace

std::span<const ExerciseInfo> all_exercises() { return kExercises; }

const ExerciseInfo& find_exercise(int number) {
  for (const auto& e : kExercises)
    if (e.number == number) return e;
  throw cpu::InvalidArgument(fmt::format(
      "there is no exercise {}: the exercises are 1, 2, 3, 6 and 10 (one per lesson that has "
      "one); `flashlab exercise N` shows one",
      number));
}

bool CheckReport::passed() const {
  return not_written.empty() && !cases.empty() &&
         std::all_of(cases.begin(), cases.end(), [](const CaseResult& c) { return c.passed; });
}

CheckReport check_exercise(int number, const ExerciseSet& set) {
  find_exercise(number);
  CheckReport report{number, {}, {}};
  Cases cases(report);
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
