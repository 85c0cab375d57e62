// `flashlab book DIR [--force] [--source ROOT]`: writes the course as a static site
// (lessons/book/book_site.hpp says what is in it).
#include "commands.hpp"

#include "book/book_site.hpp"

#include <fmt/core.h>

#include <iostream>

namespace flashlab::app {

namespace {

struct BookArgs {
  std::string folder;
  std::string source = book::default_source_root().string();
  bool force = false;
};

}  // namespace

void add_book_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "book", "Write the course as a static site: every lesson's text, tables and figures");
  auto& args = arguments_of<BookArgs>(cmd, [](const BookArgs& a) {
    const book::BookSummary s =
        book::write_book({.folder = a.folder, .source_root = a.source, .force = a.force});
    std::cout << fmt::format(
        "flashlab: wrote the book to {}: {} lesson pages, {} figures, {} tile viewers; open "
        "{}/index.html in a browser\n",
        a.folder, s.pages, s.figures, s.viewers, a.folder);
  });
  cmd->add_option("DIR", args.folder, "The folder to write into (created if missing)")->required();
  cmd->add_flag("--force", args.force,
                "Write into a folder that already holds files (the book's own files are replaced)");
  cmd->add_option("--source", args.source,
                  "The flashlab repository whose lessons/*/README.md and bench/results/ are read")
      ->default_str(book::default_source_root().string());
}

}  // namespace flashlab::app
