// The parity gate over run directories, ensemble manifests, FID and KID.
#include <filesystem>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "metrics/ensemble.h"
#include "metrics/fid.h"
#include "metrics/kid.h"
#include "metrics/parity_gate.h"
#include "py_json.h"
#include "training/ensemble.h"
#include "tensor_input.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

metrics::Pairing pairing(const std::string& method) {
  if (method == "auto") return metrics::Pairing::automatic;
  if (method == "paired") return metrics::Pairing::paired;
  if (method == "welch") return metrics::Pairing::welch;
  throw std::invalid_argument("method must be auto, paired or welch, not '" + method + "'");
}

// `mpverify gate --json` as a dict. Bad input raises ValueError with the message the CLI prints (its exit 2).
py::object gate(const std::string& baseline, const std::string& candidate, const std::string& metric, double margin,
                double alpha, const std::string& method, double loss_tail, const std::string& loss_key,
                bool accept_single_run) {
  metrics::GateOptions options;
  const auto m = metrics::parse_gate_metric(metric);
  if (!m) throw std::invalid_argument("metric must be accuracy, fid, kid or loss, not '" + metric + "'");
  options.metric = *m;
  options.margin = margin;
  options.alpha = alpha;
  options.pairing = pairing(method);
  options.loss_tail_fraction = loss_tail;
  options.loss_key = loss_key;
  options.accept_single_run = accept_single_run;
  std::error_code same_error;
  if (std::filesystem::equivalent(baseline, candidate, same_error))
    throw std::invalid_argument("baseline and candidate name the same directory (" + candidate +
                                "): a run compared with itself shows no spread and proves nothing");
  try {
    const bool steps = options.metric == metrics::GateMetric::loss;
    const metrics::GateResult r = metrics::evaluate_gate(metrics::read_ensemble(baseline, steps),
                                                         metrics::read_ensemble(candidate, steps), options);
    return to_python(metrics::gate_json(r));
  } catch (const metrics::InputError& e) {
    throw std::invalid_argument(e.what());
  }
}

struct Features {
  py::array_t<double, py::array::c_style | py::array::forcecast> array;
  metrics::FeatureMatrix matrix;
};

Features features(const py::array& a, const std::string& name) {
  Features f{contiguous<double>(a, name), {}};
  if (f.array.ndim() != 2)
    throw std::invalid_argument(name + ": give a 2-D array (samples x feature dimensions)");
  f.matrix = {std::span<const double>(f.array.data(), static_cast<std::size_t>(f.array.size())),
              static_cast<std::size_t>(f.array.shape(0)), static_cast<std::size_t>(f.array.shape(1)), name};
  return f;
}

py::dict fid(const py::array& a, const py::array& b) {
  const Features fa = features(a, "a"), fb = features(b, "b");
  const metrics::FidResult r = metrics::fid(fa.matrix, fb.matrix);
  py::dict d;
  d["fid"] = r.fid;
  d["fid_raw"] = r.fid_raw;
  d["mean_term"] = r.mean_term;
  d["trace_a"] = r.trace_a;
  d["trace_b"] = r.trace_b;
  d["trace_sqrt"] = r.trace_sqrt;
  d["n_a"] = r.n_a;
  d["n_b"] = r.n_b;
  d["dims"] = r.dims;
  return d;
}

py::dict kid(const py::array& a, const py::array& b, std::size_t subsets, std::size_t subset_size,
             std::uint64_t seed) {
  const Features fa = features(a, "a"), fb = features(b, "b");
  const metrics::KidResult r = metrics::kernel_inception_distance(fa.matrix, fb.matrix, {subsets, subset_size, seed});
  py::dict d;
  d["kid"] = r.kid;
  d["kid_stderr"] = r.kid_stderr;
  return d;
}

}  // namespace

void bind_metrics(py::module_& m) {
  m.def("gate", &gate, exact_fp(), py::arg("baseline"), py::arg("candidate"), py::arg("metric"), py::arg("margin"),
        py::arg("alpha"), py::arg("method"), py::arg("loss_tail"), py::arg("loss_key"), py::arg("accept_single_run"),
        "The parity gate (`mpverify gate --json`) as a dict.");
  m.def(
      "write_ensemble_manifest",
      [](const std::string& dir, const std::vector<std::uint64_t>& seeds) {
        training::write_ensemble_manifest(dir, seeds);
      },
      py::arg("dir"), py::arg("seeds"), "Writes DIR/ensemble.json over the runs DIR/seed-<s>/.");
  m.def("fid", &fid, exact_fp(), py::arg("a"), py::arg("b"), "Frechet distance between two feature sets (rows are samples).");
  m.def("kid", &kid, exact_fp(), py::arg("a"), py::arg("b"), py::arg("subsets"), py::arg("subset_size"), py::arg("seed"),
        "Kernel inception distance between two feature sets.");
}

}  // namespace mpverify::python
