#include "kit/lesson_context.hpp"

#include <istream>
#include <ostream>
#include <string>

namespace flashlab::app {

LessonContext::LessonContext(std::ostream& out, std::istream& in, Style style, bool step)
    : out_(&out), in_(&in), style_(style), stepping_(step) {}

LessonContext::LessonContext(LessonRecorder& recorder)
    : out_(&recorder.stream()),
      in_(nullptr),
      style_(Style::plain()),
      stepping_(false),
      recorder_(&recorder) {}

void LessonContext::title(int number, std::string_view name) {
  *out_ << paint(style_, Tone::heading, fmt::format("Lesson {}: {}", number, name)) << "\n\n";
}

void LessonContext::step(std::string_view heading) {
  if (stepping_ && steps_ > 0) {
    *out_ << paint(style_, Tone::dim, "[press Enter for the next step]") << std::flush;
    std::string ignored;
    std::getline(*in_, ignored);
    *out_ << '\n';
  }
  ++steps_;
  if (recorder_) return recorder_->step(fmt::format("Step {}: {}", steps_, heading));
  *out_ << paint(style_, Tone::heading, fmt::format("Step {}: {}", steps_, heading)) << "\n\n";
}

void LessonContext::say(std::string_view text) { *out_ << text; }

void LessonContext::table(const Table& t) {
  if (recorder_) return recorder_->table(t);
  t.print(*out_, style_);
  *out_ << '\n';
}

void LessonContext::finish(std::string_view next) {
  if (recorder_) return recorder_->finish(fmt::format("Next: {}", next));
  *out_ << paint(style_, Tone::dim, fmt::format("Next: {}", next)) << '\n';
}

}  // namespace flashlab::app
