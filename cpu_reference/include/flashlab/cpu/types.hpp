// The matrix types and the error type that every part of the CPU reference shares.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace flashlab::cpu {

// Row-major, like a (rows, d) tensor whose last dimension is contiguous in HBM.
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
// A read-only view of any row-major block (a tile's rows of Q, K or V) without a copy.
template <class T>
using MatrixView = Eigen::Ref<const Matrix<T>>;

using bf16 = Eigen::bfloat16;
using fp16 = Eigen::half;

// The precision the arithmetic happens in. Low-precision inputs (bf16, fp16) are
// accumulated in fp32, as a GPU's tensor cores do; fp32 and fp64 accumulate in themselves.
template <class In> struct Accumulator { using type = In; };
template <> struct Accumulator<bf16> { using type = float; };
template <> struct Accumulator<fp16> { using type = float; };
template <class In>
using accum_t = typename Accumulator<In>::type;

template <class In>
constexpr bool is_low_precision = !std::is_same_v<In, accum_t<In>>;

// Every bad input ends here: the message says what was wrong and what would be right.
struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Thrown when the caller asked for finite scores and a score was not finite.
struct NonFiniteScore : std::domain_error {
  using std::domain_error::domain_error;
};

using Index = Eigen::Index;

}  // namespace flashlab::cpu
