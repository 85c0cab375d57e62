#include "flashlab/sim/machine.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/sim/units.hpp"

#include "l2_cache.hpp"

#include <algorithm>
#include <sstream>

namespace flashlab::sim {

OpCounts& OpCounts::operator+=(const OpCounts& o) {
  constexpr std::string_view kWhat = "an operation count";
  matrix_flops = cpu::checked_add(matrix_flops, o.matrix_flops, kWhat);
  exp = cpu::checked_add(exp, o.exp, kWhat);
  max = cpu::checked_add(max, o.max, kWhat);
  sum = cpu::checked_add(sum, o.sum, kWhat);
  rescale = cpu::checked_add(rescale, o.rescale, kWhat);
  divide = cpu::checked_add(divide, o.divide, kWhat);
  return *this;
}

OpCounts OpCounts::times(std::int64_t k) const {
  constexpr std::string_view kWhat = "an operation count";
  return {cpu::checked_mul(matrix_flops, k, kWhat), cpu::checked_mul(exp, k, kWhat),
          cpu::checked_mul(max, k, kWhat),          cpu::checked_mul(sum, k, kWhat),
          cpu::checked_mul(rescale, k, kWhat),      cpu::checked_mul(divide, k, kWhat)};
}

Machine::Machine(Bytes sram_capacity, Bytes l2_capacity, L2Replacement replacement,
                 std::uint64_t seed, int home_partitions, Bytes l2_dirty_cap, int l2_ways)
    : capacity_(sram_capacity),
      l2_(l2_capacity > 0
              ? std::make_unique<detail::L2Cache>(l2_capacity, 0, replacement, seed,
                                                  home_partitions, l2_dirty_cap, l2_ways)
              : nullptr) {}

Machine::~Machine() = default;

Machine::TensorId Machine::add_tensor(std::string name, cpu::Index rows, cpu::Index cols,
                                      DType dtype) {
  const cpu::Index elements = cpu::checked_product({rows, cols}, "the elements of " + name);
  cpu::checked_mul(elements, bytes_of(dtype), "the bytes of " + name);
  tensors_.push_back({std::move(name), dtype, elements});
  tensor_cols_.push_back(cols);
  tensor_stores_.emplace_back();
  return static_cast<TensorId>(tensors_.size() - 1);
}

void Machine::set_store(TensorId tensor, const WarpStore& store) {
  check(store);
  tensor_stores_.at(tensor) = store;
}

Machine::BufferId Machine::allocate(std::string name, std::string role, cpu::Index rows,
                                    cpu::Index cols, DType dtype) {
  cpu::checked_product({rows, cols, bytes_of(dtype)}, "the bytes of the SRAM buffer " + name);
  Buffer b{std::move(name), std::move(role), rows, cols, dtype};
  if (b.bytes() > capacity_ - in_use_) overflow(b);
  in_use_ += b.bytes();
  peak_ = std::max(peak_, in_use_);
  buffers_.push_back(std::move(b));
  return static_cast<BufferId>(buffers_.size() - 1);
}

void Machine::overflow(const Buffer& b) const {
  std::ostringstream why;
  why << "SRAM overflow: " << b.name << " (" << b.role << ": " << b.rows << " x " << b.cols
      << " " << to_string(b.dtype) << " = " << b.bytes() << " bytes) does not fit; the SRAM "
      << "holds " << capacity_ << " bytes (" << format_bytes(static_cast<double>(capacity_))
      << ") and " << in_use_ << " are already in use";
  if (!buffers_.empty()) {
    why << " by";
    for (const auto& r : buffers_) why << " " << r.name;
  }
  why << "; choose smaller tiles (Br, Bc) or a larger SRAM";
  throw SramOverflow(why.str(), b.name, capacity_, in_use_);
}

Bytes Machine::transfer_bytes(BufferId buffer, TensorId tensor, cpu::Index rows) const {
  const Buffer& b = buffers_.at(buffer);
  const cpu::Index cols = tensor_cols_.at(tensor);
  if (rows > b.rows || cols != b.cols)
    throw std::logic_error("a program moved " + std::to_string(rows) + " x " +
                           std::to_string(cols) + " elements of " + tensors_[tensor].name +
                           " through " + b.name + ", which holds " + std::to_string(b.rows) +
                           " x " + std::to_string(b.cols));
  return rows * cols * bytes_of(tensors_[tensor].dtype);
}

void Machine::move_rows(TensorId tensor, cpu::Index row0, cpu::Index rows, bool write,
                        std::int64_t times) {
  if (l2_ && times != 1) throw std::logic_error("grouped steps cannot go through an L2");
  const Bytes row_bytes = tensor_cols_[tensor] * bytes_of(tensors_[tensor].dtype);
  move_bytes(tensor, row0, cpu::checked_mul(rows, row_bytes, "the bytes of a tile"), write,
             times);
}

void Machine::move_bytes(TensorId tensor, cpu::Index row0, Bytes bytes, bool write,
                         std::int64_t times) {
  TensorTraffic& t = tensors_[tensor];
  constexpr std::string_view kWhat = "the bytes a tensor moves";  // no string built per step
  const Bytes total = cpu::checked_mul(bytes, times, kWhat);
  // Out of the SMs a store costs the sectors it touches (warp_store.hpp).
  const std::optional<WarpStore>& store = tensor_stores_[tensor];
  const Bytes sm_total =
      write && store ? cpu::checked_mul(bytes_out(*store, bytes), times, kWhat) : total;
  Bytes& moved = write ? t.written : t.read;
  moved = cpu::checked_add(moved, sm_total, kWhat);
  if (!l2_) {
    Bytes& dram = write ? t.dram_written : t.dram_read;
    dram = cpu::checked_add(dram, total, kWhat);
    return;
  }
  l2_->access(tensor, row0, bytes, write, tensors_, times);
}

void Machine::load(BufferId buffer, TensorId tensor, cpu::Index row0, cpu::Index rows,
                   TileCoord where, std::int64_t times) {
  const Bytes bytes = transfer_bytes(buffer, tensor, rows);
  move_rows(tensor, row0, rows, /*write=*/false, times);
  emit(EventKind::load, where, tensors_[tensor].name, bytes, times);
}

void Machine::store(BufferId buffer, TensorId tensor, cpu::Index row0, cpu::Index rows,
                    TileCoord where, std::int64_t times) {
  const Bytes bytes = transfer_bytes(buffer, tensor, rows);
  move_rows(tensor, row0, rows, /*write=*/true, times);
  emit(EventKind::store, where, tensors_[tensor].name, bytes, times);
}

void Machine::read_through(TensorId tensor) {
  const TensorTraffic& t = tensors_.at(tensor);
  const cpu::Index rows = t.elements / tensor_cols_[tensor];
  move_rows(tensor, 0, rows, /*write=*/false, 1);
  emit(EventKind::load, {}, t.name, t.elements * bytes_of(t.dtype), 1);
}

void Machine::write_through(TensorId tensor) {
  const TensorTraffic& t = tensors_.at(tensor);
  const cpu::Index rows = t.elements / tensor_cols_[tensor];
  move_rows(tensor, 0, rows, /*write=*/true, 1);
  emit(EventKind::store, {}, t.name, t.elements * bytes_of(t.dtype), 1);
}

void Machine::read_through(TensorId tensor, cpu::Index row0, Bytes bytes, std::int64_t times) {
  through(tensor, row0, bytes, /*write=*/false, times);
}

void Machine::write_through(TensorId tensor, cpu::Index row0, Bytes bytes, std::int64_t times) {
  through(tensor, row0, bytes, /*write=*/true, times);
}

void Machine::read_held_in_l2(TensorId tensor, cpu::Index row0, Bytes bytes, std::int64_t times) {
  if (!l2_) return through(tensor, row0, bytes, /*write=*/false, times);
  TensorTraffic& t = tensors_.at(tensor);
  constexpr std::string_view kWhat = "the bytes a tensor moves";
  t.read = cpu::checked_add(t.read, cpu::checked_mul(bytes, times, kWhat), kWhat);
  emit(EventKind::load, {}, t.name, bytes, times);
}

void Machine::through(TensorId tensor, cpu::Index row0, Bytes bytes, bool write,
                      std::int64_t times) {
  const TensorTraffic& t = tensors_.at(tensor);
  const cpu::Index rows = t.elements / tensor_cols_[tensor];
  const Bytes row_bytes = tensor_cols_[tensor] * bytes_of(t.dtype);
  if (row0 < 0 || row0 >= rows || bytes < 0 || bytes > (rows - row0) * row_bytes || times < 1)
    throw std::logic_error("a program moved " + std::to_string(bytes) + " bytes of " + t.name +
                           " from row " + std::to_string(row0) + ", " + std::to_string(times) +
                           " times; it has " + std::to_string(rows) + " rows of " +
                           std::to_string(row_bytes) + " bytes");
  move_bytes(tensor, row0, bytes, write, times);
  emit(write ? EventKind::store : EventKind::load, {}, t.name, bytes, times);
}

void Machine::finish() {
  if (l2_) l2_->flush(tensors_);
}

void Machine::empty_l2_between_kernels() {
  if (l2_) l2_->clear();
}

void Machine::compute(std::string_view what, const OpCounts& ops, TileCoord where,
                      std::optional<cpu::TileKind> kind, std::int64_t times,
                      const cpu::SoftmaxState<float>* state) {
  ops_ += ops.times(times);
  if (kind) {
    tiles_.computed += times;
    if (*kind == cpu::TileKind::partial) tiles_.partial += times;
  }
  emit(EventKind::compute, where, what, 0, times, state);
}

void Machine::skip(TileCoord where, std::int64_t times) {
  tiles_.skipped += times;
  emit(EventKind::skip, where, "", 0, times);
}

void Machine::emit(EventKind kind, TileCoord where, std::string_view tensor, Bytes bytes,
                   std::int64_t times, const cpu::SoftmaxState<float>* state) {
  if (trace_) trace_({step_, kind, where, tensor, bytes, times, state});
  ++step_;
  steps_ = cpu::checked_add(steps_, times, "the steps of a program");
}

void Machine::add_books(const Books& before, const Books& after, std::int64_t k) {
  constexpr std::string_view kWhat = "the books of repeated iterations";
  const auto add = [&](std::int64_t& total, std::int64_t from, std::int64_t to) {
    total = cpu::checked_add(total, cpu::checked_mul(to - from, k, kWhat), kWhat);
  };
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const TensorTraffic &b = before.tensors.at(t), &a = after.tensors.at(t);
    add(tensors_[t].read, b.read, a.read);
    add(tensors_[t].written, b.written, a.written);
    add(tensors_[t].dram_read, b.dram_read, a.dram_read);
    add(tensors_[t].dram_written, b.dram_written, a.dram_written);
  }
  add(ops_.matrix_flops, before.ops.matrix_flops, after.ops.matrix_flops);
  add(ops_.exp, before.ops.exp, after.ops.exp);
  add(ops_.max, before.ops.max, after.ops.max);
  add(ops_.sum, before.ops.sum, after.ops.sum);
  add(ops_.rescale, before.ops.rescale, after.ops.rescale);
  add(ops_.divide, before.ops.divide, after.ops.divide);
  add(tiles_.computed, before.tiles.computed, after.tiles.computed);
  add(tiles_.partial, before.tiles.partial, after.tiles.partial);
  add(tiles_.skipped, before.tiles.skipped, after.tiles.skipped);
  add(steps_, before.steps, after.steps);
}

std::vector<std::int64_t> Machine::l2_signature(const std::vector<TensorId>& moving,
                                                cpu::Index origin) const {
  return l2_ ? l2_->signature(moving, origin) : std::vector<std::int64_t>{};
}

void Machine::shift_l2(const std::vector<TensorId>& moving, cpu::Index rows) {
  if (l2_) l2_->shift(moving, rows);
}

}  // namespace flashlab::sim
