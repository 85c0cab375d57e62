// The parts of the module, one file each: module.cpp creates the module and calls these.
#pragma once

#include <pybind11/pybind11.h>

namespace flashlab::python {

void bind_cpu_reference(pybind11::module_& m);  // cpu_reference.cpp: flashlab._flashlab.cpu
void bind_simulator(pybind11::module_& m);      // simulator.cpp: flashlab._flashlab.sim
void bind_gpu(pybind11::module_& m);            // gpu.cpp: flashlab._flashlab.gpu

}  // namespace flashlab::python
