// 06_fa3: FlashAttention-3 on Hopper (sm_90a). What it adds over 03_fa2:
//   - TMA (hopper/tma.cuh): one thread copies a whole (rows, 64) slab of Q, K or V with one
//     instruction; the bytes land in SRAM in the 128-byte swizzle that wgmma reads, and
//     complete on an mbarrier. Rows past N are zero-filled by the copy engine.
//   - wgmma (hopper/wgmma.cuh): a warpgroup (4 warps) owns 64 query rows and multiplies
//     asynchronously: S = Q K^T with Q and K read straight from SRAM, U += W V with W from
//     registers (the softmax output, rounded to bf16/fp16) and V from SRAM.
//   - warp specialisation: warpgroup 0 is the producer. One of its warps walks the KV tiles
//     ahead of the consumers (an elected lane issues each copy), as far as the `stages`
//     buffers of the K and V rings allow (hopper/pipeline.cuh), and the warpgroup hands most
//     of its registers to the consumer warpgroups (setmaxnreg), which only compute: two
//     consumers (Br = 128, 24 / 240 registers a thread) at d = 128, three (Br = 192,
//     32 / 160) at d = 64 (fa3::consumer_warpgroups). Switched off, there is no producer:
//     warp 0 of the first consumer issues the copies itself, between its own tiles.
//   - ping-pong: the consumer warpgroups take turns through named barriers, round robin: one
//     issues its matmuls (U += W_j V_j, S_{j+1} = Q K_{j+1}^T) and passes the turn, then runs
//     its softmax while the others' matmuls occupy the tensor cores.
//   - intra-warpgroup overlap: S_{j+1} is issued before U += W_j V_j and waited for first,
//     so the softmax of S_{j+1} runs while the tensor cores still work on W_j V_j; U is
//     rescaled by alpha once that product has landed.
//   - conditional rescaling (FlashAttention-4; switch conditional_rescale): a row keeps its
//     base m until its max outgrows it by more than tau = 8 in log2 units, so alpha is 1 on
//     most tiles, and a warp none of whose rows moved skips U = alpha U. With a counts
//     buffer, a kernel of its own counts on the device what each (row, tile) update did.
//   - the masked tiles (the causal diagonal, the ragged end of N_k) have an online softmax
//     of their own; the others read S as it is, with no per-score test.
//   - software exponentials (FlashAttention-4; switch software_exp2): on the unmasked tiles,
//     1 in fa3::kSoftwareExp2Period of W's k16 slices is exponentiated on the FMA pipe
//     (flashlab/gpu/exp2_software.hpp) rather than by ex2.approx on the special-function
//     unit, whose 16 a clock per SM at d = 64 take as long as the matmuls.
// Each consumer's mainloop (consume) is cut into sections: section 0 computes S_0 and its
// softmax; section j (1 <= j <= Tc) issues U += W_{j-1} V_{j-1} and, when j < Tc, S_j, then
// runs the softmax of S_j. In a persistent block the consumers may run across work items (switch
// overlap_items, off by default; with a producer, two Q buffers and the standard rule):
// the last section of an item issues the next item's S_0, whose Q the producer has loaded
// into a second buffer, so that item starts at its section 1. The per-tile algebra and its
// names are fa2's and the CPU reference's:
//   update:     m' = max(m, rowmax S); alpha = exp(m - m'); W = exp(S - m'); m = m'
//   accumulate: l = alpha l + rowsum W; U = alpha U + W V
// W, the A operand of U += W V, in bf16/fp16 registers (fa3::w_buffers): with two buffers
// the softmax packs W_j into one while U += W_{j-1} V_{j-1} reads the other; with one
// (FlashAttention-3's order, d = 64, where registers are short) it writes W_j over S_j in
// fp32 and packs it once that product has landed.
//   finalize:   O = U / l, L = m + log l (a row that saw no key: O = 0, L = -inf)
// The epilogue: where the SRAM has room (fa3::stages_o), a consumer writes its O rows into
// sO and one of its threads sends them to HBM with TMA stores, whole 128-byte lines, while
// the warpgroup goes on to its next tile; else each thread stores its O from registers.
// Causal: KV tiles wholly in the future of the block's last row are never loaded; only
// tiles that cross the diagonal (or the ragged end of N_k) are masked, in registers.
// The tile scheduler (flashlab/gpu/tile_schedule.hpp): a block runs work items, each one
// query tile of one (batch, head), in an order that keeps the K and V of a few heads in the
// L2, longest causal tiles first. Persistent: one block per SM, whose rings run on from one
// item to the next, so the producer loads the next item's Q, K_0 and V_0 while the
// consumers finish this one; or one block per item (flashlab_fa3_options.grid). The
// producer takes each item (in fixed turns, or from a work queue: a counter in device
// memory), works it out (batch, head, first row, KV tiles) and hands it to the consumers in
// the SRAM slot of the item's Q buffer, written before the arrival that announces Q's bytes:
// the Q ring's full phase publishes both, and the consumers release Q, freeing the slot,
// only after they have read it. So the consumers do no division between items, where at
// short N the kernel's time is lost (bench/gpu/NOTES.md, "fa3's pipeline logged").
// Tiles, stages, threads and SRAM: fa3:: in flashlab/gpu/kernel_info.hpp; the switches:
// flashlab/fa3.h. Any N_q, N_k; batch, heads, GQA; strides that are multiples of 16 bytes.
#include "common.cuh"
#include "flashlab/cpu/rescale_rule.hpp"
#include "flashlab/gpu/exp2_software.hpp"
#include "flashlab/gpu/tile_schedule.hpp"
#include "hopper/pipeline.cuh"
#include "hopper/tma.cuh"
#include "hopper/wgmma.cuh"
#include "launch.hpp"
#include "pipeline_log.cuh"
#include "ptx.cuh"

#include <map>
#include <mutex>
#include <optional>

