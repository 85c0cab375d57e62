// Lesson 8's timeline model: every unit runs one task at a time, every task starts after
// its inputs, and the totals match what the stage times imply in closed form.
#include "08-pipelining/timeline.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace flashlab::app::timeline;

namespace {

// Unequal stage times, none a multiple of another, so that no tie hides an ordering bug.
constexpr StageTimes kTimes{.load = 2.0, .mma = 0.8, .softmax = 0.55};
constexpr Index kTiles = 13;
constexpr double kExact = 1e-9;  // sums of a few dozen doubles

std::vector<Task> ran(Arrangement a, Index buffers = kDoubleBuffer) {
  auto tasks = schedule(a, kTimes, kTiles, a == Arrangement::sequential ? 1 : buffers);
  run(tasks);
  return tasks;
}

}  // namespace

TEST_CASE("sequential: every task waits for the previous one") {
  const auto s = summarise(ran(Arrangement::sequential));
  CHECK(s.seconds == doctest::Approx(kTiles * (kTimes.load + 2 * kTimes.mma + kTimes.softmax)).epsilon(kExact));
}

TEST_CASE("every arrangement: units never double-booked, dependencies respected, work conserved") {
  for (const auto a : {Arrangement::sequential, Arrangement::loads_overlapped,
                       Arrangement::intra_overlap, Arrangement::ping_pong}) {
    CAPTURE(to_string(a));
    const auto tasks = ran(a);
    for (int u = 0; u < kUnits; ++u) {
      double free_at = 0;
      for (const auto& t : tasks)
        if (int(t.unit) == u) {
          CHECK(t.start >= free_at - kExact);
          free_at = t.end;
        }
    }
    for (const auto& t : tasks)
      for (int dep : t.after) CHECK(t.start >= tasks[std::size_t(dep)].end - kExact);
    const auto s = summarise(tasks);
    const double groups = query_tiles(a);
    CHECK(s.busy[int(Unit::tensor)] == doctest::Approx(groups * kTiles * 2 * kTimes.mma));
    CHECK(s.busy[int(Unit::exp)] == doctest::Approx(groups * kTiles * kTimes.softmax));
    CHECK(s.busy[int(Unit::copy)] == doctest::Approx(kTiles * kTimes.load));
    // No arrangement can beat its busiest unit.
    CHECK(s.seconds >= *std::max_element(s.busy, s.busy + kUnits) - kExact);
  }
}

TEST_CASE("overlap helps: overlapped loads beat sequential, ping-pong beats both per query tile") {
  const double sequential = summarise(ran(Arrangement::sequential)).seconds;
  const double overlapped = summarise(ran(Arrangement::loads_overlapped)).seconds;
  const double ping_pong = summarise(ran(Arrangement::ping_pong)).seconds / 2;
  CHECK(overlapped < sequential);
  CHECK(ping_pong < overlapped);
  // Here the compute chain S, softmax, PV (2.15) outlasts a load (2.0): after the first load
  // the chain runs back to back, each next tile already loaded.
  const double chain = 2 * kTimes.mma + kTimes.softmax;
  REQUIRE(chain > kTimes.load);
  CHECK(overlapped == doctest::Approx(kTimes.load + kTiles * chain).epsilon(kExact));
}

TEST_CASE("bad schedules are refused") {
  std::vector<Task> tasks{{Kind::load, Unit::copy, 0, 0, 1.0, {1}}, {Kind::S, Unit::tensor, 0, 0, 1.0, {}}};
  CHECK_THROWS_WITH_AS(run(tasks), doctest::Contains("only wait for tasks issued before it"),
                       flashlab::cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(schedule(Arrangement::ping_pong, kTimes, kTiles, 0),
                       doctest::Contains("at least one buffer"), flashlab::cpu::InvalidArgument);
}
