// The viewer page as text: the traces are embedded whole, safely, and the page needs nothing
// from the network. (Its behaviour in a browser is viewer_browser_test.sh's job.)
#include "traces/html_viewer.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace flashlab;

namespace {

// The JSON between the traces' <script> tags.
nlohmann::json embedded(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"traces\">";
  const auto begin = page.find(open) + open.size();
  return nlohmann::json::parse(page.substr(begin, page.find("</script>", begin) - begin));
}

}  // namespace

TEST_CASE("the page embeds one trace per KV tile size, every event of each") {
  std::vector<app::TileTrace> traces;
  for (app::Index Bc : app::viewer_kv_tile_sizes(4, 24))
    traces.push_back(app::trace_random({.N = 24, .d = 4, .tiles = {4, Bc}}));
  const std::size_t initial = traces.size() - 1;
  const std::string page = app::viewer_html(traces, "a <title> with </script> in it", initial);
  const auto data = embedded(page);
  CHECK(data["initial"] == initial);
  REQUIRE(data["traces"].size() == traces.size());
  for (std::size_t k = 0; k < traces.size(); ++k)
    CHECK(data["traces"][k]["events"].size() == app::to_json_events(traces[k]).size());
  CHECK(data["title"] == "a <title> with </script> in it");  // escaped, then read back whole
  CHECK(page.find("__FLASHLAB_TRACES__") == std::string::npos);
  CHECK(page.find("http://") == std::string::npos);   // nothing fetched from anywhere
  CHECK(page.find("https://") == std::string::npos);
}

TEST_CASE("the KV tile sizes offered: the one asked for and the powers of two that fit") {
  CHECK(app::viewer_kv_tile_sizes(4, 24) == std::vector<app::Index>{2, 4, 8, 16, 24});
  CHECK(app::viewer_kv_tile_sizes(5, 6) == std::vector<app::Index>{2, 4, 5, 6});
  CHECK(app::viewer_kv_tile_sizes(1, 1) == std::vector<app::Index>{1});
}

TEST_CASE("a problem too big for a page is refused, naming the limits") {
  CHECK_THROWS_WITH_AS(app::check_viewer_size(app::kViewerMaxN + 1, 4),
                       doctest::Contains("N <= 256 and d <= 64"), cpu::InvalidArgument);
  CHECK_NOTHROW(app::check_viewer_size(app::kViewerMaxN, app::kViewerMaxD));
}
