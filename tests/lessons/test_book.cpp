// `flashlab book`: what a lesson printed kept as blocks, the measured results read and
// refused, the site written for every registered lesson, and every refusal of a bad folder.
// (The pages in a browser, their figures and links: book_browser_test.sh.)
#include "book/book_site.hpp"
#include "book/measured_results.hpp"
#include "book/pages.hpp"
#include "kit/lesson_context.hpp"
#include "kit/lesson_registry.hpp"
#include "run_flashlab.hpp"

#include "flashlab/cpu/types.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using flashlab::test::contains;
using flashlab::test::count_of;
using flashlab::test::kUsageError;
using flashlab::test::read_file;
using flashlab::test::run_flashlab;
using flashlab::test::Scratch;
using namespace flashlab::app;
namespace fs = std::filesystem;

namespace {

// The pipe tables of a Markdown text: one separator line (|---|:--:|) each.
std::size_t markdown_tables(const std::string& text) {
  std::size_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    n += line.size() > 1 && line[0] == '|' && line.find('-') != std::string::npos &&
         line.find_first_not_of("|-: ") == std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("a recorded lesson keeps its steps, text, tables and closing line in order") {
  LessonRecorder recorder;
  LessonContext ctx(recorder);
  ctx.step("first");
  ctx.say("one line\n");
  ctx.out() << "written straight to out()\n";
  Table t({"name", "value"}, {true});
  t.add({"x", "1.5"});
  ctx.table(t);
  ctx.step("second");
  ctx.finish("lesson 99");
  const auto& blocks = recorder.blocks();
  REQUIRE(blocks.size() == 5);
  CHECK(blocks[0].kind == LessonBlock::Kind::step);
  CHECK(blocks[0].text == "Step 1: first");
  CHECK(blocks[1].kind == LessonBlock::Kind::text);
  CHECK(blocks[1].text == "one line\nwritten straight to out()\n");
  REQUIRE(blocks[2].kind == LessonBlock::Kind::table);
  CHECK(blocks[2].table->header() == std::vector<std::string>{"name", "value"});
  CHECK(blocks[2].table->cells().at(0).at(1) == "1.5");
  CHECK(blocks[3].text == "Step 2: second");
  CHECK(blocks[4].kind == LessonBlock::Kind::finish);
  CHECK(blocks[4].text == "Next: lesson 99");
  const std::string html = book::output_html(blocks);
  CHECK(contains(html, "<h3>Step 1: first</h3>"));
  CHECK(contains(html, "<th>name</th><th>value</th>"));
  CHECK(contains(html, "<td>x</td><td class=\"number\">1.5</td>"));
}

TEST_CASE("the measured results are read from bench/results/, and a broken file is refused") {
  const auto measured = book::read_measured_results(FLASHLAB_SOURCE_DIR);
  CHECK(measured.bytes_file == book::kMeasuredBytesFile);
  CHECK(measured.speed_file == book::kMeasuredSpeedFile);
  const auto fa2 = book::select(measured.tflops, "fa2", 128, false);
  REQUIRE(fa2.size() >= 2);
  for (std::size_t k = 1; k < fa2.size(); ++k) CHECK(fa2[k - 1].N < fa2[k].N);
  for (const auto& p : fa2) CHECK(p.value > 0);
  CHECK_FALSE(book::select(measured.sm_read, "fa2", 128, false).empty());

  Scratch root("book-results");
  fs::create_directories(root.dir / "bench/results");
  std::ofstream(root.dir / book::kMeasuredSpeedFile)
      << "d,causal,N,B,H,impl,ms,tflops\n128,0,1024,16,16,fa2,,fast\n";
  CHECK_THROWS_WITH_AS(book::read_measured_results(root.dir),
                       doctest::Contains("`fast` in column `tflops` is not a number"),
                       flashlab::cpu::InvalidArgument);
  std::ofstream(root.dir / book::kMeasuredSpeedFile) << "d,causal,N\n128,0\n";
  CHECK_THROWS_WITH_AS(book::read_measured_results(root.dir),
                       doctest::Contains("line 2: 2 cells where the header has 3"),
                       flashlab::cpu::InvalidArgument);
  fs::remove(root.dir / book::kMeasuredSpeedFile);  // absent: no points, no error
  CHECK(book::read_measured_results(root.dir).tflops.empty());
}

TEST_CASE("the book has a page for every registered lesson, with its tables and figures") {
  Scratch site("book-site");
  const auto summary = book::write_book({.folder = site.dir, .source_root = FLASHLAB_SOURCE_DIR});
  const auto lessons = all_lessons();
  CHECK(summary.pages == int(lessons.size()));
  CHECK(summary.viewers == 2);  // lessons 3 and 4
  const std::string index = read_file(site.dir / "index.html");
  int figures_linked = 0;
  for (const auto& lesson : lessons) {
    const std::string name = book::lesson_page_name(lesson.number);
    CHECK(contains(index, "href=\"" + name + "\""));
    const std::string page = read_file(site.dir / name);
    REQUIRE_MESSAGE(!page.empty(), name);
    // Every table the program printed is on the page, as a table.
    LessonRecorder recorder;
    LessonContext ctx(recorder);
    lesson.run(ctx);
    std::size_t tables = 0;
    for (const auto& b : recorder.blocks()) tables += b.kind == LessonBlock::Kind::table;
    const std::size_t readme_tables = markdown_tables(
        read_file(fs::path(FLASHLAB_SOURCE_DIR) / "lessons" / lesson.folder / "README.md"));
    CHECK_MESSAGE(count_of(page, "<table>") == tables + readme_tables, name);
    CHECK_MESSAGE(contains(page, "<h3>Step 1: "), name);
    figures_linked += int(count_of(page, "<figure id="));
    CHECK_FALSE(contains(page, "http://www.w3.org/1999/xhtml"));  // nothing but inline SVG
  }
  CHECK(figures_linked == summary.figures);
  CHECK(summary.figures >= 7);
  for (int viewer : {3, 4}) {
    CHECK(fs::is_regular_file(site.dir / book::viewer_page_name(viewer)));
    CHECK(contains(read_file(site.dir / book::lesson_page_name(viewer)),
                   "href=\"" + book::viewer_page_name(viewer) + "\""));
  }
  // Lesson 5's speed figure carries the measured points from bench/results/.
  CHECK(contains(read_file(site.dir / "lesson-05.html"), "measured on an H200"));
}

TEST_CASE("book: a folder that is a file is refused, and the file is left as it was") {
  Scratch scratch("book-file");
  const fs::path file = scratch.dir / "notes.txt";
  std::ofstream(file) << "keep me";
  const auto run = run_flashlab("book " + file.string() + " 2>&1");
  CHECK(run.status == kUsageError);
  CHECK(contains(run.output, "is a file, not a folder: give a folder"));
  CHECK(read_file(file) == "keep me");
}

TEST_CASE("book: a folder that already holds files needs --force, which keeps other files") {
  Scratch scratch("book-nonempty");
  std::ofstream(scratch.dir / "mine.txt") << "mine";
  const auto refused = run_flashlab("book " + scratch.dir.string() + " 2>&1");
  CHECK(refused.status == kUsageError);
  CHECK(
      contains(refused.output, "already holds files: give a new or empty folder, or add --force"));
  CHECK_FALSE(fs::exists(scratch.dir / "index.html"));
  const auto forced = run_flashlab("book --force " + scratch.dir.string() + " 2>&1");
  CHECK(forced.status == 0);
  CHECK(contains(forced.output, "wrote the book to"));
  CHECK(fs::is_regular_file(scratch.dir / "index.html"));
  CHECK(read_file(scratch.dir / "mine.txt") == "mine");
}

TEST_CASE("book: a folder that cannot be created or written is refused with the reason") {
  // /proc takes no new files or folders, whoever runs the test (root included).
  const auto not_created = run_flashlab("book /proc/flashlab-book/site 2>&1");
  CHECK(not_created.status == kUsageError);
  CHECK(contains(not_created.output, "cannot be created ("));
  CHECK(contains(not_created.output, "give a folder you can write to"));
  const auto not_writable = run_flashlab("book --force /proc 2>&1");
  CHECK(not_writable.status == kUsageError);
  CHECK(contains(not_writable.output, "/proc is not writable ("));
}

TEST_CASE("book: a source without lessons and a missing folder are refused") {
  Scratch scratch("book-source");
  const auto no_lessons =
      run_flashlab("book " + (scratch.dir / "site").string() + " --source /tmp 2>&1");
  CHECK(no_lessons.status == kUsageError);
  CHECK(contains(no_lessons.output, "has no lessons/ folder: --source must be the root"));
  const auto no_folder = run_flashlab("book 2>&1");
  CHECK(no_folder.status == kUsageError);
  CHECK(contains(no_folder.output, "DIR is required"));
}

TEST_CASE("book: a source missing a lesson's text leaves the folder empty for a second try") {
  Scratch scratch("book-partial");
  fs::create_directories(scratch.dir / "source" / "lessons");  // a lessons/ folder, no lessons
  const std::string command =
      "book " + scratch.quoted("site") + " --source " + scratch.quoted("source") + " 2>&1";
  const auto run = run_flashlab(command);
  CHECK(run.status != 0);
  REQUIRE(fs::is_directory(scratch.dir / "site"));
  CHECK(fs::is_empty(scratch.dir / "site"));  // no index.html, no figures/ half-written
  CHECK_FALSE(contains(run_flashlab(command).output, "already holds files"));
}
