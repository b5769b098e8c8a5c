// What a format does to a tensor: its statistics at one scale (the recorders'
// definition), the per-scale sweep of `mpverify analyze`, and lost updates.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/scale_sweep.h"
#include "bindings.h"
#include "emu/exponent_histogram.h"
#include "py_json.h"
#include "record/histogram_json.h"
#include "record/lost_updates.h"
#include "record/nonfinite_count.h"
#include "record/tensor_stats.h"
#include "tensor_input.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

py::object number_or_none(double v) { return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none()); }

py::dict tensor_stats(const py::array& x, const std::string& bits, const std::string& format, double scale) {
  const FloatInput in(x, bits, "tensor_stats: x");
  const formats::Format f = formats::parse_format(format);
  const record::TensorStats s = record::tensor_stats(in.values(), f, scale);
  py::dict d;
  d["format"] = f.name;
  d["scale"] = scale;
  d["count"] = s.count;
  d["zeros_in"] = s.zeros_in;
  d["nonfinite_in"] = s.nonfinite_in;
  d["nonzero_finite"] = s.nonzero_finite;
  d["underflow_to_zero"] = s.counters.underflow_to_zero;
  d["subnormal"] = s.counters.subnormal;
  d["overflow"] = s.counters.overflow;
  d["underflow_to_zero_rate"] = s.underflow_to_zero_rate;
  d["subnormal_rate"] = s.subnormal_rate;
  d["overflow_rate"] = s.overflow_rate;
  d["max_abs"] = s.max_abs;
  d["norm"] = s.norm;
  d["headroom_log2"] = number_or_none(s.headroom_log2);
  d["histogram"] = to_python(record::histogram_to_json(s.histogram));
  d["thresholds"] = to_python(record::thresholds_to_json(s.thresholds));
  return d;
}

// One dict per scale, with the keys of `mpverify analyze --json`'s results.
py::list analyze(const py::array& x, const std::string& bits, const std::string& format,
                 const std::vector<double>& scales) {
  const formats::Format f = formats::parse_format(format);
  const analysis::SweepPlan plan(f, scales);
  analysis::ScaleSweep sweep(plan);
  if (bits.empty() && x.dtype().kind() == 'f' && x.itemsize() == 8) {
    // float64 tensors multiply in float64, as tensor.mul(S) does for them.
    const auto c = contiguous<double>(x, "analyze: x");
    sweep.add(std::span<const double>(c.data(), static_cast<std::size_t>(c.size())));
  } else {
    sweep.add(FloatInput(x, bits, "analyze: x").values());
  }
  py::list out;
  for (const analysis::ScaleStats& s : sweep.results()) {
    py::dict d;
    d["scale"] = s.scale;
    d["count"] = s.count;
    d["zeros_in"] = s.zeros_in;
    d["nan_or_inf_in"] = s.nan_or_inf_in;
    d["nonzero_finite"] = s.nonzero_finite();
    d["underflow_to_zero"] = s.underflow_to_zero;
    d["subnormal"] = s.subnormal;
    d["overflow"] = s.overflow;
    d["underflow_to_zero_rate"] = s.rate(s.underflow_to_zero);
    d["subnormal_rate"] = s.rate(s.subnormal);
    d["overflow_rate"] = s.rate(s.overflow);
    d["max_abs"] = s.max_abs;
    d["headroom_log2"] = number_or_none(s.headroom_log2(f));
    d["histogram"] = to_python(record::histogram_to_json(s.histogram));
    out.append(d);
  }
  return out;
}

py::dict counts_dict(const record::LostUpdateCounts& c) {
  py::dict d;
  d["precision"] = c.precision;
  d["elements"] = c.elements;
  d["updates"] = c.updates;
  d["lost"] = c.lost;
  d["ratio_needed"] = c.ratio_needed;
  d["ratio_sufficient"] = c.ratio_sufficient;
  d["lost_rate"] = c.lost_rate;
  d["ratio_needed_rate"] = c.ratio_needed_rate;
  d["ratio_sufficient_rate"] = c.ratio_sufficient_rate;
  return d;
}

py::dict lost_updates(const py::array& w, const std::string& w_bits, const py::array& u, const std::string& u_bits,
                      const std::string& format) {
  const FloatInput wi(w, w_bits, "lost_updates: w"), ui(u, u_bits, "lost_updates: u");
  if (wi.values().size() != ui.values().size())
    throw std::invalid_argument("lost_updates: w has " + std::to_string(wi.values().size()) + " elements and u " +
                                std::to_string(ui.values().size()) + " (give the update of each weight)");
  const record::LostUpdateStats s = record::lost_updates(wi.values(), ui.values(), formats::parse_format(format));
  py::dict d;
  d["format"] = formats::parse_format(format).name;
  d["without_master"] = counts_dict(s.without_master);
  d["with_master"] = counts_dict(s.with_master);
  return d;
}

