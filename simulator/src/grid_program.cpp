// A kernel's grid run through one shared L2 (grid.hpp says the model): blocks start in grid
// order as slots free, the resident ones step through their tiles together (FlashAttention-2's
// forward and the deterministic dQ kernel through K and V, the backward's main kernel through
// its group's query tiles), and every tile they move goes through the L2.
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/cpu/philox.hpp"

#include "l2_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <deque>
#include <queue>
#include <stdexcept>
#include <tuple>

namespace flashlab::sim {

namespace {

using cpu::Index;

constexpr Index kMaxHeads = Index{1} << 16;
constexpr Index kMaxSms = Index{1} << 16;
constexpr Index kMaxPartitions = 64;
constexpr Bytes kMaxL1 = Bytes{1} << 30;       // an L1 per SM: 1 GiB is far past any GPU's
constexpr Index kMaxL1Slots = Index{1} << 20;  // blocks placed on SMs one by one (the L1)

// The pass's tensors (grid.hpp's GridReport), as indices into the report's; -1 where the pass
// has none. The forward's are 0 to 4, Q, K, V, O, L.
struct TensorIds {
  int Q = -1, K = -1, V = -1, O = -1, L = -1;
  int dO = -1, D = -1, accumulator = -1, dK = -1, dV = -1, dQ = -1;
};

// One tile a block moves: read into the SM, written out of it, or reduced into (a reduction
// done in the L2: read from DRAM where absent, then dirty). through_l1: a K or V load of the
// forward's steps, which an SM's L1 may serve (GridProblem::l1_bytes).
enum class Move { read, write, reduce };
struct TileMove {
  int tensor = 0;
  Index row0 = 0, rows = 0;
  Move move = Move::read;
  bool through_l1 = false;
};
// A block's moves at one moment (its start, a step, its end). The most: the main kernel's
// step, Q, dO, L and D in and the reduction into dQ.
constexpr std::size_t kMostMoves = 5;
struct Moves {
  std::array<TileMove, kMostMoves> list{};
  int count = 0;
  void add(const TileMove& m) { list[static_cast<std::size_t>(count++)] = m; }
  const TileMove* begin() const { return list.data(); }
  const TileMove* end() const { return list.data() + count; }
};

// Blocks of one head that start in the same step, walk the same tiles and end in the same
// step (FlashAttention-2's: consecutive query tiles of one head; the main kernel's: KV tiles
// of one KV head with the same first query tile): they move the same tiles at the same
// moments, so the L2 sees the first block's access and the others hit (grid.hpp). Without
// grouping, each is alone.
struct Group {
  Index first_block = 0;  // block ids first_block .. first_block + count - 1
  Index count = 1;
  Index j = 0;                 // the next step
  Index steps = 0;             // the block's steps in all
  std::vector<Index> slots{};  // with an L1: each block's slot (GridProblem::sm_of_slot)
};

class GridRun {
 public:
  GridRun(const GridProblem& p, const L2Observer& observer) : p_(p), group_alike_(!observer) {
    // A tensor of the queries' side (N_q rows a head) or of the keys' (N rows a KV head).
    const auto query_side = [&](const char* name, Index cols, DType dtype) {
      return add(name, p.heads, p.queries(), cols, dtype);
    };
    const auto key_side = [&](const char* name) {
      return add(name, p.kv_head_count(), p.N, p.d, p.dtype);
    };
    if (p.pass == GridPass::backward_pre || p.pass == GridPass::backward_pre_deterministic) {
      t_.O = query_side("O", p.d, p.dtype);
      t_.dO = query_side("dO", p.d, p.dtype);
      t_.D = query_side("D", 1, kAccumulator);
      if (p.pass == GridPass::backward_pre)
        t_.accumulator = query_side("dQ accumulator", p.d, kAccumulator);
    } else if (p.pass == GridPass::backward_post) {
      t_.accumulator = query_side("dQ accumulator", p.d, kAccumulator);
      t_.dQ = query_side("dQ", p.d, p.dtype);
    } else {
      t_.Q = query_side("Q", p.d, p.dtype);
      t_.K = key_side("K");
      t_.V = key_side("V");
      if (p.pass == GridPass::forward) {
        t_.O = query_side("O", p.d, p.dtype);
        t_.L = query_side("L", 1, kAccumulator);
      } else {
        t_.dO = query_side("dO", p.d, p.dtype);
        t_.L = query_side("L", 1, kAccumulator);
        t_.D = query_side("D", 1, kAccumulator);
        if (p.pass == GridPass::backward_main)
          t_.accumulator = query_side("dQ accumulator", p.d, kAccumulator);
        if (p.owns_kv_tiles()) {
          t_.dK = key_side("dK");
          t_.dV = key_side("dV");
        } else {
          t_.dQ = query_side("dQ", p.d, p.dtype);
        }
      }
    }
    for (Index part = 0; part < p.l2_partitions; ++part) {
      l2_.emplace_back(p.partition_bytes(), static_cast<int>(part), p.replacement, p.seed,
                       /*home_partitions=*/1, p.l2_dirty_cap, p.l2_ways, p.l2_reduced_window);
      if (observer) l2_.back().set_observer(&observer);
    }
    if (p.l1_bytes > 0) {  // grid.hpp, "The L1": an LRU per SM, and the slots blocks take
      for (Index sm = 0; sm < p.sm_count; ++sm) l1_.emplace_back(p.l1_bytes, int(sm));
      l1_scratch_ = tensors_;
      for (Index slot = 0; slot < p.resident_blocks(); ++slot) free_slots_.push_back(slot);
    }
  }

  GridReport run() {
    return p_.schedule == GridSchedule::lockstep ? run_lockstep() : run_drifting();
  }

