// The checker survives any student code: each way code can fail (wrong_solutions/failures.hpp)
// fails the one case where it happens, with an explanation of what the code did, while the
// checker lives on and the other cases still run and pass.
#include "checker.hpp"
#include "wrong_solutions/failures.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <string_view>

using namespace flashlab::exercises;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

// Short limits keep the tests quick; a correct case needs milliseconds and a few MiB.
constexpr CaseLimits kQuick{1.0, std::size_t{256} << 20};
// Writing 256 MiB page by page takes a fraction of a second on an idle core, but several
// seconds on a machine busy with other builds: the memory test gives time its own margin, so
// that it can only fail on memory.
constexpr CaseLimits kRoomToAllocate{30.0, kQuick.memory_bytes};
const std::string kTriggeredCase = "random scores, N = " + std::to_string(failing::kTrigger);

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

ExerciseSet with_softmax(decltype(&stable_softmax) f) {
  ExerciseSet set;
  set.softmax = f;
  return set;
}

// Checks exercise 1 with `f`: the triggered case fails with `explanation` in its detail, and
// every other case runs and passes. Returns the failed case.
CaseResult only_the_triggered_case_fails(decltype(&stable_softmax) f, std::string_view explanation,
                                         const CaseLimits& limits = kQuick) {
  const std::size_t all_cases = check_exercise(1, with_softmax(&failing::softmax), limits).cases.size();
  const CheckReport r = check_exercise(1, with_softmax(f), limits);
  REQUIRE(r.not_written.empty());
  CHECK(r.cases.size() == all_cases);
  CaseResult failed;
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    CAPTURE(c.detail);
    if (c.name == kTriggeredCase) {
      CHECK_FALSE(c.passed);
      CHECK(contains(c.detail, explanation));
      failed = c;
    } else {
      CHECK(c.passed);
    }
  }
  CHECK(failed.name == kTriggeredCase);
  return failed;
}

}  // namespace

TEST_CASE("checker: the control, right on every case, passes them all") {
  const CheckReport r = check_exercise(1, with_softmax(&failing::softmax), kQuick);
  CHECK(r.passed());
  CHECK(r.cases.size() >= 4);
  for (const auto& c : r.cases) CHECK(c.output.empty());
}

TEST_CASE("checker: code that throws an int is told it did not throw a std::exception") {
  only_the_triggered_case_fails(&failing::softmax_throws_int, "threw an int, not a std::exception");
}

TEST_CASE("checker: a std::exception is reported with its type and message") {
  only_the_triggered_case_fails(&failing::softmax_throws_out_of_range,
                                "threw std::out_of_range: \"index 9 is past the end of the row\"");
}

TEST_CASE("checker: a null dereference is reported as SIGSEGV") {
  only_the_triggered_case_fails(&failing::softmax_dereferences_null,
                                "the code was killed by SIGSEGV (a null or wild pointer");
}

TEST_CASE("checker: under AddressSanitizer, a read past the end is reported as the sanitizer's" *
          doctest::skip(!kUnderAddressSanitizer)) {
  only_the_triggered_case_fails(&failing::softmax_reads_past_the_end,
                                "was stopped by a sanitizer (exit status 1): AddressSanitizer: "
                                "heap-buffer-overflow");
}

TEST_CASE("checker: an endless loop is stopped at the time limit") {
  const auto start = std::chrono::steady_clock::now();
  only_the_triggered_case_fails(&failing::softmax_loops_forever,
                                "did not finish within 1 s (an infinite loop?)");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  CHECK(took.count() >= kQuick.seconds);
}

TEST_CASE("checker: a runaway allocation stops at the memory limit" *
          doctest::skip(kUnderAddressSanitizer)) {
  only_the_triggered_case_fails(&failing::softmax_allocates_without_end,
                                "ran out of memory: it asked for more than the 256 MiB a case may use",
                                kRoomToAllocate);
}

TEST_CASE("checker: exit(3) and abort() are reported as such") {
  only_the_triggered_case_fails(&failing::softmax_calls_exit, "called exit(3) instead of returning");
  only_the_triggered_case_fails(&failing::softmax_calls_abort, "called abort()");
}

TEST_CASE("checker: a NaN in the output is found and counted") {
  const CaseResult c = only_the_triggered_case_fails(&failing::softmax_returns_nan,
                                                     "(1 of 7 entries NaN or inf)");
  CHECK(c.detail.starts_with("p: expected finite values ["));
  CHECK(contains(c.detail, "nan"));
}

TEST_CASE("checker: what the code printed before it crashed comes back with the case") {
  const CaseResult c = only_the_triggered_case_fails(&failing::softmax_prints_then_crashes,
                                                     "SIGSEGV");
  CAPTURE(c.output);
  CAPTURE(c.detail);
  CHECK(contains(c.output, "softmax of 7 scores"));
}

