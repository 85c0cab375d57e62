// flashlab's GPU backward as built (FlashAttention-2's order), counted kernel by kernel.
//
//   1. pre-kernel   D = rowsum(dO * O): reads O and dO, writes D (fp32); zeroes the fp32
//                   dQ accumulator (atomic mode only)
//   2. main kernel  a block per (batch, KV head, KV tile j of Bc keys): loads K_j, V_j once;
//                   for each query head of its GQA group and each query tile i of Br rows
//                   that sees tile j (causal: from the first such tile on; the tiles before
//                   it are skipped whole) loads Q_i, dO_i (input dtype), L_i, D_i (fp32),
//                   recomputes S = Q_i K_j^T and P = exp(S - L_i), forms dP = dO_i V_j^T,
//                   dS = P * (dP - D_i), adds P^T dO_i into dV_j and dS^T Q_i into dK_j on
//                   chip and dS K_j into the dQ accumulator with fp32 reductions
//                   (red.global.add: the L2 reads and adds; into the SMs nothing comes back,
//                   so they are writes of Br x d fp32); writes dK_j, dV_j (input dtype) at the end
//   3. post-kernel  reads the dQ accumulator, writes dQ (input dtype)
// Deterministic mode: no accumulator and no post-kernel; the main kernel leaves dQ alone
// and a dQ kernel, a block per (batch, query head, query tile i), loads Q_i, dO_i, L_i,
// D_i once, loops over the KV tiles that i sees (K_j, V_j each) and writes dQ_i once. Its
// tiles are its own (dq_Br query rows, KV tiles of dq_Bc keys), not the main kernel's.
// The pre- and post-kernels run a warp a row over the (B, H_q, N_q) rows taken as one array,
// pre_post_rows_per_block rows a block (the kernel's fact; a block per query tile where it
// is not given). A main or dQ block loads its own tile
// (K_j, V_j; Q_i, dO_i, L_i, D_i) before its loop even when no tile of the other side is visible to
// it, and then writes zeros (dK_j, dV_j; dQ_i); except v3's main kernel (skips_unseen_kv), which
// loads nothing in a block whose keys no query sees (and writes its zeros).
//
// Closed form. b = input bytes, f = 4 (fp32), H_q query heads, H_kv KV heads, batch B,
// Tr = ceil(N_q / Br), Tc = ceil(N_k / Bc); a step is a visible (i, j) pair of one query
// head, r x c its rows and keys (the tile's full size: masked scores are computed too).
//   QR = sum over steps of r   (no mask: Tc N_q)     -- query rows a main block loads
//   A  = sum over steps of r c (no mask: N_q N_k)    -- scores computed
//   UK = keys of the KV tiles no query sees (no mask: 0)
// and, where the main kernel's copies are TMA's whole boxes (tma_boxes, v3), its Q and dO
// rows and its K and V keys as boxes of Br and Bc rows, the zero-filled rows past N_q and
// N_k counted as the rest:
//   QB = sum over steps of Br  (no mask: Tc Tr Br)   -- query rows in its boxes
//   KB = Bc x the KV tiles it loads (no mask: Tc Bc)   -- keys in its boxes
// with UT the KV tiles no query sees, which v3 does not load (KB = (Tc - UT) Bc)
// and over the dQ kernel's steps, in its tiles (Tr' = ceil(N_q / dq_Br)):
//   KR  = sum over its steps of c   (no mask: Tr' N_k)  -- keys the dQ kernel loads
//   A'  = sum over its steps of r c (no mask: N_q N_k)  -- scores it computes
// for one (query head, KV head) pair; causal with offset o (top-left 0, bottom-right
// N_k - N_q): KV tile j at key k0 is first seen by query tile floor((k0 - o) / Br) (0 when
// k0 <= o, none when k0 - o >= N_q), and query tile i, last row e, sees min(N_k,
// (floor((e + o) / Bc) + 1) Bc) keys (none when e + o < 0).
// Bytes, atomic mode (B H_q = query heads in all, B H_kv = KV heads in all):
//   O                 read  B H_q N_q d b
//   dO                read  B H_q (N_q + QR) d b; v3: B H_q (N_q + QB) d b
//   D                 written B H_q N_q f          read  B H_q QR f
//   dQ accumulator    written B H_q (N_q + QR) d f read  B H_q N_q d f (the post-kernel)
//   Q                 read  B H_q QR d b; v3: B H_q QB d b
//   L                 read  B H_q QR f
//   K, V              read  B H_kv N_k d b each; v3: B H_kv KB d b each
//   dK, dV            written B H_kv N_k d b each
//   dQ                written B H_q N_q d b
// Deterministic: no accumulator; Q, dO, L, D read B H_q (QR + N_q) rows (the dQ kernel
// adds N_q), K and V B H_kv N_k d b + B H_q KR d b each, dQ written B H_q N_q d b.
// Out of the SMs, the written bytes are the sectors of each kernel's warp stores when the
// facts give them (BackwardStores; warp_store.hpp), row by row. As the kernels are built:
// dK, dV and the dQ kernel's dQ from mma fragments, 8 rows x 16 bytes an instruction, so
// 2 x their data; D (B, H_q, N_q) fp32, one array whose consecutive rows the pre-kernel's
// blocks store 8 at a time, a sector a store: 32 ceil(B H_q N_q / 8) bytes; the reductions
// (16 rows x 32 bytes), the zeros and the post-kernel's dQ exactly their data. So, atomic
// mode: writes = 32 ceil(B H_q N_q / 8) + (N_q + QR) B H_q d f + B H_q N_q d b
// + 2 x 2 B H_kv N_k d b. (A store of D's pattern with one lane, {4, 1, 1}, gives the
// kernel before it: a sector a row, 32 B H_q N_q.)
// Operations: matrix FLOPs 2 A d per product: 5 products in atomic mode (S, dP, dV, dK,
// dQ), 4 over A and 3 over A' deterministic (the dQ kernel recomputes S and dP); per score
// exp 1 (P), sum 1 (dP - D), rescale 1 (P * (dP - D)), in each kernel that forms dS; D costs N_q d
// multiplies (rescale) and N_q d adds (sum) per query head; the atomics QR d adds (sum).
//
// Counts only: the numbers of the backward are cpu_reference's (backward_multihead.hpp),
// in the order it sums them; the GPU's atomic order is not a sequence the simulator could
// follow step by step, so the mirror books bytes and work and leaves the values to it.
#include "flashlab/sim/backward_kernel.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashlab::sim {

