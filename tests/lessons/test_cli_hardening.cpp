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
           {"--kernels ''", "--kernels: an empty value"},
           {"--kernels fa2,", "a name is missing after the last comma"}}) {
    CAPTURE(args);
    const auto run = run_flashlab("compare --n 64 " + args + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
  }
}

TEST_CASE("compare's --ncu-clocks takes own or base, nothing else") {
  const auto run = run_flashlab("compare --n 64 --no-ncu --ncu-clocks boost 2>&1");
  CHECK(run.status == kUsageError);
  CHECK(contains(run.output, "--ncu-clocks: boost not in {own,base}"));
  const auto base = run_flashlab("compare --n 64 --kernels naive --no-ncu --ncu-clocks base 2>&1");
  CHECK(base.status == 0);
  CHECK(contains(base.output, "CPU tiled (FA2 order)"));
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

TEST_CASE("an option given an empty value is refused, not taken for its default") {
  for (const char* args : {"trace --example ''", "trace --n 8 --json ''", "simulate --sram ''",
                           "simulate --pass decode --splits ''", "sweep --n 64,128 --csv ''",
                           "compare --n 64 --profile ''"}) {
    CAPTURE(args);
    const auto run = run_flashlab(std::string(args) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "an empty value: give one, or leave the option out"));
  }
}

TEST_CASE("compare's sizes are the simulator's, checked before any work") {
  // With one kernel as with all: d past the simulator's 4096, N past its 2^22.
  for (const char* args : {"--d 4097", "--kernels fa2 --d 4097", "--n 1 --d 100000000",
                           "--n 4194305", "--sweep n=4194305", "--kernels fa2 --sweep d=5000"}) {
    CAPTURE(args);
    const auto run = run_flashlab("compare --no-ncu " + std::string(args) + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "is not a whole number from 1 to 4"));
    CHECK_FALSE(contains(run.output, "errors are max"));  // nothing computed
  }
}

TEST_CASE("a sweep names each value once, within the single comparison's limits") {
  Scratch scratch("sweep-lists");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"compare --sweep d=64,64", "64 is named twice: name each value once"},
           {"compare --sweep n=512,1024,512", "512 is named twice"},
           {"sweep --n 5,5 --csv " + scratch.quoted("s.csv"), "5 is named twice"},
           {"compare --kernels fa2 --sweep heads=1025", "is not a whole number from 1 to 1024"},
           {"compare --pass decode --sweep batch=70000", "is not a whole number from 1 to 65536"},
           {"compare --sweep n=1024,2048 --n 4096",
            "--n with --sweep n=1024,2048: the sweep sets n"},
           {"compare --sweep d=64,128 --d 128", "--d with --sweep d=64,128"},
           {"compare --pass backward --sweep heads=2,4 --heads 4", "--heads with --sweep"}}) {
    CAPTURE(args);
    const auto run = run_flashlab(args + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
  }
  CHECK_FALSE(fs::exists(scratch.dir / "s.csv"));
}

TEST_CASE("a sweep none of whose points could be predicted fails and writes nothing") {
  Scratch scratch("sweep-none");
  for (const char* args : {"compare --kernels fa3 --sweep d=63 --sweep n=256,512",
                           "compare --pass backward --sweep d=63"}) {
    CAPTURE(args);
    const auto run =
        run_flashlab(std::string(args) + " --no-ncu --csv " + scratch.quoted("s.csv") + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "no point of the sweep could be predicted (the first: d = 63"));
    CHECK(contains(run.output, "nothing was written"));
    CHECK_FALSE(fs::exists(scratch.dir / "s.csv"));
  }
  // One point predicted is a result: the others' rows say why they have none.
  const auto some = run_flashlab(
      "compare --kernels fa3 --sweep d=63,64 --sweep n=256 --no-ncu "
      "--csv " +
      scratch.quoted("s.csv") + " 2>&1");
  CHECK(some.status == 0);
  CHECK(fs::exists(scratch.dir / "s.csv"));
}

TEST_CASE("grid models past their time limit ask for --large before they start") {
  // About a second a GiB into the SMs (kernel_bytes.hpp): 1,024 heads at N = 4,096 is some two
  // minutes of them, past the minute a comparison takes; a sweep to N = 2^22, days.
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"compare --n 4096 --heads 1024 --repeats 1", "this comparison's grid models"},
           {"compare --sweep n=4194304", "this sweep's grid models"},
           {"compare --pass backward --n 1000000", "or pass --no-grid-model"},
           {"compare --pass backward --sweep n=1000000,2000000", "this sweep's grid models"}}) {
    CAPTURE(args);
    const auto run = run_flashlab(args + " --no-ncu 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, message));
    CHECK(contains(run.output, "pass --large to run it anyway"));
  }
  // --large is the passes' too now, and below the limits nothing asks for it.
  const auto pass = run_flashlab("compare --pass decode --n 4096 --large --no-ncu 2>&1");
  CHECK(pass.status == 0);
  CHECK_FALSE(contains(pass.output, "is an option of the forward comparison"));
  const auto small = run_flashlab("compare --kernels fa2 --sweep n=1024,2048 --no-ncu 2>&1");
  CHECK(small.status == 0);
}

TEST_CASE("simulate refuses a kernel whose blocks the profile's SM cannot hold") {
  for (const char* d : {"64", "128"}) {
    CAPTURE(d);
    const auto run =
        run_flashlab(std::string("simulate --pass fa3 --profile a100 --d ") + d + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "cannot launch there"));
    CHECK(contains(run.output, "an SM of the a100 profile holds 164.0 KiB"));
  }
  CHECK(run_flashlab("simulate --pass fa3 --profile h100 2>&1").status == 0);
}

TEST_CASE("a ring has two ranks or more, and few enough to count quickly") {
  for (const char* ranks : {"1", "257"}) {
    CAPTURE(ranks);
    const auto run = run_flashlab(std::string("ring --ranks ") + ranks + " 2>&1");
    CHECK(run.status == kUsageError);
    CHECK(contains(run.output, "is not a whole number from 2 to 256"));
  }
}

TEST_CASE("trace --html refuses a trace too large for the viewer before printing it") {
  Scratch scratch("html-size");
  const auto run = run_flashlab("trace --n 1000 --html " + scratch.quoted("t.html") + " 2>&1");
  CHECK(run.status == kUsageError);
  CHECK(contains(run.output, "--html embeds every number of the trace"));
  CHECK_FALSE(contains(run.output, "query tile"));  // no trace printed first
  CHECK_FALSE(fs::exists(scratch.dir / "t.html"));
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
