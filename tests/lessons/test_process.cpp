// kit/process: other programs run without a shell, their arguments passed as they are.
#include "kit/process.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using flashlab::app::run_program;

TEST_CASE("arguments reach the program untouched: no shell reads them") {
  const std::string hostile = "$(echo injected); touch pwned\n'\"`id`";
  const auto run = run_program({"printf", "%s", hostile});
  REQUIRE(run.succeeded());
  CHECK(run.output == hostile);
}

TEST_CASE("exit status, a missing program, and stdout to a file") {
  const auto fails = run_program({"sh", "-c", "echo oops >&2; exit 3"});
  CHECK(fails.started);
  CHECK(fails.exit_status == 3);
  CHECK(fails.output == "oops\n");
  const auto missing = run_program({"flashlab-no-such-program"});
  CHECK_FALSE(missing.started);
  CHECK(missing.message.find("cannot run flashlab-no-such-program") != std::string::npos);
  const std::string path = "test_process_out.txt";
  const auto to_file = run_program({"printf", "%s", "to the file"}, path);
  CHECK(to_file.succeeded());
  CHECK(to_file.output.empty());
  std::stringstream content;
  content << std::ifstream(path).rdbuf();
  CHECK(content.str() == "to the file");
  std::remove(path.c_str());
}

TEST_CASE("a program ended by a signal says which") {
  const auto killed = run_program({"sh", "-c", "kill -9 $$"});
  CHECK(killed.started);
  CHECK(killed.exit_status == -1);
  CHECK(killed.message.find("signal 9") != std::string::npos);
}
