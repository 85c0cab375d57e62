#include "book/pages.hpp"

#include "book/svg_plot.hpp"

#include <fmt/core.h>

namespace flashlab::app::book {

namespace {

constexpr std::string_view kStyle = R"css(
body { font-family: sans-serif; max-width: 62rem; margin: 0 auto; padding: 1rem 1.5rem;
       color: #222; line-height: 1.45; }
nav { display: flex; gap: 1.5rem; padding: 0.5rem 0; border-bottom: 1px solid #ddd; }
nav a, a { color: #1f6fb4; }
pre, code { font-family: monospace; font-size: 0.9rem; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
th { background: #eef3fa; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2rem 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #444; }
.output h3 { margin-top: 1.6rem; color: #1f6fb4; }
.next { color: #666; font-style: italic; }
)css";

std::string document(std::string_view title, std::string_view nav, std::string_view body) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<nav>{}</nav>\n<main>\n{}</main>\n"
      "</body>\n</html>\n",
      escape_xml(title), kStyle, nav, body);
}

std::string link(std::string_view href, std::string_view text) {
  return fmt::format("<a href=\"{}\">{}</a>", escape_xml(href), escape_xml(text));
}

std::string table_html(const Table& t) {
  std::string html = "<table>\n<thead><tr>";
  for (const auto& cell : t.header()) html += "<th>" + escape_xml(cell) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.cells()) {
    html += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c)
      html += fmt::format("<td{}>{}</td>", t.left_aligned(c) ? "" : " class=\"number\"",
                          escape_xml(row[c]));
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n";
}

}  // namespace

std::string lesson_page_name(int number) { return fmt::format("lesson-{:02}.html", number); }
std::string viewer_page_name(int number) { return fmt::format("viewer-{:02}.html", number); }
std::string figure_file_name(const Figure& figure) { return "figures/" + figure.id + ".svg"; }

std::string index_page(std::span<const LessonInfo> lessons) {
  std::string body =
      "<h1>flashlab: FlashAttention, learned by running it</h1>\n"
      "<p>Each lesson's text, every table its program computes, and figures drawn from the "
      "computed data. The same programs run in a terminal as <code>flashlab lesson N</code>.</p>\n"
      "<table>\n<thead><tr><th>lesson</th><th>title</th><th>what it teaches</th></tr></thead>\n"
      "<tbody>\n";
  for (const auto& lesson : lessons)
    body += fmt::format("<tr><td class=\"number\">{}</td><td>{}</td><td>{}</td></tr>\n",
                        lesson.number, link(lesson_page_name(lesson.number), lesson.title),
                        escape_xml(lesson.teaches));
  body += "</tbody>\n</table>\n";
  return document("flashlab: the lessons", link("index.html", "All lessons"), body);
}

std::string output_html(const std::vector<LessonBlock>& blocks) {
  std::string html;
  for (const LessonBlock& b : blocks) {
    switch (b.kind) {
      case LessonBlock::Kind::step: html += "<h3>" + escape_xml(b.text) + "</h3>\n"; break;
      case LessonBlock::Kind::text: html += "<pre>" + escape_xml(b.text) + "</pre>\n"; break;
      case LessonBlock::Kind::table: html += table_html(*b.table); break;
      case LessonBlock::Kind::finish:
        html += "<p class=\"next\">" + escape_xml(b.text) + "</p>\n";
        break;
    }
  }
  return html;
}

std::string lesson_page(const LessonPage& page) {
  const LessonInfo& lesson = *page.lesson;
  std::string nav = link("index.html", "All lessons");
  if (page.previous)
    nav += link(lesson_page_name(page.previous->number),
                fmt::format("Previous: lesson {}", page.previous->number));
  if (page.next)
    nav += link(lesson_page_name(page.next->number),
                fmt::format("Next: lesson {}", page.next->number));
  std::string body = page.text_html;
  if (page.viewer)
    body += fmt::format(
        "<h2 id=\"viewer\">The tile viewer</h2>\n<p>{} replays this lesson's example tile by "
        "tile: pick a query tile, step through the KV tiles, and watch m, l and U change.</p>\n",
        link(viewer_page_name(lesson.number), "The tile viewer"));
  if (!page.figures.empty()) {
    body += "<h2 id=\"figures\">Figures</h2>\n";
    for (const Figure& f : page.figures)
      body +=
          fmt::format("<figure id=\"{}\">\n{}<figcaption>{} ({})</figcaption>\n</figure>\n", f.id,
                      f.svg, escape_xml(f.caption), link(figure_file_name(f), "the figure alone"));
  }
  body += fmt::format(
      "<h2 id=\"output\">What the program computes</h2>\n<p>The output of <code>flashlab "
      "lesson {}</code>, run when this book was written.</p>\n<div class=\"output\">\n{}</div>\n",
      lesson.number, output_html(page.output));
  return document(fmt::format("Lesson {}: {}", lesson.number, lesson.title), nav, body);
}

}  // namespace flashlab::app::book
