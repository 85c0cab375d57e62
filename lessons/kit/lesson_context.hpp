// What a lesson's program prints through: the output stream, the style (colour, aligned
// tables), and the pauses of `flashlab lesson N --step`. Lessons write only through this,
// so the same program runs in a terminal, in a script, under a golden-output test, and into
// the pages of `flashlab book` (through a LessonRecorder).
#pragma once

#include "kit/lesson_record.hpp"
#include "kit/terminal.hpp"

#include <fmt/core.h>

#include <iosfwd>
#include <string_view>

namespace flashlab::app {

class LessonContext {
 public:
  // With step, every step after the first waits for Enter on in before it starts.
  LessonContext(std::ostream& out, std::istream& in, Style style, bool step);
  // Into a recorder: plain style, no pauses; steps, tables and the closing line become
  // blocks of their own, the text between them blocks of text.
  explicit LessonContext(LessonRecorder& recorder);

  // The lesson's title line.
  void title(int number, std::string_view name);
  // A new step: pauses first when stepping, then prints "Step k: heading".
  void step(std::string_view heading);
  // Plain text, printed as given (lessons wrap their own lines at about 90 columns).
  void say(std::string_view text);
  template <class... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) {
    say(fmt::format(format, std::forward<Args>(args)...));
  }
  void table(const Table& t);
  // A result the learner should look at twice (bold when colour is on).
  std::string emph(std::string_view text) const { return paint(style_, Tone::emphasis, text); }
  std::string good(std::string_view text) const { return paint(style_, Tone::good, text); }
  std::string bad(std::string_view text) const { return paint(style_, Tone::bad, text); }
  // The closing line: where to read next.
  void finish(std::string_view next);

  const Style& style() const { return style_; }
  std::ostream& out() { return *out_; }
  int steps() const { return steps_; }

 private:
  std::ostream* out_;
  std::istream* in_;
  Style style_;
  bool stepping_;
  int steps_ = 0;
  LessonRecorder* recorder_ = nullptr;
};

}  // namespace flashlab::app
