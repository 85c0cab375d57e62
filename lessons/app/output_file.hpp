// Files the commands write (--json, --html, --trace, --csv, --plot): each appears whole or not
// at all. The text goes to a temporary file beside the target and is renamed into place only
// when every write, the flush and the close succeeded, so a full disk, a failed run or a
// rejected argument never leaves a half-written file or truncates an existing one. A target
// that is not a regular file (/dev/stdout, a pipe) is written directly, and its errors are
// still reported.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashlab::app {

class OutputFile {
 public:
  // Checks the path at once (not a directory, its folder exists) and opens the temporary;
  // throws cpu::InvalidArgument naming the flag and the path otherwise. A file of more than
  // max_bytes is refused when written, with a message naming the limit and `raise_with`.
  OutputFile(std::string_view flag, std::string path, std::int64_t max_bytes = INT64_MAX,
             std::string_view raise_with = "");
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // without commit(): the temporary is removed, the target left as it was

  // Appends text; throws once the file would pass max_bytes.
  void write(std::string_view text);
  // For writers that take a stream: what goes through it is not held to max_bytes (check
  // the size before writing), but its errors are caught by commit() all the same.
  std::ostream& stream() { return out_; }
  // Flushes, closes and renames into place; throws cpu::InvalidArgument with the system's
  // reason ("No space left on device") when any of it failed.
  void commit();

  const std::string& path() const { return path_; }
  // Where the bytes go until commit(): for another program that writes the file itself.
  const std::string& writing_to() const { return temporary_.empty() ? path_ : temporary_; }
  std::int64_t bytes() const { return bytes_; }

 private:
  [[noreturn]] void fail(std::string_view what) const;

  std::string flag_, path_, temporary_;  // temporary_ empty: writing to path_ directly
  std::ofstream out_;
  std::int64_t bytes_ = 0, max_bytes_;
  std::string raise_with_;
  bool committed_ = false;
};

// Two outputs of one command may not name the same file (one would overwrite the other):
// throws cpu::InvalidArgument naming both flags. Empty paths (outputs not asked for) are
// skipped; paths are compared after resolving "." and ".." and links.
void check_distinct_outputs(const std::vector<std::pair<std::string_view, std::string>>& outputs);

// Standard output and standard error flushed and checked: a table printed into a full disk
// or a closed pipe is an error, not a silent success. Throws cpu::InvalidArgument.
void flush_standard_streams();

}  // namespace flashlab::app
