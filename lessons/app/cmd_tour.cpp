// `flashlab tour`: the first thing a newcomer runs (filled in below).
#include "commands.hpp"

namespace flashlab::app {

void add_tour_command(CLI::App& app) {
  app.add_subcommand("tour", "A short tour: the 49/15 example tile by tile, and what S and P cost");
}

}  // namespace flashlab::app