 private:
  GridReport run_lockstep() {
    const Index blocks = p_.blocks(), R = p_.resident_blocks();
    Index next = 0;
    std::int64_t steps = 0;
    while (next < blocks || !groups_.empty()) {
      for (Index free = R - resident_; free > 0 && next < blocks;) {  // fill the free slots
        const Index taken = start(next, free);
        next += taken, free -= taken;
        // A block without steps (the pre- and post-kernels', a query tile that sees no key)
        // ends as it starts and frees its slot at once, as in the drift schedule.
        if (groups_.back().steps == 0) {
          finish_done();
          free += taken;
        }
      }
      if (groups_.empty()) break;    // every block has ended
      for (Group& g : groups_) {     // one step of every resident block, in block order
        if (g.j < g.steps) step(g);  // (the pre- and post-kernels' blocks take none)
        ++g.j;
      }
      ++steps;
      finish_done();
    }
    return report(steps);
  }

  // The drift schedule (grid.hpp): a queue of moments, one pending per resident block. At the
  // same moment stores go first, then Q loads, then K and V, each in block order: lockstep's
  // order, so that sigma = 0 reproduces it. The older_first schedule runs here too, its
  // blocks' paces set again whenever a block starts or ends on their SM, and catch_up, its
  // blocks' paces set again after each step by where the step's tiles came from.
  enum Moment : int { kFinish, kStart, kStep };
  struct Event {
    double time;
    int moment;
    Index block;
    Index slot;
    std::uint64_t version;  // the slot's when pushed: a later change of pace makes it stale
    bool operator>(const Event& o) const {
      return std::tie(time, moment, block) > std::tie(o.time, o.moment, o.block);
    }
  };
  struct Running {  // the block in one of the R slots
    Index block = 0;
    double t0 = 0;     // when it started
    double tau = 1;    // its time per step (the forward's: per KV tile), now
    double base = 1;   // its time per step alone (drift's draw; the log's pace)
    double t_at = 0, pos = 0;  // at time t_at it stood at step position pos (step j at j)
    Index j = 0, steps = 0;
    int moment = kStart;  // its pending moment
    std::uint64_t version = 0;
    // logged with a step log (LoggedBlock::step_starts): its entry in the log, else null.
    const LoggedBlock* stepped = nullptr;
  };

  // When the slot's pending moment comes: its own tile at its start, step j at position j
  // (the forward's K_j), the stores after its last step.
  static double moment_time(const Running& r) {
    if (r.moment == kStart) return r.t0;
    if (r.stepped != nullptr)
      return r.moment == kStep ? r.stepped->step_starts[std::size_t(r.j)] : r.stepped->end;
    const double target = r.moment == kStep ? double(r.j) : double(r.steps);
    return r.t_at + (target - r.pos) * r.tau;
  }

  // The logged schedule runs here too: every block in a slot of its own from the start,
  // at its logged start and pace, on its logged SM.
  GridReport run_drifting() {
    const bool logged = p_.schedule == GridSchedule::logged;
    const bool older_first = p_.schedule == GridSchedule::older_first;
    const bool catch_up = p_.schedule == GridSchedule::catch_up;
    const Index blocks = p_.blocks(), R = logged ? blocks : p_.resident_blocks();
    std::vector<Running> slots(R);
    std::vector<bool> busy(R, false);
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
    const auto push = [&](Index slot) {
      Running& r = slots[slot];
      events.push({moment_time(r), r.moment, r.block, slot, ++r.version});
    };
    const auto begin = [&](Index slot, Index block, double t) {
      const Index steps = steps_of(block);
      // catch_up: one draw for all the blocks of a KV head
      double tau = block_tile_time(p_, catch_up ? kv_head_of(block) : block);
      const LoggedBlock* log = logged ? &p_.block_log[static_cast<std::size_t>(block)] : nullptr;
      if (log) {
        t = log->start;
        tau = steps > 0 ? (log->end - log->start) / double(steps) : 0.0;
        if (!log->step_starts.empty() && Index(log->step_starts.size()) != steps)
          throw cpu::InvalidArgument(fmt::format(
              "block_log[{}] has {} step starts for its {} steps: give one a step, or none "
              "for an even pace",
              block, log->step_starts.size(), steps));
      }
      const std::uint64_t version = slots[slot].version;
      slots[slot] = {block, t, tau, tau, t, 0.0, 0, steps, kStart, version};
      if (log && !log->step_starts.empty()) slots[slot].stepped = log;
      busy[slot] = true;
      push(slot);
    };
    // older_first: the paces of the blocks on SM `sm` from time t on, the oldest (earliest
    // start, then lowest block id) at 1 + lead / 2 of its own, the others at 1 - lead / 2.
    const auto set_paces = [&](Index sm, double t) {
      Index oldest = -1;
      for (Index k = sm; k < R; k += p_.sm_count)
        if (busy[k] && (oldest < 0 || std::tie(slots[k].t0, slots[k].block) <
                                          std::tie(slots[oldest].t0, slots[oldest].block)))
          oldest = k;
      for (Index k = sm; k < R; k += p_.sm_count) {
        if (!busy[k]) continue;
        Running& r = slots[k];
        const double pace = 1.0 + (k == oldest ? 1.0 : -1.0) * p_.older_block_lead / 2;
        const double tau = r.base / pace;
        if (tau == r.tau) continue;
        if (r.moment != kStart) r.pos += (t - r.t_at) / r.tau;
        r.t_at = std::max(t, r.t0);
        r.tau = tau;
        push(k);
      }
    };
    const auto sm_of = [&](Index slot, Index block) {
      return logged ? p_.block_log[static_cast<std::size_t>(block)].sm : p_.sm_of_slot(slot);
    };
    for (Index b = 0; b < R; ++b) begin(b, b, 0.0);
    if (older_first)
      for (Index sm = 0; sm < std::min(p_.sm_count, R); ++sm) set_paces(sm, 0.0);
    Index next = R;
    double end = 0;
    while (!events.empty()) {
      const Event e = events.top();
      events.pop();
      Running& r = slots[e.slot];
      if (e.version != r.version) continue;  // its pace changed since: pushed again
      const Index sm = sm_of(e.slot, r.block);
      const Index part = logged && !p_.sm_partitions.empty() ? p_.sm_partitions[std::size_t(sm)]
                                                             : p_.partition_of(r.block);
      if (e.moment == kStart) {
        for (const TileMove& m : start_moves(r.block)) move(m, sm, part);
      } else if (e.moment == kStep) {
        const Bytes dram_before = dram_read_so_far();
        Bytes read = 0;
        for (const TileMove& m : step_moves(r.block, r.j)) {
          if (m.move == Move::read) read += m.rows * row_bytes_[std::size_t(m.tensor)];
          move(m, sm, part);
        }
        if (catch_up && read > 0) {  // the next step at the pace of where this one's tiles were
          const double from_dram =
              std::min(1.0, double(dram_read_so_far() - dram_before) / double(read));
          r.pos = double(r.j), r.t_at = e.time;
          r.tau = r.base * (from_dram + (1.0 - from_dram) * p_.l2_step_share);
        }
        ++r.j;
      } else {
        for (const TileMove& m : end_moves(r.block)) move(m, sm, part);
        end = e.time;
        busy[e.slot] = false;
        if (next < blocks) begin(e.slot, next++, e.time);
        if (older_first) set_paces(p_.sm_of_slot(e.slot), e.time);
        continue;
      }
      // Its next moment: step j at position j, or the stores after the last.
      r.moment = r.j == r.steps ? kFinish : kStep;
      push(e.slot);
    }
    return report(static_cast<std::int64_t>(std::ceil(end)));
  }

