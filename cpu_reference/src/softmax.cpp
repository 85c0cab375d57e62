#include "flashlab/cpu/softmax.hpp"

#include <cmath>
#include <limits>

namespace flashlab::cpu {

template <class T>
Vector<T> unstable_softmax(const Vector<T>& x) {
  const Vector<T> e = x.array().exp();
  return e / e.sum();
}

template <class T>
Vector<T> stable_softmax(const Vector<T>& x) {
  if (x.size() == 0) return x;
  const T m = x.maxCoeff();
  // No valid key at all: exp(-inf - (-inf)) would be NaN. flashlab's convention is p = 0.
  if (m == -std::numeric_limits<T>::infinity()) return Vector<T>::Zero(x.size());
  const Vector<T> e = (x.array() - m).exp();  // every exponent <= 0
  return e / e.sum();
}

template <class T>
T log_sum_exp(const Vector<T>& x) {
  const T m = x.size() ? x.maxCoeff() : -std::numeric_limits<T>::infinity();
  if (m == -std::numeric_limits<T>::infinity()) return m;
  return m + std::log((x.array() - m).exp().sum());
}

template <class T>
OnlineNormaliser<T> online_normaliser(const Vector<T>& x) {
  OnlineNormaliser<T> s{-std::numeric_limits<T>::infinity(), T(0)};
  for (Index j = 0; j < x.size(); ++j) {
    if (x[j] == -std::numeric_limits<T>::infinity()) continue;  // a masked score weighs 0
    const T m_new = std::max(s.m, x[j]);
    s.l = s.l * std::exp(s.m - m_new) + std::exp(x[j] - m_new);
    s.m = m_new;
  }
  return s;
}

template Vector<double> unstable_softmax(const Vector<double>&);
template Vector<float> unstable_softmax(const Vector<float>&);
template Vector<double> stable_softmax(const Vector<double>&);
template Vector<float> stable_softmax(const Vector<float>&);
template double log_sum_exp(const Vector<double>&);
template float log_sum_exp(const Vector<float>&);
template OnlineNormaliser<double> online_normaliser(const Vector<double>&);
template OnlineNormaliser<float> online_normaliser(const Vector<float>&);

}  // namespace flashlab::cpu
