// PassReport: sums, look-ups, the bound, JSON and the terminal table of a kernel pass's mirror.
#include "flashlab/sim/kernel_pass.hpp"

#include "flashlab/sim/units.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace flashlab::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A grid model's figures, one a launch (to_json, format_pass_table): a caller's mistake else.
void check_grid_rows(const PassReport& r, const std::vector<LaunchDram>* grid) {
  if (grid && grid->size() != r.launches.size())
    throw std::invalid_argument(fmt::format(
        "{} DRAM figures of the grid model for the {} mirror's {} launches: give one a launch "
        "(predicted_dram's)",
        grid->size(), r.pass, r.launches.size()));
}

}  // namespace

std::int64_t Launch::waves(int sm_count) const {
  return ceil_div(blocks, std::int64_t{sm_count} * per_sm);
}

std::int64_t Launch::busy_sms(int sm_count) const {
  return std::min<std::int64_t>(sm_count, working);
}

Bytes PassReport::bytes_read() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const PassTensor& t) { return s + t.read; });
}

Bytes PassReport::bytes_written() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const PassTensor& t) { return s + t.written; });
}

Bytes PassReport::bytes_written_by_tma() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const PassTensor& t) { return s + t.written_by_tma; });
}

Bytes PassReport::bytes_written_by_atomics() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const PassTensor& t) { return s + t.written_by_atomics; });
}

const PassTensor& PassReport::tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw std::out_of_range(fmt::format("the {} mirror has no HBM tensor named '{}'", pass, name));
}

const Launch& PassReport::launch(std::string_view name) const {
  for (const auto& l : launches)
    if (l.name == name) return l;
  throw std::out_of_range(fmt::format("the {} mirror launches no kernel named '{}'", pass, name));
}

CompulsoryDram compulsory_dram(const Launch& launch, Bytes dirty_room) {
  const auto sum = [](const std::vector<Footprint>& f) {
    return std::accumulate(f.begin(), f.end(), Bytes{0},
                           [](Bytes s, const Footprint& t) { return s + t.bytes; });
  };
  return {sum(launch.reads), std::max<Bytes>(0, sum(launch.writes) - dirty_room)};
}

std::optional<CompulsoryDram> compulsory_dram(const PassReport& report, Bytes dirty_room) {
  CompulsoryDram all;
  for (const Launch& l : report.launches) {
    if (l.reads.empty() && l.writes.empty()) return std::nullopt;
    const CompulsoryDram one = compulsory_dram(l, dirty_room);
    all.read += one.read;
    all.written += one.written;
  }
  return all;
}

std::optional<std::vector<LaunchDram>> predicted_dram(const PassReport& report,
                                                      const HardwareProfile& gpu,
                                                      std::optional<L2Replacement> replacement) {
  std::vector<LaunchDram> launches;
  for (const Launch& l : report.launches) {
    if (l.grid) {
      const GridProblem on = paced_on_gpu(gpu, *l.grid);
      const GridReport g = run_grid(replacement ? with_replacement(gpu, on, *replacement) : on);
      launches.push_back({g.dram_read(), g.dram_written(), true, g.left_dirty()});
      continue;
    }
    if (l.reads.empty() && l.writes.empty()) return std::nullopt;
    const CompulsoryDram floor = compulsory_dram(l, l2_dirty_room(gpu));
    launches.push_back({floor.read, floor.written, false});
  }
  return launches;
}

CompulsoryDram total(const std::vector<LaunchDram>& launches) {
  CompulsoryDram all;
  for (const LaunchDram& l : launches) all.read += l.read, all.written += l.written;
  return all;
}

Bound roofline(const PassReport& report, const HardwareProfile& profile) {
  return roofline(report.ops, report.bytes_total(), profile);
}

nlohmann::ordered_json to_json(const PassReport& r, const HardwareProfile& profile,
                               const std::vector<LaunchDram>* grid) {
  using json = nlohmann::ordered_json;
  check_grid_rows(r, grid);
  json launches = json::array();
  const bool floors = compulsory_dram(r, l2_dirty_room(profile)).has_value();
  for (std::size_t k = 0; k < r.launches.size(); ++k) {
    const Launch& l = r.launches[k];
    launches.push_back({{"name", l.name},
                        {"blocks", l.blocks},
                        {"working_blocks", l.working},
                        {"threads", l.threads},
                        {"waves", l.waves(profile.sm_count)},
                        {"busy_sms", l.busy_sms(profile.sm_count)}});
    if (floors) {
      const CompulsoryDram f = compulsory_dram(l, l2_dirty_room(profile));
      launches.back()["dram_floor"] = {{"read", f.read}, {"written", f.written}};
    }
    if (grid && (*grid)[k].from_grid)
      launches.back()["dram_grid"] = {{"read", (*grid)[k].read},
                                      {"written", (*grid)[k].written},
                                      {"left_dirty", (*grid)[k].left_dirty}};
  }
  json tensors = json::array();
  for (const auto& t : r.tensors)
    tensors.push_back({{"name", t.name},
                       {"type", t.type},
                       {"elements", t.elements},
                       {"bytes_read", t.read},
                       {"bytes_written", t.written}});
  const Bound b = roofline(r, profile);
  return {{"pass", r.pass},
          {"kernel", r.label},
          {"launches", std::move(launches)},
          {"tensors", std::move(tensors)},
          {"peak_sram_bytes", r.peak_sram},
          {"bytes",
           {{"read", r.bytes_read()}, {"written", r.bytes_written()}, {"total", r.bytes_total()}}},
          {"ops",
           {{"matrix_flops", r.ops.matrix_flops},
            {"exp", r.ops.exp},
            {"max", r.ops.max},
            {"sum", r.ops.sum},
            {"rescale", r.ops.rescale},
            {"divide", r.ops.divide},
            {"non_matrix", r.ops.non_matrix()}}},
          {"bound",
           {{"profile", profile.name},
            {"seconds", b.seconds()},
            {"binds", b.binding()},
            {"matrix_s", b.matrix_s},
            {"exp_s", b.exp_s},
            {"memory_s", b.memory_s}}}};
}

