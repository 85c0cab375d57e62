// Bad input to the backward and to dropout gets a clear InvalidArgument that says what was
// wrong and what would be right.
#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive_backward.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <string>

using namespace flashlab::cpu;

namespace {

// The message of the InvalidArgument that `call` throws, or "" if it throws none.
template <class F>
std::string message_of(F&& call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const Index n_q = 6, n_k = 5, d = 4;
const Matrix<double> Q = Matrix<double>::Ones(n_q, d), K = Matrix<double>::Ones(n_k, d),
                     V = Matrix<double>::Ones(n_k, d), O = Matrix<double>::Ones(n_q, d),
                     dO = Matrix<double>::Ones(n_q, d);
const Vector<double> L = Vector<double>::Zero(n_q);

// Runs both loop orders with one input replaced; both must give the same message.
std::string backward_message(const Matrix<double>& O_in, const Vector<double>& L_in,
                             const Matrix<double>& dO_in) {
  const std::string kv = message_of([&] { backward_kv_outer(Q, K, V, O_in, L_in, dO_in); });
  const std::string q = message_of([&] { backward_q_outer(Q, K, V, O_in, L_in, dO_in); });
  CHECK(kv == q);
  return kv;
}

}  // namespace

TEST_CASE("good input passes: the checks below fail only for the bad part") {
  CHECK(backward_message(O, L, dO).empty());
}

TEST_CASE("dO of the wrong shape is refused") {
  const std::string short_rows = backward_message(O, L, Matrix<double>::Ones(n_q - 1, d));
  CHECK(contains(short_rows, "dO is (5, 4)"));
  CHECK(contains(short_rows, "(N_q, d) = (6, 4)"));
  CHECK(contains(backward_message(O, L, Matrix<double>::Ones(n_q, d + 1)), "dO is (6, 5)"));
  CHECK(contains(message_of([&] { naive_backward<double>(Q, K, V, Matrix<double>::Ones(n_q, 1)); }),
                 "dO is (6, 1)"));
}

TEST_CASE("O of the wrong shape is refused") {
  CHECK(contains(backward_message(Matrix<double>::Ones(n_k, d), L, dO), "O is (5, 4)"));
}

TEST_CASE("L missing or of the wrong length is refused") {
  const std::string missing = backward_message(O, Vector<double>(), dO);
  CHECK(contains(missing, "L is missing"));
  CHECK(contains(missing, "N_q = 6"));
  const std::string wrong = backward_message(O, Vector<double>::Zero(n_q + 1), dO);
  CHECK(contains(wrong, "L has 7 entries"));
  CHECK(contains(wrong, "N_q = 6"));
}

TEST_CASE("the multi-head backward refuses a missing L and a wrong dO") {
  HeadTensor<double> Qh(1, 2, n_q, d), Kh(1, 1, n_k, d), Vh(1, 1, n_k, d), Oh(1, 2, n_q, d),
      Lh(1, 2, n_q, 1), dOh(1, 2, n_q, d);
  CHECK(message_of([&] { backward_multihead(Qh, Kh, Vh, Oh, Lh, dOh); }).empty());
  CHECK(contains(message_of([&] { backward_multihead(Qh, Kh, Vh, Oh, HeadTensor<double>(), dOh); }),
                 "L is missing"));
  CHECK(contains(message_of([&] {
                   backward_multihead(Qh, Kh, Vh, Oh, HeadTensor<double>(1, 2, n_q - 1, 1), dOh);
                 }),
                 "L is (1, 2, 5, 1)"));
  CHECK(contains(message_of([&] {
                   backward_multihead(Qh, Kh, Vh, Oh, Lh, HeadTensor<double>(1, 1, n_q, d));
                 }),
                 "dO is (1, 1, 6, 4)"));
}

TEST_CASE("the multi-head backward reports a non-finite score instead of aborting") {
  // The score check throws inside the loop over (batch, KV head), which runs on OpenMP
  // threads: the error must still reach the caller.
  HeadTensor<double> Qh(1, 2, n_q, d), Kh(1, 1, n_k, d), Vh(1, 1, n_k, d), Oh(1, 2, n_q, d),
      Lh(1, 2, n_q, 1), dOh(1, 2, n_q, d);
  Qh.data[3] = std::numeric_limits<double>::quiet_NaN();
  AttentionOptions options;
  options.check_finite = true;
  std::string msg;
  try {
    backward_multihead(Qh, Kh, Vh, Oh, Lh, dOh, options);
  } catch (const NonFiniteScore& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "S[0, 0]"));
  CHECK(contains(msg, "not finite"));
}

TEST_CASE("dropout p outside 0 <= p < 1 is refused everywhere") {
  for (double p : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(p);
    const Dropout bad{p, 1, 0};
    const std::string msg = message_of([&] { DropoutMask mask(bad); });
    CHECK(contains(msg, "outside [0, 1)"));
    CHECK(contains(msg, "use p = 0 for no dropout"));
    CHECK(contains(message_of([&] { check_dropout(bad); }), "outside [0, 1)"));
    HeadTensor<double> Qh(1, 1, n_q, d), Kh(1, 1, n_k, d), Lh(1, 1, n_q, 1);
    CHECK(contains(message_of([&] { backward_multihead(Qh, Kh, Kh, Qh, Lh, Qh, {}, bad); }),
                   "outside [0, 1)"));
  }
  CHECK(message_of([&] { DropoutMask mask(Dropout{0.0, 1, 0}); }).empty());
}

TEST_CASE("a dropout mask for a batch entry or head beyond 2^16 is refused") {
  CHECK(contains(message_of([&] { DropoutMask mask(Dropout{0.1, 1, 0}, kMaxBatchOrHead, 0); }),
                 "[0, 65536)"));
  CHECK(contains(message_of([&] { DropoutMask mask(Dropout{0.1, 1, 0}, 0, -1); }), "[0, 65536)"));
}

TEST_CASE("a dropout position outside the Philox counter is refused") {
  const DropoutMask mask(Dropout{0.1, 1, 0});
  const Index too_far = Index{1} << 32;  // rows fill one 32-bit counter word
  CHECK(contains(message_of([&] { (void)mask.keep(too_far, 0); }), "[0, 2^32)"));
  CHECK(contains(message_of([&] { (void)mask.keep(-1, 0); }), "[0, 2^32)"));
  CHECK(contains(message_of([&] { (void)mask.multipliers<double>(too_far - 1, 2, 0, 4); }),
                 "does not fit the Philox counter"));
  CHECK(contains(message_of([&] { (void)mask.keep(0, 4 * too_far); }), "[0, 2^34)"));
  CHECK(message_of([&] { (void)mask.keep(too_far - 1, 4 * too_far - 1); }).empty());
}
