// The kernel exercises' cases and their comparison with the CPU reference.
//
// The rule is flashlab's (the 2x rule of the FlashAttention tests): the kernel computes in
// fp32 on fp32 inputs, and its largest error against an fp64 reference may be at most twice
// the largest error of the plain computation in fp32 (naive attention, or the merge of the
// splits' states one after another), plus a margin for summing in another order: two fp32
// sums of n terms of size x in different orders differ by about sqrt(n) eps x, and exp of an
// argument of size a rounded to eps a carries an error eps a, which the plain computation
// may happen to lack on some draw. A wrong formula is off by far more (1e-3 and up).
// Every case draws fresh inputs; a failure prints FLASHLAB_SEED=<n>, and setting it replays them.
#include "kernel_checker.hpp"

#include "kernel_plugin.hpp"

#include "flashlab/cpu/correctness.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace flashlab::exercises {

namespace {

using MatrixF = cpu::Matrix<float>;
using VectorF = cpu::Vector<float>;
using MatrixD = cpu::Matrix<double>;
using VectorD = cpu::Vector<double>;

constexpr double kEps = std::numeric_limits<float>::epsilon();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kShownEntries = 4;
// A case starts CUDA in a fresh process (a fraction of a second) before its kernel runs; under
// a loaded machine that can take several seconds.
constexpr double kCaseSeconds = 60.0;
// CUDA reserves far more address space than it uses: a limit on it would stop CUDA itself, so
// the memory guard of the CPU exercises is left off (a case's GPU memory is the harness's).
constexpr std::size_t kNoMemoryLimit = std::numeric_limits<std::size_t>::max();
constexpr std::string_view kNoDevice = "no device: ";

CaseLimits kernel_limits(const CaseLimits& limits) {
  return {std::max(limits.seconds, kCaseSeconds), kNoMemoryLimit};
}

std::uint64_t fresh_seed() {
  if (const char* s = std::getenv("FLASHLAB_SEED"); s && *s) return std::strtoull(s, nullptr, 10);
  std::random_device device;
  return (std::uint64_t{device()} << 32) | device();
}

template <class V>
std::string entries(const V& v) {
  std::string s;
  const Index n = static_cast<Index>(v.size());
  for (Index k = 0; k < std::min<Index>(n, kShownEntries); ++k)
    s += (k ? ", " : "") +
         (std::isnan(double(v(k))) ? std::string("nan") : fmt::format("{:.6g}", double(v(k))));
  return n > kShownEntries ? s + ", ..." : s;
}

MatrixF random_matrix(std::mt19937_64& gen, Index rows, Index cols, double range) {
  std::uniform_real_distribution<float> u(float(-range), float(range));
  MatrixF X(rows, cols);
  for (Index k = 0; k < X.size(); ++k) X.data()[k] = u(gen);
  return X;
}

double max_finite_abs(const auto& x) {
  double m = 0.0;
  for (Index k = 0; k < x.size(); ++k)
    if (std::isfinite(double(x.data()[k]))) m = std::max(m, std::abs(double(x.data()[k])));
  return m;
}

// What the kernel returned for one output (O or L), beside the fp64 reference and the plain
// fp32 computation, each (rows, cols) row-major.
struct Output {
  std::string_view name;  // "O", "LSE"
  const MatrixD& reference;
  const MatrixF& plain;
  const MatrixF& got;
  double slack;  // the order-of-summation margin, absolute
};

// "" when `out` passes the rule, else what differed: NaN or inf the reference does not have
// (the harness fills every output with NaN before the launch), -inf where the reference has
// it, or an error over the bound, showing the row of the largest error.
std::string judge(const Output& out) {
  const Index rows = out.reference.rows(), cols = out.reference.cols();
  const auto row_text = [&](Index r) {
    return fmt::format("{} row {}: expected [{}], got [{}]", out.name, r,
                       entries(out.reference.row(r)), entries(out.got.row(r)));
  };
  Index nan = 0, first_bad = -1;
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c) {
      const double want = out.reference(r, c), have = out.got(r, c);
      const bool bad = std::isnan(have) || (std::isinf(want) != std::isinf(have)) ||
                       (std::isinf(want) && want != have);
      nan += std::isnan(have);
      if (bad && first_bad < 0) first_bad = r;
    }
  if (first_bad >= 0 && nan > 0)
    return fmt::format(
        "{} ({} of {} entries of {} are NaN: the value the harness filled it with before the "
        "launch, so not written, or computed as NaN)",
        row_text(first_bad), nan, rows * cols, out.name);
  if (first_bad >= 0)
    return fmt::format("{} (-inf marks a row that sees no key; only such a row may have it)",
                       row_text(first_bad));
  double error = 0.0, plain_error = 0.0;
  Index worst_row = 0, worst_col = 0;
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c) {
      const double want = out.reference(r, c);
      if (std::isinf(want)) continue;  // matched above
      const double e = std::abs(double(out.got(r, c)) - want);
      if (e > error) error = e, worst_row = r, worst_col = c;
      plain_error = std::max(plain_error, std::abs(double(out.plain(r, c)) - want));
    }
  const double bound = 2.0 * plain_error + out.slack;
  if (error <= bound) return "";
  return fmt::format(
      "{} (largest |difference| {:.3g}, at column {}: expected {:.6g}, got {:.6g}; allowed "
      "{:.3g}: twice the plain fp32 computation's {:.3g}, + {:.3g} for the order of the sums)",
      row_text(worst_row), error, worst_col, out.reference(worst_row, worst_col),
      double(out.got(worst_row, worst_col)), bound, plain_error, out.slack);
}

