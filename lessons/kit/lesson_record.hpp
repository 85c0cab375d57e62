// What a lesson printed, kept in order as blocks instead of one stream of text: a step's
// heading, the text between, each table with its cells. `flashlab book` lays the blocks out
// as HTML (a heading as a heading, a table as a table); the terminal never sees them.
#pragma once

#include "kit/terminal.hpp"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace flashlab::app {

struct LessonBlock {
  enum class Kind { step, text, table, finish };
  Kind kind = Kind::text;
  std::string text;  // the heading, the text, or the closing line; empty for a table
  std::optional<Table> table;
};

// Collects the blocks. A LessonContext built on a recorder writes its plain text into
// stream() (so text a lesson prints through out() is kept too) and hands over headings and
// tables as they come; the text written since the last block becomes a block of its own.
class LessonRecorder {
 public:
  std::ostream& stream() { return pending_; }
  void step(std::string heading);
  void table(const Table& t);
  void finish(std::string next);
  // Every block so far, the pending text included.
  const std::vector<LessonBlock>& blocks();

 private:
  void flush_text();

  std::ostringstream pending_;
  std::vector<LessonBlock> blocks_;
};

}  // namespace flashlab::app
