// The book's figures, each drawn as inline SVG from data computed when the book is written:
// by the simulator, by the CPU reference, by a lesson's own function (NN-topic/book_data.hpp),
// or read from bench/results/ for what was measured on a GPU. One file draws each figure;
// lesson_figures.cpp says which lesson shows which.
#pragma once

#include "book/measured_results.hpp"

#include <string>
#include <vector>

namespace flashlab::app::book {

struct Figure {
  std::string id;       // unique in the book: the page anchor and the standalone file's name
  std::string caption;  // what it shows and where its numbers come from
  std::string svg;      // the <svg> element
};

// HBM and SRAM, the bytes of each tensor in both directions, naive against fused (fa2),
// counted by the simulator.
Figure dataflow_figure();
// Lesson 5: HBM bytes against N for naive, fa1 and fa2; bytes into the SMs of the kernels
// as built against N, predicted and measured; TFLOP/s against N, the roofline bound against
// the measured.
std::vector<Figure> io_sweep_figures(const MeasuredResults& measured);
// Lesson 7: which warp owns which part of a score tile under split-K and split-Q.
Figure warp_split_figure();
// Lesson 9: the base r and the running max along one row, tile by tile.
Figure rescaling_figure();
// Lesson 10: the balanced merge tree of split-KV decode, each node's (m, l).
Figure merge_tree_figure();

}  // namespace flashlab::app::book
