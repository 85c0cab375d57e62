#include "flashlab/sim/sweep.hpp"

#include "flashlab/sim/simulate.hpp"

#include <fmt/format.h>

namespace flashlab::sim {

std::vector<Report> run_sweep(const SweepSpec& spec, const SweepProgress& progress) {
  const std::size_t total =
      spec.N.size() * spec.d.size() * spec.sram_bytes.size() * spec.algorithms.size();
  std::vector<Report> reports;
  reports.reserve(total);
  for (const cpu::Index d : spec.d)
    for (const Bytes sram : spec.sram_bytes)
      for (const cpu::Index N : spec.N)
        for (const Algorithm a : spec.algorithms) {
          Problem p;
          p.N = N;
          p.d = d;
          p.dtype = spec.dtype;
          p.causal = spec.causal;
          p.sram_bytes = sram;
          p.tiles = spec.tiles;
          p.l2_bytes = spec.l2_bytes;
          try {
            reports.push_back(count(a, p));
          } catch (const std::exception& e) {
            throw cpu::InvalidArgument(fmt::format("sweep point {} at N = {}, d = {}, SRAM = {} "
                                                   "bytes: {}",
                                                   to_string(a), N, d, sram, e.what()));
          }
          if (progress) progress(reports.size(), total);
        }
  return reports;
}

void write_csv(std::ostream& out, const std::vector<Report>& reports,
               const HardwareProfile* profile) {
  out << "algorithm,N,d,dtype,causal,sram_bytes,M,Br,Bc,bytes_read,bytes_written,bytes_total,"
         "matrix_flops,non_matrix_ops,exp,peak_sram_bytes,tiles_computed,tiles_skipped,"
         "l2_bytes,dram_bytes_total";
  out << (profile ? ",bound_s,binds\n" : "\n");
  for (const Report& r : reports) {
    const Problem& p = r.problem;
    const cpu::Index Br = r.tiles ? r.tiles->tiles.Br : 0, Bc = r.tiles ? r.tiles->tiles.Bc : 0;
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},", to_string(r.algorithm), p.N, p.d,
                       to_string(p.dtype), cpu::to_string(p.causal), p.sram_bytes, p.M(), Br, Bc,
                       r.bytes_read(), r.bytes_written(), r.bytes_total());
    out << fmt::format("{},{},{},{},{},{},{},{}", r.ops.matrix_flops, r.ops.non_matrix(),
                       r.ops.exp, r.peak_sram, r.tile_counts.computed, r.tile_counts.skipped,
                       p.l2_bytes, r.dram_total());
    if (profile) {
      const Bound b = roofline(r, *profile);
      out << fmt::format(",{:.6g},{}", b.seconds(), b.binding());
    }
    out << '\n';
  }
}

}  // namespace flashlab::sim