MatrixD column(const VectorD& v) { return MatrixD(v); }
MatrixF column(const VectorF& v) { return MatrixF(v); }

// Runs each case in a child process and records how it ended (as checker.cpp's Cases does for
// the CPU exercises): after a not-written skeleton nothing more runs.
class KernelCases {
 public:
  KernelCases(CheckReport& report, const CaseLimits& limits, std::string plugin)
      : report_(&report), limits_(kernel_limits(limits)), plugin_(std::move(plugin)) {}

  // body gets the loaded plugin; it returns "" when the case passed, else what differed.
  void run(std::string name, std::uint64_t seed,
           const std::function<std::string(const KernelPlugin&)>& body) {
    if (!report_->not_written.empty()) return;
    CaseOutcome outcome = run_in_child([&] { return body(load_kernel_plugin(plugin_)); }, limits_);
    if (outcome.verdict == CaseOutcome::Verdict::not_written) {
      report_->not_written = std::move(outcome.detail);
      return;
    }
    const bool passed = outcome.verdict == CaseOutcome::Verdict::passed;
    if (!passed) outcome.detail += fmt::format(" [inputs from FLASHLAB_SEED={}]", seed);
    report_->cases.push_back(
        {std::move(name), passed, std::move(outcome.detail), std::move(outcome.output)});
  }

 private:
  CheckReport* report_;
  CaseLimits limits_;
  std::string plugin_;
};

// What a launch said when it did not give outputs to compare: "" when it ran. Throws
// NotWrittenYet for a skeleton.
std::string launch_problem(const flashlab_kx_result& result, int number, std::string_view file) {
  if (result.not_written)
    throw NotWrittenYet(
        fmt::format("exercise {}: the kernel is not written yet ({})", number, file));
  if (result.ran) return "";
  return fmt::format("the kernel did not run to its end: {}", result.message);
}

struct ForwardCase {
  std::string name;
  Index n_q, n_k, d;
  bool causal;
  double range = 2.0;  // inputs uniform in [-range, range]: scores of a few units move the max
};

