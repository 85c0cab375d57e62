// `flashlab book DIR`: the whole course as a static site in one folder, to open in any
// browser with no network and no server:
//   index.html                the lessons, from the lesson registry (a lesson added there
//                             appears here with nothing else to change)
//   lesson-NN.html            a lesson's text (its README.md), its figures, and everything
//                             its program printed, tables as tables
//   viewer-NN.html            the tile viewer replaying a lesson's example (lessons 3 and 4)
//   figures/ID.svg            each figure alone
#pragma once

#include <filesystem>
#include <string>

namespace flashlab::app::book {

struct BookOptions {
  std::filesystem::path folder;       // where the site is written
  std::filesystem::path source_root;  // the repository: lessons/*/README.md, bench/results/
  bool force = false;                 // write into a folder that already holds files
};

struct BookSummary {
  int pages = 0, figures = 0, viewers = 0;
};

// The repository this program was built from: where the book reads by default.
std::filesystem::path default_source_root();

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, when the
// folder is a file, cannot be created or written, or already holds files without force,
// or when the source root has no lessons/ folder.
void check_book_options(const BookOptions& options);

// Checks the options, then writes every file. Each file is written whole; a failure stops
// with cpu::InvalidArgument naming the file and the system's reason.
BookSummary write_book(const BookOptions& options);

}  // namespace flashlab::app::book
