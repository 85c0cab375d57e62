// What `flashlab book` takes from lesson 4: the problem its tile viewer page replays.
#pragma once

#include "traces/tile_trace.hpp"

namespace flashlab::app {

// The lesson's causal 24-token example in tiles of 4 x 4, as its step 2 traces it.
TraceSetup causal_viewer_setup();

}  // namespace flashlab::app