void check_forward(int number, std::string_view file, KernelCases& cases) {
  const std::vector<ForwardCase> all{
      {"N = 1, d = 64: one query, one key", 1, 1, 64, false},
      {"N = 17, d = 59: one ragged KV tile", 17, 17, 59, false},
      {"N = 97, d = 128", 97, 97, 128, false},
      {"N = 1023, d = 64: many tiles, the max moves", 1023, 1023, 64, false},
      {"N_q = 113, N_k = 203, d = 111", 113, 203, 111, false},
      {"N = 97, d = 1, inputs up to 30: scores in the hundreds", 97, 97, 1, false, 30.0},
      {"causal, N = 97, d = 64", 97, 97, 64, true},
      {"causal, N_q = 17, N_k = 1023, d = 32 (bottom-right: the last row sees every key)", 17, 1023,
       32, true},
      {"causal, N_q = 1023, N_k = 97, d = 16: the first 926 rows see no key (O = 0, "
       "LSE = -inf)",
       1023, 97, 16, true},
  };
  for (const ForwardCase& c : all) {
    const std::uint64_t seed = fresh_seed();
    std::mt19937_64 gen(seed);
    const MatrixF Q = random_matrix(gen, c.n_q, c.d, c.range),
                  K = random_matrix(gen, c.n_k, c.d, c.range),
                  V = random_matrix(gen, c.n_k, c.d, 1.0);
    cpu::AttentionOptions options;
    options.causal = c.causal ? cpu::Causal::bottom_right : cpu::Causal::none;
    const auto reference =
        cpu::naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>(), options);
    const auto plain = cpu::naive_attention<float>(Q, K, V, options);
    const double order =
        cpu::kSummationOrderSlack * kEps * (std::sqrt(double(c.n_k)) + max_finite_abs(reference.L));
    const MatrixD L_reference = column(reference.L);
    const MatrixF L_plain = column(plain.L);
    cases.run(c.name, seed, [&](const KernelPlugin& plugin) {
      MatrixF O = MatrixF::Zero(c.n_q, c.d), L = MatrixF::Zero(c.n_q, 1);
      const flashlab_kx_forward_call call{number,   Q.data(), K.data(), V.data(), O.data(),
                                          L.data(), c.n_q,    c.n_k,    c.d,      c.causal};
      flashlab_kx_result result{};
      plugin.forward(&call, &result);
      if (std::string e = launch_problem(result, number, file); !e.empty()) return e;
      if (std::string e = judge({"O", reference.O, plain.O, O, order * max_finite_abs(V)});
          !e.empty())
        return e;
      return judge({"LSE", L_reference, L_plain, L, order});
    });
  }
}

// The splits' (O_s, LSE_s) as the reference's states: m = LSE_s, l = 1, U = O_s for a split
// that saw keys; the empty state for one that did not. Their merge, finalised, is the combine.
template <class T>
cpu::Normalised<T> merged(const std::vector<MatrixF>& O_s, const std::vector<VectorF>& lse_s) {
  std::vector<cpu::SoftmaxState<T>> states;
  for (std::size_t s = 0; s < O_s.size(); ++s) {
    auto state = cpu::SoftmaxState<T>::empty(O_s[s].rows(), O_s[s].cols());
    for (Index r = 0; r < O_s[s].rows(); ++r) {
      if (std::isinf(lse_s[s](r))) continue;
      state.m(r) = T(lse_s[s](r));
      state.l(r) = T(1);
      state.U.row(r) = O_s[s].row(r).template cast<T>();
    }
    states.push_back(std::move(state));
  }
  cpu::SoftmaxState<T> all = states.front();
  for (std::size_t s = 1; s < states.size(); ++s) all = cpu::merge(all, states[s]);
  return cpu::finalize(all);
}

struct CombineCase {
  std::string name;
  Index splits, rows, d;
  double spread = 3.0;       // LSE_s uniform in [-spread, spread]
  double empty_share = 0.0;  // the share of (split, row) pairs that saw no key
  bool last_split_empty = false;
  bool first_row_empty = false;  // every split of row 0 empty
};

