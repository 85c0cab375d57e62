#include "convert.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstring>

namespace flashlab::python {

namespace {

std::string shape_of(const py::array& a) {
  std::string out = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) out += (i ? ", " : "") + std::to_string(a.shape(i));
  return out + (a.ndim() == 1 ? ",)" : ")");
}

std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// The array as C-contiguous memory of T (a copy only when a is strided).
template <class T>
py::array_t<T, py::array::c_style> contiguous(const py::array& a, int ndim) {
  if (!py::isinstance<py::array_t<T>>(a) || a.ndim() != ndim)
    throw std::logic_error("contiguous(): dtype and ndim must be checked before");
  return py::array_t<T, py::array::c_style>::ensure(a);
}

}  // namespace

Float float_of(const py::array& a, std::string_view what) {
  if (py::isinstance<py::array_t<double>>(a)) return Float::f64;
  if (py::isinstance<py::array_t<float>>(a)) return Float::f32;
  throw py::type_error(fmt::format(
      "{} has dtype {}: the reference takes float64 (or float32, computed in fp32); convert "
      "with .astype(numpy.float64)",
      what, dtype_name(a)));
}

void check_same_dtype(const py::array& a, std::string_view what, const py::array& first,
                      std::string_view first_name) {
  if (!a.dtype().is(first.dtype()))
    throw py::type_error(
        fmt::format("{} has dtype {} but {} has {}: give every input the same dtype", what,
                    dtype_name(a), first_name, dtype_name(first)));
}

void check_ndim(const py::array& a, std::string_view what, int ndim, std::string_view shape) {
  if (a.ndim() != ndim)
    throw py::value_error(
        fmt::format("{} has shape {}: it must be {}-d, {}", what, shape_of(a), ndim, shape));
}

template <class T>
cpu::Matrix<T> to_matrix(const py::array& a) {
  const auto c = contiguous<T>(a, 2);
  cpu::Matrix<T> X(c.shape(0), c.shape(1));
  if (X.size() > 0) std::memcpy(X.data(), c.data(), sizeof(T) * X.size());
  return X;
}

template <class T>
cpu::HeadTensor<T> to_heads(const py::array& a) {
  const auto c = contiguous<T>(a, 4);
  cpu::HeadTensor<T> X(c.shape(0), c.shape(1), c.shape(2), c.shape(3));
  if (!X.data.empty()) std::memcpy(X.data.data(), c.data(), sizeof(T) * X.data.size());
  return X;
}

template <class T>
cpu::Vector<T> to_vector(const py::array& a) {
  const auto c = contiguous<T>(a, 1);
  cpu::Vector<T> x(c.shape(0));
  if (x.size() > 0) std::memcpy(x.data(), c.data(), sizeof(T) * x.size());
  return x;
}

template <class T>
py::array_t<T> to_numpy(const cpu::Matrix<T>& X) {
  py::array_t<T> out({X.rows(), X.cols()});
  if (X.size() > 0) std::memcpy(out.mutable_data(), X.data(), sizeof(T) * X.size());
  return out;
}

template <class T>
py::array_t<T> to_numpy(const cpu::Vector<T>& x) {
  py::array_t<T> out(x.size());
  if (x.size() > 0) std::memcpy(out.mutable_data(), x.data(), sizeof(T) * x.size());
  return out;
}

template <class T>
py::array_t<T> to_numpy(const cpu::HeadTensor<T>& X, bool drop_cols) {
  std::vector<py::ssize_t> shape = {X.batch, X.heads, X.rows};
  if (!drop_cols) shape.push_back(X.cols);
  py::array_t<T> out(shape);
  if (!X.data.empty()) std::memcpy(out.mutable_data(), X.data.data(), sizeof(T) * X.data.size());
  return out;
}

py::object namespace_of(const py::dict& fields) {
  return py::module_::import("types").attr("SimpleNamespace")(**fields);
}

py::object from_json(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::null: return py::none();
    case nlohmann::ordered_json::value_t::boolean: return py::bool_(value.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return py::int_(value.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return py::int_(value.get<std::uint64_t>());
    case nlohmann::ordered_json::value_t::number_float: return py::float_(value.get<double>());
    case nlohmann::ordered_json::value_t::string: return py::str(value.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      py::list out;
      for (const auto& item : value) out.append(from_json(item));
      return out;
    }
    case nlohmann::ordered_json::value_t::object: {
      py::dict fields;
      for (const auto& [key, item] : value.items()) fields[py::str(key)] = from_json(item);
      return namespace_of(fields);
    }
    default: break;
  }
  throw std::logic_error("from_json: a JSON value of a type the reports never hold");
}

#define FLASHLAB_PYTHON_CONVERT(T)                            \
  template cpu::Matrix<T> to_matrix<T>(const py::array&);     \
  template cpu::HeadTensor<T> to_heads<T>(const py::array&);  \
  template cpu::Vector<T> to_vector<T>(const py::array&);     \
  template py::array_t<T> to_numpy<T>(const cpu::Matrix<T>&); \
  template py::array_t<T> to_numpy<T>(const cpu::Vector<T>&); \
  template py::array_t<T> to_numpy<T>(const cpu::HeadTensor<T>&, bool);
FLASHLAB_PYTHON_CONVERT(double)
FLASHLAB_PYTHON_CONVERT(float)
#undef FLASHLAB_PYTHON_CONVERT

}  // namespace flashlab::python
