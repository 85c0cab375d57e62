#include "child_process.hpp"

#include "exercises.hpp"

#include <Eigen/Core>
#include <cxxabi.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <system_error>
#include <typeinfo>

namespace flashlab::exercises {

namespace {

using Clock = std::chrono::steady_clock;

// The child tells the parent how the case ended with one byte, then the detail's text. A child
// that ends without having written its byte was ended by something else: a signal, exit(),
// or the parent's time limit.
constexpr char kPassed = 'P';
constexpr char kFailed = 'F';
constexpr char kNotWritten = 'N';
constexpr char kOutOfMemory = 'M';

constexpr std::size_t kMaxMessageBytes = 4096;  // a detail longer than this is cut
constexpr std::size_t kKeptOutputBytes = 4096;  // of what the code printed, the end is kept
constexpr int kShownOutputLines = 8;
constexpr auto kReapInterval = std::chrono::milliseconds(10);  // polling a child that closed its pipes
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kMaxSeconds = 24 * 3600.0;  // a day: far past any case, and no overflow of the clock

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Its ends are closed when it goes out of scope, in the parent; the child leaves by _exit().
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "could not create a pipe to run a case");
    read = fds[0], write = fds[1];
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() { close_fd(read), close_fd(write); }
};

// ---- in the child -------------------------------------------------------------------------

void write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t done = ::write(fd, data, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return;  // the parent has gone: nobody is left to tell
    data += done, n -= static_cast<std::size_t>(done);
  }
}

[[noreturn]] void report_and_exit(int fd, char verdict, std::string_view detail) {
  std::fflush(stdout), std::fflush(stderr);
  write_all(fd, &verdict, 1);
  write_all(fd, detail.data(), std::min(detail.size(), kMaxMessageBytes));
  ::_exit(0);  // not exit(): the checker's own atexit handlers and buffers belong to the parent
}

std::string demangle(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> name(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

// "an int", "a char const*": the type of the exception being handled in a catch (...).
std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  const std::string name = type ? demangle(type->name()) : "";
  if (name.empty()) return "something";
  return (std::strchr("aeiou", name.front()) ? "an " : "a ") + name;
}

// Called in a catch (...): tells the parent what was thrown.
[[noreturn]] void report_current_exception(int fd) {
  try {
    throw;
  } catch (const NotWrittenYet& e) {
    report_and_exit(fd, kNotWritten, e.what());
  } catch (const std::bad_alloc&) {
    report_and_exit(fd, kOutOfMemory, "");
  } catch (const std::exception& e) {
    report_and_exit(fd, kFailed, fmt::format("threw {}: \"{}\"", demangle(typeid(e).name()), e.what()));
  } catch (...) {
    report_and_exit(fd, kFailed, fmt::format("threw {}, not a std::exception", current_exception_type()));
  }
}

// The address space the child may reach: what it has now (the checker's copy) plus the budget.
// Under AddressSanitizer the limit is left off: its allocator reports a failed mapping as an
// error of its own instead of std::bad_alloc.
void limit_resources([[maybe_unused]] const CaseLimits& limits) {
  const rlimit no_core{0, 0};  // a crash of the student's code leaves no core file behind
  ::setrlimit(RLIMIT_CORE, &no_core);
#if !defined(__SANITIZE_ADDRESS__)
  std::ifstream statm("/proc/self/statm");
  unsigned long long pages = 0;
  if (!(statm >> pages)) return;  // no /proc: the time limit still holds
  const rlim_t now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
  if (limits.memory_bytes > RLIM_INFINITY - now) return;
  const rlimit memory{now + limits.memory_bytes, now + limits.memory_bytes};
  ::setrlimit(RLIMIT_AS, &memory);
#endif
}

[[noreturn]] void run_case(const std::function<std::string()>& body, const CaseLimits& limits,
                           int result_fd, int output_fd) {
  ::setpgid(0, 0);  // its own process group, so the parent can end whatever it starts
  // A crash ends the child the plain way, whatever handlers the checker's program installed
  // (a test framework's, say): the parent reads the signal from the exit status.
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGPIPE})
    std::signal(signal, SIG_DFL);
  ::dup2(output_fd, STDOUT_FILENO);
  ::dup2(output_fd, STDERR_FILENO);
  ::close(output_fd);
  // Unbuffered: what was printed before a crash has already left (no buffer to lose, none to
  // allocate in a child whose memory is limited).
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  limit_resources(limits);
  // A forked child has none of the OpenMP threads the parent may have started, and GNU OpenMP
  // would wait for them forever: the student's code (and Eigen inside it) runs on one thread.