namespace flashlab::gpu {
namespace {

using fa3::kBc;
using fa3::kMaxStages;
using fa3::kSlab;
using hopper::Stage;

constexpr int kWarpgroupThreads = fa3::kWarpgroupThreads;
static_assert(fa3::kRowsPerConsumer == hopper::kWgmmaM, "a consumer owns one wgmma M");
// Named barriers 1 .. kMaxConsumerWarpgroups: "consumer warpgroup c may issue its matmuls"
// (ping-pong; 0 is __syncthreads); each is passed by the 128 threads that wait on it and
// the 128 of the consumer before them that arrive.
constexpr int kTurnBarrier0 = 1;
constexpr int kTurnThreads = 2 * kWarpgroupThreads;
// The next kMaxConsumerWarpgroups: consumer warpgroup c's 128 threads at its epilogue.
constexpr int kEpilogueBarrier0 = kTurnBarrier0 + fa3::kMaxConsumerWarpgroups;
static_assert(kEpilogueBarrier0 + fa3::kMaxConsumerWarpgroups <= 16, "16 named barriers a block");

template <class T, int D>
struct Tiles {
  static constexpr int kBr = fa3::br(D);  // query rows of a work item
  static constexpr int kConsumers = fa3::consumer_warpgroups(D);
  static_assert(kConsumers <= fa3::kMaxConsumerWarpgroups, "a turn and an epilogue barrier each");
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  static constexpr int kProducerRegisters = fa3::producer_registers(D);
  static constexpr int kConsumerRegisters = fa3::consumer_registers(D);
  static constexpr int kWBuffers = fa3::w_buffers(D);
  static constexpr int kSlabs = D / kSlab;
  static constexpr int kQElems = kBr * D;   // sQ (Br, D)
  static constexpr int kKVElems = kBc * D;  // one sK or sV (Bc, D)
  static constexpr uint32_t kQBytes = kQElems * sizeof(T);
  static constexpr uint32_t kKVBytes = kKVElems * sizeof(T);
  static_assert(D % kSlab == 0 && kBc % 8 == 0);
  static_assert((kBr * kSlab * sizeof(T)) % fa3::kSwizzleAtom == 0 &&
                    (kBc * kSlab * sizeof(T)) % fa3::kSwizzleAtom == 0,
                "every slab of every tile starts on a swizzle atom");
};

struct TensorMaps {
  hopper::TensorMap q, k, v;
  hopper::TensorMap o;  // described only where O is staged (Fa3Params::stage_o)
};

// One work item as the block runs it: the scheduler's (b, h, query tile), resolved.
struct WorkTile {
  int b, h, hk;  // batch entry, query head, the KV head it reads (GQA)
  int q0;        // its first query row
  int Tc;        // the KV tiles it needs
};
// (Br = order.rows, known at compile time: the launch makes the order with the kernel's D.)
template <int Br>
__device__ __forceinline__ WorkTile work_tile(const Problem& p, const fa3::TileOrder& order,
                                              int64_t w) {
  const fa3::WorkItem item = fa3::work_item(order, w);
  const int q0 = item.tile * Br;
  return {item.b, item.h, item.h / p.group_size, q0, kv_tile_count<Br, kBc>(p, q0)};
}

// What the producer hands the consumers with each Q (a slot per Q buffer, published by the Q
// ring's full phase): the work item, -1 where none is left, and the item worked out, so that
// the consumers, whose time between items is the kernel's at short N, do not divide their way
// to it again (bench/gpu/NOTES.md, "fa3's pipeline logged").
struct ItemSlot {
  int64_t item;
  WorkTile w;
};

// The SRAM of one block: the barriers and the item slots, then the Q buffers, then the K ring
// and the V ring, then sO where O is staged (each consumer's (64, D) after the one before).
// Every tile is D / 64 slabs of (rows, 64), one after the other.
using Barriers = hopper::PipelineBarriers<kMaxStages, fa3::kMaxQBuffers>;
template <class T, int D>
struct Sram {
  Barriers* bars;
  ItemSlot* slot;  // per Q buffer: the work item whose Q it holds
  T* sQ;  // (q_buffers, Br, D)
  T* sK;  // (stages, Bc, D)
  T* sV;  // (stages, Bc, D)
  T* sO;  // (Br, D), where O is staged
  __device__ __forceinline__ Sram(unsigned char* raw, int q_buffers, int stages) {
    const uint32_t pad =
        (fa3::kSwizzleAtom - ptx::sram_address(raw) % fa3::kSwizzleAtom) % fa3::kSwizzleAtom;
    unsigned char* base = raw + pad;
    bars = reinterpret_cast<Barriers*>(base);
    slot = reinterpret_cast<ItemSlot*>(base + sizeof(Barriers));
    sQ = reinterpret_cast<T*>(base + fa3::kBarrierBytes);
    sK = sQ + q_buffers * Tiles<T, D>::kQElems;
    sV = sK + stages * Tiles<T, D>::kKVElems;
    sO = sV + stages * Tiles<T, D>::kKVElems;
  }
  __device__ __forceinline__ T* k_tile(int index) const {
    return sK + index * Tiles<T, D>::kKVElems;
  }
  __device__ __forceinline__ T* v_tile(int index) const {
    return sV + index * Tiles<T, D>::kKVElems;
  }
};
static_assert(sizeof(Barriers) % alignof(ItemSlot) == 0 &&
              sizeof(Barriers) + fa3::kMaxQBuffers * sizeof(ItemSlot) <= fa3::kBarrierBytes);

// Where a block's rings stand when a work item starts: the item's KV tile j is the K (and
// V) ring's use kv + j, its Q the Q ring's use q. Each item's tiles continue the rings where
// the last item left them. Only a use's buffer (n % stages) and parity ((n / stages) % 2)
// matter, so kv is kept modulo 2 stages and q modulo 2 Q buffers.
struct RingUses {
  int kv = 0, q = 0;
  __device__ __forceinline__ void advance(int Tc, int stages, int q_buffers) {
    kv = (kv + Tc) % (2 * stages);
    q = q + 1 == 2 * q_buffers ? 0 : q + 1;
  }
  // The Q ring's stage of use q, without a division (q < 2 q_buffers).
  __device__ __forceinline__ Stage q_stage(int q_buffers) const {
    return Stage::of_use_below_two_passes(q, q_buffers);
  }
};

// The producer's work: a work item's Q, then K_j and V_j into their rings. Each call is
// made by a whole warp: every lane waits for the buffer, one elected lane issues.
template <class T, int D>
struct Loader {
  const TensorMaps* maps;
  Sram<T, D> sram;
  int q_buffers;
  int stages;

