#include "output_file.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/core.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;

namespace flashlab::app {

namespace {

std::string reason() { return errno != 0 ? std::strerror(errno) : "an unknown write error"; }

// A name beside the target that no other flashlab process picks: the pid makes it unique.
std::string temporary_beside(const fs::path& target) {
  return (target.parent_path() / fmt::format(".{}.{}.tmp", target.filename().string(), getpid()))
      .string();
}

}  // namespace

OutputFile::OutputFile(std::string_view flag, std::string path, std::int64_t max_bytes,
                       std::string_view raise_with)
    : flag_(flag), path_(std::move(path)), max_bytes_(max_bytes), raise_with_(raise_with) {
  if (path_.empty()) fail("is empty: give a file name");
  std::error_code error;
  const fs::path target(path_);
  const auto status = fs::status(target, error);
  if (fs::is_directory(status)) fail("is a directory: give a file name inside it");
  const bool direct = fs::exists(status) && !fs::is_regular_file(status);
  if (!direct) {
    const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
    if (!fs::is_directory(folder, error))
      fail(
          fmt::format("is in a folder that does not exist ({}): create it first", folder.string()));
    temporary_ = temporary_beside(target);
  }
  errno = 0;
  out_.open(direct ? path_ : temporary_, std::ios::binary | std::ios::trunc);
  if (!out_) fail(fmt::format("cannot be written: {}", reason()));
}

OutputFile::~OutputFile() {
  if (committed_ || temporary_.empty()) return;
  out_.close();
  std::remove(temporary_.c_str());
}

void OutputFile::fail(std::string_view what) const {
  throw cpu::InvalidArgument(fmt::format("{} {}: the path {}", flag_, path_, what));
}

void OutputFile::write(std::string_view text) {
  if (std::int64_t(text.size()) > max_bytes_ - bytes_)
    fail(fmt::format(
        "would hold more than {} bytes, the limit of this output{}; nothing was written",
        max_bytes_, raise_with_.empty() ? "" : ": raise it with " + raise_with_));
  errno = 0;
  out_.write(text.data(), std::streamsize(text.size()));
  if (!out_) fail(fmt::format("could not be written ({}); nothing was kept", reason()));
  bytes_ += std::int64_t(text.size());
}

void OutputFile::commit() {
  errno = 0;
  out_.flush();
  if (!out_) fail(fmt::format("could not be written ({}); nothing was kept", reason()));
  out_.close();
  if (out_.fail()) fail(fmt::format("could not be closed ({}); nothing was kept", reason()));
  if (!temporary_.empty() && std::rename(temporary_.c_str(), path_.c_str()) != 0)
    fail(fmt::format("could not be put in place ({})", reason()));
  committed_ = true;
}

void check_distinct_outputs(const std::vector<std::pair<std::string_view, std::string>>& outputs) {
  std::vector<std::pair<std::string_view, fs::path>> seen;
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    std::error_code error;
    fs::path resolved = fs::weakly_canonical(fs::absolute(path), error);
    if (error) resolved = fs::absolute(path).lexically_normal();
    for (const auto& [other_flag, other] : seen)
      if (other == resolved)
        throw cpu::InvalidArgument(fmt::format(
            "{} and {} both name {}: one would overwrite the other; give each its own file",
            other_flag, flag, path));
    seen.emplace_back(flag, resolved);
  }
}

void flush_standard_streams() {
  errno = 0;
  std::cout.flush();
  const bool cout_ok = bool(std::cout) && std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (!cout_ok)
    throw cpu::InvalidArgument(fmt::format("could not write to standard output ({})", reason()));
}

}  // namespace flashlab::app
