#include "py_json.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace mpverify::python {

namespace {

template <class Json>
py::object convert(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.template get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.template get<double>());
    case nlohmann::json::value_t::string: return py::str(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : j) out.append(convert(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (auto it = j.begin(); it != j.end(); ++it) out[py::str(it.key())] = convert(it.value());
      return out;
    }
    default: return py::none();  // binary and discarded values never occur in our results
  }
}

}  // namespace

py::object to_python(const nlohmann::json& j) { return convert(j); }
py::object to_python(const nlohmann::ordered_json& j) { return convert(j); }

nlohmann::json to_json(const py::handle& obj) {
  if (obj.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(obj)) return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj)) return obj.cast<std::int64_t>();
  if (py::isinstance<py::float_>(obj)) {
    const double v = obj.cast<double>();
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  }
  if (py::isinstance<py::str>(obj)) return obj.cast<std::string>();
  if (py::isinstance<py::dict>(obj)) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, value] : obj.cast<py::dict>()) out[py::str(key).cast<std::string>()] = to_json(value);
    return out;
  }
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : obj) out.push_back(to_json(v));
    return out;
  }
  // numpy scalars and the like: integers first (__index__), then anything float() accepts.
  if (py::hasattr(obj, "__index__")) return to_json(py::int_(obj.cast<py::object>()));
  if (py::hasattr(obj, "__float__")) return to_json(py::float_(obj.cast<py::object>()));
  throw std::invalid_argument("cannot write a Python " + std::string(py::str(obj.get_type().attr("__name__"))) +
                              " to JSON (use dict, list, str, int, float, bool or None)");
}

}  // namespace mpverify::python