  // Waits until every consumer is done with the last use of the Q buffer that use `use`
  // takes (its item's last S): the buffer, and its item slot, may then be written.
  __device__ __forceinline__ void acquire_q(int use) const {
    sram.bars->q.producer_acquire(Stage(use, q_buffers));
  }
  // Q of work item `item` (w), as the Q ring's use `use`, acquired: the elected lane writes
  // the item and w to the slot the consumers read them from, then announces Q's bytes on the
  // full barrier, whose phase publishes both (an arrive releases the writes before it).
  __device__ __forceinline__ void load_q(const WorkTile& w, int64_t item, int use) const {
    const Stage st(use, q_buffers);
    if (hopper::elect_one_lane()) {
      sram.slot[st.index] = {item, w};
      uint64_t* bar = sram.bars->q.producer_expect(st, Tiles<T, D>::kQBytes);
      T* sQ = sram.sQ + st.index * Tiles<T, D>::kQElems;
#pragma unroll
      for (int s = 0; s < Tiles<T, D>::kSlabs; ++s)
        hopper::tma_load_4d(sQ + s * Tiles<T, D>::kBr * kSlab, &maps->q.map, bar, s * kSlab, w.q0,
                            w.h * maps->q.head_step, w.b * maps->q.batch_step);
    }
    __syncwarp();
  }
  // No work item left for the block: the slot says so (-1) on the Q ring's use `use`,
  // acquired, and an arrival without bytes completes its phase.
  __device__ __forceinline__ void publish_end(int use) const {
    const Stage st(use, q_buffers);
    if (hopper::elect_one_lane()) {
      sram.slot[st.index].item = -1;
      hopper::mbarrier_arrive(&sram.bars->q.full[st.index]);
    }
    __syncwarp();
  }
  // Consumer: the work item of the Q ring's use `use`, once the producer has published it
  // (-1: the block is done).
  __device__ __forceinline__ int64_t wait_item(int use) const {
    const Stage st(use, q_buffers);
    sram.bars->q.consumer_wait(st);
    return *static_cast<const volatile int64_t*>(&sram.slot[st.index].item);
  }
  // Consumer: the worked-out item of the Q ring's use at stage st, once published. (Waiting
  // on a phase that has completed returns at once; the next phase of this buffer cannot
  // complete before the consumers have released it.)
  __device__ __forceinline__ WorkTile published_tile(Stage st) const {
    sram.bars->q.consumer_wait(st);
    const volatile WorkTile& w = sram.slot[st.index].w;
    return {w.b, w.h, w.hk, w.q0, w.Tc};
  }
  // Tile j of the item's K (or V), as its ring's use `use`.
  __device__ __forceinline__ void load_kv(hopper::Ring<kMaxStages>& ring, T* tiles,
                                          const hopper::TensorMap* map, const WorkTile& w, int use,
                                          int j) const {
    const Stage st(use, stages);
    ring.producer_acquire(st);
    if (hopper::elect_one_lane()) {
      uint64_t* bar = ring.producer_expect(st, Tiles<T, D>::kKVBytes);
      T* sX = tiles + st.index * Tiles<T, D>::kKVElems;
#pragma unroll
      for (int s = 0; s < Tiles<T, D>::kSlabs; ++s)
        hopper::tma_load_4d(sX + s * kBc * kSlab, &map->map, bar, s * kSlab, j * kBc,
                            w.hk * map->head_step, w.b * map->batch_step);
    }
    __syncwarp();
  }
  __device__ __forceinline__ void load_k(const WorkTile& w, const RingUses& at, int j) const {
    load_kv(sram.bars->k, sram.sK, &maps->k, w, at.kv + j, j);
  }
  __device__ __forceinline__ void load_v(const WorkTile& w, const RingUses& at, int j) const {
    load_kv(sram.bars->v, sram.sV, &maps->v, w, at.kv + j, j);
  }
};

// ---- The consumer's per-tile algebra, on one thread's share of a (64, Bc) tile ----------
// The thread holds rows g and g + 8 of its warp's 16 (g = lane / 4): element 4 nt + e of rS
// is row g + 8 (e / 2), key 8 nt + 2 (lane % 4) + e % 2 (wgmma's accumulator layout).
constexpr int kSRegs = fa3::s_registers();  // (64, Bc) fp32 over 128 threads

// The key of element i of the thread's share, counted from the thread's first key of the
// tile (k0 + 2 (lane % 4)), and the row (0 or 1: g or g + 8) it belongs to.
__device__ __forceinline__ constexpr int key_of(int i) { return (i / 4) * 8 + i % 2; }
__device__ __forceinline__ constexpr int row_of(int i) { return (i % 4) / 2; }
// W, the A operand of U += W V, in T: the two accumulator tiles of keys 16 kk .. 16 kk + 15
// are exactly one A fragment (wgmma.cuh), whose register q packs elements i and i + 1 of the
// thread's share, i = w_element(kk, q): row g + 8 (q % 2), keys + 8 (q / 2).
__device__ __forceinline__ constexpr int w_element(int kk, int q) {
  return 8 * kk + 4 * (q / 2) + 2 * (q % 2);
}

// The accumulator tiles the rows' partial sums and maxima are spread over, so that each is a
// short dependency chain rather than one add (or max) after another across the whole tile.
// (Two: four would need registers that the d = 128 consumer does not have to spare.)
constexpr int kPartials = 2;
static_assert(kPartials == 2 && (kBc / 16) % kPartials == 0, "online_softmax adds two partials");

// The state of the thread's two rows. m is the base the weights are taken against, in raw
// score units; it is the running max, or with conditional rescaling up to tau below it.
struct SoftmaxState {
  float m[2];         // the base of rows g and g + 8
  float l[2];         // this thread's share of the row sums; the quad's total is taken in finalize
  float max_seen[2];  // the running max, which the base may trail (conditional rescaling)
};

// How the base moves: after every tile whose max is larger (FlashAttention-2 and -3), or,
// under the conditional rule, only once the max has outgrown it by more than tau
// (FlashAttention-4); `counted` is the conditional rule that also counts what each update
// did (a kernel of its own: the counting needs registers, and at d = 128 spills some).
enum class Rescale { standard, conditional, counted };
__host__ __device__ constexpr bool is_conditional(Rescale r) { return r != Rescale::standard; }

struct RescaleRule {
  unsigned long long* counts;  // FLASHLAB_RESCALE_COUNTS to add each update to, or nullptr
  float tau;                   // in log2 units: flashlab::cpu::kFa4RescaleThresholdLog2
};

// What the updates of one tile did, for the counts (flashlab_rescale_count).
struct TileEvents {
  unsigned rescaled = 0, skipped = 0;
};


// Adds a warp's counts to the device's: one atomic per count and warp, none when zero.
// Counts are added modulo 2^64, so that a negative term (kept, below) subtracts.
__device__ __forceinline__ void add_count(unsigned long long* counts, int k, int thread_count) {
  const int warp_total = __reduce_add_sync(kFullWarp, unsigned(thread_count));
  if (threadIdx.x % kWarpSize == 0 && warp_total != 0)
    atomicAdd(counts + k, (unsigned long long)(long long)warp_total);
}

// The updates of one tile in which a row's max grew, whether its base moved or was kept.
__device__ __forceinline__ void count_growth(const TileEvents& events, unsigned long long* counts) {
  add_count(counts, FLASHLAB_RESCALE_RESCALED, int(events.rescaled));
  add_count(counts, FLASHLAB_RESCALE_SKIPPED, int(events.skipped));
  // These updates are not `kept`, which count_updates counts among every later update.
  add_count(counts, FLASHLAB_RESCALE_KEPT, -int(events.rescaled + events.skipped));
}

// A counted row takes part in the KV tiles that hold a key before its key_end: its first
// update sets the base, and every later one was kept, unless count_growth counted it.
__device__ __forceinline__ void count_updates(const int (&key_end)[2], unsigned counted, int Tc,
                                              unsigned long long* counts) {
  int first = 0, later = 0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int updates =
        (counted >> r & 1u) && key_end[r] > 0 ? min(Tc, (key_end[r] + kBc - 1) / kBc) : 0;
    first += updates > 0;
    later += max(updates - 1, 0);
  }
  add_count(counts, FLASHLAB_RESCALE_FIRST, first);
  add_count(counts, FLASHLAB_RESCALE_KEPT, later);
}

// The base of a row after a tile whose max is tile_max, the factor alpha its l and U are
// multiplied by, and (conditional rule) what the update did, in events.
template <Rescale kRescale>
__device__ __forceinline__ float move_base(SoftmaxState& state, int r, float tile_max,
                                           const RescaleRule& rule, bool counted,
                                           TileEvents& events, float scale_log2, float& alpha) {
  const float m_old = state.m[r];
  const bool grew = tile_max > state.max_seen[r];
  // (tile_max - m_old) is +inf on a row's first unmasked tile (the base moves), NaN on a
  // tile where the row is wholly masked and has seen nothing yet (the base stays -inf).
  const bool move = !is_conditional(kRescale) || (tile_max - m_old) * scale_log2 > rule.tau;
  const float m_new = move ? fmaxf(m_old, tile_max) : m_old;
  // A row that has seen only masked keys still has m = -inf: exponentiate against 0
  // instead, since 2^(-inf - (-inf)) is NaN; its W and alpha then come out 0. alpha is
  // 2^((m - m') s), the difference taken first, so that it is exactly 1 where the base stays
  // (as in the CPU reference): m s - m' s would be fused into one multiply-add against m' s
  // rounded, leaving the rounding error of m s, and a tile that moves nothing (one wholly
  // masked, say) would still scale l and U by 2^e.
  const float m_finite = m_new == -INFINITY ? 0.0f : m_new;
  const float base = m_finite * scale_log2;
  alpha = move ? ptx::exp2_approx((m_old - m_finite) * scale_log2) : 1.0f;
  state.m[r] = m_new;
  state.max_seen[r] = fmaxf(state.max_seen[r], tile_max);
  if (kRescale == Rescale::counted && counted) {
    const bool later_growth = m_old != -INFINITY && grew;
    events.rescaled += later_growth && move;
    events.skipped += later_growth && !move;
  }
  return base;
}

// m' = max(m, rowmax S) (or m kept, under the conditional rule); alpha = 2^((m - m') s);
// W = 2^(S s - m' s); l = alpha l + rowsum W (flashlab::cpu::update and the l half of
// accumulate), with s = scale * log2(e). kMasked: scores of keys at or past key_end[r] (the
// thread's first masked key of row r, counted as key_of counts) are -inf; tiles that need
// no mask take the kMasked = false path, which reads S as it is. W, the A operand of
// U += W V in T (fa3::w_buffers): kPackHere (two W buffers), packed as it is made into
// rW_out, the buffer that the product in flight does not read; else (one buffer,
// FlashAttention-3's order) written over S in fp32, element for element, for pack_w to pack
// once that product has landed. U's half of accumulate (alpha U, then + W V) is the
// caller's, since U may still be being written by the tensor cores here.
// kSoftwareExp2 (unmasked tiles only, where every score is finite): the slices kk with
// kk % kSoftwareExp2Period == kSoftwareExp2Period - 1 take 2^x from software_exp2 (FMA pipe),
// the others from ex2.approx (MUFU).
template <class T, bool kMasked, Rescale kRescale, bool kSoftwareExp2, bool kPackHere>
__device__ __forceinline__ void online_softmax(SoftmaxState& state, float (&rS)[kSRegs],
                                               const int (&key_end)[2], const RescaleRule& rule,
                                               unsigned counted, float (&alpha)[2],
                                               uint32_t (&rW_out)[kBc / 16][4], float scale_log2) {
  static_assert(!(kMasked && kSoftwareExp2), "software_exp2 takes finite scores only");
  const auto score = [&](int i) {
    if constexpr (kMasked) return key_of(i) >= key_end[row_of(i)] ? -INFINITY : rS[i];
    return rS[i];
  };
  float base[2];
  TileEvents events;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float part[kPartials];
#pragma unroll
    for (int c = 0; c < kPartials; ++c) part[c] = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
      part[nt % kPartials] =
          fmaxf(part[nt % kPartials], fmaxf(score(4 * nt + 2 * r), score(4 * nt + 2 * r + 1)));
    const float tile_max = quad_max(fmaxf(part[0], part[1]));
    base[r] = move_base<kRescale>(state, r, tile_max, rule, counted >> r & 1u, events, scale_log2,
                                  alpha[r]);
  }
  if (kRescale == Rescale::counted) count_growth(events, rule.counts);
  float row_sum[2][kPartials] = {};
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk) {
    // Known at compile time: kk is unrolled.
    const bool on_fma_pipe =
        kSoftwareExp2 && kk % fa3::kSoftwareExp2Period == fa3::kSoftwareExp2Period - 1;
    const auto power_of_2 = [&](float x) {
      return on_fma_pipe ? software_exp2(x) : ptx::exp2_approx(x);
    };
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = w_element(kk, q), r = row_of(i);
      const float w0 = power_of_2(fmaf(score(i), scale_log2, -base[r]));
      const float w1 = power_of_2(fmaf(score(i + 1), scale_log2, -base[r]));
      row_sum[r][kk % kPartials] += w0 + w1;
      if constexpr (kPackHere) {
        rW_out[kk][q] = ptx::pack2<T>(w0, w1);
      } else {
        rS[i] = w0;
        rS[i + 1] = w1;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) state.l[r] = alpha[r] * state.l[r] + (row_sum[r][0] + row_sum[r][1]);
}

// W in T, the A operand of U += W V, from W in fp32 (written over S), as w_element lays it out.
template <class T>
__device__ __forceinline__ void pack_w(uint32_t (&rW)[kBc / 16][4], const float (&rS)[kSRegs]) {
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = w_element(kk, q);
      rW[kk][q] = ptx::pack2<T>(rS[i], rS[i + 1]);
    }
}

// U = alpha U: elements 0, 1 of each accumulator tile are row g, 2, 3 row g + 8.
template <int D>
__device__ __forceinline__ void rescale(float (&rU)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < D / 2; ++i) rU[i] *= alpha[(i % 4) / 2];
}

// Issues S = Q K_j^T for the warpgroup's 64 rows: D / 16 instructions over d, committed as
// one group. q_desc and k_desc describe row 0, column 0 of the warpgroup's rows of sQ and of
// the tile K_j (hopper::descriptor_k_major); each instruction's 16 columns are a constant
// offset from there.
template <class T, int D>
__device__ __forceinline__ void issue_scores(float (&rS)[kSRegs], uint64_t q_desc,
                                             uint64_t k_desc) {
#pragma unroll
  for (int kk = 0; kk < D / hopper::kWgmmaK; ++kk) {
    const int slab = kk * hopper::kWgmmaK / kSlab, col = kk * hopper::kWgmmaK % kSlab;
    const uint32_t q_bytes = (slab * Tiles<T, D>::kBr * kSlab + col) * sizeof(T);
    const uint32_t k_bytes = (slab * kBc * kSlab + col) * sizeof(T);
    hopper::wgmma_ss<T, kBc>(rS, hopper::descriptor_plus(q_desc, q_bytes),
                             hopper::descriptor_plus(k_desc, k_bytes), /*scale_d=*/kk > 0);
  }
  hopper::wgmma_commit();
}

