#include "traces/html_viewer.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace flashlab::app {

extern const std::string_view kViewerTemplate;

namespace {

constexpr std::string_view kPlaceholder = "__FLASHLAB_TRACES__";

// Inside <script>, the text "</" could close the element early; JSON allows "<\/" instead.
std::string script_safe(std::string json) {
  for (auto at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3))
    json.replace(at, 2, "<\\/");
  return json;
}

}  // namespace

std::vector<Index> viewer_kv_tile_sizes(Index requested, Index n_k) {
  std::vector<Index> sizes{requested};
  for (Index Bc : {Index{2}, Index{4}, Index{8}, Index{16}, n_k})
    if (Bc <= n_k) sizes.push_back(Bc);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

void check_viewer_size(Index N, Index d) {
  if (N > kViewerMaxN || d > kViewerMaxD)
    throw cpu::InvalidArgument(fmt::format(
        "--html embeds every number of the trace, so it takes N <= {} and d <= {}; got N = {}, "
        "d = {}. Print the trace without --html, or write --json for a larger one",
        kViewerMaxN, kViewerMaxD, N, d));
}

std::string viewer_html(const std::vector<TileTrace>& traces, const std::string& title,
                        std::size_t initial) {
  nlohmann::json data{{"title", title}, {"initial", initial}, {"traces", nlohmann::json::array()}};
  for (const auto& trace : traces) data["traces"].push_back({{"events", to_json_events(trace)}});
  std::string page(kViewerTemplate);
  page.replace(page.find(kPlaceholder), kPlaceholder.size(), script_safe(data.dump()));
  return page;
}

std::string viewer_html(const TraceSetup& setup, const std::string& title) {
  check_viewer_size(setup.N, setup.d);
  std::vector<TileTrace> traces;
  std::size_t initial = 0;
  TraceSetup each = setup;
  for (Index Bc : viewer_kv_tile_sizes(setup.tiles.Bc, setup.N)) {
    if (Bc == setup.tiles.Bc) initial = traces.size();
    each.tiles.Bc = Bc;
    traces.push_back(trace_random(each));
  }
  return viewer_html(traces, title, initial);
}

}  // namespace flashlab::app
