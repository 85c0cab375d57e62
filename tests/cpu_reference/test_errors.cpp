// Bad input gets a clear error that says what was wrong and what would be right.
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/naive.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <string>

using namespace flashlab::cpu;

namespace {
// The message of the exception `call` throws as E, or "" if it throws none.
template <class E, class F>
std::string message_of(F&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const Matrix<double> Q = Matrix<double>::Ones(4, 8), K = Matrix<double>::Ones(5, 8),
                     V = Matrix<double>::Ones(5, 8);
}  // namespace

TEST_CASE("d = 0 is refused") {
  const Matrix<double> empty_cols(4, 0);
  const auto msg = message_of<InvalidArgument>([&] { forward_q_outer(empty_cols, empty_cols, empty_cols); });
  CHECK(contains(msg, "d = 0"));
  CHECK(contains(msg, "at least 1"));
}

TEST_CASE("Q and K with different d are refused") {
  const Matrix<double> K7 = Matrix<double>::Ones(5, 7);
  const auto msg = message_of<InvalidArgument>([&] { forward_kv_outer(Q, K7, V); });
  CHECK(contains(msg, "K has d = 7"));
  CHECK(contains(msg, "Q has d = 8"));
}

TEST_CASE("V with a different width is refused") {
  const Matrix<double> V9 = Matrix<double>::Ones(5, 9);
  CHECK(contains(message_of<InvalidArgument>([&] { naive_attention(Q, K, V9); }), "V has 9 columns"));
}

TEST_CASE("K and V with different numbers of rows are refused") {
  const Matrix<double> V6 = Matrix<double>::Ones(6, 8);
  const auto msg = message_of<InvalidArgument>([&] { forward_q_outer(Q, K, V6); });
  CHECK(contains(msg, "N_k = 5"));
  CHECK(contains(msg, "same rows"));
}

TEST_CASE("tile sizes of 0 are refused") {
  AttentionOptions options;
  options.tiles = {0, 16};
  CHECK(contains(message_of<InvalidArgument>([&] { forward_q_outer(Q, K, V, options); }), "Br = 0"));
  options.tiles = {16, 0};
  CHECK(contains(message_of<InvalidArgument>([&] { forward_kv_outer(Q, K, V, options); }), "Bc = 0"));
}

TEST_CASE("a scale that is not a positive finite number is refused") {
  AttentionOptions options;
  options.scale = -1.0;
  CHECK(contains(message_of<InvalidArgument>([&] { forward_q_outer(Q, K, V, options); }), "1/sqrt(d)"));
}

TEST_CASE("query heads that are not a multiple of the KV heads are refused") {
  HeadTensor<double> q(1, 6, 4, 8), k(1, 4, 5, 8), v(1, 4, 5, 8);
  const auto msg = message_of<InvalidArgument>([&] { forward_multihead(q, k, v); });
  CHECK(contains(msg, "6 query heads cannot share 4 KV heads"));
  CHECK(contains(msg, "multiple"));
}

TEST_CASE("mismatched batch sizes are refused") {
  HeadTensor<double> q(2, 2, 4, 8), k(1, 2, 5, 8), v(1, 2, 5, 8);
  CHECK(contains(message_of<InvalidArgument>([&] { forward_multihead(q, k, v); }), "batch sizes differ"));
}

TEST_CASE("non-finite scores are reported when the caller asks for checking") {
  Matrix<double> bad_q = Q;
  bad_q(2, 3) = std::numeric_limits<double>::quiet_NaN();
  AttentionOptions options;
  options.check_finite = true;
  options.tiles = {2, 2};
  for (auto run : {+[](const Matrix<double>& q, const AttentionOptions& o) { forward_q_outer(q, K, V, o); },
                   +[](const Matrix<double>& q, const AttentionOptions& o) { forward_kv_outer(q, K, V, o); },
                   +[](const Matrix<double>& q, const AttentionOptions& o) { naive_attention(q, K, V, o); }}) {
    const auto msg = message_of<NonFiniteScore>([&] { run(bad_q, options); });
    CHECK(contains(msg, "S[2, 0]"));
    CHECK(contains(msg, "not finite"));
  }
  // Without the check the caller gets what IEEE arithmetic gives, by their choice.
  options.check_finite = false;
  CHECK_NOTHROW(forward_q_outer(bad_q, K, V, options));
}

TEST_CASE("K and V with different numbers of heads are refused") {
  HeadTensor<double> q(1, 4, 4, 8), k(1, 2, 5, 8), v(1, 1, 5, 8);
  const auto msg = message_of<InvalidArgument>([&] { forward_multihead(q, k, v); });
  CHECK(contains(msg, "K has 2 heads but V has 1"));
}

TEST_CASE("a HeadTensor whose data does not match its shape is refused") {
  HeadTensor<double> q(1, 2, 4, 8), k(1, 2, 5, 8), v(1, 2, 5, 8);
  k.data.pop_back();
  const auto msg = message_of<InvalidArgument>([&] { forward_multihead(q, k, v); });
  CHECK(contains(msg, "K claims the shape (1, 2, 5, 8) but holds 79 entries"));
}

TEST_CASE("merging states of different shapes is refused") {
  const auto a = SoftmaxState<double>::empty(3, 8), b = SoftmaxState<double>::empty(4, 8),
             c = SoftmaxState<double>::empty(3, 7);
  CHECK(contains(message_of<InvalidArgument>([&] { merge(a, b); }), "3 rows and d = 8 with one of 4 rows"));
  CHECK(contains(message_of<InvalidArgument>([&] { merge(a, c); }), "both shapes must match"));
}
