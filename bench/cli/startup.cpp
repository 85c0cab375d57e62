// How long `flashlab` takes to start: each command that needs no GPU, run many times as a
// separate process, its wall time from spawn to exit. The goal is under 50 ms: the program
// must not load CUDA or cuBLAS before main (lessons/gpu_bridge/ loads them on demand).
//
//   bench_cli_startup --flashlab build/lessons/app/flashlab --runs 21
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

// Milliseconds from spawning `program args...` (stdout and stderr to /dev/null) to its exit.
double run_once(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int error = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error(fmt::format("cannot start {}", program));
  int status = 0;
  waitpid(pid, &status, 0);
  const auto t1 = std::chrono::steady_clock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(fmt::format("{} {} failed", program, args.empty() ? "" : args[0]));
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Start-up time of the flashlab program, command by command"};
  std::string flashlab;
  int runs = 21;
  app.add_option("--flashlab", flashlab, "The flashlab program")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--runs", runs, "Runs per command; the median is shown")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::vector<std::string>> commands{{"--help"},
                                                       {"lessons"},
                                                       {"exercise"},
                                                       {"trace", "--example", "49-15"},
                                                       {"simulate", "--n", "1024", "--d", "64"},
                                                       {"tour"}};
  fmt::print("{:<32} {:>10} {:>10} {:>10}\n", "command", "min ms", "median ms", "max ms");
  try {
    for (const auto& args : commands) {
      std::vector<double> ms;
      for (int r = 0; r < runs; ++r) ms.push_back(run_once(flashlab, args));
      std::sort(ms.begin(), ms.end());
      std::string name = "flashlab";
      for (const auto& a : args) name += " " + a;
      fmt::print("{:<32} {:>10.1f} {:>10.1f} {:>10.1f}\n", name, ms.front(), ms[ms.size() / 2],
                 ms.back());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_cli_startup: {}\n", e.what());
    return 1;
  }
  return 0;
}