py::dict lost_updates_of_values(std::span<const float> before, std::span<const float> after, const std::string& format) {
  if (before.size() != after.size())
    throw std::invalid_argument("lost_updates_of_step: before has " + std::to_string(before.size()) +
                                " values and after " + std::to_string(after.size()));
  const record::LostUpdateStats s = record::lost_updates_of_step(before, after, formats::parse_format(format));
  py::dict d;
  d["format"] = formats::parse_format(format).name;
  d["without_master"] = counts_dict(s.without_master);
  d["with_master"] = counts_dict(s.with_master);
  return d;
}

// The lost updates of one optimizer step, from the weights before and after it (the update computed here,
// record::applied_update, instead of three tensor conversions in Python).
py::dict lost_updates_of_step(const py::array& before, const std::string& before_bits, const py::array& after,
                              const std::string& after_bits, const std::string& format) {
  const FloatInput b(before, before_bits, "lost_updates_of_step: before"), a(after, after_bits, "lost_updates_of_step: after");
  return lost_updates_of_values(b.values(), a.values(), format);
}

// lost_updates_of_step for two dense float32 CPU torch tensors, read in place; None for any other tensors.
py::object lost_updates_of_step_torch(const py::handle& before, const py::handle& after, const std::string& format) {
  const auto b = torch_float32_values(before), a = torch_float32_values(after);
  if (!b || !a) return py::none();
  return lost_updates_of_values(*b, *a, format);
}

// The number of inf and NaN values of a torch tensor, read in place when it is a dense CPU tensor of a float
// type with a pattern (record/nonfinite_count.h); -1 for any other tensor (the caller counts with torch).
// The Monitor asks this of module outputs and gradients on every step, right after torch's kernels have
// pushed the interpreter out of the caches: one call that reads the tensor's attributes in C++ costs less
// there than the same reads in Python, and much less than a numpy view of the tensor.
std::int64_t count_nonfinite_torch(const py::handle& t) {
  if (!is_dense_cpu_tensor(t)) return -1;
  const auto pattern = record::float_pattern(py::str(t.attr("dtype")).cast<std::string>().substr(6));  // "torch.float32"
  if (!pattern) return -1;
  const auto address = t.attr("data_ptr")().cast<std::uintptr_t>();
  const auto count = t.attr("numel")().cast<std::size_t>();
  if (count == 0) return 0;
  return static_cast<std::int64_t>(record::count_nonfinite(reinterpret_cast<const void*>(address), count, *pattern));
}

// count_nonfinite_torch of each parameter's .grad (0 where it has none, -1 where it is not read in place), in
// one call: the Monitor checks every parameter gradient once per step.
std::vector<std::int64_t> count_nonfinite_grads(const py::list& params) {
  std::vector<std::int64_t> out;
  out.reserve(params.size());
  for (const py::handle p : params) {
    const py::object grad = p.attr("grad");
    out.push_back(grad.is_none() ? 0 : count_nonfinite_torch(grad));
  }
  return out;
}

}  // namespace

void bind_analysis(py::module_& m) {
  m.def("tensor_stats", &tensor_stats, exact_fp(), py::arg("x"), py::arg("bits"), py::arg("format"), py::arg("scale"),
        "The recorders' statistics of x * scale (exact) rounded to nearest-even to the format.");
  m.def("analyze", &analyze, exact_fp(), py::arg("x"), py::arg("bits"), py::arg("format"), py::arg("scales"),
        "`mpverify analyze` on one tensor: per scale S, what casting fl(x * S) (in the tensor's type) to the "
        "format does.");
  m.def("lost_updates", &lost_updates, exact_fp(), py::arg("w"), py::arg("w_bits"), py::arg("u"), py::arg("u_bits"),
        py::arg("format"), "Lost updates of w + u, weights stored in the format and with an fp32 master copy.");
  m.def("lost_updates_of_step", &lost_updates_of_step, exact_fp(), py::arg("before"), py::arg("before_bits"), py::arg("after"),
        py::arg("after_bits"), py::arg("format"),
        "lost_updates(before, fl32(after - before)): the lost updates of the update one step applied.");
  m.def("_lost_updates_of_step_torch", &lost_updates_of_step_torch, exact_fp(), py::arg("before"), py::arg("after"),
        py::arg("format"),
        "lost_updates_of_step() for two dense float32 CPU torch tensors, read in place; None for any others.");
  m.def("_count_nonfinite_grads", &count_nonfinite_grads, py::arg("params"),
        "_count_nonfinite_torch of each parameter's .grad: 0 where it has none, -1 where it is not read in place.");
  m.def("_count_nonfinite_torch", &count_nonfinite_torch, py::arg("tensor"),
        "The number of inf and NaN values of a dense CPU torch tensor of type float64, float32, float16 or "
        "bfloat16, read in place; -1 for any other tensor.");
}

}  // namespace mpverify::python
