// The simulated GPU memory: HBM (unbounded, every byte counted per tensor) and SRAM (a
// fixed capacity; a program that asks for more fails, naming the tile that did not fit),
// with an optional L2 between them that predicts which bytes reach HBM's DRAM.
//
// A program declares its HBM tensors, allocates its SRAM buffers up front as a kernel
// declares its shared memory, then moves tiles explicitly with load (HBM -> SRAM) and
// store (SRAM -> HBM), and reports what it computed on chip. The machine holds no values:
// the program keeps the numbers; the machine keeps the books.
#pragma once

#include "flashlab/cpu/options.hpp"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/trace.hpp"
#include "flashlab/sim/warp_store.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashlab::sim {

// Work done on chip. A matrix FLOP is one multiply or one add of a matrix product
// (2 per multiply-add); the rest are element-wise operations of the softmax.
struct OpCounts {
  std::int64_t matrix_flops = 0;  // S = Q K^T and W V (or P V)
  std::int64_t exp = 0;           // exp and log: the special-function unit
  std::int64_t max = 0;           // row maxima and max(m, rowmax)
  std::int64_t sum = 0;           // row sums of the weights
  std::int64_t rescale = 0;       // multiplications by alpha, beta or l
  std::int64_t divide = 0;        // normalisation O = U / l, P = W / l

  std::int64_t non_matrix() const { return exp + max + sum + rescale + divide; }
  OpCounts& operator+=(const OpCounts& o);
  OpCounts times(std::int64_t k) const;
};

// One HBM tensor and the bytes moved across its boundary.
struct TensorTraffic {
  std::string name{};
  DType dtype = DType::fp32;
  std::int64_t elements = 0;
  Bytes read = 0;          // HBM -> SRAM, as the two-level model counts it
  Bytes written = 0;       // SRAM -> HBM (the stores' sectors, for a tensor given its store)
  Bytes dram_read = 0;     // of those, what an L2 could not serve: HBM's own (DRAM) reads
  Bytes dram_written = 0;  // and writes (of data); equal to read and written without an L2,
                           // unless the tensor's stores touch more sectors than they fill
};

// Thrown when an SRAM buffer does not fit. what() names the buffer, its size, the
// capacity and what was already resident.
struct SramOverflow : std::runtime_error {
  SramOverflow(const std::string& message, std::string tile, Bytes capacity, Bytes in_use)
      : std::runtime_error(message), tile(std::move(tile)), capacity(capacity), in_use(in_use) {}
  std::string tile;
  Bytes capacity;
  Bytes in_use;
};

namespace detail {
class L2Cache;
}

class Machine {
 public:
  using TensorId = int;
  using BufferId = int;
  static constexpr Bytes kUnbounded = std::numeric_limits<Bytes>::max();

  // l2_capacity = 0: no L2, the paper's two-level model.
  // An L2 of l2_capacity bytes (0: none) that makes room by `replacement` (l2_policy.hpp),
  // one of home_partitions alike (Problem::l2_home_partitions), holding at most l2_dirty_cap
  // bytes dirty (0: no cap; Problem::l2_dirty_cap), in sets of l2_ways lines (the sets policy;
  // Problem::l2_ways).
  explicit Machine(Bytes sram_capacity, Bytes l2_capacity = 0,
                   L2Replacement replacement = L2Replacement::lru, std::uint64_t seed = 0,
                   int home_partitions = 1, Bytes l2_dirty_cap = 0, int l2_ways = kL2Ways);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // An HBM tensor of (rows, cols) elements.
  TensorId add_tensor(std::string name, cpu::Index rows, cpu::Index cols, DType dtype);
  // The warp store that writes tensor on a GPU: from then on its writes are booked as the
  // sectors those stores send out of the SMs (sim::bytes_out), not as bytes of data; its
  // DRAM bytes (and an L2's lines) stay the data. Without a call: bytes of data, as the
  // paper counts.
  void set_store(TensorId tensor, const WarpStore& store);

  // An SRAM buffer of (rows, cols) elements; role says what it holds, for error messages
  // ("the KV tile K_j"). Throws SramOverflow when it does not fit beside those resident.
  BufferId allocate(std::string name, std::string role, cpu::Index rows, cpu::Index cols,
                    DType dtype);

  // Rows [row0, row0 + rows) of tensor moved into (load) or out of (store) buffer.
  // times > 1 books that many identical transfers at once (count-only mode; not with an
  // L2, which must see which rows move).
  void load(BufferId buffer, TensorId tensor, cpu::Index row0, cpu::Index rows,
            TileCoord where, std::int64_t times = 1);
  void store(BufferId buffer, TensorId tensor, cpu::Index row0, cpu::Index rows,
             TileCoord where, std::int64_t times = 1);

