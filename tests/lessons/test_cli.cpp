// The `flashlab` command line as a script sees it: exit codes, plain output, clear errors.
#include "flashlab/gpu/kernel_info.hpp"
#include "kit/lesson_registry.hpp"
#include "run_flashlab.hpp"

#include <doctest/doctest.h>

using flashlab::test::run_flashlab;

using flashlab::test::contains;
using flashlab::test::kUsageError;

TEST_CASE(
    "compare's correctness rule: in fp32 a summation order's slack beside 2x the naive error") {
  // At N_k = 1 every row's output is V's row exactly: the naive fp32 error is 0, and 2 x 0 would
  // fail any other order of the same sums; with one key of many queries (and at N_k = 2) the
  // naive error is a rounding or two, by luck. The fp32 rule adds the slack of
  // flashlab/cpu/correctness.hpp; bf16 and fp16 keep the plain rule.
  for (const char* shape : {"--n 1 --n-q 97", "--n 2 --n-q 1025 --causal"}) {
    CAPTURE(shape);
    const auto run = run_flashlab(std::string("compare --kernels fa2 ") + shape +
                                  " --d 64 --dtype fp32 --repeats 1 --no-ncu --no-color");
    REQUIRE(run.status == 0);
    CHECK(contains(run.output, "error <= 2 x the naive fp32 error + fp32's summation-order slack"));
    CHECK(contains(run.output, "CPU tiled: within"));
  }
  const auto bf16 = run_flashlab("compare --kernels fa2 --n 97 --d 64 --repeats 1 --no-ncu");
  REQUIRE(bf16.status == 0);
  CHECK(contains(bf16.output, "error <= 2 x the naive bf16 error = "));
}

TEST_CASE("flashlab lessons lists every lesson with what it teaches") {
  const auto run = run_flashlab("lessons");
  REQUIRE(run.status == 0);
  for (const auto& lesson : flashlab::app::all_lessons()) {
    CHECK(contains(run.output, std::string(lesson.title)));
    CHECK(contains(run.output, std::string(lesson.teaches)));
  }
}

TEST_CASE("flashlab lesson N runs, and an unknown N is a clear error") {
  const auto ok = run_flashlab("lesson 2");
  CHECK(ok.status == 0);
  CHECK(contains(ok.output, "Lesson 2:"));
  CHECK_FALSE(contains(ok.output, "\033["));  // stdout is a pipe: no colour
  const auto missing = run_flashlab("lesson 99 2>&1");
  CHECK(missing.status == kUsageError);
  CHECK(contains(missing.output, "there is no lesson 99"));
  const auto word = run_flashlab("lesson two 2>&1");
  CHECK(word.status == kUsageError);
  CHECK(contains(word.output, "`two` is not a lesson number"));
}

TEST_CASE("flashlab trace refuses what it cannot trace, saying what would work") {
  const auto example = run_flashlab("trace --example 3-4 2>&1");
  CHECK(example.status == kUsageError);
  CHECK(contains(example.output, "the one example is `49-15`"));
  const auto tile = run_flashlab("trace --n 24 --query-tile 6 2>&1");
  CHECK(tile.status == kUsageError);
  CHECK(contains(tile.output, "numbered 0 to 5"));
}

TEST_CASE("flashlab trace --json writes one event per line") {
  const std::string path = "test_cli_trace.jsonl";
  const auto run = run_flashlab("trace --n 24 --bc 8 --json " + path + " 2>&1");
  REQUIRE(run.status == 0);
  CHECK(contains(run.output, "wrote 31 events"));  // setup + 6 x (start, 3 KV tiles, end)
  std::remove(path.c_str());
}

