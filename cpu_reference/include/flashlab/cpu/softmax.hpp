// Softmax three ways: the unstable textbook formula, the stable one, and the online one.
#pragma once

#include "flashlab/cpu/types.hpp"

namespace flashlab::cpu {

// p_j = exp(x_j) / sum_k exp(x_k). Overflows to inf/inf = NaN once a score passes ~88
// in fp32 (~709 in fp64): kept only to show why the stable form exists.
template <class T>
Vector<T> unstable_softmax(const Vector<T>& x);

// p_j = exp(x_j - m) / l with m = max_j x_j and l = sum_j exp(x_j - m): every exponent
// is <= 0, so nothing overflows, and the factor exp(-m) cancels between numerator and
// denominator. A row of all -inf (no valid key) returns zeros by flashlab's convention.
template <class T>
Vector<T> stable_softmax(const Vector<T>& x);

// log sum_j exp(x_j), computed stably as m + log sum_j exp(x_j - m); -inf for a row of
// all -inf. This is the L that the forward pass stores for the backward pass.
template <class T>
T log_sum_exp(const Vector<T>& x);

// The normaliser of a row, (m, l), after one pass that meets the scores one at a time:
// when a new maximum arrives, the running sum is moved to the new base by exp(m_old - m).
template <class T>
struct OnlineNormaliser {
  T m;  // the running maximum
  T l;  // sum of exp(x_j - m) over the scores seen so far
};

template <class T>
OnlineNormaliser<T> online_normaliser(const Vector<T>& x);

}  // namespace flashlab::cpu