  GridReport report(std::int64_t steps) const {
    GridReport r{
        p_,        tensors_, std::vector<Bytes>(tensors_.size(), 0), p_.resident_blocks(), steps,
        accesses_, l1_hits_};
    for (const detail::L2Cache& part : l2_) part.add_dirty(r.dirty_at_end);
    return r;
  }

  // A tensor of `heads` heads of `rows` rows of `cols` elements, heads stacked; returns its
  // index.
  int add(const char* name, Index heads, Index rows, Index cols, DType dtype) {
    const Index all_rows = cpu::checked_mul(heads, rows, "a tensor's rows");
    tensors_.push_back({name, dtype, cpu::checked_mul(all_rows, cols, "a tensor's elements")});
    row_bytes_.push_back(cols * bytes_of(dtype));
    head_rows_.push_back(rows);
    return static_cast<int>(tensors_.size()) - 1;
  }

  // The bytes of the sectors that rows [row0, row0 + rows) of tensor t occupy.
  Bytes sector_bytes(int t, Index row0, Index rows) const {
    const Bytes rb = row_bytes_[t];
    const Bytes first = row0 * rb / kSectorBytes;
    const Bytes end = (row0 * rb + rows * rb + kSectorBytes - 1) / kSectorBytes;
    return (end - first) * kSectorBytes;
  }

  // One access by a block of partition `part`. A read that its partition misses is copied
  // from another partition holding the tile, if one does, instead of read from DRAM; with
  // home copies, line by line (access_homed).
  void access(int t, Index row0, Index rows, bool write, Index part) {
    tensors_[t].*(write ? &TensorTraffic::written : &TensorTraffic::read) += rows * row_bytes_[t];
    const Bytes bytes = sector_bytes(t, row0, rows);
    detail::L2Cache& near = l2_[part];
    if (p_.l2_home_copies && bytes <= near.capacity())
      access_homed(t, row0, bytes, write, part);
    else if (!write && bytes <= near.capacity() && !near.holds(t, row0) &&
             held_elsewhere(t, row0, part))
      near.copy_in(t, row0, bytes, tensors_);
    else
      near.access(t, row0, bytes, write, tensors_);
    ++accesses_;
  }

  // Home copies (grid.hpp): each line from partition `part`, else copied from another that
  // holds it, else from DRAM; every line read from DRAM, or written, held at its home too.
  void access_homed(int t, Index row0, Bytes bytes, bool write, Index part) {
    detail::L2Cache& near = l2_[part];
    std::vector<std::int64_t> fresh;  // the lines read from DRAM or written
    if (write) {
      near.access(t, row0, bytes, /*write=*/true, tensors_);
      for (std::int64_t j = 0; j < l2_lines(bytes); ++j) fresh.push_back(j);
    } else {
      fresh = near.read_lines(t, row0, bytes, [&](std::int64_t j) {
        for (Index other = 0; other < p_.l2_partitions; ++other)
          if (other != part && l2_[other].holds_line(t, row0, j)) return true;
        return false;
      }, tensors_);
    }
    for (const std::int64_t j : fresh) {
      const int home = l2_line_home(t, row0, j, p_.seed, int(p_.l2_partitions));
      if (home != part) l2_[home].place_home_copy(t, row0, j, bytes, tensors_);
    }
  }

  // A load of K or V (tensor t) by a block on SM `sm` of partition `part`: served by the
  // SM's L1 where there is one and it holds the tile (kept there on a miss), else the
  // access above.
  void load_kv_tile(int t, Index row0, Index rows, Index sm, Index part) {
    if (l1_.empty()) return access(t, row0, rows, /*write=*/false, part);
    detail::L2Cache& l1 = l1_[sm];
    const bool hit = l1.holds(t, row0);
    l1.access(t, row0, sector_bytes(t, row0, rows), /*write=*/false, l1_scratch_);
    if (hit)
      l1_hits_ += rows * row_bytes_[t];
    else
      access(t, row0, rows, /*write=*/false, part);
  }

  // What DRAM has sent so far, all tensors.
  Bytes dram_read_so_far() const {
    Bytes sum = 0;
    for (const TensorTraffic& t : tensors_) sum += t.dram_read;
    return sum;
  }

  bool held_elsewhere(int t, Index row0, Index part) const {
    for (Index other = 0; other < p_.l2_partitions; ++other)
      if (other != part && l2_[other].holds(t, row0)) return true;
    return false;
  }

