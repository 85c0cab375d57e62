#include "kit/lesson_record.hpp"

namespace flashlab::app {

void LessonRecorder::flush_text() {
  std::string text = pending_.str();
  pending_.str("");
  if (text.find_first_not_of(" \n") == std::string::npos) return;
  blocks_.push_back({LessonBlock::Kind::text, std::move(text), std::nullopt});
}

void LessonRecorder::step(std::string heading) {
  flush_text();
  blocks_.push_back({LessonBlock::Kind::step, std::move(heading), std::nullopt});
}

void LessonRecorder::table(const Table& t) {
  flush_text();
  blocks_.push_back({LessonBlock::Kind::table, "", t});
}

void LessonRecorder::finish(std::string next) {
  flush_text();
  blocks_.push_back({LessonBlock::Kind::finish, std::move(next), std::nullopt});
}

const std::vector<LessonBlock>& LessonRecorder::blocks() {
  flush_text();
  return blocks_;
}

}  // namespace flashlab::app
