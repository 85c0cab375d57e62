#include "flashlab/sim/units.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

namespace flashlab::sim {

namespace {

constexpr double kKi = 1024.0;
constexpr double kK = 1000.0;

struct Unit {
  std::string_view suffix;
  double bytes;
};
constexpr std::array kUnits = {
    Unit{"B", 1.0},          Unit{"KiB", kKi},       Unit{"MiB", kKi * kKi},
    Unit{"GiB", kKi * kKi * kKi}, Unit{"KB", kK},    Unit{"MB", kK * kK},
    Unit{"GB", kK * kK * kK}, Unit{"", 1.0}};

[[noreturn]] void bad(std::string_view text, std::string_view what) {
  throw cpu::InvalidArgument(fmt::format(
      "'{}' is not a size in bytes ({}): write a positive number with an optional unit, "
      "e.g. 196608, 192KiB, 1.5MiB or 100KB",
      text, what));
}

static_assert(kMaxCapacityBytes == Bytes{1} << 50, "too_large() names it 1 PiB");

std::string too_large() {
  return fmt::format("more than 1 PiB = {} bytes, larger than any SRAM or L2",
                     kMaxCapacityBytes);
}

}  // namespace

Bytes parse_bytes(std::string_view text) {
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc{} || end == text.data()) bad(text, "no number at the start");
  const std::string_view suffix(end, text.data() + text.size() - end);
  for (const Unit& u : kUnits) {
    if (suffix != u.suffix) continue;
    const double bytes = number * u.bytes;
    if (!(bytes >= 1)) bad(text, "it must be at least one byte");
    if (bytes > static_cast<double>(kMaxCapacityBytes)) bad(text, too_large());
    if (bytes != std::floor(bytes)) bad(text, "not a whole number of bytes");
    return static_cast<Bytes>(bytes);
  }
  bad(text, "unknown unit; use B, KiB, MiB, GiB, KB, MB or GB");
}

Bytes parse_capacity(std::string_view text, DType dtype) {
  constexpr std::string_view kElements = "el";
  if (!text.ends_with(kElements)) return parse_bytes(text);
  const std::string_view count = text.substr(0, text.size() - kElements.size());
  Bytes elements = 0;
  const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), elements);
  const bool whole = end == count.data() + count.size() && !count.starts_with('-');
  if (whole && (ec == std::errc::result_out_of_range ||
                (ec == std::errc{} && elements > kMaxCapacityBytes / bytes_of(dtype))))
    throw cpu::InvalidArgument(fmt::format("'{}' is too many {} elements ({}): write at "
                                           "most {}el",
                                           text, to_string(dtype), too_large(),
                                           kMaxCapacityBytes / bytes_of(dtype)));
  if (ec != std::errc{} || !whole || elements < 1)
    throw cpu::InvalidArgument(fmt::format(
        "'{}' is not a number of elements: write a positive whole number before 'el', "
        "e.g. 98304el", text));
  return elements * bytes_of(dtype);
}

std::string format_bytes(double bytes) {
  constexpr std::array<std::string_view, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t k = 0;
  while (std::abs(bytes) >= kKi && k + 1 < kNames.size()) {
    bytes /= kKi;
    ++k;
  }
  if (k == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.1f} {}", bytes, kNames[k]);
}

}  // namespace flashlab::sim