void check_combine(int number, std::string_view file, KernelCases& cases) {
  const std::vector<CombineCase> all{
      {"1 split, 1 row, d = 64", 1, 1, 64},
      {"2 splits, 17 rows, d = 59", 2, 17, 59},
      {"7 splits, 97 rows, d = 128 (more columns than threads), some splits empty", 7, 97, 128, 3.0,
       0.2},
      {"16 splits, 1023 rows, d = 64, LSE_s up to 100 apart: nothing may overflow", 16, 1023, 64,
       50.0},
      {"5 splits, 33 rows, d = 1, the last split empty (N not a multiple of the splits)", 5, 33, 1,
       3.0, 0.0, true},
      {"3 splits, 8 rows, d = 16, every split of row 0 empty: O = 0, LSE = -inf", 3, 8, 16, 3.0,
       0.0, false, true},
  };
  for (const CombineCase& c : all) {
    const std::uint64_t seed = fresh_seed();
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> share(0.0, 1.0);
    std::vector<MatrixF> O_s;
    std::vector<VectorF> lse_s;
    for (Index s = 0; s < c.splits; ++s) {
      O_s.push_back(random_matrix(gen, c.rows, c.d, 1.0));
      lse_s.push_back(random_matrix(gen, c.rows, 1, c.spread));
      for (Index r = 0; r < c.rows; ++r) {
        const bool empty = share(gen) < c.empty_share ||
                           (c.last_split_empty && s == c.splits - 1) ||
                           (c.first_row_empty && r == 0);
        if (!empty) continue;
        lse_s.back()(r) = -std::numeric_limits<float>::infinity();
        O_s.back().row(r).setZero();
      }
    }
    const auto reference = merged<double>(O_s, lse_s);
    const auto plain = merged<float>(O_s, lse_s);
    double largest_lse = 0.0;
    for (const VectorF& l : lse_s) largest_lse = std::max(largest_lse, max_finite_abs(l));
    const double order =
        cpu::kSummationOrderSlack * kEps * (std::sqrt(double(c.splits)) + largest_lse);
    MatrixF flat_O(c.splits * c.rows, c.d), flat_lse(c.splits, c.rows);
    for (Index s = 0; s < c.splits; ++s) {
      flat_O.middleRows(s * c.rows, c.rows) = O_s[s];
      flat_lse.row(s) = lse_s[s].transpose();
    }
    const MatrixD L_reference = column(reference.L);
    const MatrixF L_plain = column(plain.L);
    cases.run(c.name, seed, [&](const KernelPlugin& plugin) {
      MatrixF O = MatrixF::Zero(c.rows, c.d), L = MatrixF::Zero(c.rows, 1);
      const flashlab_kx_combine_call call{flat_O.data(), flat_lse.data(), O.data(), L.data(),
                                          c.splits,      c.rows,          c.d};
      flashlab_kx_result result{};
      plugin.combine(&call, &result);
      if (std::string e = launch_problem(result, number, file); !e.empty()) return e;
      if (std::string e = judge({"O", reference.O, plain.O, O, order}); !e.empty()) return e;
      return judge({"LSE", L_reference, L_plain, L, order});
    });
  }
}

// "" when a GPU is there to run the plugin's kernels, else why not.
std::string why_it_cannot_run(const std::string& plugin_path) {
  if (plugin_path.empty())
    return "this flashlab was built without CUDA (nvcc was not found when it was configured), so "
           "your kernel was not compiled. With the CUDA toolkit installed, configure and build "
           "again (`cmake --preset default && cmake --build build --target flashlab`); running "
           "the kernel then needs an NVIDIA GPU";
  if (!std::filesystem::exists(plugin_path))
    return fmt::format(
        "the plugin that holds your kernel ({}) is not built: build it with "
        "`cmake --build build --target flashlab`",
        plugin_path);
  const CaseOutcome probe = run_in_child(
      [&] {
        char description[256] = "";
        const bool present =
            load_kernel_plugin(plugin_path).device(description, sizeof description) == 1;
        return present ? std::string() : std::string(kNoDevice) + description;
      },
      kernel_limits({}));
  if (probe.verdict == CaseOutcome::Verdict::passed) return "";
  if (probe.detail.starts_with(kNoDevice))
    return fmt::format(
        "your kernel compiled (it is built into {}); running it needs a CUDA GPU, "
        "and this machine has none ({})",
        plugin_path, probe.detail.substr(kNoDevice.size()));
  return fmt::format("the plugin that holds your kernel ({}) could not be used: {}", plugin_path,
                     probe.detail);
}

}  // namespace

void check_kernel_exercise(int number, const std::string& plugin_path, const CaseLimits& limits,
                           CheckReport& report) {
  report.not_run = why_it_cannot_run(plugin_path);
  if (!report.not_run.empty()) return;
  KernelCases cases(report, limits, plugin_path);
  const std::string_view file = find_exercise(number).file;
  if (number == 23)
    check_combine(number, file, cases);
  else
    check_forward(number, file, cases);
}

}  // namespace flashlab::exercises
