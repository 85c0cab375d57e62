// One tile of the backward pass: the per-tile algebra that both loop orders of backward.hpp
// are built from, and that a simulator program or a GPU kernel follows step by step.
#pragma once

#include "flashlab/cpu/types.hpp"

namespace flashlab::cpu {

template <class T>
using VectorView = Eigen::Ref<const Vector<T>>;

// What the tile of query rows i and keys j reads besides its scores.
template <class T>
struct BackwardTileInputs {
  MatrixView<T> Q_i;   // (rows, d)
  MatrixView<T> K_j;   // (cols, d)
  MatrixView<T> V_j;   // (cols, d)
  MatrixView<T> dO_i;  // (rows, d)
  VectorView<T> L_i;   // (rows) the forward's log-sum-exp
  VectorView<T> D_i;   // (rows) rowsum(dO o O)
};

// P = exp(S - L) row by row: (rows, cols). L holds each row's max and sum already, so no
// rowmax and no rowsum are needed. A row with no valid key (L = -inf) gets P = 0, where
// exp(-inf - (-inf)) would be NaN.
template <class T>
Matrix<T> probabilities(const Matrix<T>& S, VectorView<T> L);

// Given the tile's recomputed scores S (rows, cols), masked as in the forward, adds
//   dV_j += (P o Z)^T dO_i;  dP = (dO_i V_j^T) o Z;  dS = P o (dP - D_i)
//   dQ_i += dS K_j * scale;  dK_j += dS^T Q_i * scale
// with P = exp(S - L_i). Z (rows, cols) is the tile's dropout multipliers (dropout.hpp), the
// same the forward used; without it (nullptr) Z = 1 and no multiplication happens.
template <class T>
void backward_tile(const Matrix<T>& S, const BackwardTileInputs<T>& in, T scale, const Matrix<T>* Z,
                   Eigen::Ref<Matrix<T>> dQ_i, Eigen::Ref<Matrix<T>> dK_j,
                   Eigen::Ref<Matrix<T>> dV_j);

// backward_tile in two halves, for a caller that adds dQ_i later (in a fixed order, from
// another thread): the first adds to dK_j and dV_j and returns dS (rows, cols); the second
// adds dQ_i += dS K_j * scale. Run one after the other, they are backward_tile, bit for bit.
template <class T>
Matrix<T> backward_tile_kv(const Matrix<T>& S, const BackwardTileInputs<T>& in, T scale,
                           const Matrix<T>* Z, Eigen::Ref<Matrix<T>> dK_j,
                           Eigen::Ref<Matrix<T>> dV_j);
template <class T>
void add_tile_dQ(const Matrix<T>& dS, MatrixView<T> K_j, T scale, Eigen::Ref<Matrix<T>> dQ_i);

}  // namespace flashlab::cpu
