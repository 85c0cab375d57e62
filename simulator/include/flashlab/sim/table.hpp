// The reports of several programs on one problem, as aligned text tables.
#pragma once

#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"

#include <span>
#include <string>

namespace flashlab::sim {

// A summary (one row per program: Br x Bc, tiles, HBM bytes, work, peak SRAM, the bytes
// past the L2 if there is one and, with a profile, the bound and the term that binds
// it), then the bytes read and written per
// HBM tensor, one column per program. The reports should share one problem.
std::string format_table(std::span<const Report> reports, const HardwareProfile* profile);

}  // namespace flashlab::sim