#if defined(_OPENMP)
  omp_set_num_threads(1);
#endif
  Eigen::setNbThreads(1);
  try {
    const std::string differences = body();
    report_and_exit(result_fd, differences.empty() ? kPassed : kFailed, differences);
  } catch (...) {
    // Describing the exception allocates; with the memory a leaking student's code left, that
    // can fail in turn, and then running out of memory is what happened.
    try {
      report_current_exception(result_fd);
    } catch (...) {
      report_and_exit(result_fd, kOutOfMemory, "");
    }
  }
}

// ---- in the parent ------------------------------------------------------------------------

// What a signal usually means when it ends a student's function.
std::string describe_signal(int signal) {
  switch (signal) {
    case SIGABRT: return "called abort() (or an assertion failed): the code was killed by SIGABRT";
    case SIGSEGV:
      return "the code was killed by SIGSEGV (a null or wild pointer, an index out of range, "
             "or endless recursion)";
    case SIGBUS: return "the code was killed by SIGBUS (a wild pointer)";
    case SIGFPE: return "the code was killed by SIGFPE (an integer division by zero)";
    case SIGILL:
      return "the code was killed by SIGILL (an illegal instruction: often a function that "
             "reaches its end without returning a value)";
    case SIGKILL:
      return "the code was killed by SIGKILL from outside the checker (the system out of memory?)";
    default:
      if (const char* abbrev = ::sigabbrev_np(signal))
        return fmt::format("the code was killed by SIG{}", abbrev);
      return fmt::format("the code was killed by signal {}", signal);
  }
}

std::string describe_ending(int status, bool timed_out, const CaseLimits& limits,
                            std::string_view output) {
  if (timed_out) return fmt::format("did not finish within {:g} s (an infinite loop?)", limits.seconds);
  if (WIFSIGNALED(status)) return describe_signal(WTERMSIG(status));
  const int code = WEXITSTATUS(status);
  // A sanitizer ends its long report with one line that says it all.
  constexpr std::string_view kSummary = "SUMMARY: ";
  if (const std::size_t at = output.rfind(kSummary); at != std::string_view::npos) {
    const std::string_view summary = output.substr(at + kSummary.size());
    return fmt::format("was stopped by a sanitizer (exit status {}): {}", code,
                       summary.substr(0, summary.find('\n')));
  }
  return fmt::format("called exit({}) instead of returning: a function under test must return "
                     "its result, not end the program",
                     code);
}

// The last kShownOutputLines lines of `tail`, the end of what the code printed; "..." marks
// that something came before them.
std::string last_lines(std::string_view tail, bool cut) {
  while (!tail.empty() && tail.back() == '\n') tail.remove_suffix(1);
  std::size_t begin = tail.size();  // the newline before the first line kept, or 0
  for (int lines = 0; lines < kShownOutputLines && begin != 0; ++lines) {
    const std::size_t newline = tail.rfind('\n', begin - 1);
    begin = newline == std::string_view::npos ? 0 : newline;
  }
  const bool dropped = cut || begin != 0;
  return (dropped ? "...\n" : "") + std::string(tail.substr(begin == 0 ? 0 : begin + 1));
}

// How the child ended and what it sent.
struct ChildEnd {
  int status = 0;               // from waitpid
  bool timed_out = false;       // killed by the parent at the deadline
  std::string message;          // the verdict byte and the detail
  std::string output;           // the end of what it printed
  std::size_t output_bytes = 0; // how much it printed in all
};

// Appends what is ready on fd to `into`, keeping at most `keep` bytes: the first ones, or the
// last ones with keep_tail. Closes fd at the end of the stream. Returns the bytes read.
std::size_t read_some(int& fd, std::string& into, std::size_t keep, bool keep_tail) {
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return 0;
  if (n <= 0) {
    close_fd(fd);
    return 0;
  }
  into.append(buffer, static_cast<std::size_t>(n));
  if (into.size() > keep) {
    if (keep_tail) into.erase(0, into.size() - keep);
    else into.resize(keep);
  }
  return static_cast<std::size_t>(n);
}

