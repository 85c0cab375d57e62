// Runs the `flashlab` program built beside the tests and captures what it prints.
#pragma once

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/wait.h>

namespace flashlab::test {

// The exit status of every refusal: app::kUsageError in lessons/app/cli.hpp (not included
// here: the tests drive the program from outside).
inline constexpr int kUsageError = 2;

// A test's own file or folder in the system's temporary directory: `name` and the process id,
// so that two builds testing at once on one machine never share one.
// The id goes before the extension, which some commands read (compare-sweep.png ->
// flashlab-compare-sweep-1234.png).
inline std::filesystem::path scratch_path(const std::string& name) {
  const std::filesystem::path given(name);
  return std::filesystem::temp_directory_path() /
         ("flashlab-" + given.stem().string() + "-" + std::to_string(::getpid()) +
          given.extension().string());
}

// A test's own folder (scratch_path), made empty at the start and removed afterwards.
struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const std::string& name) : dir(scratch_path(name)) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // A path inside, single-quoted for the shell (a quote in it becomes '\'').
  std::string quoted(const std::string& file) const {
    std::string q = "'";
    for (char c : (dir / file).string()) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
};

// A file's bytes as they are (empty where it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// How many times `part` stands in `text` (overlapping ones counted).
inline std::size_t count_of(std::string_view text, std::string_view part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

struct Run {
  int status = -1;     // the exit status
  std::string output;  // stdout, and stderr when the command line redirects it
};

// A shell command line, run as it is; its stdout is captured.
inline Run run_command(const std::string& command) {
  Run run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    run.output.append(buffer.data(), n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

// args are appended to the program's path as they are: quote them in the caller if needed.
inline Run run_flashlab(const std::string& args) {
  return run_command(std::string(FLASHLAB_BINARY) + " " + args);
}

}  // namespace flashlab::test