// Issues U += W V_j: Bc / 16 instructions over the keys, committed as one group. v_desc
// describes key row 0 of the tile V_j (hopper::descriptor_mn_major).
template <class T, int D>
__device__ __forceinline__ void issue_values(float (&rU)[D / 2], const uint32_t (&rW)[kBc / 16][4],
                                             uint64_t v_desc) {
#pragma unroll
  for (int kk = 0; kk < kBc / hopper::kWgmmaK; ++kk) {
    const uint32_t v_bytes = kk * hopper::kWgmmaK * kSlab * sizeof(T);
    hopper::wgmma_rs<T, D>(rU, rW[kk], hopper::descriptor_plus(v_desc, v_bytes), /*scale_d=*/1);
  }
  hopper::wgmma_commit();
}

// Ping-pong: wait for this warpgroup's turn to issue matmuls; hand the turn to the next of
// the `consumers` (round robin: 0, 1, .., consumers - 1, 0, ..).
__device__ __forceinline__ void wait_turn(int consumer) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(kTurnBarrier0 + consumer), "n"(kTurnThreads)
               : "memory");
}
template <int kConsumers>
__device__ __forceinline__ void pass_turn(int consumer) {
  // (With two, 1 - consumer: the same turn, and the instructions d = 128's kernel was
  // measured with.)
  const int next = kConsumers == 2 ? 1 - consumer : (consumer + 1) % kConsumers;
  asm volatile("bar.arrive %0, %1;\n" ::"r"(kTurnBarrier0 + next), "n"(kTurnThreads) : "memory");
}

// Whether KV tile [k0, k0 + Bc) needs masking for query rows from `first_row` on.
__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int first_row, int k0) {
  return k0 + kBc > p.n_k || (p.causal && k0 + kBc - 1 > first_row + p.causal_offset);
}

// The run-time switches (flashlab/fa3.h) the kernel reads; the other two are template
// parameters, since they change what lives in registers.
struct Switches {
  int stages;
  bool ping_pong;
  RescaleRule rescale;
  bool overlap_items;  // consumers run across work items, where the kernel can (below)
};

struct Fa3Params {
  Problem p;
  Switches sw;
  fa3::TileOrder order;  // the work items and the order blocks take them in
  int q_buffers;         // Q's buffers (fa3::q_buffers): two let consumers run across items
  unsigned long long* queue;  // the work queue's count of items taken (zeroed), or nullptr:
                              // fixed turns (flashlab_fa3_options.grid)
  bool stage_o;          // O through sO and TMA stores (fa3::stages_o), else from registers
};

// The LSE, L = m + log l (natural log) of row `row`, by the quad's lane 0; -inf for a row that
// saw no key.
__device__ __forceinline__ void store_lse(const SoftmaxState& state, const Problem& p, int b, int h,
                                          int row, float l_row, int lane, float scale_log2, int r) {
  if (p.lse != nullptr && lane % 4 == 0)
    p.lse[(size_t(b) * p.heads_q + h) * p.n_q + row] =
        l_row > 0.0f ? (state.m[r] * scale_log2 + log2f(l_row)) * kLn2 : -INFINITY;
}

// O = U / l and L = m + log l (flashlab::cpu::finalize) for the thread's two rows, O stored
// from the registers: 4 bytes per thread and store, half a 32-byte sector each.
template <class T, int D>
__device__ __forceinline__ void finalize(const SoftmaxState& state, const float (&rU)[D / 2],
                                         const Problem& p, int b, int h, int row_g, int lane,
                                         float scale_log2) {
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;  // (N_q, D)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l_row = quad_sum(state.l[r]);
    const int row = row_g + r * 8;
    if (row >= p.n_q) continue;
    const float inv_l = l_row > 0.0f ? 1.0f / l_row : 0.0f;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const int col = nt * 8 + (lane % 4) * 2;
      *reinterpret_cast<uint32_t*>(gO + row * p.o_stride.row + col) =
          ptx::pack2<T>(rU[4 * nt + 2 * r] * inv_l, rU[4 * nt + 2 * r + 1] * inv_l);
    }
    store_lse(state, p, b, h, row, l_row, lane, scale_log2, r);
  }
}

__device__ __forceinline__ void epilogue_barrier(int consumer) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(kEpilogueBarrier0 + consumer), "n"(kWarpgroupThreads)
               : "memory");
}

// The same through SRAM: the warpgroup writes O = U / l into its sO (64, D) in the 128-byte
// swizzle (row r's 16-byte chunk c at chunk c ^ (r % 8): a warp's 32 lanes hit 32 banks),
// then thread 0 issues one TMA store per slab and goes on; before the next tile writes sO,
// it waits until those stores have read it. Rows past N_q are written to sO, never to HBM
// (the copy engine stops at the tensor's end).
template <class T, int D>
__device__ __forceinline__ void finalize_staged(const SoftmaxState& state, const float (&rU)[D / 2],
                                                const Problem& p, const hopper::TensorMap& map_o,
                                                T* sO, const WorkTile& w, int consumer,
                                                int first_row, int t,
                                                float scale_log2 FLASHLAB_PIPELINE_LOG_PARAM) {
  const int warp = t / kWarpSize, lane = t % kWarpSize;
  if (t == 0) hopper::tma_store_wait_read<0>();  // the previous tile's stores have read sO
  epilogue_barrier(consumer);
  FLASHLAB_PIPELINE_LOG(kOReady, flashlab_pipeline_log_item, -1);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l_row = quad_sum(state.l[r]);
    const int local = warp * 16 + lane / 4 + r * 8;  // the row within the consumer's 64
    const float inv_l = l_row > 0.0f ? 1.0f / l_row : 0.0f;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const int slab = nt / (kSlab / 8), chunk = (nt % (kSlab / 8)) ^ (local % 8);
      *reinterpret_cast<uint32_t*>(sO + (slab * fa3::kRowsPerConsumer + local) * kSlab + chunk * 8 +
                                   (lane % 4) * 2) =
          ptx::pack2<T>(rU[4 * nt + 2 * r] * inv_l, rU[4 * nt + 2 * r + 1] * inv_l);
    }
    if (first_row + local < p.n_q)
      store_lse(state, p, w.b, w.h, first_row + local, l_row, lane, scale_log2, r);
  }
  hopper::fence_proxy_async_shared();  // sO's writes, visible to the copy engine
  epilogue_barrier(consumer);
  FLASHLAB_PIPELINE_LOG(kOStaged, flashlab_pipeline_log_item, -1);
  if (t == 0 && first_row < p.n_q) {
#pragma unroll
    for (int s = 0; s < Tiles<T, D>::kSlabs; ++s)
      hopper::tma_store_4d(&map_o.map, sO + s * fa3::kRowsPerConsumer * kSlab, s * kSlab, first_row,
                           w.h * map_o.head_step, w.b * map_o.batch_step);
    hopper::tma_store_commit();
  }
}

// A consumer warpgroup's 64 rows of one work item: the item, where its Q is, and the rows'
// online-softmax state. Where the rows are, and which of their keys are masked, is worked
// out from the item where it is needed (registers are scarcest across items, below).
struct ItemRows {
  WorkTile w;
  Stage q_st;  // the item's Q: its buffer in the Q ring, and the phase
  int tiles;   // the KV tiles the warpgroup computes: w.Tc, or its own_tiles (below)
  SoftmaxState state;
};
// The warpgroup's first row, and the thread's row g (its other row is g + 8).
__device__ __forceinline__ int first_row_of(const WorkTile& w, int consumer) {
  return w.q0 + consumer * fa3::kRowsPerConsumer;
}
// The KV tiles of an item that a consumer's own 64 rows need: none where they start past
// N_q (the item's last query tile, partly empty), and under the causal mask those up to its
// last row's diagonal. With Br = 192 > Bc (d = 64) a diagonal item's first consumers need
// one KV tile fewer than its last, and the last item of a head of N = 2^k rows has one or
// two consumers with no row at all.
__device__ __forceinline__ int own_tiles(const Problem& p, const WorkTile& w, int consumer) {
  const int first_row = first_row_of(w, consumer);
  return first_row < p.n_q ? kv_tile_count<fa3::kRowsPerConsumer, kBc>(p, first_row) : 0;
}
// skip_unseen: the warpgroup computes its own tiles only, else every tile of the item.
__device__ __forceinline__ ItemRows item_rows(const Problem& p, const WorkTile& w, Stage q_st,
                                              int consumer, bool skip_unseen) {
  return {w, q_st, skip_unseen ? own_tiles(p, w, consumer) : w.Tc,
          {{-INFINITY, -INFINITY}, {0.0f, 0.0f}, {-INFINITY, -INFINITY}}};
}
__device__ __forceinline__ int row_g_of(int first_row) {
  const int t = threadIdx.x % kWarpgroupThreads;
  return first_row + t / kWarpSize * 16 + t % kWarpSize / 4;
}
// Bit r: row r's updates are counted, by the quad's lane 0, for rows inside N_q.
__device__ __forceinline__ unsigned counted_rows(const Problem& p, int row_g) {
  return threadIdx.x % 4 != 0 ? 0u : unsigned(row_g < p.n_q) | unsigned(row_g + 8 < p.n_q) << 1;
}
// Row r's first masked key: N_k, or under the causal mask the key after its diagonal.
__device__ __forceinline__ int row_key_end(const Problem& p, int row_g, int r) {
  return p.causal ? min(p.n_k, row_g + 8 * r + p.causal_offset + 1) : p.n_k;
}

