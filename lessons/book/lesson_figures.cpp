#include "book/lesson_figures.hpp"

#include "03-tiled-forward/book_data.hpp"
#include "04-causal-masking/book_data.hpp"

namespace flashlab::app::book {

LessonExtras extras_for_lesson(int number, const MeasuredResults& measured) {
  switch (number) {
    case 0: return {{dataflow_figure()}, std::nullopt};
    case 3: return {{}, tiled_forward_viewer_setup()};
    case 4: return {{}, causal_viewer_setup()};
    case 5: return {io_sweep_figures(measured), std::nullopt};
    case 7: return {{warp_split_figure()}, std::nullopt};
    case 9: return {{rescaling_figure()}, std::nullopt};
    case 10: return {{merge_tree_figure()}, std::nullopt};
    default: return {};
  }
}

}  // namespace flashlab::app::book
