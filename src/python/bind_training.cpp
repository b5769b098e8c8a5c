// The loss-scale strategies as objects, and the recorders and run log that a
// run directory is written with (what `mpverify train` writes, for the
// Monitor to write the same files).
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "py_json.h"
#include "record/run_log.h"
#include "record/tensor_stats.h"
#include "record/tensor_stats_fused.h"
#include "tensor_input.h"
#include "training/loss_scaler.h"
#include "training/scaler_state.h"
#include "training/step_recorder.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

// A strategy of training/loss_scaler.h; step() takes found_inf (a bool) or an amax (a float), by its drive.
class PyScaler {
 public:
  PyScaler(const std::string& name, const std::map<std::string, std::string>& options)
      : name_(name), scaler_(training::make_scaler(name, options)) {}
  // From a framework's saved state (training/scaler_state.h: torch's GradScaler.state_dict(), ...).
  PyScaler(const std::string& name, const std::map<std::string, std::string>& options, const py::dict& state)
      : name_(name), scaler_(training::make_scaler_from_state(name, options, to_json(state))) {}

  py::dict step(const py::object& arg) {
    training::StepResult r;
    if (auto* loss = dynamic_cast<training::LossScaler*>(scaler_.get())) {
      if (!py::isinstance<py::bool_>(arg) && !py::isinstance<py::int_>(arg))
        throw std::invalid_argument("the " + name_ + " strategy steps on found_inf (True or False), not on an amax");
      r = loss->step(arg.cast<bool>());
    } else {
      const float amax = arg.cast<float>();
      if (std::signbit(amax))  // as a trace's amax column (training/scaler_replay.cpp) refuses it
        throw std::invalid_argument("amax " + std::string(py::str(arg)) +
                                    " is negative; an amax is a max |x| (>= 0, inf or nan)");
      r = dynamic_cast<training::AmaxScaler&>(*scaler_).step(amax);
    }
    py::dict d;
    d["scale_used"] = r.scale_used;
    d["skipped"] = r.skipped;
    d["aborted"] = r.aborted;
    return d;
  }

  py::dict state() const {
    py::dict d;
    d["name"] = name_;
    d["scale"] = scaler_->scale();
    d["floor"] = scaler_->floor();
    d["drive"] = scaler_->drive() == training::Drive::found_inf ? "found_inf" : "amax";
    if (const auto* t = dynamic_cast<const training::TorchScaler*>(scaler_.get())) d["growth_tracker"] = t->growth_tracker();
    if (const auto* s = dynamic_cast<const training::DeepSpeedScaler*>(scaler_.get())) {
      d["hysteresis"] = s->hysteresis();
      d["iteration"] = s->iteration();
      d["last_overflow_iteration"] = s->last_overflow_iteration();
      d["aborted"] = s->aborted();
    }
    if (const auto* s = dynamic_cast<const training::MegatronScaler*>(scaler_.get())) {
      d["hysteresis"] = s->hysteresis();
      d["growth_tracker"] = s->growth_tracker();
    }
    return d;
  }

  double scale() const { return scaler_->scale(); }

 private:
  std::string name_;
  std::unique_ptr<training::Scaler> scaler_;
};

nn::Role parse_role(const std::string& name) {
  for (nn::Role r : {nn::Role::activation, nn::Role::activation_grad, nn::Role::weight, nn::Role::weight_grad,
                     nn::Role::update})
    if (nn::to_string(r) == name) return r;
  throw std::invalid_argument("unknown role '" + name + "' (activation, activation_grad, weight, weight_grad, update)");
}

nn::Pass parse_pass(const std::string& name) {
  for (nn::Pass p : {nn::Pass::forward, nn::Pass::backward, nn::Pass::optimizer})
    if (nn::to_string(p) == name) return p;
  throw std::invalid_argument("unknown pass '" + name + "' (forward, backward, optimizer)");
}