// The consumer's mainloop: one consumer warpgroup's 64 rows of each of a block's work items,
// from `item` on, each from its first tile to O. `skip_unseen` (a producer, no ping-pong, items
// apart, d = 64: fa3::skips_unseen_tiles): the warpgroup
// computes only the KV tiles its own rows see (own_tiles), releasing the item's others unread
// as they land, before its O; the producer loads every tile the item's rows need, and the
// other consumers compute them. (Ping-pong's turns need every consumer to take as many as the
// others; without a producer, warp 0 issues the copies and must walk them all.)
// next_item(item, uses) gives the item after one (-1: none), uses being
// where the rings stand after it; start_item(item, w, uses) runs before an item that starts on its
// own (there, without a producer, warp 0 issues its first copies: `issues`).
// Across work items (`across_items`: a producer, two Q buffers, flashlab_fa3_options.
// overlap_items; never with `issues`, whose copies start_item issues): where an item with KV
// tiles follows one with KV tiles, the first's last section issues its own last U += W V
// and then the second's S_0, writes O while S_0 runs, and the second item's S_0 softmax runs
// at the loop's top; it goes on from its section 1. So S_0's latency is spent writing O
// rather than waiting. Words: `chain` (this item's end issues the next item's S_0) and
// `started` (this item's S_0 was issued so) are the two sides of one hand-over.
// kProducer: a producer warp loads each item's Q and publishes the item, worked out, in the Q
// buffer's slot (ItemSlot), where the consumers read it once the Q has landed; without one,
// each consumer thread works it out from the item's index.
template <class T, int D, bool kProducer, bool kIntraOverlap, Rescale kRescale, bool kSoftwareExp2,
          class NextItem, class StartItem>