TEST_CASE("flashlab check reports on the student's code, and fails unless every case passes") {
  // In the repository the skeletons are unwritten; in a student's copy they may not be.
  const auto run = run_flashlab("check 2");
  CHECK(contains(run.output, "lessons/exercises/student/ex02_merge.cpp"));
  if (contains(run.output, "NOT WRITTEN YET")) {
    CHECK(run.status == 1);
  } else {
    CHECK(contains(run.output, "cases passed"));
    CHECK((run.status == 0) == contains(run.output, "Well done"));
  }
  const auto missing = run_flashlab("check 5 2>&1");
  CHECK(missing.status == kUsageError);
  CHECK(contains(missing.output, "the exercises are 1, 2, 3, 6, 10, 21, 22 and 23"));
}

TEST_CASE("flashlab check on a kernel exercise: not run without a GPU, saying why, and checked with one") {
  // In the repository the skeleton is unwritten; in a student's copy it may not be.
  const auto run = run_flashlab("check 21 --no-color");
  CHECK(contains(run.output, "lessons/exercises/student/ex21_scalar_update.cu"));
  if (contains(run.output, "NOT RUN")) {
    CHECK(run.status == 1);
    CHECK((contains(run.output, "running it needs a CUDA GPU") ||
           contains(run.output, "built without CUDA")));
  } else if (contains(run.output, "NOT WRITTEN YET")) {  // a GPU is here: the skeleton ran
    CHECK(run.status == 1);
  } else {
    CHECK(contains(run.output, "cases passed"));
    CHECK((run.status == 0) == contains(run.output, "Well done"));
  }
  const auto shown = run_flashlab("exercise 22 --no-color");
  REQUIRE(shown.status == 0);
  CHECK(contains(shown.output, "lessons/exercises/kernels/ex22_pipelined_forward.cuh"));
  CHECK(contains(shown.output, "lessons/exercises/student/ex22_pipelined_loop.cu"));
  CHECK(contains(shown.output, "flashlab lesson 8"));
  CHECK(contains(shown.output, "a CUDA GPU"));
  const auto listed = run_flashlab("exercise --no-color");
  REQUIRE(listed.status == 0);
  CHECK(contains(listed.output, "ex23_combine.cu"));
}

TEST_CASE("every subcommand answers --help") {
  for (const char* cmd : {"lessons", "lesson", "trace", "exercise", "check", "compare"}) {
    CAPTURE(cmd);
    CHECK(run_flashlab(std::string(cmd) + " --help").status == 0);
  }
}

TEST_CASE("flashlab compare runs the CPU reference and the simulator, and says what it could not run") {
  const auto run = run_flashlab("compare --n 97 --d 59 --dtype fp32 --repeats 1 --no-ncu");
  REQUIRE(run.status == 0);
  CHECK(contains(run.output, "CPU tiled (FA2 order)"));
  CHECK(contains(run.output, "d = 59 is not supported by the fa2 kernel"));
  CHECK(contains(run.output, "CPU tiled: within"));
  CHECK(contains(run.output, "GPU: "));  // the device, or why there is none
  // The simulator mirrors fa2 with the kernel's own tiles, from gpu/'s table.
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 64, FLASHLAB_BF16);
  const auto tiled = run_flashlab("compare --n 128 --d 64 --repeats 1 --no-ncu");
  REQUIRE(tiled.status == 0);
  CHECK(contains(tiled.output, "simulator: fa2 (Br " + std::to_string(fa2.Br) + ", Bc " +
                                   std::to_string(fa2.Bc) + ")"));
  const auto decode = run_flashlab("compare --n 300 --n-q 1 --d 64 --causal --repeats 1 --no-ncu");
  REQUIRE(decode.status == 0);
  CHECK(contains(decode.output, "causal = bottom-right"));
  // N_q != N: the fa2 program mirrors fa2 and the scalar kernel; the naive mirror's three
  // operators take N_q = N_k.
  CHECK(contains(decode.output, "simulator: fa2 (Br " + std::to_string(fa2.Br)));
  CHECK(contains(decode.output, "the naive-kernel program takes N_q = N_k"));
  const auto bad = run_flashlab("compare --n 0 2>&1");
  CHECK(bad.status == kUsageError);
  CHECK(contains(bad.output, "--n: `0` is not a whole number from 1"));
}