py::dict rate_counts(const training::RateCounts& c) {
  py::dict d;
  d["nonzero"] = c.nonzero;
  d["underflow_to_zero"] = c.underflow_to_zero;
  d["subnormal"] = c.subnormal;
  d["overflow"] = c.overflow;
  d["underflow_rate"] = c.underflow_rate();
  d["subnormal_rate"] = c.subnormal_rate();
  d["overflow_rate"] = c.overflow_rate();
  return d;
}

using Counts = std::pair<std::uint64_t, std::uint64_t>;  // (nonzero_finite, underflow_to_zero)

Counts record_values(training::StepRecorder& r, const std::string& layer, const std::string& tensor,
                     const std::string& role, const std::string& pass, std::span<const float> values,
                     const formats::Format& format, double scale) {
  const training::RateCounts c = r.record(layer, tensor, parse_role(role), parse_pass(pass), values, format, scale);
  return {c.nonzero, c.underflow_to_zero};
}

Counts record_one(training::StepRecorder& r, const std::string& layer, const std::string& tensor,
                  const std::string& role, const std::string& pass, const py::array& x, const std::string& bits,
                  const std::string& format, double scale) {
  const FloatInput in(x, bits, layer + "." + tensor);
  return record_values(r, layer, tensor, role, pass, in.values(), formats::parse_format(format), scale);
}

// A dense float32 CPU torch tensor, read in place (tensor_input.h); nullopt for any other tensor.
std::optional<Counts> record_torch(training::StepRecorder& r, const std::string& layer, const std::string& tensor,
                                   const std::string& role, const std::string& pass, const py::handle& t,
                                   double scale) {
  const auto values = torch_float32_values(t);
  if (!values) return std::nullopt;
  return record_values(r, layer, tensor, role, pass, *values, formats::fp32(), scale);
}

// A count from a dict of counts (record_counted): a non-negative integer, by name.
std::uint64_t count_of(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw std::invalid_argument(std::string("record_counted: no count '") + key + "'");
  const auto n = d[key].cast<long long>();
  if (n < 0) throw std::invalid_argument(std::string("record_counted: '") + key + "' is negative");
  return static_cast<std::uint64_t>(n);
}

// record_counted's statistics: the counts the torch path made, finished as tensor_stats finishes its own.
record::TensorStats counted_stats(const py::dict& d, const formats::Format& target, double scale) {
  record::TensorStats s;
  s.counters.elements = count_of(d, "elements");
  s.counters.zeros_in = count_of(d, "zeros_in");
  s.counters.nonfinite_in = count_of(d, "nonfinite_in");
  s.counters.underflow_to_zero = count_of(d, "underflow_to_zero");
  s.counters.subnormal = count_of(d, "subnormal");
  s.counters.overflow = count_of(d, "overflow");
  s.max_abs = d["max_abs"].cast<double>();
  s.norm = d["norm"].cast<double>();
  const auto bins = d["bins"].cast<std::vector<long long>>();
  if (bins.size() != emu::ExponentHistogram::exponent_bins)
    throw std::invalid_argument("record_counted: 'bins' has " + std::to_string(bins.size()) + " counts, not " +
                                std::to_string(emu::ExponentHistogram::exponent_bins) + " (exponents -149 to 127)");
  for (std::size_t i = 0; i < bins.size(); ++i) {
    if (bins[i] < 0) throw std::invalid_argument("record_counted: a negative bin");
    s.histogram.bins[i] = static_cast<std::uint64_t>(bins[i]);
  }
  s.histogram.zeros = s.counters.zeros_in;
  s.histogram.nans = count_of(d, "nans");
  // Products beyond float's range at the scale: the torch path never has them (it leaves such a tensor to
  // the host), the host's counts (a tensor_stats histogram) may.
  if (d.contains("below_range")) s.histogram.below_range = count_of(d, "below_range");
  if (d.contains("above_range")) s.histogram.above_range = count_of(d, "above_range");
  s.histogram.infinities = s.counters.nonfinite_in - std::min(s.histogram.nans, s.counters.nonfinite_in);
  return record::finish_tensor_stats(s, target, scale);
}

