// flashlab: FlashAttention three ways (exact CPU numerics, a memory simulator, CUDA kernels).
#include "commands.hpp"

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"flashlab: learn FlashAttention by running it three ways", "flashlab"};
  app.require_subcommand(1);
  flashlab::app::add_tour_command(app);
  flashlab::app::add_lessons_command(app);
  flashlab::app::add_lesson_command(app);
  flashlab::app::add_trace_command(app);
  flashlab::app::add_simulate_command(app);
  flashlab::app::add_sweep_command(app);
  flashlab::app::add_exercise_command(app);
  flashlab::app::add_check_command(app);
  flashlab::app::add_compare_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {  // bad input reaching the library: one clear line
    std::cerr << "flashlab: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