TEST_CASE("checker: of much printed output only the last lines are kept") {
  const CheckReport r = check_exercise(1, with_softmax(&failing::softmax_prints_a_lot), kQuick);
  CHECK(r.passed());
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    if (c.name != kTriggeredCase) {
      CHECK(c.output.empty());
      continue;
    }
    CHECK(c.output.starts_with("...\n"));
    CHECK(c.output.ends_with("line " + std::to_string(failing::kManyLines)));
    CHECK(std::count(c.output.begin(), c.output.end(), '\n') <= 8);
  }
}

TEST_CASE("checker: a skeleton not written yet stops the check with its message") {
  const CheckReport r = check_exercise(1, with_softmax(&failing::softmax_not_written), kQuick);
  CHECK(r.not_written == "exercise 1: stable_softmax is not written yet");
  CHECK(r.cases.empty());
  CHECK_FALSE(r.passed());
}

TEST_CASE("checker: OpenMP in the student's code runs after the checker itself used OpenMP") {
  // A forked child lacks the parent's OpenMP threads: unless the checker runs it on one
  // thread, the student's parallel loop waits for them and every case times out.
  int team = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp atomic
    ++team;
  }
  CHECK(team >= 1);
  const CheckReport r = check_exercise(1, with_softmax(&failing::softmax_with_openmp), kQuick);
  CHECK(r.passed());
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    CHECK(c.detail == "");
  }
}

TEST_CASE("checker: a missing function fails every case and the checker lives on") {
  const CheckReport r = check_exercise(1, ExerciseSet{}, kQuick);
  CHECK(r.cases.size() >= 4);
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    CHECK_FALSE(c.passed);
    CHECK(contains(c.detail, "SIGSEGV"));
  }
}

TEST_CASE("checker: a dS of the wrong shape is named, not read out of bounds") {
  ExerciseSet set;
  set.D = &failing::compute_D;
  set.dS = &failing::score_gradient_too_wide;
  const CheckReport r = check_exercise(6, set, kQuick);
  bool saw_24 = false;
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    CAPTURE(c.detail);
    if (contains(c.name, "D = rowsum")) {
      CHECK(c.passed);
      continue;
    }
    CHECK_FALSE(c.passed);
    CHECK(contains(c.detail, "dS has shape ("));
    CHECK(contains(c.detail, "like P"));
    if (contains(c.name, "N = 24")) {
      saw_24 = true;
      CHECK(c.detail == "dS has shape (24, 31); it should be (24, 24) like P");
    }
  }
  CHECK(saw_24);
}

TEST_CASE("checker: an O_i of the wrong shape and a U of the wrong length are named") {
  ExerciseSet set;
  set.query_tile = &failing::query_tile_one_column_short;
  set.merge_states = &failing::merge_one_entry_long;
  for (const auto& c : check_exercise(3, set, kQuick).cases) {
    CAPTURE(c.name);
    CHECK_FALSE(c.passed);
    if (c.name == "Br = 7, N = 97, d = 59, Bc = 16")
      CHECK(c.detail == "O_i has shape (7, 58); it should be (7, 59) like Q_i");
  }
  for (const auto& c : check_exercise(2, set, kQuick).cases) {
    CAPTURE(c.name);
    CHECK_FALSE(c.passed);
    CHECK(c.detail == "U has 4 entries; it should have 3, like a.U and b.U");
  }
}

TEST_CASE("checker: limits out of range are refused, naming the value") {
  const ExerciseSet set = with_softmax(&failing::softmax);
  CHECK_THROWS_WITH_AS(check_exercise(1, set, CaseLimits{0.0, kQuick.memory_bytes}),
                       "the time limit per case is 0 s: it must be more than 0 and at most 86400 s (a day)",
                       flashlab::cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check_exercise(1, set, CaseLimits{-1.5, kQuick.memory_bytes}),
                       doctest::Contains("the time limit per case is -1.5 s"),
                       flashlab::cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check_exercise(1, set, CaseLimits{std::nan(""), kQuick.memory_bytes}),
                       doctest::Contains("the time limit per case is nan s"),
                       flashlab::cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check_exercise(1, set, CaseLimits{1e9, kQuick.memory_bytes}),
                       doctest::Contains("is 1e+09 s: it must be more than 0 and at most 86400 s"),
                       flashlab::cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check_exercise(1, set, CaseLimits{kQuick.seconds, 0}),
                       "the memory limit per case is 0 bytes: it must be at least one byte",
                       flashlab::cpu::InvalidArgument);
}
