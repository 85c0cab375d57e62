// flashlab._flashlab: the extension module under the Python package `flashlab`
// (python/flashlab/__init__.py). Three submodules, one per part of flashlab: cpu (the
// reference on numpy arrays), sim (the simulator's reports, traces and profiles) and gpu
// (the kernel table, and the kernels through libflashlab.so's C ABI).
//
// Errors: the libraries' cpu::InvalidArgument (what was wrong, what would be right) becomes
// ValueError with the same message, as do a score that is not finite and an SRAM overflow;
// the bindings raise TypeError for an input of the wrong type themselves.
#include "bindings.hpp"

#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/machine.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_flashlab, m) {
  m.doc() = "flashlab's C++ libraries: the CPU reference, the simulator, the GPU kernels";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const flashlab::cpu::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const flashlab::cpu::NonFiniteScore& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const flashlab::sim::SramOverflow& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  auto cpu = m.def_submodule("cpu");
  flashlab::python::bind_cpu_reference(cpu);
  auto sim = m.def_submodule("sim");
  flashlab::python::bind_simulator(sim);
  auto gpu = m.def_submodule("gpu");
  flashlab::python::bind_gpu(gpu);
}