__device__ __forceinline__ void consume(const Fa3Params& params, const Sram<T, D>& sram,
                                        int consumer, const Loader<T, D>& loader, bool issues,
                                        bool across_items, bool skip_unseen, int64_t item,
                                        NextItem next_item, StartItem start_item) {
  const Problem& p = params.p;
  const int stages = params.sw.stages;
  const bool ping_pong = params.sw.ping_pong;
  const int t = threadIdx.x % kWarpgroupThreads;
  const int lane = t % kWarpSize;
  const float scale_log2 = p.scale * kLog2e;
  // The operands' descriptors: this warpgroup's rows of Q buffer 0, and buffer 0 of the K
  // and V rings; buffer i of each is i tiles further on.
  const uint64_t q_desc0 =
      hopper::descriptor_k_major(sram.sQ + consumer * fa3::kRowsPerConsumer * kSlab);
  const uint64_t k_desc0 = hopper::descriptor_k_major(sram.k_tile(0));
  const uint64_t v_desc0 = hopper::descriptor_mn_major(sram.v_tile(0), kBc);
  const auto q_desc = [&](Stage q_st) {
    return hopper::descriptor_plus(q_desc0, q_st.index * Tiles<T, D>::kQBytes);
  };
  const auto k_desc = [&](int index) {
    return hopper::descriptor_plus(k_desc0, index * Tiles<T, D>::kKVBytes);
  };
  const auto v_desc = [&](int index) {
    return hopper::descriptor_plus(v_desc0, index * Tiles<T, D>::kKVBytes);
  };
  hopper::Ring<fa3::kMaxQBuffers>& q_ring = sram.bars->q;
  hopper::Ring<kMaxStages>& k_ring = sram.bars->k;
  hopper::Ring<kMaxStages>& v_ring = sram.bars->v;
  // K_j (at stage st) is done with once S_j has landed; the item's Q too, after its last S.
  const auto release_k = [&](Stage st, const ItemRows& rows, int j) {
    k_ring.consumer_release(st);
    if (j == rows.tiles - 1) q_ring.consumer_release(rows.q_st);
  };
  const RescaleRule& rule = params.sw.rescale;
  // pipeline_log.cuh: nothing unless a bench program asks for the log (its thread 0 writes).
  FLASHLAB_PIPELINE_LOG_WRITER(1 + consumer, t == 0);

  RingUses at;           // where the rings stand at the item's start
  // The K (and V) ring's stage of the last KV tile read: a section steps it to its own K_j.
  // (It is the ring's use at.kv + j, kept by steps rather than divisions.)
  Stage k_st(0, stages);
  const auto work_tile_of = [&](int64_t w) {
    return work_tile<Tiles<T, D>::kBr>(p, params.order, w);
  };
  const auto rows_of = [&](int64_t w, Stage q_st) {
    return item_rows(p, kProducer ? loader.published_tile(q_st) : work_tile_of(w), q_st, consumer,
                     skip_unseen);
  };
  ItemRows cur = rows_of(item, at.q_stage(params.q_buffers));
  float rU[D / 2];   // (64, D) of U = sum of W V, not divided by l
  float rS[kSRegs];  // (64, Bc) of S, then of W_j in fp32 until it is packed
  // W in T, the A operand of U += W V (fa3::w_buffers): with two, W_{j-1} in one, W_j packed
  // into the other as soon as the softmax has made it, while U += W_{j-1} V_{j-1} may still
  // run; they trade places every section. With one (rW_next unused), W_j is packed into rW
  // once U += W_{j-1} V_{j-1} has landed.
  constexpr bool kTwoWBuffers = Tiles<T, D>::kWBuffers == 2;
  constexpr int consumers = Tiles<T, D>::kConsumers;
  uint32_t rW[kBc / 16][4];
  uint32_t rW_next[kBc / 16][4];
  const auto zero_u = [&] {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) rU[i] = 0.0f;
  };
  // The online softmax of the rows' tile whose first key is k0, masked only where it must be.
  // W_j goes into rW_out (two W buffers) or over S_j (one: pack, below).
  const auto softmax = [&](ItemRows& rows, int k0, float(&alpha)[2],
                           uint32_t(&rW_out)[kBc / 16][4]) {
    const int first_row = first_row_of(rows.w, consumer), row_g = row_g_of(first_row);
    const unsigned counted = kRescale == Rescale::counted ? counted_rows(p, row_g) : 0u;
    if (tile_needs_mask(p, first_row, k0)) {
      const int first_key = k0 + 2 * (lane % 4);
      const int key_end[2] = {row_key_end(p, row_g, 0) - first_key,
                              row_key_end(p, row_g, 1) - first_key};
      online_softmax<T, true, kRescale, /*kSoftwareExp2=*/false, kTwoWBuffers>(
          rows.state, rS, key_end, rule, counted, alpha, rW_out, scale_log2);
    } else {
      const int none[2] = {kBc, kBc};
      online_softmax<T, false, kRescale, kSoftwareExp2, kTwoWBuffers>(
          rows.state, rS, none, rule, counted, alpha, rW_out, scale_log2);
    }
  };
  // O = U / l and L = m + log l of the rows, once their last U += W V has landed.
  const auto write_o = [&](const ItemRows& rows) {
    const int first_row = first_row_of(rows.w, consumer), row_g = row_g_of(first_row);
    if (kRescale == Rescale::counted) {
      const int key_end[2] = {row_key_end(p, row_g, 0), row_key_end(p, row_g, 1)};
      count_updates(key_end, counted_rows(p, row_g), rows.w.Tc, rule.counts);
    }
    if (params.stage_o)
      finalize_staged<T, D>(rows.state, rU, p, loader.maps->o,
                            sram.sO + consumer * fa3::kRowsPerConsumer * D, rows.w, consumer,
                            first_row, t, scale_log2 FLASHLAB_PIPELINE_LOG_ARG(item));
    else
      finalize<T, D>(rows.state, rU, p, rows.w.b, rows.w.h, row_g, lane, scale_log2);
  };

  // One W buffer: W_j, from rS (where the softmax wrote it over S_j) into rW_to, once nothing
  // reads it (with two, the softmax packed it already).
  const auto pack = [&](uint32_t(&rW_to)[kBc / 16][4]) {
    if constexpr (!kTwoWBuffers) {
      hopper::fence_registers(rS);
      pack_w<T>(rW_to, rS);
    }
  };
  // Section j (1 <= j < Tc): U += W_{j-1} V_{j-1} (W_{j-1} in rW_prev), S_j and its softmax,
  // W_j into rW_made (the other buffer, or with one buffer the same, once the product has
  // landed), U rescaled by the softmax's alpha.
  const auto section = [&](int j, const uint32_t(&rW_prev)[kBc / 16][4],
                           uint32_t(&rW_made)[kBc / 16][4]) {
    const Stage v_st = k_st;  // tile j - 1: the V ring's uses are the K ring's
    k_st = k_st.next(stages);
    k_ring.consumer_wait(k_st);
    v_ring.consumer_wait(v_st);
    FLASHLAB_PIPELINE_LOG(kDataLanded, item, j);
    if (ping_pong) {
      wait_turn(consumer);
      FLASHLAB_PIPELINE_LOG(kTurn, item, j);
    }
    hopper::wgmma_fence();  // rU was rescaled and rW written by ordinary instructions
    // Intra-warpgroup overlap (kIntraOverlap): S_j is issued before U += W_{j-1} V_{j-1}, so
    // that S_j's softmax below runs while the tensor cores still compute that product.
    if (kIntraOverlap) {
      issue_scores<T, D>(rS, q_desc(cur.q_st), k_desc(k_st.index));
      issue_values<T, D>(rU, rW_prev, v_desc(v_st.index));
    } else {
      issue_values<T, D>(rU, rW_prev, v_desc(v_st.index));
      issue_scores<T, D>(rS, q_desc(cur.q_st), k_desc(k_st.index));
    }
    if (ping_pong) pass_turn<consumers>(consumer);
    FLASHLAB_PIPELINE_LOG(kScoresIssued, item, j);

    float alpha[2];
    if (kIntraOverlap) {
      hopper::wgmma_wait<1>();  // S_j is done; W_{j-1} V_{j-1} may still run
      hopper::fence_registers(rS);
      FLASHLAB_PIPELINE_LOG(kScoresLanded, item, j);
      release_k(k_st, cur, j);
      softmax(cur, j * kBc, alpha, rW_made);
      FLASHLAB_PIPELINE_LOG(kSoftmaxDone, item, j);
      hopper::wgmma_wait<0>();  // U += W_{j-1} V_{j-1} has landed: now U may be rescaled
      hopper::fence_registers(rU);
      FLASHLAB_PIPELINE_LOG(kValuesLanded, item, j - 1);
      v_ring.consumer_release(v_st);
      pack(rW_made);
    } else {
      hopper::wgmma_wait<0>();
      hopper::fence_registers(rS);
      hopper::fence_registers(rU);
      FLASHLAB_PIPELINE_LOG(kScoresLanded, item, j);
      FLASHLAB_PIPELINE_LOG(kValuesLanded, item, j - 1);
      release_k(k_st, cur, j);
      v_ring.consumer_release(v_st);
      softmax(cur, j * kBc, alpha, rW_made);
      pack(rW_made);
      FLASHLAB_PIPELINE_LOG(kSoftmaxDone, item, j);
    }
    if (issues) {  // no producer warpgroup: refill the buffers just released
      if (j + stages < cur.w.Tc) loader.load_k(cur.w, at, j + stages);
      if (j - 1 + stages < cur.w.Tc) loader.load_v(cur.w, at, j - 1 + stages);
    }
    // Under the conditional rule, a warp none of whose rows moved its base has alpha = 1
    // on every row and skips the multiply (FlashAttention-4's saving).
    if (!is_conditional(kRescale) || __any_sync(kFullWarp, alpha[0] != 1.0f || alpha[1] != 1.0f))
      rescale<D>(rU, alpha);
  };

  bool started = false;  // cur's S_0 was issued in the last item's last section
  // Ping-pong's turn between items, where items run one after the other (not across items):
  // the last consumer hands consumer 0 the turn for the next item's S_0 as soon as it has
  // issued its last U += W V, so that consumer 0 need not wait for the last consumer's O. It
  // does so once before the block's first item, then at the end of every item with tiles;
  // consumer 0 takes each at its next S_0, and the one left over, which no item follows,
  // before it returns. (No flag kept across the loop instead: the kernels that chain items
  // have no register to spare for one.)
  const bool hand_over_early = ping_pong && !across_items;
  if (hand_over_early && consumer == consumers - 1) pass_turn<consumers>(consumer);
  while (true) {
    const int Tc = cur.tiles;  // the tiles this warpgroup computes (cur.w.Tc: the item's)
    FLASHLAB_PIPELINE_LOG(kItem, item, Tc);
    if (!started) {
      // Section 0: S_0 (its softmax follows, below). Ping-pong: consumer 0 goes first; the
      // last consumer hands it the first turn. Each consumer then waits once per section, a
      // started item's section 0 being the last item's last section; the last consumer skips
      // its hand-over only in a last section that starts no item (no one would wait for it).
      start_item(item, cur.w, at);
      q_ring.consumer_wait(cur.q_st);
      FLASHLAB_PIPELINE_LOG(kQLanded, item, -1);
      if (Tc == 0) q_ring.consumer_release(cur.q_st);  // no key to read Q against
      if (ping_pong && across_items && consumer == consumers - 1 && Tc > 0)
        pass_turn<consumers>(consumer);
      if (Tc > 0) {
        k_ring.consumer_wait(k_st);
        FLASHLAB_PIPELINE_LOG(kDataLanded, item, 0);
        if (ping_pong) {
          wait_turn(consumer);
          FLASHLAB_PIPELINE_LOG(kTurn, item, 0);
        }
        hopper::wgmma_fence();
        issue_scores<T, D>(rS, q_desc(cur.q_st), k_desc(k_st.index));
        if (ping_pong) pass_turn<consumers>(consumer);
        FLASHLAB_PIPELINE_LOG(kScoresIssued, item, 0);
        hopper::wgmma_wait<0>();
        hopper::fence_registers(rS);
        FLASHLAB_PIPELINE_LOG(kScoresLanded, item, 0);
        release_k(k_st, cur, 0);
        if (issues && stages < cur.w.Tc) loader.load_k(cur.w, at, stages);
      }
    } else if (Tc == 1) {
      q_ring.consumer_release(cur.q_st);  // its one S landed in the last item's last section
    }
    if (Tc > 0) {
      float alpha[2];  // U is 0: nothing to rescale
      softmax(cur, 0, alpha, rW);
      pack(rW);  // free: the last item's last U += W V has landed
      FLASHLAB_PIPELINE_LOG(kSoftmaxDone, item, 0);
    }
    // U = 0 for the item's first U += W V, set only now: from O's writing to here U holds
    // nothing, and its registers are free for the softmax of S_0.
    zero_u();
    if constexpr (kTwoWBuffers) {
      // Sections 1 .. Tc - 1, two per turn, the W buffers trading places, so that W_j never
      // has to be copied into the registers W_{j-1} held (32 moves per tile); W_{Tc-1} is
      // then moved into rW once for the last section.
      for (int j = 1; j < Tc; j += 2) {
        section(j, rW, rW_next);
        if (j + 1 < Tc) section(j + 1, rW_next, rW);
      }
      if (Tc % 2 == 0 && Tc > 0) {
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk)
#pragma unroll
          for (int q = 0; q < 4; ++q) rW[kk][q] = rW_next[kk][q];
      }
    } else {
      for (int j = 1; j < Tc; ++j) section(j, rW, rW);
    }

    // Section Tc: the last U += W_{Tc-1} V_{Tc-1}, then O. Across items, the next item's S_0
    // is issued right after it (its Q in the other buffer, its K_0 next in the ring) and runs
    // while O is written; its softmax follows.
    RingUses after = at;
    after.advance(cur.w.Tc, stages, params.q_buffers);
    int64_t next = -1;
    bool chain = false;  // the next item's S_0 goes with this section
    if (across_items) {
      next = next_item(item, after);
      // (The next item's tiles are worked out again at the loop's end rather than kept
      // across O: registers are what this section is short of.)
      // Without the mask every item has tiles where this one has: nothing to work out.
      chain = Tc > 0 && next >= 0 && (!p.causal || work_tile_of(next).Tc > 0);
    }
    const Stage v_st = k_st;               // tile Tc - 1 (unused where Tc = 0)
    if (Tc > 0) k_st = k_st.next(stages);  // tile Tc: the next item's K_0, or one not computed
    // The two cases apart, each with its own O: ptxas must see, on each path, which
    // accumulators are still being written while O is (else it serialises every wgmma).
    const auto last_values = [&] {
      v_ring.consumer_wait(v_st);
      FLASHLAB_PIPELINE_LOG(kDataLanded, item, Tc);
      if (ping_pong) {
        wait_turn(consumer);
        FLASHLAB_PIPELINE_LOG(kTurn, item, Tc);
      }
      hopper::wgmma_fence();
      issue_values<T, D>(rU, rW, v_desc(v_st.index));
      FLASHLAB_PIPELINE_LOG(kValuesIssued, item, Tc - 1);
    };
    if (chain) {
      last_values();
      // Waited for only now, so that a late Q or K_0 holds up S_0 and not U += W V; but
      // still holding the turn, so the next consumer's issue waits too (measured: a loss
      // where they land late, bench/gpu/NOTES.md, and why the switch is off by default).
      const Stage next_q = after.q_stage(params.q_buffers);
      q_ring.consumer_wait(next_q);
      k_ring.consumer_wait(k_st);
      issue_scores<T, D>(rS, q_desc(next_q), k_desc(k_st.index));
      if (ping_pong) pass_turn<consumers>(consumer);
      FLASHLAB_PIPELINE_LOG(kScoresIssued, next, 0);
      hopper::wgmma_wait<1>();  // U += W V has landed; S_0 may still run
      hopper::fence_registers(rU);
      FLASHLAB_PIPELINE_LOG(kValuesLanded, item, Tc - 1);
      v_ring.consumer_release(v_st);
      // O while S_0 runs; then (at the loop's top) S_0's softmax, W_0 packed into rW,
      // which the last U += W V has finished reading.
      write_o(cur);
      FLASHLAB_PIPELINE_LOG(kOWritten, item, -1);
      hopper::wgmma_wait<0>();
      hopper::fence_registers(rS);
      FLASHLAB_PIPELINE_LOG(kScoresLanded, next, 0);
      k_ring.consumer_release(k_st);
    } else {
      if (Tc > 0) {
        last_values();
        if (ping_pong && (consumer != consumers - 1 || hand_over_early))
          pass_turn<consumers>(consumer);
        hopper::wgmma_wait<0>();
        hopper::fence_registers(rU);
        FLASHLAB_PIPELINE_LOG(kValuesLanded, item, Tc - 1);
        v_ring.consumer_release(v_st);
      }
      // The item's tiles past this warpgroup's own (skip_unseen), released unread as they land.
      for (int j = Tc; j < cur.w.Tc; ++j) {
        k_ring.consumer_wait(k_st);
        k_ring.consumer_release(k_st);
        v_ring.consumer_wait(k_st);
        v_ring.consumer_release(k_st);
        k_st = k_st.next(stages);
      }
      write_o(cur);
      FLASHLAB_PIPELINE_LOG(kOWritten, item, -1);
    }

    if (!across_items) next = next_item(item, after);
    at = after;
    if (next < 0) {
      if (hand_over_early && consumer == 0) wait_turn(consumer);  // the one left over
      return;
    }
    item = next;
    cur = rows_of(item, at.q_stage(params.q_buffers));
    started = chain;
  }
}

