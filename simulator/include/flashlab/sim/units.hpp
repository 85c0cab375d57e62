// Byte sizes as people write them ("192KiB", "1.5MiB", "4096") and as tables print them.
#pragma once

#include "flashlab/sim/dtype.hpp"

#include <string>
#include <string_view>

namespace flashlab::sim {

// The largest size parse_bytes and parse_capacity take: 1 PiB, larger than any SRAM or
// L2, and far from where a count of bytes would overflow.
constexpr Bytes kMaxCapacityBytes = Bytes{1} << 50;

// A whole number of bytes with an optional unit: B, KiB, MiB, GiB (powers of 1024) or
// KB, MB, GB (powers of 1000). Throws cpu::InvalidArgument for anything else, for a
// negative or zero size, for a fraction of a byte, or for more than kMaxCapacityBytes.
Bytes parse_bytes(std::string_view text);

// An SRAM or L2 capacity: a size in bytes as parse_bytes takes it, or a whole number of
// elements of dtype written with the suffix "el" ("98304el" is 192 KiB at bf16); at most
// kMaxCapacityBytes either way.
Bytes parse_capacity(std::string_view text, DType dtype);

// 201326592 -> "192.0 MiB"; below 1 KiB, "512 B".
std::string format_bytes(double bytes);

}  // namespace flashlab::sim
