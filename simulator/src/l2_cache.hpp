// An L2 between HBM and SRAM: least-recently-used whole tensor rows, write-back and
// write-allocate. It turns the SRAM's traffic (what the two-level model counts) into the
// traffic that reaches HBM itself (what a GPU's DRAM counters report). Private to simulator/.
//
// The programs run one tile after another, as one SM would; a GPU runs a tile per SM at
// once, and tiles in flight together share what the L2 holds. So where the data that a
// program re-reads outgrows the L2, this model misses more often than a GPU does.
#pragma once

#include "flashlab/sim/machine.hpp"

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace flashlab::sim::detail {

class L2Cache {
 public:
  explicit L2Cache(Bytes capacity) : capacity_(capacity) {}

  // One row of a tensor moving between the L2 and SRAM. A read that misses fetches the
  // row from HBM; a write allocates the row without fetching it (the row is written
  // whole) and marks it dirty. Rows larger than the whole L2 go straight to HBM. Evicted
  // dirty rows are written back. What reaches HBM is booked in tensors[t].dram_read and
  // .dram_written.
  void access(int tensor, std::int64_t row, Bytes row_bytes, bool write, std::vector<TensorTraffic>& tensors);

  // Writes every dirty row back: where the data ends up when the program is done.
  void flush(std::vector<TensorTraffic>& tensors);

 private:
  struct Line {
    std::uint64_t key;
    int tensor;
    Bytes bytes;
    bool dirty;
  };
  void evict_until_fits(Bytes bytes, std::vector<TensorTraffic>& tensors);

  Bytes capacity_, in_use_ = 0;
  std::list<Line> lru_;  // front: most recently used
  std::unordered_map<std::uint64_t, std::list<Line>::iterator> where_;
};

}  // namespace flashlab::sim::detail
