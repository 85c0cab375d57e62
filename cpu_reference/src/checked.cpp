#include "flashlab/cpu/checked.hpp"

#include <sstream>

namespace flashlab::cpu {

namespace {

[[noreturn]] void overflow(std::string_view what, Index a, char op, Index b) {
  std::ostringstream why;
  why << what << ": " << a << " " << op << " " << b << " exceeds " << kMaxIndex
      << " (2^63 - 1), the largest size flashlab counts with; give smaller sizes";
  throw InvalidArgument(why.str());
}

}  // namespace

void check_nonnegative(Index value, std::string_view what) {
  if (value >= 0) return;
  std::ostringstream why;
  why << what << " = " << value << ": a size must be at least 0";
  throw InvalidArgument(why.str());
}

Index checked_mul(Index a, Index b, std::string_view what) {
  check_nonnegative(a, what);
  check_nonnegative(b, what);
  Index out = 0;
  if (__builtin_mul_overflow(a, b, &out)) overflow(what, a, 'x', b);
  return out;
}

Index checked_add(Index a, Index b, std::string_view what) {
  check_nonnegative(a, what);
  check_nonnegative(b, what);
  Index out = 0;
  if (__builtin_add_overflow(a, b, &out)) overflow(what, a, '+', b);
  return out;
}

Index checked_product(std::initializer_list<Index> sizes, std::string_view what) {
  // Signs first, so that a negative size is named even where an earlier product would
  // overflow.
  for (Index s : sizes) check_nonnegative(s, what);
  // Every partial product must fit too (a tensor's offsets are formed from them), so a
  // zero late in the list does not excuse an overflow before it.
  Index out = 1;
  for (Index s : sizes) out = checked_mul(out, s, what);
  return out;
}

}  // namespace flashlab::cpu