  Index group_size() const { return p_.heads / p_.kv_head_count(); }  // query heads a KV head

  // The (head, tile) block b owns: a query head's query tile in grid order, under the causal
  // mask the longest rows first where the kernel runs them so (causal_longest_first: fa2's
  // forward, the dQ kernel), or the kernel's own order; the
  // main kernel's KV head and KV tile, in order.
  BlockTile own_of(Index block) const {
    if (p_.order) return p_.order(block);
    if (p_.streams_rows()) return {0, block};  // its rows: b Br .. of the (head, row) array
    if (p_.owns_kv_tiles()) return {block / p_.kv_tiles(), block % p_.kv_tiles()};
    const Index x = block % p_.query_tiles();
    const bool reversed = p_.causal != cpu::Causal::none && p_.causal_longest_first;
    return {block / p_.query_tiles(), reversed ? p_.query_tiles() - 1 - x : x};
  }
  // The KV head whose K and V block b reads (the main kernel's blocks own one).
  Index kv_head_of(Index block) const {
    if (p_.streams_rows()) return 0;
    const BlockTile own = own_of(block);
    return p_.owns_kv_tiles() ? own.head : own.head / group_size();
  }
  // The main kernel: the first query tile that sees KV tile j, the tile of the first row that
  // sees its first key (row j Bc - offset); Tr where no row does (top-left, N_q < N).
  Index first_query_tile(Index j) const {
    if (p_.causal == cpu::Causal::none) return 0;
    const Index row = std::max<Index>(0, j * p_.Bc - p_.diagonal_offset());
    return row >= p_.queries() ? p_.query_tiles() : row / p_.Br;
  }
  // A block's steps: the KV tiles its query tile sees (the forward, the dQ kernel), or its
  // group's (query head, query tile) pairs that see its KV tile (the main kernel).
  Index steps_of(Index block) const {
    if (p_.streams_rows()) return 0;
    const BlockTile own = own_of(block);
    if (p_.owns_kv_tiles()) return group_size() * (p_.query_tiles() - first_query_tile(own.tile));
    if (p_.causal == cpu::Causal::none) return p_.kv_tiles();
    // Keys 0 .. its last row + offset (none where that is below 0: bottom-right, N_q > N).
    const Index last_row = std::min(own.tile * p_.Br + p_.Br, p_.queries()) - 1;
    const Index keys = std::clamp<Index>(last_row + p_.diagonal_offset() + 1, 0, p_.N);
    return cpu::tile_count(keys, p_.Bc);
  }
  // Whether blocks a and b move the same tiles at every step (Group).
  bool same_walk(Index a, Index b) const {
    const BlockTile x = own_of(a), y = own_of(b);
    if (x.head != y.head || steps_of(a) != steps_of(b)) return false;
    return !p_.owns_kv_tiles() || first_query_tile(x.tile) == first_query_tile(y.tile);
  }

  // The rows of tile `tile` (of B rows) of head `head`, in a tensor with heads stacked.
  TileMove tile(int tensor, Index head, Index tile, Index B, Move m, bool l1 = false) const {
    const Index rows = head_rows_[std::size_t(tensor)];
    return {tensor, head * rows + tile * B, std::min(B, rows - tile * B), m, l1};
  }
  // Block b's rows of the (head, row) array: [b Br, b Br + Br), the last block's fewer.
  TileMove rows_move(int tensor, Index block, Move m) const {
    const Index row0 = block * p_.Br;
    return {tensor, row0, std::min(p_.Br, p_.heads * p_.queries() - row0), m};
  }
  // What a block moves at its start, at step s, and at its end (grid.hpp's table).
  Moves start_moves(Index block) const {
    const BlockTile own = own_of(block);
    Moves m;
    if (p_.streams_rows()) {
      for (const int t : {t_.O, t_.dO}) {
        if (t >= 0) m.add(rows_move(t, block, Move::read));
      }
      if (p_.pass == GridPass::backward_post) m.add(rows_move(t_.accumulator, block, Move::read));
      return m;
    }
    if (p_.owns_kv_tiles()) {
      if (p_.skips_unseen_kv && steps_of(block) == 0) return m;  // no query sees its keys
      m.add(tile(t_.K, own.head, own.tile, p_.Bc, Move::read));
      m.add(tile(t_.V, own.head, own.tile, p_.Bc, Move::read));
      return m;
    }
    m.add(tile(t_.Q, own.head, own.tile, p_.Br, Move::read));
    if (p_.pass == GridPass::backward_dq)
      for (const int t : {t_.dO, t_.L, t_.D}) m.add(tile(t, own.head, own.tile, p_.Br, Move::read));
    return m;
  }
  Moves step_moves(Index block, Index s) const {
    const BlockTile own = own_of(block);
    Moves m;
    if (p_.owns_kv_tiles()) {
      const Index first = first_query_tile(own.tile), count = p_.query_tiles() - first;
      const Index head = own.head * group_size() + s / count, i = first + s % count;
      for (const int t : {t_.Q, t_.dO, t_.L, t_.D}) m.add(tile(t, head, i, p_.Br, Move::read));
      if (t_.accumulator >= 0) m.add(tile(t_.accumulator, head, i, p_.Br, Move::reduce));
      return m;
    }
    const Index kv_head = own.head / group_size();
    m.add(tile(t_.K, kv_head, s, p_.Bc, Move::read, /*l1=*/true));
    m.add(tile(t_.V, kv_head, s, p_.Bc, Move::read, /*l1=*/true));
    return m;
  }
  Moves end_moves(Index block) const {
    const BlockTile own = own_of(block);
    Moves m;
    if (p_.pass == GridPass::backward_post) {
      m.add(rows_move(t_.dQ, block, Move::write));
    } else if (p_.streams_rows()) {
      m.add(rows_move(t_.D, block, Move::write));
      if (t_.accumulator >= 0) m.add(rows_move(t_.accumulator, block, Move::write));
    } else if (p_.owns_kv_tiles()) {
      m.add(tile(t_.dK, own.head, own.tile, p_.Bc, Move::write));
      m.add(tile(t_.dV, own.head, own.tile, p_.Bc, Move::write));
    } else if (p_.pass == GridPass::backward_dq) {
      m.add(tile(t_.dQ, own.head, own.tile, p_.Br, Move::write));
    } else {
      m.add(tile(t_.O, own.head, own.tile, p_.Br, Move::write));
      m.add(tile(t_.L, own.head, own.tile, p_.Br, Move::write));
    }
    return m;
  }