namespace {

using cpu::Index;

constexpr Bytes kFp32 = bytes_of(kAccumulator);
constexpr std::int64_t kFlopsPerMultiplyAdd = 2;
// Past any GPU's: an SM holds at most 64 warps, a block at most 1024 threads.
constexpr Index kMaxBlocksPerSm = 64, kMaxThreadsPerBlock = 1024;

Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

// The sums over the steps of one (query head, KV head) pair, named as in the header: the
// main kernel's in its tiles (Br, Bc), the dQ kernel's in its own (dq_Br, dq_Bc).
struct StepSums {
  Index QR = 0, A = 0, UK = 0;  // main kernel
  Index UT = 0;                 // the KV tiles no query sees
  Index QB = 0;                 // its Q and dO rows in whole boxes (tma_boxes)
  Index KR = 0, A_dq = 0;       // dQ kernel
  // The most rows a main block's query tiles span (KV tile 0's), and the most keys a dQ block
  // loads (its last query tile's): the rows and keys each kernel touches at all. Below N_q
  // (N_k) where some rows (keys) are seen by nothing: bottom-right with N_q > N_k (top-left
  // with N_q < N_k).
  Index QT = 0, KT = 0;
};

Index add_scores(Index sum, Index rows, Index cols) {
  return cpu::checked_add(sum, cpu::checked_mul(rows, cols, "the scores"), "the scores");
}

StepSums step_sums(const BackwardShape& s, Index Br, Index Bc, Index dq_Br, Index dq_Bc) {
  const cpu::Mask mask{s.causal, s.n_q, s.n_k};
  const Index o = mask.diagonal_offset(), Tr = ceil_div(s.n_q, Br), Tc = ceil_div(s.n_k, Bc);
  StepSums sums;
  for (Index j = 0; j < Tc; ++j) {  // main kernel: the query rows each KV tile sees
    const Index k0 = j * Bc, c = std::min(Bc, s.n_k - k0);
    Index first = 0;  // the first query tile that sees key k0, Tr if none
    if (s.causal != cpu::Causal::none && k0 > o) first = k0 - o >= s.n_q ? Tr : (k0 - o) / Br;
    const Index rows = first >= Tr ? 0 : s.n_q - first * Br;
    sums.QR += rows;
    sums.QT = std::max(sums.QT, rows);
    if (rows == 0) sums.UK += c, ++sums.UT;
    if (rows > 0) sums.QB += (Tr - first) * Br;
    sums.A = add_scores(sums.A, rows, c);
  }
  for (Index i = 0; i < ceil_div(s.n_q, dq_Br); ++i) {  // dQ kernel: the keys each tile sees
    const Index q0 = i * dq_Br, e = std::min(q0 + dq_Br, s.n_q) - 1;
    Index keys = s.n_k;
    if (s.causal != cpu::Causal::none)
      keys = e + o < 0 ? 0 : std::min(s.n_k, ((e + o) / dq_Bc + 1) * dq_Bc);
    sums.KR += keys;
    sums.KT = std::max(sums.KT, keys);
    sums.A_dq = add_scores(sums.A_dq, e + 1 - q0, keys);
  }
  return sums;
}

void check_size(std::string_view name, Index value, Index max) {
  check_mirror_size("backward", name, value, 1, max);
}

// B x heads x rows x cols elements.
Index elements(Index heads_in_all, Index rows, Index cols) {
  return cpu::checked_product({heads_in_all, rows, cols}, "a tensor's elements");
}

}  // namespace