// A consumer's last TMA stores of O must have read sO before the block's SRAM goes.
__device__ __forceinline__ void finish_o_stores(const Fa3Params& params) {
  if (params.stage_o && threadIdx.x % kWarpgroupThreads == 0) hopper::tma_store_wait<0>();
}

// The next item from the work queue, for the producer warp: lane 0 counts one more item
// taken and the warp shares the count before it (fa3::next_from_queue).
__device__ __forceinline__ int64_t take_from_queue(const Fa3Params& params) {
  unsigned long long taken = 0;
  if (threadIdx.x % kWarpSize == 0) taken = atomicAdd(params.queue, 1ull);
  taken = __shfl_sync(kFullWarp, taken, 0);
  return fa3::next_from_queue(int64_t(taken), gridDim.x);
}

// The block: its barriers once, then work items from the tile scheduler (one item, or in
// a persistent block several, one after the other), in both arrangements.
// kChainCode: whether the code that runs the consumers across work items is compiled in (and
// then params.sw.overlap_items says whether it runs); fa3::chain_code_in_default_kernel says
// where the default kernel is better without it.
template <class T, int D, bool kWarpSpecialized, bool kIntraOverlap, Rescale kRescale,
          bool kSoftwareExp2, bool kChainCode>
__global__ void __launch_bounds__(fa3::threads(kWarpSpecialized, D), 1)
    fa3_kernel(const __grid_constant__ Fa3Params params, const __grid_constant__ TensorMaps maps) {
  extern __shared__ __align__(128) unsigned char raw_sram[];
  FLASHLAB_PIPELINE_LOG_BLOCK_BEGIN;  // pipeline_log.cuh: nothing unless a bench program asks
  const Problem& p = params.p;
  const fa3::TileOrder& order = params.order;
  const int stages = params.sw.stages;
  const Sram<T, D> sram(raw_sram, params.q_buffers, stages);
  const Loader<T, D> loader{&maps, sram, params.q_buffers, stages};

  if (threadIdx.x == 0) {
    sram.bars->init(params.q_buffers, stages, Tiles<T, D>::kConsumerThreads);
    hopper::fence_barrier_init();
  }
  __syncthreads();

  // Read through a shuffle from lane 0, the warpgroup's index is visibly the same in every
  // lane: ptxas then knows the role branches below are warp-uniform, which it needs to keep
  // the wgmma of a consumer asynchronous rather than serialise them.
  const int warpgroup = __shfl_sync(kFullWarp, int(threadIdx.x) / kWarpgroupThreads, 0);
  // A block's first item in fixed turns (-1: none), and the one after `item`.
  const int64_t first_in_turn = blockIdx.x < order.items ? int64_t(blockIdx.x) : -1;
  const auto next_in_turn = [&](int64_t item) -> int64_t {
    const int64_t next = fa3::next_in_turn(item, gridDim.x);
    return next < order.items ? next : -1;
  };
  if constexpr (kWarpSpecialized) {
    if (warpgroup == 0) {  // the producer
      // Register reallocation (setmaxnreg; fa3::producer_registers, consumer_registers): the
      // producer gives most of its share to the consumers, which only compute.
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tiles<T, D>::kProducerRegisters));
      if (threadIdx.x / kWarpSize == 0) {  // one warp; its elected lane issues the copies
        FLASHLAB_PIPELINE_LOG_WRITER(0, threadIdx.x == 0);
        hopper::tma_prefetch_map(&maps.q.map);
        hopper::tma_prefetch_map(&maps.k.map);
        hopper::tma_prefetch_map(&maps.v.map);
        // Each item's Q once the consumers are done with the item that last used its buffer
        // (the buffer and its item slot are then free: with two buffers, the item before
        // this one's predecessor), then its K_j and V_j as far ahead as the rings allow. The
        // next item is settled as soon as the last of these loads is issued: in fixed turns
        // it is known at once; from the work queue the block claims it then, some `stages`
        // tiles before its consumers are done with this one, so that the atomic's round
        // trip to the L2 and the item's indices are worked out while they finish, not after.
        // It reaches them in its Q buffer's slot, as does the end (-1).
        RingUses at;
        for (int64_t item = blockIdx.x; item < order.items;) {
          const WorkTile w = work_tile<Tiles<T, D>::kBr>(p, order, item);
          loader.acquire_q(at.q);
          loader.load_q(w, item, at.q);
          FLASHLAB_PIPELINE_LOG(kQIssued, item, -1);
          for (int j = 0; j < w.Tc; ++j) {
            loader.load_k(w, at, j);
            FLASHLAB_PIPELINE_LOG(kKIssued, item, j);
            loader.load_v(w, at, j);
            FLASHLAB_PIPELINE_LOG(kVIssued, item, j);
          }
          at.advance(w.Tc, stages, params.q_buffers);
          item = params.queue ? take_from_queue(params) : fa3::next_in_turn(item, gridDim.x);
        }
        if (params.queue) {
          loader.acquire_q(at.q);
          loader.publish_end(at.q);
        }
      }
    } else {
      // Register reallocation's other side: the consumers take what the producer gave up.
      asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tiles<T, D>::kConsumerRegisters));
      // The consumers' items: their fixed turns, which they know, or the queue's, which they
      // read from the slot of the Q buffer that the item's use takes (-1: the end).
      const auto next_item = [&](int64_t item, const RingUses& uses) -> int64_t {
        return params.queue ? loader.wait_item(uses.q) : next_in_turn(item);
      };
      // Across work items where the switch asks for it and the SRAM holds a second Q buffer
      // (fa3::runs_across_items); never in the conditional rule's kernels, whose registers at
      // d = 128 do not stretch to it (ptxas spills), nor in those compiled without the
      // chaining code: known here at compile time, so that their code for it is left out.
      constexpr bool kMayRunAcross = kChainCode && !is_conditional(kRescale);
      const bool across_items =
          kMayRunAcross && fa3::runs_across_items(params.sw.overlap_items, kWarpSpecialized,
                                                  is_conditional(kRescale), params.q_buffers);
      const int64_t first = params.queue ? loader.wait_item(0) : first_in_turn;
      if (first >= 0)
        consume<T, D, /*kProducer=*/true, kIntraOverlap, kRescale, kSoftwareExp2>(
            params, sram, warpgroup - 1, loader, /*issues=*/false, across_items,
            fa3::consumers_skip_unseen(D, kWarpSpecialized, params.sw.ping_pong, across_items),
            first, next_item,
            [](int64_t, const WorkTile&, const RingUses&) {});
      finish_o_stores(params);
    }
  } else {
    // No producer: warp 0 issues each item's Q and first `stages` tiles at its start, and
    // each later tile as soon as its buffer is released (in consume); items start on their own.
    const bool issues = __shfl_sync(kFullWarp, int(threadIdx.x) / kWarpSize, 0) == 0;
    const auto start_item = [&](int64_t item, const WorkTile& w, const RingUses& at) {
      if (!issues) return;
      loader.acquire_q(at.q);
      loader.load_q(w, item, at.q);
      for (int j = 0; j < min(stages, w.Tc); ++j) {
        loader.load_k(w, at, j);
        loader.load_v(w, at, j);
      }
    };
    if (first_in_turn >= 0)
      consume<T, D, /*kProducer=*/false, kIntraOverlap, kRescale, kSoftwareExp2>(
          params, sram, warpgroup, loader, issues, /*across_items=*/false, /*skip_unseen=*/false,
          first_in_turn,
          [&](int64_t item, const RingUses&) { return next_in_turn(item); }, start_item);
    finish_o_stores(params);
  }
  FLASHLAB_PIPELINE_LOG_BLOCK_END;
}

