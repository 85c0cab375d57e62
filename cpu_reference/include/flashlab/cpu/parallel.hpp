// An OpenMP loop over independent work items that is safe to throw from.
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

}  // namespace flashlab::cpu
