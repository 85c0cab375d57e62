// Crossing between numpy and the C++ libraries: arrays in (dtype and shape checked, copied
// into row-major Eigen matrices or (batch, heads, rows, cols) HeadTensors), arrays out, and
// results as Python objects with attributes (types.SimpleNamespace).
//
// Errors follow Python's split: an array of the wrong dtype is a TypeError; a wrong number
// of dimensions or a wrong shape is a ValueError, as is every cpu::InvalidArgument the
// libraries throw (module.cpp translates them, message untouched).
#pragma once

#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/types.hpp"

#include <nlohmann/json_fwd.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <string_view>

namespace flashlab::python {

namespace py = pybind11;
using cpu::Index;

// Runs f() with the GIL released, for the long C++ computations, and returns its result.
// An exception from f leaves with the GIL taken back; module.cpp translates the libraries'
// own (cpu::InvalidArgument, cpu::NonFiniteScore, sim::SramOverflow) into ValueError.
template <class F>
auto without_gil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// The element types the reference takes from numpy: float64, and float32 (fp32 arithmetic).
enum class Float { f64, f32 };

// The dtype of q (float64 or float32); TypeError naming `what` and the dtype otherwise.
Float float_of(const py::array& a, std::string_view what);
// TypeError unless a has the same dtype as the first input (named first).
void check_same_dtype(const py::array& a, std::string_view what, const py::array& first,
                      std::string_view first_name);
// ValueError unless a has `ndim` dimensions ("q must be 2-d (N, d) or 4-d ...").
void check_ndim(const py::array& a, std::string_view what, int ndim, std::string_view shape);

// a as a row-major (rows, cols) matrix, copied; a must be 2-d of element type T.
template <class T>
cpu::Matrix<T> to_matrix(const py::array& a);
// a as a (batch, heads, rows, cols) tensor, copied; a must be 4-d of element type T.
template <class T>
cpu::HeadTensor<T> to_heads(const py::array& a);
// a as a vector, copied; a must be 1-d of element type T.
template <class T>
cpu::Vector<T> to_vector(const py::array& a);

template <class T>
py::array_t<T> to_numpy(const cpu::Matrix<T>& X);
template <class T>
py::array_t<T> to_numpy(const cpu::Vector<T>& x);
// (batch, heads, rows, cols); with drop_cols, (batch, heads, rows), for L whose cols is 1.
template <class T>
py::array_t<T> to_numpy(const cpu::HeadTensor<T>& X, bool drop_cols = false);

// types.SimpleNamespace(**fields): a result whose fields read as attributes.
py::object namespace_of(const py::dict& fields);

// A JSON value as Python: objects as namespaces (attributes), arrays as lists, numbers and
// strings as themselves, null as None.
py::object from_json(const nlohmann::ordered_json& value);

}  // namespace flashlab::python
