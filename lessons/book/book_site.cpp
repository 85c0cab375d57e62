#include "book/book_site.hpp"

#include "book/lesson_figures.hpp"
#include "book/markdown.hpp"
#include "book/pages.hpp"
#include "traces/html_viewer.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;

namespace flashlab::app::book {

namespace {

[[noreturn]] void refuse(const fs::path& folder, std::string_view what) {
  throw cpu::InvalidArgument(fmt::format("book: the folder {} {}", folder.string(), what));
}

void write_file(const fs::path& path, std::string_view text) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), std::streamsize(text.size()));
  out.close();
  if (!out)
    throw cpu::InvalidArgument(fmt::format("book: {} could not be written ({})", path.string(),
                                           errno ? std::strerror(errno) : "a write error"));
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw cpu::InvalidArgument(fmt::format(
        "book: {} cannot be read: every lesson's folder holds its text as README.md; give the "
        "repository's root with --source",
        path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<LessonBlock> run_recorded(const LessonInfo& lesson) {
  LessonRecorder recorder;
  LessonContext context(recorder);
  lesson.run(context);
  return recorder.blocks();
}

}  // namespace

fs::path default_source_root() { return FLASHLAB_SOURCE_DIR; }

void check_book_options(const BookOptions& options) {
  const fs::path& folder = options.folder;
  std::error_code error;
  if (!fs::is_directory(options.source_root / "lessons", error))
    throw cpu::InvalidArgument(fmt::format(
        "book: {} has no lessons/ folder: --source must be the root of the flashlab repository",
        options.source_root.string()));
  if (folder.empty()) refuse(folder, "is empty: give the folder to write the book into");
  const auto status = fs::status(folder, error);
  if (fs::exists(status) && !fs::is_directory(status))
    refuse(folder, "is a file, not a folder: give a folder (a new one is created)");
  if (!fs::exists(status)) {
    if (!fs::create_directories(folder, error))
      refuse(folder, fmt::format("cannot be created ({}): give a folder you can write to",
                                 error ? error.message() : "unknown reason"));
  } else if (!options.force && !fs::is_empty(folder, error)) {
    refuse(folder,
           "already holds files: give a new or empty folder, or add --force to write the "
           "book's files over whatever of them is there");
  }
  const fs::path probe = folder / ".flashlab-book-probe";
  {
    std::ofstream out(probe);
    if (!out)
      refuse(folder, fmt::format("is not writable ({}): give a folder you can write to",
                                 std::strerror(errno)));
  }
  fs::remove(probe, error);
}

BookSummary write_book(const BookOptions& options) {
  check_book_options(options);
  const fs::path& folder = options.folder;
  // What the pages take from the source is read before the first file is written: a source
  // that lacks a lesson's text leaves the folder as empty as it was, for a second try.
  const MeasuredResults measured = read_measured_results(options.source_root);
  const auto lessons = all_lessons();
  std::vector<std::string> texts;
  for (const LessonInfo& lesson : lessons)
    texts.push_back(read_text(options.source_root / "lessons" / lesson.folder / "README.md"));
  fs::create_directories(folder / "figures");
  BookSummary summary;
  write_file(folder / "index.html", index_page(lessons));
  for (std::size_t k = 0; k < lessons.size(); ++k) {
    const LessonInfo& lesson = lessons[k];
    LessonExtras extras = extras_for_lesson(lesson.number, measured);
    LessonPage page{.lesson = &lesson,
                    .previous = k > 0 ? &lessons[k - 1] : nullptr,
                    .next = k + 1 < lessons.size() ? &lessons[k + 1] : nullptr,
                    .text_html = markdown_to_html(texts[k]),
                    .output = run_recorded(lesson),
                    .figures = std::move(extras.figures),
                    .viewer = extras.viewer.has_value()};
    if (extras.viewer) {
      write_file(folder / viewer_page_name(lesson.number),
                 viewer_html(*extras.viewer, fmt::format("Lesson {}: {}, tile by tile",
                                                         lesson.number, lesson.title)));
      ++summary.viewers;
    }
    for (const Figure& f : page.figures) {
      write_file(folder / figure_file_name(f), f.svg);
      ++summary.figures;
    }
    write_file(folder / lesson_page_name(lesson.number), lesson_page(page));
    ++summary.pages;
  }
  return summary;
}

}  // namespace flashlab::app::book
