// What a store leaving the SMs costs: the L1 issues a warp's store (or reduction) instruction
// as whole 32-byte sectors, one for every sector that any of its lanes writes a byte of, and
// Nsight Compute's l1tex__t_sectors_pipe_lsu_mem_global_op_st (and _op_red) counts exactly
// those. So the bytes stored = 32 x (sectors touched per instruction), not the bytes of
// data: a store of 4 bytes by each of 32 lanes spread over 8 rows writes 8 runs of 16 bytes,
// touches 8 sectors and issues 256 bytes for 128 bytes of data. What then leaves the SM
// (l1tex__m_l1tex2xbar_write_bytes) is that or less: some kernels' sectors are merged on the
// way, by a rule not modelled here (docs/IO-LEVELS.md).
//
//   sim::WarpStore pattern{.bytes_per_thread = 4, .threads = 32, .runs = 8};
//   sim::bytes_out(pattern, 1024);   // 2048: eight instructions of 8 sectors each
//
// The kernels' own patterns are facts of each kernel (flashlab/gpu/kernel_info.hpp), handed
// to the mirrors by their callers; this file only knows sectors.
#pragma once

#include "flashlab/sim/dtype.hpp"

namespace flashlab::sim {

// The unit the L1 and the L2 exchange, and DRAM moves (the grid model's L2 counts in it too).
inline constexpr Bytes kSectorBytes = 32;

// An atomic add whose answer the thread waits for (a work queue's claim: one lane's atomicAdd
// on a counter) is no store instruction, so the store sectors issued leave it out; it leaves
// the SMs as one sector and its answer comes back as one, whatever the counter's width
// (fa3's 8-byte claims on an H100, 2026-12-05: 15 claims at N = 777 over 3 heads read 480
// bytes into the SMs beyond the loads, 42 at N = 2,500 read 1,344, and at eight shapes
// predicted before the run, to the byte; out of the SMs now and then a sector fewer a run,
// docs/IO-LEVELS.md, "fa3's work queue: the claims booked"; decode's 4-byte claims on the
// H200, 2026-12-03: 16.0 KiB out of the SMs above the stores issued for 512 claims).
inline constexpr Bytes kClaimBytes = kSectorBytes;

// One warp-level store instruction: `threads` active lanes write `bytes_per_thread` bytes
// each, and their bytes fall in `runs` runs of contiguous bytes of equal length (a run per
// row of the tensor the lanes write, or one run when the lanes write consecutive
// addresses). Each run starts on a sector boundary unless an offset is given.
struct WarpStore {
  int bytes_per_thread = 16;
  int threads = 32;
  int runs = 1;

  Bytes run_bytes() const { return Bytes{bytes_per_thread} * threads / runs; }
  Bytes data_bytes() const { return Bytes{bytes_per_thread} * threads; }
};

// Throws cpu::InvalidArgument, saying what would be right, unless 1 <= bytes_per_thread
// <= 16 (a lane stores at most a 16-byte vector), 1 <= threads <= 32, 1 <= runs <= threads
// and runs divides threads.
void check(const WarpStore& store);

// The sectors that `bytes` contiguous bytes touch when they start `offset` bytes past a
// sector boundary (offset taken modulo 32): ceil((offset % 32 + bytes) / 32); 0 for none.
Bytes sectors_touched(Bytes offset, Bytes bytes);

// The sectors one instruction of the pattern touches, every run starting `offset` bytes past
// a sector boundary: runs x sectors_touched(offset, run_bytes).
Bytes sectors_touched(const WarpStore& store, Bytes offset = 0);

// Bytes out of the SMs for `data` bytes stored as consecutive runs of the pattern, each
// starting `offset` bytes past a sector boundary (whole rows of a tile, or a tile's stretch
// of a vector such as L; 0: from the boundary on): 32 bytes per sector of each whole run, and
// the sectors of the partial run at the end (the lanes past the last row store nothing).
Bytes bytes_out(const WarpStore& store, Bytes data, Bytes offset = 0);

// Bytes out of the SMs for `heads` heads' `data` bytes each, laid end to end (a (heads, N)
// tensor such as L, one head's rows after the other's): bytes_out of each head with its runs
// starting where that head does, h x data bytes in, past a sector boundary by (h x data) % 32
// bytes when data is no multiple of 32 (L in fp32 with N_q not a multiple of 8). A pattern
// whose runs are 32 bytes, 8 rows of L, then touches 2 sectors a run in such a head, not 1.
// Exact where a head's runs all start alike: runs of whole sectors (L's 8 or 32 rows), of one
// element, or on rows of whole sectors (O, whose every head starts on a boundary).
Bytes bytes_out_of_heads(const WarpStore& store, Bytes data, Bytes heads);

}  // namespace flashlab::sim
