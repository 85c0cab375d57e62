// OpenMP loops over work items that are safe to throw from: independent items, and items whose
// last step must run in the items' order.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace flashlab::cpu {

// The threads an OpenMP loop started here would run on (1 without OpenMP).
inline int worker_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Runs body(i) for i in [0, n) across threads; in order on one thread when serial is true.
// An exception may not leave an OpenMP region (the program would terminate), so the first
// one is caught inside, the other items are left undone, and it is rethrown here.
template <class Index, class Body>
void parallel_for(Index n, Body&& body, bool serial = false) {
  std::exception_ptr failure;  // written once, under call_once; read after the loop
  std::atomic<bool> failed{false};
  std::once_flag first;
#pragma omp parallel for schedule(dynamic) if (!serial)
  for (Index i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      body(i);
    } catch (...) {
      std::call_once(first, [&] {
        failure = std::current_exception();
        failed = true;
      });
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Runs compute(i, state) for i in [0, n) across threads, and after each, ordered(i, state) in
// the order of i: i = 0, 1, 2, ... one at a time, as a serial loop would run them. The heavy
// part runs in parallel; the part whose order matters (a floating-point sum into a result
// that several items share) keeps the serial loop's order, so the result is bitwise the
// serial one whatever the number of threads. Each thread has its own State, which carries
// compute's result to ordered. The first exception stops the remaining items and is
// rethrown here, as parallel_for's.
template <class State, class Index, class Compute, class Ordered>
void ordered_parallel_for(Index n, Compute&& compute, Ordered&& ordered) {
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  std::once_flag first;
  const auto guarded = [&](auto&& step) {
    if (failed.load(std::memory_order_relaxed)) return;
    try {
      step();
    } catch (...) {
      std::call_once(first, [&] {
        failure = std::current_exception();
        failed = true;
      });
    }
  };
#pragma omp parallel
  {
    State state{};
#pragma omp for ordered schedule(dynamic)
    for (Index i = 0; i < n; ++i) {
      guarded([&] { compute(i, state); });
#pragma omp ordered
      guarded([&] { ordered(i, state); });
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace flashlab::cpu
