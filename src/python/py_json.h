// Conversions between nlohmann::json and Python objects (dict, list, str,
// int, float, bool, None), so that the library's JSON results reach Python
// as plain objects and Python dicts reach the run logs as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace mpverify::python {

pybind11::object to_python(const nlohmann::json& j);
pybind11::object to_python(const nlohmann::ordered_json& j);
// Throws std::invalid_argument naming the type of an object JSON cannot hold.
// A float that is not finite becomes null, as the run logs write it.
nlohmann::json to_json(const pybind11::handle& obj);

}  // namespace mpverify::python
