// The exercises' checker, checked: linked with the instructor's solutions every case must
// pass; linked with the deliberately wrong solutions (wrong_solutions/) each exercise must
// fail, naming the case and showing expected against got. This file is built twice, once
// per set (FLASHLAB_EXPECT_PASS says which).
#include "checker.hpp"

#include <doctest/doctest.h>

using namespace flashlab::exercises;

#if FLASHLAB_EXPECT_PASS
#define FLASHLAB_LINKED_SET "the solutions"
#else
#define FLASHLAB_LINKED_SET "the wrong solutions"
#endif

namespace {

constexpr std::size_t kMinimumCases = 4;

std::string failures(const CheckReport& r) {
  std::string s;
  for (const auto& c : r.cases)
    if (!c.passed) s += c.name + ": " + c.detail + "\n";
  return s;
}

}  // namespace

TEST_CASE("checker: every exercise, with " FLASHLAB_LINKED_SET) {
  for (const auto& e : all_exercises()) {
    if (e.kind != ExerciseKind::cpu) continue;  // the kernels': test_kernel_checker.cpp
    CAPTURE(e.number);
    const CheckReport r = check_exercise(e.number, linked_exercises());
    CHECK(r.not_written.empty());
    CHECK(r.cases.size() >= kMinimumCases);
    INFO(failures(r));
#if FLASHLAB_EXPECT_PASS
    CHECK(r.passed());
#else
    CHECK_FALSE(r.passed());
    for (const auto& c : r.cases)
      if (!c.passed) {
        CAPTURE(c.name);
        CHECK(c.detail.find("expected ") != std::string::npos);
        CHECK(c.detail.find("], got [") != std::string::npos);
      }
#endif
  }
}

#if !FLASHLAB_EXPECT_PASS
TEST_CASE("checker: the wrong softmax fails where it overflows, and passes where it does not") {
  const CheckReport r = check_exercise(1, linked_exercises());
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    if (c.name.find("random scores") != std::string::npos) CHECK(c.passed);
    if (c.name.find("large scores") != std::string::npos) {
      CHECK_FALSE(c.passed);
      CHECK(c.detail.find("expected finite values") != std::string::npos);
    }
  }
}
#endif

TEST_CASE("checker: an exercise that does not exist is refused with the list, with " FLASHLAB_LINKED_SET) {
  CHECK_THROWS_WITH_AS(check_exercise(4, linked_exercises()),
                       doctest::Contains("the exercises are 1, 2, 3, 6, 10, 21, 22 and 23"),
                       flashlab::cpu::InvalidArgument);
}