void check(const BackwardShape& s, const BackwardKernelFacts& f) {
  check_size("batch", s.batch, kMirrorMaxHeadsInAll);
  check_size("heads_q", s.heads_q, kMirrorMaxHeadsInAll);
  check_size("heads_kv", s.heads_kv, s.heads_q);
  check_size("N_q", s.n_q, kMaxLength);
  check_size("N_k", s.n_k, kMaxLength);
  check_size("d", s.d, kMaxHeadDim);
  check_size("Br", f.Br, kMaxLength);
  check_size("Bc", f.Bc, kMaxLength);
  check_mirror_size("backward", "dq_Br", f.dq_Br, 0, kMaxLength);
  check_mirror_size("backward", "dq_Bc", f.dq_Bc, 0, kMaxLength);
  check_mirror_size("backward", "dq_threads", f.dq_threads, 0, kMaxThreadsPerBlock);
  check_size("blocks_per_sm", f.blocks_per_sm, kMaxBlocksPerSm);
  check_size("dq_blocks_per_sm", f.dq_blocks_per_sm, kMaxBlocksPerSm);
  check_size("pre_post_blocks_per_sm", f.pre_post_blocks_per_sm, kMaxBlocksPerSm);
  if (f.pre_post_rows_per_block < 0 || f.pre_post_threads < 0)
    throw cpu::InvalidArgument(fmt::format(
        "the backward mirror: pre_post_rows_per_block = {}, pre_post_threads = {}; each is a "
        "count of the pre- and post-kernels' blocks (>= 1), or 0 where not described",
        f.pre_post_rows_per_block, f.pre_post_threads));
  cpu::check_causal(s.causal);
  check_mirror_heads(s.batch, s.heads_q, s.heads_kv);
  for (const auto* store : {&f.stores.dk_dv, &f.stores.dq_reduction, &f.stores.d,
                            &f.stores.accumulator_zeros, &f.stores.dq, &f.stores.dq_kernel})
    if (*store) check(**store);
  if (f.stores.dq_reduction_passes < 1 || f.stores.dq_reduction_passes > 2)
    throw cpu::InvalidArgument(fmt::format(
        "the backward mirror: dq_reduction_passes = {}; a step's dQ is reduced once or twice "
        "(1 or 2)",
        f.stores.dq_reduction_passes));
  if (f.skips_unseen_kv && f.deterministic)
    throw cpu::InvalidArgument(
        "the backward mirror: skips_unseen_kv (v3's main kernel) with deterministic = true is "
        "no kernel that runs: the deterministic mode runs v2, which loads every KV tile");
  if (f.tma_boxes && f.deterministic)
    throw cpu::InvalidArgument(
        "the backward mirror: tma_boxes (v3's main kernel) with deterministic = true is no "
        "kernel that runs: the deterministic mode runs v2, whose cp.async copies move the rows "
        "inside alone");
}