  // One move by a block on SM `sm` (its L1, where there is one) of partition `part`.
  void move(const TileMove& m, Index sm, Index part) {
    if (m.move == Move::reduce) return reduce(m.tensor, m.row0, m.rows);
    if (m.through_l1 && !l1_.empty()) return load_kv_tile(m.tensor, m.row0, m.rows, sm, part);
    access(m.tensor, m.row0, m.rows, m.move == Move::write, part);
  }
  // A reduction into a tile (grid.hpp): done in the partition that is its first line's home,
  // read from DRAM there where absent, then dirty; out of the SM go the bytes it adds.
  void reduce(int t, Index row0, Index rows) {
    tensors_[t].written += rows * row_bytes_[t];
    detail::L2Cache& home = l2_[reduction_home(t, row0)];
    const Bytes bytes = sector_bytes(t, row0, rows);
    home.reduce(t, row0, bytes, tensors_);
    ++accesses_;
  }
  Index reduction_home(int t, Index row0) const {
    const int P = static_cast<int>(p_.l2_partitions);
    return P == 1 ? 0 : l2_line_home(t, row0, 0, p_.seed, P);
  }
  // Whether partition `part` holds every tile that the moves read or reduce into.
  bool holds_all(const Moves& moves, Index part) const {
    for (const TileMove& m : moves) {
      if (m.move == Move::write) continue;
      const Index where = m.move == Move::reduce ? reduction_home(m.tensor, m.row0) : part;
      if (!l2_[where].holds(m.tensor, m.row0)) return false;
    }
    return true;
  }

  // Starts blocks first, first + 1, ... (at most `free` of them) as one group of blocks
  // that run alike, each moving its own tiles in; returns how many started.
  Index start(Index first, Index free) {
    Index count = 1;
    if (group_alike_ && steps_of(first) > 0)  // (a block without steps ends as it starts)
      while (count < free && first + count < p_.blocks() && same_walk(first, first + count))
        ++count;
    groups_.push_back({first, count, 0, steps_of(first)});
    for (Index k = 0; k < count && !l1_.empty(); ++k) {  // the slots freed first
      groups_.back().slots.push_back(free_slots_.front());
      free_slots_.pop_front();
    }
    for (Index b = first; b < first + count; ++b)
      for (const TileMove& m : start_moves(b)) move(m, 0, p_.partition_of(b));
    resident_ += count;
    return count;
  }

  // One step of a group: its first block's moves, block after block, each in its own
  // partition. In each round the next block of every partition that has one left moves them
  // all, in block order (the group's blocks alternate partitions, so this is their order);
  // after it, a partition that still holds every tile read (and every reduced tile's home)
  // books its remaining blocks as hits, and the others go on one block per round, as they
  // would without grouping.
  void step(const Group& g) {
    const Moves moves = step_moves(g.first_block, g.j);
    // Block by block, each through its SM's L1, or in its partition where a slot_partitions
    // map places the blocks (the rounds below take the group's blocks to alternate).
    if (!l1_.empty() || !p_.slot_partitions.empty()) {
      for (Index k = 0; k < g.count; ++k) {
        // (the slots are kept where there is an L1 only)
        const Index sm = l1_.empty() ? 0 : p_.sm_of_slot(g.slots[k]);
        for (const TileMove& m : moves) move(m, sm, p_.partition_of(g.first_block + k));
      }
      return;
    }
    const Index P = p_.l2_partitions;
    std::vector<Index> left(P, 0);  // blocks of the group in each partition
    for (Index b = g.first_block; b < g.first_block + g.count; ++b) ++left[p_.partition_of(b)];
    for (Index remaining = g.count; remaining > 0;) {
      for (Index k = 0; k < P; ++k) {
        const Index part = p_.partition_of(g.first_block + k);
        if (left[part] == 0) continue;
        for (const TileMove& m : moves) move(m, 0, part);
        --left[part], --remaining;
      }
      for (Index part = 0; part < P; ++part) {
        if (left[part] == 0 || !holds_all(moves, part)) continue;
        for (const TileMove& m : moves) book_hits(m, left[part]);
        remaining -= left[part], left[part] = 0;
      }
    }
  }

  // `count` more moves of a resident tile: bytes across the SMs' boundary (read in, or a
  // reduction's written out), nothing at DRAM, no change of order.
  void book_hits(const TileMove& m, Index count) {
    const Bytes bytes = m.rows * row_bytes_[m.tensor] * count;
    (m.move == Move::read ? tensors_[m.tensor].read : tensors_[m.tensor].written) += bytes;
  }

  // Blocks whose last step is done move their results out and free their slots.
  void finish_done() {
    for (const Group& g : groups_) {
      if (g.j < g.steps) continue;
      for (Index b = g.first_block; b < g.first_block + g.count; ++b)
        for (const TileMove& m : end_moves(b)) move(m, 0, p_.partition_of(b));
      free_slots_.insert(free_slots_.end(), g.slots.begin(), g.slots.end());
      resident_ -= g.count;
    }
    std::erase_if(groups_, [](const Group& g) { return g.j >= g.steps; });
  }

