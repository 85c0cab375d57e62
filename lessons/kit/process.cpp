#include "kit/process.hpp"

#include <fmt/core.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace flashlab::app {

namespace {

// Closes both ends of a pipe on every path out of run_program.
struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  void close_end(int k) {
    close(fd[k]);
    fd[k] = -1;
  }
};

}  // namespace

ProcessResult run_program(const std::vector<std::string>& argv, const std::string& stdout_path) {
  ProcessResult result;
  if (argv.empty()) return result;
  Pipe pipe_;
  if (pipe(pipe_.fd) != 0) {
    result.message = fmt::format("cannot make a pipe: {}", std::strerror(errno));
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (stdout_path.empty())
    posix_spawn_file_actions_adddup2(&actions, pipe_.fd[1], STDOUT_FILENO);
  else
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, pipe_.fd[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_.fd[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  pipe_.close_end(1);
  if (error != 0) {
    result.message = fmt::format("cannot run {}: {}", argv[0], std::strerror(error));
    return result;
  }
  result.started = true;
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = read(pipe_.fd[0], buffer.data(), buffer.size())) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buffer.data(), std::size_t(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.message = fmt::format("{} was ended by signal {} ({})", argv[0], WTERMSIG(status),
                                 strsignal(WTERMSIG(status)));
  }
  return result;
}

}  // namespace flashlab::app
