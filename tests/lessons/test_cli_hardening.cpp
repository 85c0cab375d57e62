// The command line against hostile and careless input: every refusal names what was wrong
// and what would be right, exits with the usage status, and leaves existing files as they were.
#include "run_flashlab.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using flashlab::test::contains;
using flashlab::test::kUsageError;
using flashlab::test::read_file;
using flashlab::test::run_flashlab;
using flashlab::test::Scratch;
namespace fs = std::filesystem;

TEST_CASE("an unknown command is named, with the commands there are") {
  const auto run = run_flashlab("frobnicate 2>&1");
  CHECK(run.status == kUsageError);
  CHECK(contains(run.output, "`frobnicate` is not a flashlab command"));
  CHECK(contains(run.output, "tour, lessons, lesson, trace"));
}

TEST_CASE("integer options are decimal, refused out of range, never clamped") {
  const auto leading_zero = run_flashlab("trace --n 010 --d 4 --br 4 --bc 4");
  REQUIRE(leading_zero.status == 0);
  CHECK(contains(leading_zero.output, "N_q = 10, N_k = 10"));  // ten, not octal eight
  for (const char* args :
       {"trace --seed -1", "trace --n 9223372036854775808", "trace --n 1e3", "trace --n ' 24'",
        "trace --n 24x", "trace --n -0", "simulate --br 0 --bc 4", "compare --repeats 1001",
        "check 2147483648"}) {
    CAPTURE(args);
    const auto run = run_flashlab(std::string(args) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "is not a whole number from"));
  }
}

TEST_CASE("compare's kernels are the ladder's, each named once") {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--kernels foo", "unknown GPU kernel `foo`: the kernels are naive, scalar, fa2, fa3"},
           {"--kernels fa2,fa2", "names fa2 twice"},
           {"--kernels ''", "--kernels is empty"}}) {
    CAPTURE(args);
    const auto run = run_flashlab("compare --n 64 " + args + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
  }
}

TEST_CASE("options that a mode would ignore are refused") {
  const auto run = run_flashlab("trace --example 49-15 --n 100 2>&1");
  CHECK(run.status == kUsageError);
  CHECK(contains(run.output, "--example excludes --n"));
}

TEST_CASE("requests that would exhaust the machine are refused before they start") {
  const auto trace = run_flashlab("trace --n 4096 --d 1 --br 1 --bc 1 2>&1");
  CHECK(trace.status == kUsageError);
  CHECK(contains(trace.output, "MiB a trace may take"));
  const auto compare = run_flashlab("compare --n 16384 2>&1");
  CHECK(compare.status == kUsageError);
  CHECK(contains(compare.output, "more than the 4.0 GiB it allows"));
  const auto slow = run_flashlab("compare --n 8192 --d 128 2>&1");
  CHECK(slow.status == kUsageError);
  CHECK(contains(slow.output, "pass --large to run it anyway"));
  Scratch scratch("sweep-range");
  const auto trace_file = run_flashlab("simulate --n 1048576 --algo fa2 --trace /dev/null 2>&1");
  CHECK(trace_file.status == kUsageError);
  CHECK(contains(trace_file.output, "raise the limit with --max-trace-bytes"));
  const auto grid = run_flashlab("sweep --n 1..4194304 --d 1..4194304 --sram 1KiB..1024GiB --csv " +
                                 scratch.quoted("s.csv") + " 2>&1");
  CHECK(grid.status == kUsageError);
  CHECK(contains(grid.output, "more than the 4096 it takes"));
  const auto range = run_flashlab("sweep --n 1..9223372036854775807 --d 64 --csv " +
                                  scratch.quoted("s.csv") + " 2>&1");
  CHECK(range.status == kUsageError);
  CHECK(contains(range.output, "the sequence length must be between 1 and"));
  CHECK_FALSE(contains(range.output, "sweep point"));  // refused before the first point ran
  CHECK_FALSE(fs::exists(scratch.dir / "s.csv"));
}

TEST_CASE("a long run shows its progress on stderr") {
  const auto run =
      run_flashlab("simulate --n 1048576 --d 128 --l2 60MiB --algo fa2 2>&1 >/dev/null");
  CHECK(run.status == 0);
  CHECK(contains(run.output, "simulate fa2: 100%"));
}

TEST_CASE("a write error is an error: /dev/full, a directory, a missing folder") {
  const auto json = run_flashlab("trace --n 24 --json /dev/full 2>&1");
  CHECK(json.status == kUsageError);
  CHECK(contains(json.output,
                 "--json /dev/full: the path could not be written (No space left on device)"));
  const auto html = run_flashlab("trace --n 24 --html /dev/full 2>&1");
  CHECK(html.status == kUsageError);
  CHECK(contains(html.output, "No space left on device"));
  const auto table = run_flashlab("lessons 2>&1 > /dev/full");
  CHECK(table.status == kUsageError);
  CHECK(contains(table.output, "could not write to standard output"));
  const auto folder = run_flashlab("trace --n 24 --json /tmp 2>&1");
  CHECK(folder.status == kUsageError);
  CHECK(contains(folder.output, "is a directory"));
  const auto missing = run_flashlab("simulate --algo fa2 --trace /nonexistent-folder/t.jsonl 2>&1");
  CHECK(missing.status == kUsageError);
  CHECK(contains(missing.output, "folder that does not exist"));
}