// record_many's item: record()'s 8 arguments, or (layer, tensor, role, pass, a dense float32 CPU torch
// tensor, scale).
Counts record_item(training::StepRecorder& r, const py::tuple& t) {
  if (t.size() == 6) {
    const auto counts = record_torch(r, t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::string>(),
                                     t[3].cast<std::string>(), t[4], t[5].cast<double>());
    if (!counts)
      throw std::invalid_argument("record_many: the tensor of " + t[0].cast<std::string>() + "." +
                                  t[1].cast<std::string>() + " is not a dense float32 CPU tensor (give record()'s "
                                  "8 arguments for it)");
    return *counts;
  }
  if (t.size() != 8)
    throw std::invalid_argument("record_many: each item is (layer, tensor, role, pass, x, bits, format, scale) or "
                                "(layer, tensor, role, pass, float32 tensor, scale), not a tuple of " +
                                std::to_string(t.size()));
  return record_one(r, t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::string>(),
                    t[3].cast<std::string>(), t[4].cast<py::array>(), t[5].cast<std::string>(),
                    t[6].cast<std::string>(), t[7].cast<double>());
}

void bind_scaler(py::module_& m) {
  py::class_<PyScaler>(m, "Scaler", "A loss-scale or FP8-scale strategy (`mpverify replay-scalers` lists them).")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&>(), py::arg("name"),
           py::arg("options"))
      .def(py::init<const std::string&, const std::map<std::string, std::string>&, const py::dict&>(),
           py::arg("name"), py::arg("options"), py::arg("state"))
      .def("step", &PyScaler::step, exact_fp(), py::arg("found_inf_or_amax"))
      .def("state", &PyScaler::state)
      .def_property_readonly("scale", &PyScaler::scale);
  m.def("scaler_names", &training::scaler_names, "The strategies' names.");
}

void bind_recorder(py::module_& m) {
  py::class_<training::StepRecorder>(m, "StepRecorder",
                                     "The recorders of `mpverify train`: per-tensor lines, histograms and rates.")
      .def(py::init([](const std::string& study) { return training::StepRecorder(formats::parse_format(study)); }),
           py::arg("study_format"))
      .def("begin_step", &training::StepRecorder::begin_step, py::arg("step"), py::arg("keep_records"),
           py::arg("histograms"))
      .def(
          "record",
          [](training::StepRecorder& r, const std::string& layer, const std::string& tensor, const std::string& role,
             const std::string& pass, const py::array& x, const std::string& bits, const std::string& format,
             double scale) { return record_one(r, layer, tensor, role, pass, x, bits, format, scale); },
          exact_fp(), py::arg("layer"), py::arg("tensor"), py::arg("role"), py::arg("pass_"), py::arg("x"),
          py::arg("bits"), py::arg("format"), py::arg("scale"),
          "Measures one tensor; returns its (nonzero_finite, underflow_to_zero)")
      .def(
          "record_torch",
          [](training::StepRecorder& r, const std::string& layer, const std::string& tensor, const std::string& role,
             const std::string& pass, const py::handle& t, double scale) {
            return record_torch(r, layer, tensor, role, pass, t, scale);
          },
          exact_fp(), py::arg("layer"), py::arg("tensor"), py::arg("role"), py::arg("pass_"), py::arg("t"),
          py::arg("scale"),
          "record() for a dense float32 CPU torch tensor, read in place (format fp32); returns None, recording "
          "nothing, for any other tensor")
      .def(
          "record_many",
          [](training::StepRecorder& r, const py::list& items) {
            // One crossing for many tensors (a step's weights, its weight gradients), recorded in order, as
            // the same calls one by one would.
            std::vector<Counts> out;
            out.reserve(items.size());
            for (const py::handle item : items) out.push_back(record_item(r, item.cast<py::tuple>()));
            return out;
          },
          exact_fp(), py::arg("items"),
          "record() for each (layer, tensor, role, pass, x, bits, format, scale), or record_torch() for each "
          "(layer, tensor, role, pass, float32 tensor, scale), in one call; returns the list of "
          "(nonzero_finite, underflow_to_zero)")
      .def(
          "record_counted",
          [](training::StepRecorder& r, const std::string& layer, const std::string& tensor, const std::string& role,
             const std::string& pass, const std::string& format, double scale, const py::dict& counts) {
            const formats::Format stored = formats::parse_format(format);
            const record::TensorStats s = counted_stats(counts, r.target_format(stored), scale);
            const training::RateCounts c = r.record_stats(layer, tensor, parse_role(role), parse_pass(pass), s,
                                                          stored, scale);
            return Counts{c.nonzero, c.underflow_to_zero};
          },
          exact_fp(), py::arg("layer"), py::arg("tensor"), py::arg("role"), py::arg("pass_"), py::arg("format"),
          py::arg("scale"), py::arg("counts"),
          "record() for a tensor counted elsewhere (the torch path on its own device): counts holds elements, "
          "zeros_in, nonfinite_in, nans, underflow_to_zero, subnormal, overflow, max_abs, norm and bins (277 "
          "counts, exponents -149 to 127), and optionally below_range and above_range, against the target of `format` (the study format for fp32)")
      .def("target_format", [](const training::StepRecorder& r, const std::string& format) {
            return r.target_format(formats::parse_format(format)).name;
          }, py::arg("format"), "The format a tensor stored in `format` is measured against")
      .def("gradients", [](const training::StepRecorder& r) { return rate_counts(r.gradients()); })
      .def("activations", [](const training::StepRecorder& r) { return rate_counts(r.activations()); })
      .def(
          "by_format", [](const training::StepRecorder& r) { return to_python(r.by_format_json()); },
          "The step's rates per format measured against: {FORMAT: {underflow_rate, ..., nonzero}}")
      .def("take_tensor_lines_text", &training::StepRecorder::take_tensor_lines,
           "The step's tensors.jsonl lines, moved out, as JSON text (non-finite numbers as null)")
      .def("take_histogram_lines_text", &training::StepRecorder::take_histogram_lines,
           "The step's histograms.jsonl lines, moved out, as JSON text")
      .def("thresholds", [](const training::StepRecorder& r) { return to_python(r.thresholds()); });
}