// Reads what the child sends until both pipes close and it has ended, or the deadline passes
// (then kills it); reaps it either way.
ChildEnd wait_for_child(pid_t pid, Pipe& result, Pipe& output, const CaseLimits& limits) {
  ChildEnd end;
  bool reaped = false;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limits.seconds));
  while (true) {
    if (result.read < 0 && output.read < 0) {
      const pid_t done = ::waitpid(pid, &end.status, WNOHANG);
      if (done == pid) {
        reaped = true;
        break;
      }
      if (done < 0 && errno != EINTR) {
        // Not a timeout: the child can no longer be waited for (it was reaped elsewhere).
        const int error = errno;
        ::kill(-pid, SIGKILL);
        throw std::system_error(error, std::generic_category(),
                                "could not wait for the process that ran a case");
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd fds[2];
    nfds_t n = 0;
    for (int fd : {result.read, output.read})
      if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
    const auto wait = n ? left : std::min<std::chrono::milliseconds>(left, kReapInterval);
    if (::poll(fds, n, static_cast<int>(std::min<long long>(wait.count(), INT_MAX))) <= 0) continue;
    for (nfds_t k = 0; k < n; ++k) {
      if (!fds[k].revents) continue;
      if (fds[k].fd == result.read) read_some(result.read, end.message, kMaxMessageBytes + 1, false);
      else end.output_bytes += read_some(output.read, end.output, kKeptOutputBytes, true);
    }
  }
  if (!reaped) {
    end.timed_out = true;
    ::kill(-pid, SIGKILL), ::kill(pid, SIGKILL);
    while (::waitpid(pid, &end.status, 0) < 0 && errno == EINTR) {}
  }
  // Any process the code started is in the child's group, whose id is not reused while one of
  // them lives: this ends them and nothing else.
  ::kill(-pid, SIGKILL);
  return end;
}

}  // namespace

void validate(const CaseLimits& limits) {
  if (!(limits.seconds > 0 && limits.seconds <= kMaxSeconds))
    throw cpu::InvalidArgument(fmt::format(
        "the time limit per case is {:g} s: it must be more than 0 and at most {:g} s (a day)",
        limits.seconds, kMaxSeconds));
  if (limits.memory_bytes == 0)
    throw cpu::InvalidArgument("the memory limit per case is 0 bytes: it must be at least one byte");
}

CaseOutcome run_in_child(const std::function<std::string()>& body, const CaseLimits& limits) {
  validate(limits);
  Pipe result, output;
  // Whatever the checker has buffered must leave now, or the child would print it again.
  std::cout.flush(), std::cerr.flush(), std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::system_error(errno, std::generic_category(), "could not start a process to run a case");
  if (pid == 0) {
    close_fd(result.read), close_fd(output.read);
    run_case(body, limits, result.write, output.write);
  }
  ::setpgid(pid, pid);  // also done by the child: whichever runs first
  close_fd(result.write), close_fd(output.write);  // so that the child's end means end of stream
  const ChildEnd end = wait_for_child(pid, result, output, limits);

  CaseOutcome outcome;
  if (!end.output.empty()) outcome.output = last_lines(end.output, end.output_bytes > end.output.size());
  const bool reported = !end.timed_out && !end.message.empty() && WIFEXITED(end.status) &&
                        WEXITSTATUS(end.status) == 0;
  if (!reported) {
    outcome.detail = describe_ending(end.status, end.timed_out, limits, end.output);
    return outcome;
  }
  const char verdict = end.message.front();
  outcome.detail = end.message.substr(1);  // the child wrote at most kMaxMessageBytes
  if (verdict == kPassed) outcome.verdict = CaseOutcome::Verdict::passed;
  if (verdict == kNotWritten) outcome.verdict = CaseOutcome::Verdict::not_written;
  if (verdict == kOutOfMemory)
    outcome.detail = fmt::format(
        "ran out of memory: it asked for more than the {:g} MiB a case may use and got "
        "std::bad_alloc (a size computed wrongly, or memory allocated in a loop?)",
        static_cast<double>(limits.memory_bytes) / kMiB);
  return outcome;
}

}  // namespace flashlab::exercises