  // A whole tensor read or written by an operator whose on-chip tiling the model leaves
  // out (the naive programs' library kernels): counted in HBM, no SRAM involved.
  void read_through(TensorId tensor);
  void write_through(TensorId tensor);
  // A piece of a tensor moved the same way: `bytes` from the start of row row0 (whole rows,
  // or the leading part of one row), `times` times. Through an L2 the `times` transfers are
  // this one piece again and again (the first may miss, the rest hit unless the piece is
  // larger than the L2); without an L2 they may be any pieces of that size.
  void read_through(TensorId tensor, cpu::Index row0, Bytes bytes, std::int64_t times = 1);
  void write_through(TensorId tensor, cpu::Index row0, Bytes bytes, std::int64_t times = 1);
  // A re-read of a piece the caller knows the L2 still holds (a library GEMM's operand,
  // which its resident blocks read together while they work through one output): booked into
  // the SMs, served by the L2, with no DRAM traffic and no change to the L2's order (no
  // bounds check either: the caller has read the piece through the L2 before). Without an L2,
  // where every read comes from DRAM, the same as read_through.
  void read_held_in_l2(TensorId tensor, cpu::Index row0, Bytes bytes, std::int64_t times = 1);

  // Work on SRAM-resident tiles. kind says whether a score tile was computed (full or
  // partial) or none (std::nullopt for work that is not a score tile, e.g. finalize).
  void compute(std::string_view what, const OpCounts& ops, TileCoord where,
               std::optional<cpu::TileKind> kind, std::int64_t times = 1,
               const cpu::SoftmaxState<float>* state = nullptr);
  // A tile that lies wholly in the causal future: nothing moved, nothing computed.
  void skip(TileCoord where, std::int64_t times = 1);

  // Writes back what the L2 still holds dirty: call once, when the program is done.
  void finish();
  // Between two kernels measured by Nsight Compute (its default --cache-control all): the
  // L2 written back and emptied outside either kernel, so the next one starts cold and the
  // write-backs count as neither's DRAM writes. Nothing without an L2. No event is traced
  // for it (the L2's lines simply are not there when the next kernel looks).
  void empty_l2_between_kernels();

  // Everything the machine has counted so far. A count-only run with an L2 books an outer
  // loop's iterations one by one until the L2 repeats its state (l2_signature), then books
  // the remaining alike iterations at once: add_books(before, after, k) adds k times what
  // was counted between two snapshots, and shift_l2 moves the L2's tiles to match.
  struct Books {
    std::vector<TensorTraffic> tensors;
    OpCounts ops;
    cpu::TileCounts tiles;
    std::int64_t steps = 0;
  };
  Books books() const { return {tensors_, ops_, tiles_, steps_}; }
  void add_books(const Books& before, const Books& after, std::int64_t k);
  // What the L2 holds, most recently used first, one entry per tile (tensor, first row,
  // bytes, dirty), with the rows of the `moving` tensors counted from row `origin`. Two
  // equal signatures taken at origins one iteration apart mean that the L2 is in the same
  // state relative to the outer loop. Empty without an L2.
  std::vector<std::int64_t> l2_signature(const std::vector<TensorId>& moving,
                                         cpu::Index origin) const;
  // Moves the L2's tiles of the `moving` tensors `rows` rows further down their tensors.
  void shift_l2(const std::vector<TensorId>& moving, cpu::Index rows);

  void set_trace(TraceSink sink) { trace_ = std::move(sink); }
  bool has_l2() const { return l2_ != nullptr; }
  bool tracing() const { return static_cast<bool>(trace_); }

  const std::vector<TensorTraffic>& traffic() const { return tensors_; }
  const OpCounts& ops() const { return ops_; }
  const cpu::TileCounts& tiles() const { return tiles_; }
  Bytes sram_capacity() const { return capacity_; }
  Bytes sram_in_use() const { return in_use_; }
  Bytes peak_sram() const { return peak_; }
  // Loads, stores, computes and skips so far, each group of identical steps counted `times`
  // over: the events a trace of the run lists.
  std::int64_t steps() const { return steps_; }

 private:
  struct Buffer {
    std::string name, role;
    cpu::Index rows, cols;
    DType dtype;
    Bytes bytes() const { return rows * cols * bytes_of(dtype); }
  };
  Bytes transfer_bytes(BufferId buffer, TensorId tensor, cpu::Index rows) const;
  void emit(EventKind kind, TileCoord where, std::string_view tensor, Bytes bytes,
            std::int64_t times, const cpu::SoftmaxState<float>* state = nullptr);
  [[noreturn]] void overflow(const Buffer& b) const;
  // Books rows [row0, row0 + rows) of tensor, `times` over, on the HBM side of the L2.
  void move_rows(TensorId tensor, cpu::Index row0, cpu::Index rows, bool write,
                 std::int64_t times);
  // Books `bytes` from row row0 on, `times` over (the same piece again, through an L2).
  void move_bytes(TensorId tensor, cpu::Index row0, Bytes bytes, bool write, std::int64_t times);
  // The *_through of a piece: checks that it lies inside the tensor, books it, emits it.
  void through(TensorId tensor, cpu::Index row0, Bytes bytes, bool write, std::int64_t times);

  Bytes capacity_, in_use_ = 0, peak_ = 0;
  std::vector<TensorTraffic> tensors_;
  std::vector<cpu::Index> tensor_cols_;
  std::vector<std::optional<WarpStore>> tensor_stores_;
  std::vector<Buffer> buffers_;
  OpCounts ops_;
  cpu::TileCounts tiles_;
  TraceSink trace_;
  std::int64_t step_ = 0;   // events emitted (a group of steps is one)
  std::int64_t steps_ = 0;  // steps booked (a group of steps is `times`)
  std::unique_ptr<detail::L2Cache> l2_;
};

}  // namespace flashlab::sim