  const GridProblem& p_;
  TensorIds t_;
  std::vector<detail::L2Cache> l2_;  // one per partition
  bool group_alike_;
  std::vector<TensorTraffic> tensors_;
  std::vector<Bytes> row_bytes_;
  std::vector<Index> head_rows_;  // rows a head, each tensor: N_q on the queries' side, else N
  std::vector<Group> groups_;  // resident, in block order
  Index resident_ = 0;
  std::int64_t accesses_ = 0;
  std::vector<detail::L2Cache> l1_;        // one per SM where K and V pass an L1
  std::vector<TensorTraffic> l1_scratch_;  // what the L1s would book as "DRAM": unused
  std::deque<Index> free_slots_;           // with an L1: free slots, in the order they freed
  Bytes l1_hits_ = 0;
};

void check_range(std::string_view what, Index value, Index lo, Index hi, std::string_view why) {
  if (value < lo || value > hi)
    throw cpu::InvalidArgument(
        fmt::format("{} = {}: give {} to {} ({})", what, value, lo, hi, why));
}

// A kernel's own order must give every (head, query tile) to exactly one block.
void check_order(const GridProblem& p) {
  constexpr Index kMaxChecked = Index{1} << 24;  // blocks whose order is checked one by one
  const Index blocks = p.blocks(), tiles = p.query_tiles();
  if (blocks > kMaxChecked) return;
  std::vector<bool> taken(static_cast<std::size_t>(blocks), false);
  for (Index b = 0; b < blocks; ++b) {
    const BlockTile w = p.order(b);
    if (w.head < 0 || w.head >= p.heads || w.tile < 0 || w.tile >= tiles)
      throw cpu::InvalidArgument(fmt::format(
          "the grid's order gives block {} head {}, query tile {}: give heads 0 to {} and "
          "query tiles 0 to {}",
          b, w.head, w.tile, p.heads - 1, tiles - 1));
    const auto at = static_cast<std::size_t>(w.head * tiles + w.tile);
    if (taken[at])
      throw cpu::InvalidArgument(fmt::format(
          "the grid's order gives head {}, query tile {} to two blocks (the second is block "
          "{}): give each (head, query tile) to one block",
          w.head, w.tile, b));
    taken[at] = true;
  }
}

// The logged schedule's log (grid.hpp): one entry per block, each on an SM, in order.
void check_block_log(const GridProblem& p) {
  const bool logged = p.schedule == GridSchedule::logged;
  if (!logged && !p.block_log.empty())
    throw cpu::InvalidArgument(fmt::format(
        "a block_log of {} blocks with the {} schedule, which places blocks itself: give "
        "schedule logged to replay it, or no log",
        p.block_log.size(), to_string(p.schedule)));
  if (!logged && !p.sm_partitions.empty())
    throw cpu::InvalidArgument(fmt::format(
        "sm_partitions for {} SMs with the {} schedule, whose blocks take slots, not logged "
        "SMs: give schedule logged with a block_log, or no sm_partitions",
        p.sm_partitions.size(), to_string(p.schedule)));
  if (!logged) return;
  if (!p.sm_partitions.empty() && Index(p.sm_partitions.size()) != p.sm_count)
    throw cpu::InvalidArgument(fmt::format(
        "sm_partitions has {} entries for {} SMs: give one partition for each SM",
        p.sm_partitions.size(), p.sm_count));
  for (std::size_t sm = 0; sm < p.sm_partitions.size(); ++sm)
    if (p.sm_partitions[sm] < 0 || p.sm_partitions[sm] >= p.l2_partitions)
      throw cpu::InvalidArgument(fmt::format(
          "sm_partitions[{}] = {}: give a partition from 0 to l2_partitions - 1 = {}", sm,
          p.sm_partitions[sm], p.l2_partitions - 1));
  if (p.block_time_spread != 0)
    throw cpu::InvalidArgument(fmt::format(
        "block_time_spread = {} with the logged schedule, whose blocks keep their logged "
        "times: give a spread of 0",
        p.block_time_spread));
  if (Index(p.block_log.size()) != p.blocks()) {
    const std::string grid =
        p.streams_rows()
            ? fmt::format("{} rows of {} heads in blocks of {}", p.queries(), p.heads, p.Br)
        : p.owns_kv_tiles()
            ? fmt::format("{} KV heads x {} KV tiles", p.kv_head_count(), p.kv_tiles())
            : fmt::format("{} heads x {} query tiles", p.heads, p.query_tiles());
    throw cpu::InvalidArgument(fmt::format(
        "a block_log of {} blocks for a grid of {} ({}): give one entry per block, in block order",
        p.block_log.size(), p.blocks(), grid));
  }
  for (std::size_t b = 0; b < p.block_log.size(); ++b) {
    const LoggedBlock& e = p.block_log[b];
    if (e.sm < 0 || e.sm >= p.sm_count)
      throw cpu::InvalidArgument(fmt::format(
          "block_log[{}] runs on SM {}: give an SM from 0 to sm_count - 1 = {}", b, e.sm,
          p.sm_count - 1));
    if (!(std::isfinite(e.start) && std::isfinite(e.end) && 0 <= e.start && e.start <= e.end))
      throw cpu::InvalidArgument(fmt::format(
          "block_log[{}] starts at {} and ends at {}: give 0 <= start <= end, both finite", b,
          e.start, e.end));
    for (std::size_t j = 0; j < e.step_starts.size(); ++j) {
      const double t = e.step_starts[j], before = j > 0 ? e.step_starts[j - 1] : e.start;
      if (!(std::isfinite(t) && before <= t && t <= e.end))
        throw cpu::InvalidArgument(fmt::format(
            "block_log[{}] starts step {} at {}: give step starts in order from the block's "
            "start ({}) to its end ({})",
            b, j, t, e.start, e.end));
    }
  }
}

}  // namespace

Index GridProblem::resident_blocks() const {
  return std::min(blocks(), cpu::checked_mul(sm_count, blocks_per_sm, "the resident blocks"));
}

// The passes' own rules (grid.hpp, "The backward's grids").
void check_pass(const GridProblem& p) {
  if (p.pass != GridPass::forward && p.pass != GridPass::backward_main &&
      p.pass != GridPass::backward_main_deterministic && p.pass != GridPass::backward_dq &&
      p.pass != GridPass::backward_pre && p.pass != GridPass::backward_pre_deterministic &&
      p.pass != GridPass::backward_post)
    throw cpu::InvalidArgument(
        "an unknown grid pass: give forward, backward_main, backward_main_deterministic, "
        "backward_dq, backward_pre, backward_pre_deterministic or backward_post");
  if (p.pass == GridPass::forward) return;
  if (p.l1_bytes != 0)
    throw cpu::InvalidArgument(fmt::format(
        "an L1 of {} bytes with the {} pass, whose loads bypass the L1 (cp.async.cg, TMA): give "
        "l1_bytes = 0",
        p.l1_bytes, to_string(p.pass)));
  if (p.order)
    throw cpu::InvalidArgument(fmt::format(
        "an order of blocks with the {} pass, whose kernel takes its blocks in grid order: give "
        "none (the forward's fa3 has a scheduler of its own)",
        to_string(p.pass)));
}

void check(const GridProblem& p) {
  check_pass(p);
  check_range("N", p.N, 1, kMaxLength, "keys per head, and queries unless N_q");
  check_range("N_q", p.N_q, 0, kMaxLength, "queries per head, 0 for as many as the keys");
  check_range("d", p.d, 1, kMaxHeadDim, "the head dimension");
  check_range("heads", p.heads, 1, kMaxHeads, "query heads times batch");
  check_range("kv_heads", p.kv_heads, 0, p.heads, "0 for as many as the query heads");
  if (p.kv_heads > 0 && p.heads % p.kv_heads != 0)
    throw cpu::InvalidArgument(fmt::format(
        "kv_heads = {} does not divide heads = {}: each KV head serves the same number of "
        "query heads",
        p.kv_heads, p.heads));
  check_range("Br", p.Br, 1, kMaxLength, "query rows per block");
  check_range("Bc", p.Bc, 1, kMaxLength, "keys per K/V tile");
  check_range("blocks_per_sm", p.blocks_per_sm, 1, 1024, "the kernel's occupancy");
  check_range("sm_count", p.sm_count, 1, kMaxSms, "the GPU's SMs");
  if (p.l2_bytes < 1 || p.l2_bytes > kMaxCapacityBytes)
    throw cpu::InvalidArgument(
        fmt::format("an L2 of {} bytes: give 1 byte to 1 PiB (the H200's is 60 MiB)", p.l2_bytes));
  check_range("l2_partitions", p.l2_partitions, 1, kMaxPartitions,
              "the L2's partitions, each with its own SMs: 2 on Hopper");
  if (p.l2_bytes < p.l2_partitions)
    throw cpu::InvalidArgument(
        fmt::format("an L2 of {} bytes in {} partitions: give at least a byte per partition",
                    p.l2_bytes, p.l2_partitions));
  if (p.l2_dirty_cap < 0 || p.l2_dirty_cap > p.partition_bytes())
    throw cpu::InvalidArgument(fmt::format(
        "l2_dirty_cap = {} bytes, a partition's: give 0 for no cap, or at most a partition's "
        "{} bytes ({} bytes in {} partitions)",
        p.l2_dirty_cap, p.partition_bytes(), p.l2_bytes, p.l2_partitions));
  if (!(p.block_time_spread >= 0 && p.block_time_spread <= kMaxBlockTimeSpread))
    throw cpu::InvalidArgument(fmt::format(
        "block_time_spread = {}: give 0 to {} (the standard deviation of the log of a block's "
        "time per KV tile; 0 is lockstep)",
        p.block_time_spread, kMaxBlockTimeSpread));
  if (p.schedule == GridSchedule::lockstep && p.block_time_spread != 0)
    throw cpu::InvalidArgument(fmt::format(
        "block_time_spread = {} with the lockstep schedule, where every block takes the same "
        "time per tile: give schedule drift, or a spread of 0",
        p.block_time_spread));
  check(p.replacement);
  check_l2_ways(p.l2_ways);
  check_l2_reduced_window(p.l2_reduced_window, p.l2_ways, p.replacement);
  if (p.l2_home_copies && p.replacement != L2Replacement::sets)
    throw cpu::InvalidArgument(fmt::format(
        "l2_home_copies with the {} policy: a line's home copy is a line of an L2 in hashed "
        "sets; give replacement sets, or no home copies",
        to_string(p.replacement)));
  if (!p.slot_partitions.empty()) {
    if (const Index n = Index(p.slot_partitions.size());
        n != p.sm_count && n != p.sm_count * p.blocks_per_sm)
      throw cpu::InvalidArgument(fmt::format(
          "slot_partitions has {} entries for {} SMs of {} blocks each: give one partition for "
          "each SM ({}) or for each slot of a first wave ({}), or none for block b on partition "
          "b mod l2_partitions",
          n, p.sm_count, p.blocks_per_sm, p.sm_count, p.sm_count * p.blocks_per_sm));
    for (std::size_t s = 0; s < p.slot_partitions.size(); ++s)
      if (p.slot_partitions[s] < 0 || p.slot_partitions[s] >= p.l2_partitions)
        throw cpu::InvalidArgument(fmt::format(
            "slot_partitions[{}] = {}: give a partition from 0 to l2_partitions - 1 = {}", s,
            p.slot_partitions[s], p.l2_partitions - 1));
  }
  if (p.l1_bytes < 0 || p.l1_bytes > kMaxL1)
    throw cpu::InvalidArgument(fmt::format(
        "an L1 of {} bytes: give 0 (K and V bypass it) to {} (the H200's is at most 256 KiB "
        "less the shared memory)",
        p.l1_bytes, kMaxL1));
  if (p.l1_bytes > 0 && p.resident_blocks() > kMaxL1Slots)
    throw cpu::InvalidArgument(fmt::format(
        "{} resident blocks with an L1: the model places at most {} on SMs (give fewer SMs or "
        "blocks per SM, or l1_bytes = 0)",
        p.resident_blocks(), kMaxL1Slots));
  if (p.schedule != GridSchedule::lockstep && p.schedule != GridSchedule::drift &&
      p.schedule != GridSchedule::older_first && p.schedule != GridSchedule::logged &&
      p.schedule != GridSchedule::catch_up)
    throw cpu::InvalidArgument(
        "an unknown grid schedule: give lockstep, drift, older_first, logged or catch_up");
  if (!(p.older_block_lead >= 0 && p.older_block_lead < 1))
    throw cpu::InvalidArgument(fmt::format(
        "older_block_lead = {}: give 0 to under 1 (how much faster the older of an SM's blocks "
        "runs than the others; the H200's is {})",
        p.older_block_lead, find_profile("h200").older_block_lead));
  if (p.older_block_lead != 0 && p.schedule != GridSchedule::older_first)
    throw cpu::InvalidArgument(fmt::format(
        "older_block_lead = {} with the {} schedule, which does not pace blocks by age: give "
        "schedule older_first, or a lead of 0",
        p.older_block_lead, to_string(p.schedule)));
  if (!(p.l2_step_share > 0 && p.l2_step_share <= 1))
    throw cpu::InvalidArgument(fmt::format(
        "l2_step_share = {}: give more than 0 and at most 1 (a step's time where the L2 served "
        "its tiles, as a share of one that read them from DRAM; 1 is no faster)",
        p.l2_step_share));
  if (p.l2_step_share != 1 && p.schedule != GridSchedule::catch_up)
    throw cpu::InvalidArgument(fmt::format(
        "l2_step_share = {} with the {} schedule, whose steps do not depend on where their "
        "tiles come from: give schedule catch_up, or a share of 1",
        p.l2_step_share, to_string(p.schedule)));
  check_block_log(p);
  cpu::check_causal(p.causal);
  if (p.order) check_order(p);
}

std::vector<Index> scattered_partitions(Index sm_count, Index partitions, std::uint64_t seed) {
  if (partitions < 1 || partitions > sm_count)
    throw cpu::InvalidArgument(fmt::format(
        "scattered_partitions: {} partitions for {} SMs: give 1 to the SM count", partitions,
        sm_count));
  std::vector<Index> map(static_cast<std::size_t>(sm_count));
  for (Index s = 0; s < sm_count; ++s) map[std::size_t(s)] = s % partitions;
  // Fisher-Yates: slot i swaps with one of slots 0..i, drawn from slot i's counter.
  for (Index i = sm_count - 1; i > 0; --i) {
    const cpu::PhiloxCounter c =
        cpu::philox4x32_10({static_cast<std::uint32_t>(i), 0, 0, 0}, cpu::philox_key(seed));
    std::swap(map[std::size_t(i)], map[std::size_t(c[0] % std::uint32_t(i + 1))]);
  }
  return map;
}

std::string_view to_string(GridPass pass) {
  switch (pass) {
    case GridPass::forward: return "forward";
    case GridPass::backward_main: return "backward_main";
    case GridPass::backward_main_deterministic: return "backward_main_deterministic";
    case GridPass::backward_dq: return "backward_dq";
    case GridPass::backward_pre: return "backward_pre";
    case GridPass::backward_pre_deterministic: return "backward_pre_deterministic";
    case GridPass::backward_post: return "backward_post";
  }
  return "unknown";
}

std::string_view to_string(GridSchedule schedule) {
  switch (schedule) {
    case GridSchedule::lockstep: return "lockstep";
    case GridSchedule::drift: return "drift";
    case GridSchedule::older_first: return "older_first";
    case GridSchedule::logged: return "logged";
    case GridSchedule::catch_up: return "catch_up";
  }
  return "unknown";
}

double block_tile_time(const GridProblem& p, Index block) {
  if (p.block_time_spread == 0) return 1.0;
  // Two uniform words from the block's counter and the seed, then Box-Muller for z.
  const auto u = [](std::uint32_t word) { return (double(word) + 0.5) / 4294967296.0; };
  const cpu::PhiloxCounter c = cpu::philox4x32_10(
      {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(std::uint64_t(block) >> 32),
       0, 0},
      cpu::philox_key(p.seed));
  const double z = std::sqrt(-2.0 * std::log(u(c[0]))) * std::cos(2.0 * std::numbers::pi * u(c[1]));
  return std::exp(p.block_time_spread * z);
}

std::string_view to_string(L2EventKind kind) {
  switch (kind) {
    case L2EventKind::hit: return "hit";
    case L2EventKind::miss: return "miss";
    case L2EventKind::allocate: return "allocate";
    case L2EventKind::evict: return "evict";
    case L2EventKind::write_back: return "write-back";
    case L2EventKind::clean: return "clean";
    case L2EventKind::bypass: return "bypass";
    case L2EventKind::copy: return "copy";
  }
  return "unknown";
}

GridReport run_grid(const GridProblem& problem, const L2Observer& observer) {
  check(problem);
  return GridRun(problem, observer).run();
}

namespace {
Bytes sum_of(const std::vector<TensorTraffic>& ts, Bytes TensorTraffic::*field) {
  Bytes total = 0;
  for (const auto& t : ts) total += t.*field;
  return total;
}
}  // namespace

Bytes GridReport::sm_read() const { return sum_of(tensors, &TensorTraffic::read); }
Bytes GridReport::sm_written() const { return sum_of(tensors, &TensorTraffic::written); }
Bytes GridReport::dram_read() const { return sum_of(tensors, &TensorTraffic::dram_read); }
Bytes GridReport::dram_written() const { return sum_of(tensors, &TensorTraffic::dram_written); }
Bytes GridReport::left_dirty() const {
  Bytes total = 0;
  for (Bytes b : dirty_at_end) total += b;
  return total;
}

const TensorTraffic& GridReport::tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw std::out_of_range("the grid has no tensor " + std::string(name));
}

}  // namespace flashlab::sim