namespace {

using Row = std::vector<std::string>;

std::string aligned(const std::vector<Row>& rows) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const Row& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const Row& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c)
      out += c == 0 ? fmt::format("{:<{}}", row[c], width[c])
                    : fmt::format("  {:>{}}", row[c], width[c]);
    out += '\n';
  }
  return out;
}

std::string bytes(Bytes b) { return format_bytes(static_cast<double>(b)); }

}  // namespace

std::string format_pass_table(const PassReport& r, const HardwareProfile& profile,
                              const std::vector<LaunchDram>* grid) {
  check_grid_rows(r, grid);
  // Each launch's DRAM floor from a cold L2 (compulsory_dram), where the mirror books it.
  const Bytes room = l2_dirty_room(profile);
  const bool floors = compulsory_dram(r, room).has_value();
  std::vector<Row> launches{{"kernel", "blocks", "with work", "waves", "busy SMs"}};
  if (floors) launches.front().insert(launches.front().end(), {"DRAM read", "DRAM written"});
  if (grid)
    launches.front().insert(launches.front().end(), {"grid model read", "written", "left dirty"});
  for (std::size_t k = 0; k < r.launches.size(); ++k) {
    const Launch& l = r.launches[k];
    launches.push_back({l.name, std::to_string(l.blocks), std::to_string(l.working),
                        std::to_string(l.waves(profile.sm_count)),
                        fmt::format("{} of {}", l.busy_sms(profile.sm_count), profile.sm_count)});
    if (floors) {
      const CompulsoryDram f = compulsory_dram(l, room);
      launches.back().insert(launches.back().end(), {bytes(f.read), bytes(f.written)});
    }
    if (grid) {
      const LaunchDram& g = (*grid)[k];
      launches.back().insert(launches.back().end(), {g.from_grid ? bytes(g.read) : "-",
                                                     g.from_grid ? bytes(g.written) : "-",
                                                     g.from_grid ? bytes(g.left_dirty) : "-"});
    }
  }
  const std::string floor_note =
      floors ? fmt::format(
                   "DRAM: each launch from a cold L2, every sector it reads once and "
                   "what it writes beyond the {} the L2 holds dirty (a floor)\n",
                   bytes(room))
             : "";
  const std::string grid_note =
      grid ? fmt::format(
                 "grid model: each launch's blocks in waves through {}'s L2 ({} partitions, "
                 "hashed sets), what reaches DRAM while it runs and what it leaves dirty in the "
                 "L2 (- where the launch has no grid)\n",
                 profile.name, profile.l2_partitions)
           : "";
  std::vector<Row> tensors{{"tensor", "read", "written"}};
  for (const auto& t : r.tensors) tensors.push_back({t.name, bytes(t.read), bytes(t.written)});
  tensors.push_back({"total", bytes(r.bytes_read()), bytes(r.bytes_written())});
  const Bound b = roofline(r, profile);
  const std::string sram =
      r.peak_sram > 0 ? fmt::format("SRAM per block {}; ", bytes(r.peak_sram)) : "";
  return fmt::format(
      "{} mirror: {}\n\n{}{}{}\nBytes per tensor (between the L2 and the SMs)\n{}\n"
      "{}matrix FLOPs {:.4g}, other operations {:.4g}; bound on {} {:.4g} s ({} binds)\n",
      r.pass, r.label, aligned(launches), floor_note, grid_note, aligned(tensors), sram,
      double(r.ops.matrix_flops), double(r.ops.non_matrix()), profile.name, b.seconds(),
      b.binding());
}

void check_mirror_size(std::string_view mirror, std::string_view name, cpu::Index value,
                       cpu::Index low, cpu::Index max) {
  if (value < low || value > max)
    throw cpu::InvalidArgument(
        fmt::format("{} = {} is out of range: the {} mirror takes {} <= {} <= {}", name, value,
                    mirror, low, name, max));
}

void check_mirror_heads(cpu::Index batch, cpu::Index heads_q, cpu::Index heads_kv) {
  if (heads_q % heads_kv != 0)
    throw cpu::InvalidArgument(fmt::format(
        "heads_kv = {} does not divide heads_q = {}: each KV head serves the same number of "
        "query heads (GQA), so heads_q must be a multiple of heads_kv",
        heads_kv, heads_q));
  if (batch * heads_q > kMirrorMaxHeadsInAll)
    throw cpu::InvalidArgument(
        fmt::format("batch x heads_q = {} x {} is more than the mirror takes ({})", batch, heads_q,
                    kMirrorMaxHeadsInAll));
}

}  // namespace flashlab::sim
