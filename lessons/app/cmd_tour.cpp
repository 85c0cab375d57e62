// `flashlab tour`: the worked example and the cost of S and P (lessons/tour/).
#include "commands.hpp"

#include "tour/tour.hpp"

#include <iostream>

namespace flashlab::app {

void add_tour_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tour", "A short tour: the 49/15 example tile by tile, and what S and P cost");
  cmd->callback([] { run_tour(std::cout); });
}

}  // namespace flashlab::app