TEST_CASE(
    "an existing file survives a refused or failed command, and two outputs may not collide") {
  Scratch scratch("keep");
  const fs::path csv = scratch.dir / "kept.csv";
  std::ofstream(csv) << "the learner's data\n";
  const auto bad = run_flashlab("sweep --n 64..32 --csv " + scratch.quoted("kept.csv") + " 2>&1");
  CHECK(bad.status == kUsageError);
  CHECK(contains(bad.output, "needs 1 <= a <= b"));
  CHECK(read_file(csv) == "the learner's data\n");
  const auto same = run_flashlab("sweep --n 64,128 --csv " + scratch.quoted("kept.csv") +
                                 " --plot " + scratch.quoted("./kept.csv") + " 2>&1");
  CHECK(same.status == kUsageError);
  CHECK(contains(same.output, "--csv and --plot both name"));
  CHECK(read_file(csv) == "the learner's data\n");
  const auto pair =
      run_flashlab("trace --n 24 --json " + scratch.quoted("t") + " --html " +
                   scratch.quoted("../" + scratch.dir.filename().string() + "/t") + " 2>&1");
  CHECK(pair.status == kUsageError);
  CHECK(contains(pair.output, "--json and --html both name"));
  for (const auto& entry : fs::directory_iterator(scratch.dir))  // no temporary left behind
    CHECK(entry.path().filename() == "kept.csv");
}

TEST_CASE("hostile file names are written as names, nothing more") {
  Scratch scratch("names");
  for (const std::string name : {"with space.jsonl", "quote'in.jsonl", "new\nline.jsonl",
                                 "\xff\xfe.jsonl", "$(touch pwned).jsonl"}) {
    CAPTURE(name);
    const auto run =
        run_flashlab("trace --n 8 --d 2 --br 4 --bc 4 --json " + scratch.quoted(name) + " 2>&1");
    CHECK(run.status == 0);
    CHECK(contains(read_file(scratch.dir / name), "\"event\":\"setup\""));
  }
  CHECK_FALSE(fs::exists("pwned"));
  CHECK_FALSE(fs::exists(scratch.dir / "pwned"));
}

TEST_CASE("a plot path reaches no interpreter: gnuplot draws into exactly that file") {
  Scratch scratch("plot");
  const std::string hostile = "it's\nsystem \"touch pwned\"\n.png";
  const auto run =
      run_flashlab("sweep --n 256,512 --d 64 --algo fa2 --csv " + scratch.quoted("s.csv") +
                   " --plot " + scratch.quoted(hostile) + " 2>&1");
  CHECK_FALSE(fs::exists("pwned"));
  CHECK_FALSE(fs::exists(scratch.dir / "pwned"));
  if (contains(run.output, "needs gnuplot, which is not installed")) {
    CHECK(run.status == kUsageError);
    CHECK_FALSE(fs::exists(scratch.dir / "s.csv"));  // refused before the sweep ran
    return;
  }
  REQUIRE(run.status == 0);
  CHECK(read_file(scratch.dir / hostile).substr(1, 3) == "PNG");
  CHECK(contains(read_file(scratch.dir / (hostile + ".gp")), "set output\n"));
}

TEST_CASE("a plot that cannot be drawn is an error, and nothing is half-written") {
  Scratch scratch("plot-fail");
  const auto single = run_flashlab("sweep --n 256 --d 64 --csv " + scratch.quoted("s.csv") +
                                   " --plot " + scratch.quoted("p.png") + " 2>&1");
  CHECK(single.status == kUsageError);
  CHECK(contains(single.output, "nothing to plot"));
  CHECK_FALSE(fs::exists(scratch.dir / "s.csv"));
  const auto folder = run_flashlab("sweep --n 256,512 --d 64 --csv " + scratch.quoted("s.csv") +
                                   " --plot /nonexistent-folder/p.png 2>&1");
  CHECK(folder.status == kUsageError);
  CHECK(contains(folder.output, "folder that does not exist"));
  CHECK_FALSE(fs::exists(scratch.dir / "s.csv"));
}

TEST_CASE("the tour ends the worked example at 49/15") {
  const auto run = run_flashlab("tour");
  REQUIRE(run.status == 0);
  char exact[32];
  std::snprintf(exact, sizeof exact, "O = U / l = %.15f", 49.0 / 15.0);
  CHECK(contains(run.output, exact));
}

TEST_CASE("the flashlab program itself does not need CUDA or cuBLAS to load") {
  const auto run = flashlab::test::run_command(std::string("readelf -d ") + FLASHLAB_BINARY);
  REQUIRE(run.status == 0);
  REQUIRE(contains(run.output, "(NEEDED)"));  // readelf read the dynamic section
  for (const char* library : {"libcublas", "libcudart", "libcuda.", "libflashlab.so"}) {
    CAPTURE(library);
    CHECK_FALSE(contains(run.output, library));
  }
}

TEST_CASE("a GPU runner that cannot be loaded is reported, not fatal") {
  Scratch scratch("runner");
  const fs::path not_a_plugin = scratch.dir / "libflashlab_gpu_runner.so";
  std::ofstream(not_a_plugin) << "a file, but no shared library\n";
  setenv("FLASHLAB_GPU_RUNNER", not_a_plugin.c_str(), 1);
  const auto run = run_flashlab("compare --n 64 --d 64 --repeats 1 --no-ncu 2>&1");
  unsetenv("FLASHLAB_GPU_RUNNER");
  CHECK(run.status == 0);
  CHECK(contains(run.output,
                 "GPU: the GPU runner " + not_a_plugin.string() + " could not be loaded"));
  CHECK(contains(run.output, "CPU tiled: within"));
}
