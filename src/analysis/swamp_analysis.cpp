#include "analysis/swamp_analysis.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include "formats/format.h"
#include "io/file_error.h"
#include "io/tensor_directory.h"
#include "io/tensor_file.h"

namespace mpverify::analysis {

namespace {

// The values of a tensor as floats in C order (swamp pairs elements by position).
std::vector<float> c_order_floats(const io::TensorEntry& e, const std::filesystem::path& file) {
  if (e.dtype == io::Dtype::f64)
    throw io::FileError(file, e.name, e.data_offset, "F64 tensor: swamp needs weights and updates as float32 values");
  std::vector<float> v(e.count);
  io::decode_floats(e.dtype, e.big_endian, e.data.data(), v);
  if (e.fortran_order && e.shape.size() > 1) v = io::fortran_to_c_order(std::span<const float>(v), e.shape);
  return v;
}

struct Side {
  std::map<std::string, std::pair<std::filesystem::path, io::TensorEntry>> entries;
  std::vector<io::TensorFile> files;  // keep the storage alive
};

Side read_side(const std::filesystem::path& path, std::vector<ReadFailure>& failures) {
  Side side;
  const bool directory = std::filesystem::is_directory(path);
  for (const io::FoundFile& found : io::find_tensor_files(path)) {
    try {
      side.files.push_back(io::open_tensor_file(found.path));
      for (const io::TensorEntry& e : side.files.back().tensors)
        side.entries[directory ? found.relative + ":" + e.name : e.name] = {found.path, e};
    } catch (const io::FileError& err) {
      failures.push_back({found.path.string(), err.tensor(), err.offset(), err.reason()});
    }
  }
  return side;
}

}  // namespace

std::vector<float> sgd_updates(std::span<const float> grads, float lr) {
  std::vector<float> u(grads.size());
  for (std::size_t i = 0; i < grads.size(); ++i) u[i] = -lr * grads[i];
  return u;
}

std::vector<formats::Format> default_swamp_formats() {
  return {formats::parse_format("fp16"), formats::parse_format("bf16")};
}

SwampReport swamp_tensor(const std::string& name, std::span<const float> w, std::span<const float> u,
                         const std::vector<formats::Format>& formats) {
  SwampReport r;
  r.name = name;
  r.elements = w.size();
  for (const formats::Format& f : formats) r.per_format.push_back({f.name, record::lost_updates(w, u, f)});
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double wi = w[i], ui = u[i];
    if (ui != 0 && std::isfinite(ui) && std::isfinite(wi)) r.ratio_histogram.add(std::fabs(wi) / std::fabs(ui));
  }
  return r;
}

void add_report(SwampReport& total, const SwampReport& r) {
  if (total.per_format.empty())
    for (const FormatLostUpdates& f : r.per_format) total.per_format.push_back({f.format, {}});
  if (total.per_format.size() != r.per_format.size())
    throw std::invalid_argument("add_report: the reports count lost updates in different formats");
  total.elements += r.elements;
  for (std::size_t k = 0; k < r.per_format.size(); ++k) {
    record::add_counts(total.per_format[k].stats.without_master, r.per_format[k].stats.without_master);
    record::add_counts(total.per_format[k].stats.with_master, r.per_format[k].stats.with_master);
  }
  total.ratio_histogram += r.ratio_histogram;
}

SwampAnalysis swamp_paths(const std::filesystem::path& weights, const std::filesystem::path& updates,
                          std::optional<float> lr, const std::vector<formats::Format>& formats) {
  SwampAnalysis out;
  out.total.name = "(total)";
  for (const formats::Format& f : formats) out.total.per_format.push_back({f.name, {}});
  const Side w = read_side(weights, out.failures);
  const Side u = read_side(updates, out.failures);
  for (const auto& [name, wf] : w.entries) {
    const auto it = u.entries.find(name);
    if (it == u.entries.end()) {
      out.unmatched.push_back(name + " (no " + std::string(lr ? "gradient" : "update") + ")");
      continue;
    }
    const io::TensorEntry& we = wf.second;
    const io::TensorEntry& ue = it->second.second;
    if (we.shape != ue.shape) {
      out.unmatched.push_back(name + " (shapes differ)");
      continue;
    }
    try {
      const std::vector<float> wv = c_order_floats(we, wf.first);
      std::vector<float> uv = c_order_floats(ue, it->second.first);
      if (lr) uv = sgd_updates(uv, *lr);
      SwampReport r = swamp_tensor(name, wv, uv, formats);
      add_report(out.total, r);
      out.tensors.push_back(std::move(r));
    } catch (const io::FileError& err) {
      out.failures.push_back({err.file().string(), err.tensor(), err.offset(), err.reason()});
    }
  }
  for (const auto& [name, uf] : u.entries)
    if (!w.entries.contains(name)) out.unmatched.push_back(name + " (no weight)");
  return out;
}

}  // namespace mpverify::analysis