void bind_rounding_thresholds(py::module_& m) {
  m.def(
      "_rounding_thresholds",
      [](const std::string& format) -> py::object {
        const record::detail::RoundingClassifier& c = record::detail::rounding_classifier(formats::parse_format(format));
        if (!c.usable) return py::none();
        py::dict d;
        d["zero_max"] = c.zero_max;
        d["normal_min"] = c.normal_min;
        d["overflow_min"] = c.overflow_min;
        for (const auto& [name, counts] : {std::pair{"infinity", &c.infinity}, std::pair{"nan", &c.nan}}) {
          py::dict one;  // what one infinity (one NaN) counts: a saturating format's overflow, say
          one["underflow_to_zero"] = counts->underflow_to_zero;
          one["subnormal"] = counts->subnormal;
          one["overflow"] = counts->overflow;
          d[name] = one;
        }
        return d;
      },
      py::arg("format"),
      "The rounding thresholds of `format` on |x|'s float32 bit pattern at scale 1, found from the emulator's "
      "definition and checked against it (record/tensor_stats_fused.h): x rounds to +-0 for 1 <= u <= "
      "zero_max, to a non-zero subnormal below normal_min, raises overflow from overflow_min (0x7f800000: "
      "never); `infinity` and `nan`: what one of them counts; None for a format the classifier cannot describe");
}

void bind_run_files(py::module_& m) {
  m.def(
      "write_summary",
      [](const std::string& dir, const py::object& s) { record::write_summary(dir, to_json(s)); },
      py::arg("dir"), py::arg("summary"),
      "Writes DIR/summary.json atomically (a temporary file, fsync, rename), as `mpverify train` does.");
}

}  // namespace

void bind_training(py::module_& m) {
  bind_scaler(m);
  bind_recorder(m);
  bind_rounding_thresholds(m);
  bind_run_files(m);
}

}  // namespace mpverify::python