PassReport count_backward_kernel(const BackwardShape& s, const BackwardKernelFacts& f) {
  check(s, f);
  const Index Br = f.Br, Bc = f.Bc, d = s.d, b = bytes_of(f.dtype);
  const Index dq_Br = f.dq_Br > 0 ? f.dq_Br : Br, dq_Bc = f.dq_Bc > 0 ? f.dq_Bc : Bc;
  const Index Hq = s.batch * s.heads_q, Hkv = s.batch * s.heads_kv;  // heads in all
  const StepSums sums = step_sums(s, Br, Bc, dq_Br, dq_Bc);
  const Index QR = sums.QR, A = sums.A, KR = sums.KR;
  // Bytes of `rows` rows of `cols` elements of `bytes` each, for every one of `heads` heads.
  const auto rows_of = [](Index heads, Index rows, Index cols, Index bytes) {
    return cpu::checked_product({heads, rows, cols, bytes}, "the backward's bytes");
  };
  const Index own_rows = f.deterministic ? QR + s.n_q : QR;  // Q, L, D: the dQ kernel adds N_q
  const Index box_rows = f.tma_boxes ? sums.QB : own_rows;   // Q and dO as the copies move them
  const Index kv_rows = f.skips_unseen_kv ? s.n_k - sums.UK : s.n_k;  // per KV head
  const Index kv_tiles = ceil_div(s.n_k, Bc) - (f.skips_unseen_kv ? sums.UT : 0);
  const Index kv_moved = f.tma_boxes ? kv_tiles * Bc : kv_rows;  // as the copies move them
  const Index kv_read =
      rows_of(Hkv, kv_moved, d, b) + (f.deterministic ? rows_of(Hq, KR, d, b) : 0);

  PassReport r;
  r.pass = f.deterministic ? "backward (deterministic)" : "backward";
  r.label = fmt::format("Br {}, Bc {}, {} threads, {} SRAM, {}, main kernel {}", Br, Bc, f.threads,
                        format_bytes(double(f.sram_bytes)), to_string(f.dtype), f.main_kernel);
  const auto tensor = [&](std::string name, DType dtype, Index n, Bytes read, Bytes written) {
    r.tensors.push_back({std::move(name), std::string(to_string(dtype)), n, read, written});
  };
  // Bytes out of the SMs for `rows` rows of `cols` elements of `bytes` each, every one of
  // `heads` heads, each row written by its own stores of that pattern (warp_store.hpp).
  const auto written = [&](const std::optional<WarpStore>& store, Index heads, Index rows,
                           Index cols, Index bytes) {
    const Bytes row = cols * bytes;
    return rows_of(heads, rows, 1, store ? bytes_out(*store, row) : row);
  };
  const BackwardStores& w = f.stores;
  const Index q_elems = elements(Hq, s.n_q, d), kv_elems = elements(Hkv, s.n_k, d);
  tensor("Q", f.dtype, q_elems, rows_of(Hq, box_rows, d, b), 0);
  tensor("K", f.dtype, kv_elems, kv_read, 0);
  tensor("V", f.dtype, kv_elems, kv_read, 0);
  tensor("O", f.dtype, q_elems, rows_of(Hq, s.n_q, d, b), 0);
  tensor("dO", f.dtype, q_elems, rows_of(Hq, s.n_q + box_rows, d, b), 0);
  tensor("L", kAccumulator, elements(Hq, s.n_q, 1), rows_of(Hq, own_rows, 1, kFp32), 0);
  // D: the pre-kernel's blocks store runs of consecutive rows of the whole array, across
  // heads (a run of one float, {4, 1, 1}, is a sector a row).
  tensor("D", kAccumulator, elements(Hq, s.n_q, 1), rows_of(Hq, own_rows, 1, kFp32),
         written(w.d, 1, 1, elements(Hq, s.n_q, 1), kFp32));
  if (!f.deterministic)  // read by the post-kernel only: a reduction brings nothing back
    tensor("dQ accumulator", kAccumulator, q_elems, rows_of(Hq, s.n_q, d, kFp32),
           cpu::checked_add(
               written(w.accumulator_zeros, Hq, s.n_q, d, kFp32),
               cpu::checked_mul(Index(w.dq_reduction_passes),
                                written(w.dq_reduction, Hq, QR, d, kFp32), "the backward's bytes"),
               "the backward's bytes"));
  tensor("dQ", f.dtype, q_elems, 0, written(f.deterministic ? w.dq_kernel : w.dq, Hq, s.n_q, d, b));
  tensor("dK", f.dtype, kv_elems, 0, written(w.dk_dv, Hkv, s.n_k, d, b));
  tensor("dV", f.dtype, kv_elems, 0, written(w.dk_dv, Hkv, s.n_k, d, b));

  // Work: per score of every step, per product; A (A') counts one query head's scores in
  // the main kernel (the dQ kernel).
  const Index scores = cpu::checked_mul(Hq, A, "the scores");
  const Index dq_scores = f.deterministic ? cpu::checked_mul(Hq, sums.A_dq, "the scores") : 0;
  const Index products = f.deterministic ? 4 : 5, dq_products = 3;
  const Index ds_scores = scores + dq_scores;  // scores whose dS a kernel forms
  const Index d_rows = cpu::checked_product({Hq, s.n_q, d}, "D's products");
  r.ops.matrix_flops =
      cpu::checked_product({kFlopsPerMultiplyAdd, products * scores + dq_products * dq_scores, d},
                           "the backward's FLOPs");
  r.ops.exp = ds_scores;
  r.ops.sum = ds_scores + d_rows + (f.deterministic ? 0 : Hq * QR * d);
  r.ops.rescale = ds_scores + d_rows;

  const Index Tr = ceil_div(s.n_q, Br), Tc = ceil_div(s.n_k, Bc), dq_Tr = ceil_div(s.n_q, dq_Br);
  // The pre- and post-kernels take the (B, H_q, N_q) rows as one array, a block per
  // pre_post_rows_per_block of them (without that fact, a block per query tile).
  const Index query_rows_blocks =
      f.pre_post_rows_per_block > 0 ? ceil_div(Hq * s.n_q, f.pre_post_rows_per_block) : Tr * Hq;
  // Each launch's footprint, every sector once (compulsory_dram): the pre-kernel reads O and
  // dO and writes D (and the accumulator's zeros); the main kernel reads its inputs, K and V
  // of the tiles it loads, and the accumulator's lines its reductions add to; the post-kernel
  // (or the dQ kernel) reads what dQ is made from.
  const Bytes q_in = rows_of(Hq, s.n_q, d, b), rows_f32 = rows_of(Hq, s.n_q, 1, kFp32);
  const Bytes kv_in = rows_of(Hkv, kv_rows, d, b), kv_out = rows_of(Hkv, s.n_k, d, b);
  const Bytes accumulator = rows_of(Hq, s.n_q, d, kFp32);
  // The main kernel touches the query rows of the tiles KV tile 0 sees (all but the first
  // N_q - N_k rows' tiles, bottom-right with N_q > N_k), the dQ kernel every query tile and
  // the keys its last one sees.
  const Bytes q_seen = rows_of(Hq, sums.QT, d, b), rows_f32_seen = rows_of(Hq, sums.QT, 1, kFp32);
  const Bytes kv_seen = rows_of(Hkv, sums.KT, d, b);
  const std::vector<Footprint> main_inputs = {{"Q", q_seen},        {"K", kv_in},
                                              {"V", kv_in},         {"dO", q_seen},
                                              {"L", rows_f32_seen}, {"D", rows_f32_seen}};
  Launch pre{"pre (D)", query_rows_blocks, query_rows_blocks, f.pre_post_threads,
             f.pre_post_blocks_per_sm};
  pre.reads = {{"O", q_in}, {"dO", q_in}};
  pre.writes = {{"D", rows_f32}};
  Launch main{"main", Hkv * Tc, Hkv * Tc, f.threads, f.blocks_per_sm};
  main.reads = main_inputs;
  main.writes = {{"dK", kv_out}, {"dV", kv_out}};
  if (!f.deterministic) {
    pre.writes.push_back({"dQ accumulator", accumulator});
    const Bytes accumulator_seen = rows_of(Hq, sums.QT, d, kFp32);
    main.reads.push_back({"dQ accumulator", accumulator_seen});
    main.writes.push_back({"dQ accumulator", accumulator_seen});
  }
  // The grids of the main and dQ kernels.
  const auto grid = [&](GridPass pass, Index rows, Index keys, int per_sm) {
    return std::optional<GridProblem>{GridProblem{.pass = pass,
                                                  .N = s.n_k,
                                                  .N_q = s.n_q,
                                                  .d = d,
                                                  .dtype = f.dtype,
                                                  .heads = Hq,
                                                  .kv_heads = Hkv,
                                                  .causal = s.causal,
                                                  .Br = rows,
                                                  .Bc = keys,
                                                  .skips_unseen_kv = f.skips_unseen_kv,
                                                  .blocks_per_sm = per_sm}};
  };
  main.grid =
      grid(f.deterministic ? GridPass::backward_main_deterministic : GridPass::backward_main, Br,
           Bc, f.blocks_per_sm);
  // The pre- and post-kernels' grids, where their blocks' rows are described: any N_q, their
  // rows being the query rows alone.
  const auto rows_grid = [&](GridPass pass) {
    if (f.pre_post_rows_per_block == 0) return std::optional<GridProblem>{};
    return std::optional<GridProblem>{GridProblem{.pass = pass,
                                                  .N = s.n_q,
                                                  .d = d,
                                                  .dtype = f.dtype,
                                                  .heads = Hq,
                                                  .Br = f.pre_post_rows_per_block,
                                                  .blocks_per_sm = f.pre_post_blocks_per_sm}};
  };
  pre.grid =
      rows_grid(f.deterministic ? GridPass::backward_pre_deterministic : GridPass::backward_pre);
  r.launches = {pre, main};
  if (f.deterministic) {
    Launch dq{"dQ", Hq * dq_Tr, Hq * dq_Tr, f.dq_threads, f.dq_blocks_per_sm};
    dq.reads = {{"Q", q_in},  {"K", kv_seen},  {"V", kv_seen},
                {"dO", q_in}, {"L", rows_f32}, {"D", rows_f32}};
    dq.writes = {{"dQ", q_in}};
    dq.grid = grid(GridPass::backward_dq, dq_Br, dq_Bc, f.dq_blocks_per_sm);
    r.launches.push_back(dq);
  } else {
    Launch post{"post (dQ)", query_rows_blocks, query_rows_blocks, f.pre_post_threads,
                f.pre_post_blocks_per_sm};
    post.reads = {{"dQ accumulator", accumulator}};
    post.writes = {{"dQ", q_in}};
    post.grid = rows_grid(GridPass::backward_post);
    r.launches.push_back(post);
  }
  return r;
}

}  // namespace flashlab::sim
