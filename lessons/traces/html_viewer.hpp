// The HTML tile-scan viewer: lessons/traces/viewer.html with traces embedded, one page
// that replays them in any browser with no network and no server.
#pragma once

#include "traces/tile_trace.hpp"

#include <string>
#include <vector>

namespace flashlab::app {

// The page, with the traces (one per KV tile size, in the order given) embedded as JSON;
// it opens showing traces[initial].
std::string viewer_html(const std::vector<TileTrace>& traces, const std::string& title,
                        std::size_t initial = 0);

// The page for one random problem: a trace for each of viewer_kv_tile_sizes(setup's Bc, N),
// opening on setup's own Bc. Throws as check_viewer_size does.
std::string viewer_html(const TraceSetup& setup, const std::string& title);

// The KV tile sizes a page offers for a problem of n_k keys: the one asked for, and
// 2, 4, 8, 16 and n_k where they fit, in increasing order.
std::vector<Index> viewer_kv_tile_sizes(Index requested, Index n_k);

// A page holds every number of every trace: keep it small enough to open quickly.
inline constexpr Index kViewerMaxN = 256;
inline constexpr Index kViewerMaxD = 64;

// Throws cpu::InvalidArgument naming the limits when N or d exceed them.
void check_viewer_size(Index N, Index d);

}  // namespace flashlab::app