// ---- Host side --------------------------------------------------------------------------

// What the tile scheduler needs to know of the GPU, asked of the driver once per device.
struct DeviceFacts {
  int sm_count = 0;
  int64_t l2_bytes = 0;
};
const DeviceFacts& current_device_facts() {
  static std::mutex mutex;
  static std::map<int, DeviceFacts> known;  // by device ordinal
  int device = 0;
  throw_if_cuda_error(cudaGetDevice(&device), "cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(device);
  if (found == known.end()) {
    DeviceFacts facts;
    int l2 = 0;
    throw_if_cuda_error(
        cudaDeviceGetAttribute(&facts.sm_count, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(MultiProcessorCount)");
    throw_if_cuda_error(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device),
                        "cudaDeviceGetAttribute(L2CacheSize)");
    facts.l2_bytes = l2;
    found = known.emplace(device, facts).first;
  }
  return found->second;  // a map's elements stay where they are as others are added
}

template <class T, int D, bool kWarpSpecialized, bool kIntraOverlap, Rescale kRescale,
          bool kSoftwareExp2 = false, bool kChainCode = true>
void launch(const Problem& p, const flashlab_fa3_options& options, cudaStream_t stream) {
  constexpr flashlab_dtype dtype = kDtypeOf<T>;
  constexpr KernelConfig config = fa3::config(D, dtype);
  static_assert(config.Br == Tiles<T, D>::kBr && config.Bc == kBc);
  static_assert(Tiles<T, D>::kQBytes == fa3::tile_bytes(config.Br, D, dtype) &&
                    Tiles<T, D>::kKVBytes == fa3::tile_bytes(kBc, D, dtype),
                "the kernel carves up the SRAM that kernel_info.hpp says it takes");
  const int64_t sram_bytes = fa3::sram_bytes(D, dtype, options.stages);
  const auto kernel =
      fa3_kernel<T, D, kWarpSpecialized, kIntraOverlap, kRescale, kSoftwareExp2, kChainCode>;
  throw_if_cuda_error(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sram_bytes)),
      "fa3 kernel shared memory");
  TensorMaps maps;
  maps.q = hopper::make_tensor_map("Q", p.q, p.q_stride, p.batch, p.heads_q, p.n_q, D, dtype,
                                   config.Br);
  maps.k = hopper::make_tensor_map("K", p.k, p.k_stride, p.batch, p.heads_kv, p.n_k, D, dtype, kBc);
  maps.v = hopper::make_tensor_map("V", p.v, p.v_stride, p.batch, p.heads_kv, p.n_k, D, dtype, kBc);
  const bool stage_o = fa3::stages_o(D, dtype, options.stages);
  if (stage_o)  // each consumer stores its own 64 rows
    maps.o = hopper::make_tensor_map("O", p.o, p.o_stride, p.batch, p.heads_q, p.n_q, D, dtype,
                                     fa3::kRowsPerConsumer);
  const auto counts = reinterpret_cast<unsigned long long*>(options.rescale_counts);
  const RescaleRule rule{counts, float(cpu::kFa4RescaleThresholdLog2)};
  if (counts != nullptr)
    throw_if_cuda_error(
        cudaMemsetAsync(counts, 0, FLASHLAB_RESCALE_COUNTS * sizeof(int64_t), stream),
        "fa3 rescale counts");
  const DeviceFacts& device = current_device_facts();
  const fa3::TileOrder order =
      fa3::make_tile_order(p.batch, p.heads_q, p.heads_kv, p.n_q, p.n_k, D, sizeof(T), p.causal,
                           device.l2_bytes, options.kv_l2_share);
  const flashlab_fa3_grid grid = fa3::resolve_grid(options.grid, order, kWarpSpecialized);
  // The work queue's count of items taken, zeroed on the stream before the launch.
  std::optional<StreamScratch> queue;
  if (grid == FLASHLAB_FA3_GRID_QUEUE) {
    queue.emplace(sizeof(unsigned long long), stream, "fa3 work queue");
    throw_if_cuda_error(cudaMemsetAsync(queue->get(), 0, sizeof(unsigned long long), stream),
                        "fa3 work queue");
  }
  const Fa3Params params{p,
                         {options.stages, options.ping_pong != 0, rule, options.overlap_items != 0},
                         order,
                         fa3::q_buffers(D, dtype, options.stages),
                         queue ? static_cast<unsigned long long*>(queue->get()) : nullptr,
                         stage_o};
  const auto blocks =
      unsigned(fa3::grid_blocks(order, grid != FLASHLAB_FA3_GRID_PER_TILE, device.sm_count));
  kernel<<<blocks, fa3::threads(kWarpSpecialized, D), sram_bytes, stream>>>(params, maps);
  check_launch("fa3_kernel");
  if (queue) queue->free("fa3 work queue");
}

// Every switch is compiled at the ablation's shape (bf16, d = 128); other (d, dtype) have
// the default arrangement only, which keeps the library's build time in check. The
// conditional rule and the software exponentials are each compiled with the default
// arrangement, at every (d, dtype), but not together.
template <class T, int D>
void launch_switched(const Problem& p, const flashlab_fa3_options& o, cudaStream_t stream) {
  const bool ws = o.warp_specialized != 0, overlap = o.intra_overlap != 0;
  if (o.software_exp2 != 0) {
    if (ws && overlap && o.conditional_rescale == 0)
      return launch<T, D, true, true, Rescale::standard, /*kSoftwareExp2=*/true>(p, o, stream);
    throw Error(FLASHLAB_ERROR_UNSUPPORTED,
                "fa3 with software_exp2 = 1 is compiled with warp_specialized = 1, "
                "intra_overlap = 1 and conditional_rescale = 0 only (given " +
                    std::to_string(o.warp_specialized) + ", " + std::to_string(o.intra_overlap) +
                    " and " + std::to_string(o.conditional_rescale) + ")");
  }
  if (o.conditional_rescale != 0) {
    if (ws && overlap && o.rescale_counts != nullptr)
      return launch<T, D, true, true, Rescale::counted>(p, o, stream);
    if (ws && overlap) return launch<T, D, true, true, Rescale::conditional>(p, o, stream);
    throw Error(FLASHLAB_ERROR_UNSUPPORTED,
                "fa3 with conditional_rescale = 1 is compiled with warp_specialized = 1 and "
                "intra_overlap = 1 only (given " +
                    std::to_string(o.warp_specialized) + " and " + std::to_string(o.intra_overlap) +
                    ")");
  }
  if (ws && overlap) {
    // Items apart where the default kernel is measured faster without the code that chains
    // them (fa3::chain_code_in_default_kernel); the same bits either way.
    if constexpr (!fa3::chain_code_in_default_kernel(D))
      if (o.overlap_items == 0)
        return launch<T, D, true, true, Rescale::standard, false, /*kChainCode=*/false>(p, o,
                                                                                       stream);
    return launch<T, D, true, true, Rescale::standard>(p, o, stream);
  }
  if constexpr (std::is_same_v<T, __nv_bfloat16> && D == 128) {
    if (ws) return launch<T, D, true, false, Rescale::standard>(p, o, stream);
    if (overlap) return launch<T, D, false, true, Rescale::standard>(p, o, stream);
    return launch<T, D, false, false, Rescale::standard>(p, o, stream);
  }
  throw Error(FLASHLAB_ERROR_UNSUPPORTED,
              "fa3 with warp_specialized = " + std::to_string(o.warp_specialized) +
                  " and intra_overlap = " + std::to_string(o.intra_overlap) + " is compiled " +
                  "for bf16 at d = 128 only; at other (d, dtype) both must be 1");
}

}  // namespace

// Each (element type, head dimension of kernel_info.hpp's record) is a family of its own,
// launch_switched choosing among the switches' instantiations.
void launch_fa3(const Problem& problem, const flashlab_fa3_options& options, cudaStream_t stream) {
  static_assert(compiled_for_64_and_128(find_kernel(FLASHLAB_KERNEL_FA3)->head_dims),
                "a head dimension in the table needs its instantiation here");
  dispatch_half_dtype(problem.dtype, [&](auto t) {
    dispatch_head_dim(problem.d, [&](auto d) {
      launch_switched<decltype(t), decltype(d)::value>(problem, options, stream);
    });
  });
}

}  // namespace flashlab::gpu
