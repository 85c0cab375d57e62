// Who holds what in fa2's tensor-core code (gpu/kernels/03_fa2.cu):
// - the fragments of mma.sync.m16n8k16 with 16-bit A and B and fp32 C, as the PTX ISA lays
//   them out ("Matrix Fragments for mma.m16n8k16"): with g = lane / 4 and t = lane % 4,
//     A (16 x 16, row m, column k): register r holds row g + 8 (r % 2), columns
//       2t + 8 (r / 2) + {0, 1} (its two 16-bit halves);
//     B (16 x 8, row k, column n): register r holds rows 2t + 8 r + {0, 1}, column g;
//     C (16 x 8, fp32): register r holds row g + 8 (r / 2), column 2t + r % 2;
// - the rows of SRAM each lane hands to ldmatrix.x4 for Q, K and V, as the kernel computes
//   them (lanes 8i .. 8i + 7 address the 8 rows of 8 x 8 matrix i);
// - what ldmatrix gives back: lane l's register i holds, of matrix i, row l / 4, columns
//   2 (l % 4) + {0, 1} (or, with .trans, rows 2 (l % 4) + {0, 1} of column l / 4);
// - and the check that ldmatrix, fed those addresses, hands every lane exactly the elements
//   the mma fragment needs.
#pragma once

#include <string_view>
#include <vector>

namespace flashlab::app {

enum class Fragment { A, B, C };

struct Position {
  int row = 0, col = 0;
  bool operator==(const Position&) const = default;
};

int fragment_rows(Fragment f);       // 16, 16, 16
int fragment_cols(Fragment f);       // 16, 8, 8
int fragment_registers(Fragment f);  // 32-bit registers a lane holds: 4, 2, 4
int fragment_halves(Fragment f);     // elements per register: 2 (16-bit), 2, 1 (fp32)

// The element register `reg`, half `half` of `lane` holds (the PTX ISA's layout).
Position fragment_position(Fragment f, int lane, int reg, int half);

// Who holds element (row, col): the inverse of fragment_position, over every lane.
struct Owner {
  int lane = -1, reg = -1, half = -1;
};
std::vector<std::vector<Owner>> fragment_owners(Fragment f);  // [row][col]

// The SRAM tiles fa2 reads through ldmatrix.x4, and the role each plays in an mma.
enum class Operand { Q, K, V };
std::string_view operand_name(Operand op);

// The logical row and 16-byte chunk that `lane` hands to one ldmatrix.x4 of fa2 for `op`,
// for the warp's first m16 tile (Q), the first 16 keys (K), or the first 16 columns of d (V),
// at k-slice kk of the product (columns 16 kk .. of Q and K, keys 16 kk .. of V).
struct LaneRow {
  int row = 0, chunk = 0;
};
LaneRow ldmatrix_lane_row(Operand op, int lane, int kk);
bool ldmatrix_transposed(Operand op);  // V: ldmatrix.trans

// What ldmatrix.x4 hands lane `lane` in register `reg`, half `half`: the logical tile
// position (row, col) of the element, given the addresses of ldmatrix_lane_row.
Position ldmatrix_element(Operand op, int lane, int reg, int half, int kk);

// Whether ldmatrix of `op` at k-slice kk gives every lane the elements the mma operand needs:
// Q the A fragment of rows 0..15 and columns 16 kk ..; K the B fragments of keys 0..7 and
// 8..15 (registers 0, 1 and 2, 3), k = columns 16 kk ..; V the B fragments of d columns 0..7
// and 8..15, k = keys 16 kk ... Counts the elements checked and those that match.
struct FeedCheck {
  int elements = 0, matching = 0;
};
FeedCheck check_ldmatrix_feeds_mma(Operand op, int kk);

}  // namespace flashlab::app
