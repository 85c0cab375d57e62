// What `flashlab book` takes from lesson 3: the problem its tile viewer page replays.
#pragma once

#include "traces/tile_trace.hpp"

namespace flashlab::app {

// The lesson's 24-token example with Bc = 4, as its step 2 traces it.
TraceSetup tiled_forward_viewer_setup();

}  // namespace flashlab::app
