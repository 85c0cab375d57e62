// The kernel exercises' checker on any machine: the refusals (no CUDA in the build, a plugin
// not built, a file that is not a plugin), and its cases, rule and messages driven through
// stand-in plugins that compute on the CPU (fake_kernels.cpp): right ones pass every case,
// wrong ones fail where they should showing expected against got, NaN left in an output is
// named as unwritten, and a skeleton is reported as not written.
#include "checker.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

using namespace flashlab::exercises;

namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

ExerciseSet with_plugin(std::string path) {
  ExerciseSet set;
  set.kernel_plugin = std::move(path);
  return set;
}

const CaseResult* find_case(const CheckReport& r, std::string_view name_start) {
  for (const auto& c : r.cases)
    if (c.name.rfind(name_start, 0) == 0) return &c;
  return nullptr;
}

std::string failures(const CheckReport& r) {
  std::string s;
  for (const auto& c : r.cases)
    if (!c.passed) s += c.name + ": " + c.detail + "\n";
  return s;
}

constexpr int kKernelExercises[] = {21, 22, 23};

}  // namespace

TEST_CASE("kernel checker: a build without CUDA says the kernel was not compiled, and why") {
  const CheckReport r = check_exercise(21, with_plugin(""));
  CHECK(contains(r.not_run, "built without CUDA"));
  CHECK(r.cases.empty());
  CHECK_FALSE(r.passed());
}

TEST_CASE("kernel checker: a plugin that is not built is named, with the command that builds it") {
  const CheckReport r = check_exercise(22, with_plugin("/nonexistent/libkernels.so"));
  CHECK(contains(r.not_run, "/nonexistent/libkernels.so"));
  CHECK(contains(r.not_run, "is not built"));
  CHECK(contains(r.not_run, "cmake --build build --target flashlab"));
  CHECK_FALSE(r.passed());
}

TEST_CASE("kernel checker: a file that is not a plugin is refused, saying why") {
  const std::string path = "test_kernel_checker_not_a_plugin.so";
  std::ofstream(path) << "this is text, not a shared library\n";
  const CheckReport r = check_exercise(23, with_plugin(path));
  std::remove(path.c_str());
  CHECK(contains(r.not_run, "could not be used"));
  CHECK(contains(r.not_run, "could not be loaded"));
  CHECK(r.cases.empty());
}

TEST_CASE("kernel checker: right kernels pass every case, on a pretend device") {
  for (int number : kKernelExercises) {
    CAPTURE(number);
    const CheckReport r = check_exercise(number, with_plugin(FLASHLAB_FAKE_KERNELS_RIGHT));
    INFO(failures(r));
    CHECK(r.not_run.empty());
    CHECK(r.not_written.empty());
    CHECK(r.cases.size() >= 6);
    CHECK(r.passed());
  }
}

TEST_CASE("kernel checker: U not rescaled, or the last split left out, fails where it matters") {
  for (int number : kKernelExercises) {
    CAPTURE(number);
    const CheckReport r = check_exercise(number, with_plugin(FLASHLAB_FAKE_KERNELS_WRONG));
    CHECK_FALSE(r.passed());
    for (const auto& c : r.cases)
      if (!c.passed) {
        CAPTURE(c.name);
        CHECK(contains(c.detail, "O row "));
        CHECK(contains(c.detail, ": expected ["));
        CHECK(contains(c.detail, "], got ["));
        CHECK(contains(c.detail, "largest |difference|"));
        CHECK(contains(c.detail, "FLASHLAB_SEED="));
      }
    if (number == 23) {
      REQUIRE(find_case(r, "1 split") != nullptr);
      REQUIRE(find_case(r, "5 splits") != nullptr);
      CHECK_FALSE(find_case(r, "1 split")->passed);
      CHECK(find_case(r, "5 splits")->passed);  // its last split is empty: nothing lost
    } else {
      REQUIRE(find_case(r, "N = 1, d = 64") != nullptr);
      REQUIRE(find_case(r, "N = 1023, d = 64") != nullptr);
      CHECK(find_case(r, "N = 1, d = 64")->passed);  // one key: alpha never matters
      CHECK_FALSE(find_case(r, "N = 1023, d = 64")->passed);
    }
  }
}

TEST_CASE("kernel checker: an output left as the harness's NaN is called unwritten") {
  const CheckReport r = check_exercise(21, with_plugin(FLASHLAB_FAKE_KERNELS_SILENT));
  REQUIRE_FALSE(r.cases.empty());
  for (const auto& c : r.cases) {
    CAPTURE(c.name);
    CHECK_FALSE(c.passed);
    CHECK(contains(c.detail, "got [nan"));
    CHECK(contains(c.detail, "are NaN: the value the harness filled it with"));
  }
}

TEST_CASE("kernel checker: a skeleton is reported as not written, and nothing more runs") {
  for (int number : kKernelExercises) {
    CAPTURE(number);
    const CheckReport r = check_exercise(number, with_plugin(FLASHLAB_FAKE_KERNELS_NOT_WRITTEN));
    CHECK(contains(r.not_written, "the kernel is not written yet"));
    CHECK(contains(r.not_written, find_exercise(number).file));
    CHECK(r.cases.empty());
    CHECK_FALSE(r.passed());
  }
}
