#include "analysis/dump_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <vector>

#include "analysis/scaled_rounding.h"
#include "io/file_error.h"
#include "io/tensor_directory.h"
#include "io/tensor_file.h"

namespace mpverify::analysis {

namespace {

constexpr std::size_t chunk = 65536;

std::string percent(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g%%", 100 * r);
  return buf;
}

std::string scale_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", s);
  return buf;
}

}  // namespace

std::vector<ScaleStats> analyze_tensor(const io::TensorEntry& e, const SweepPlan& plan) {
  ScaleSweep sweep(plan);
  const std::size_t esize = io::element_size(e.dtype);
  const std::byte* p = e.data.data();
  // Order does not matter for any count here, so Fortran-order data is read as it lies.
  if (e.dtype == io::Dtype::f32 && !e.big_endian) {
    // In one call: the counter splits it between its threads, each a long
    // contiguous range (pieces of a few MiB split again made the threads
    // start and wait at every piece and fault neighbouring pages of the mapping).
    sweep.add_f32_bytes(p, static_cast<std::size_t>(e.count));
  } else if (e.dtype == io::Dtype::f64) {
    std::vector<double> buf(chunk);
    for (std::uint64_t i = 0; i < e.count; i += chunk) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, e.count - i));
      io::decode_doubles(e.dtype, e.big_endian, p + i * esize, std::span<double>(buf.data(), n));
      sweep.add(std::span<const double>(buf.data(), n));
    }
  } else {
    std::vector<float> buf(chunk);
    for (std::uint64_t i = 0; i < e.count; i += chunk) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, e.count - i));
      io::decode_floats(e.dtype, e.big_endian, p + i * esize, std::span<float>(buf.data(), n));
      sweep.add(std::span<const float>(buf.data(), n));
    }
  }
  return sweep.results();
}

void add_to_total(std::vector<ScaleStats>& total, const std::vector<ScaleStats>& per_scale) {
  if (total.empty())
    for (const ScaleStats& s : per_scale) {
      ScaleStats t;
      t.scale = s.scale;
      total.push_back(t);
    }
  if (total.size() != per_scale.size())
    throw std::invalid_argument("analyze_path: every file's plan must have as many scales as the first");
  for (std::size_t k = 0; k < total.size(); ++k) {
    if (total[k].scale != per_scale[k].scale) total[k].scale = std::numeric_limits<double>::quiet_NaN();
    total[k] += per_scale[k];
  }
}

namespace {

void analyze_file(const io::FoundFile& found, bool directory, const SweepPlan& plan, const TensorSelection& selection,
                  DumpAnalysis& out) {
  const io::TensorFile f = io::open_tensor_file(found.path);
  std::vector<TensorReport> reports;
  for (const io::TensorEntry& e : f.tensors) {
    TensorReport r;
    r.name = directory ? found.relative + ":" + e.name : e.name;
    if (!out.selection.note(selection, r.name)) continue;
    r.file = found.relative;
    r.tensor = e.name;
    r.dtype = std::string(io::to_string(e.dtype));
    r.shape = e.shape;
    r.per_scale = analyze_tensor(e, plan);
    reports.push_back(std::move(r));
  }
  // Added only once the whole file was read.
  for (TensorReport& r : reports) {
    add_to_total(out.total, r.per_scale);
    out.tensors.push_back(std::move(r));
  }
  for (const std::string& s : f.skipped) out.skipped.push_back(found.relative + ": " + s);
}

}  // namespace

DumpAnalysis analyze_path(const std::filesystem::path& path, const SweepPlan& plan,
                          const std::function<void(std::size_t, std::size_t)>& progress) {
  DumpRequest request;
  request.plan = &plan;
  return analyze_path(path, request, progress);
}

DumpAnalysis analyze_path(const std::filesystem::path& path, const DumpRequest& request,
                          const std::function<void(std::size_t, std::size_t)>& progress) {
  DumpAnalysis out;
  if (request.plan)
    for (const double s : request.plan->scales()) {
      ScaleStats t;
      t.scale = s;
      out.total.push_back(t);
    }
  const bool directory = std::filesystem::is_directory(path);
  const std::vector<io::FoundFile> files = io::find_tensor_files(path);
  out.files = files.size();
  for (std::size_t i = 0; i < files.size(); ++i) {
    const io::FoundFile& found = files[i];
    const SweepPlan* plan = request.plan_for ? request.plan_for(found) : request.plan;
    if (!plan) {
      out.skipped.push_back(found.relative + ": " + request.left_out_because);
    } else {
      try {
        analyze_file(found, directory, *plan, request.selection, out);
      } catch (const io::FileError& err) {
        out.failures.push_back({found.relative, err.tensor(), err.offset(), err.reason()});
      }
    }
    if (progress) progress(i + 1, files.size());
  }
  return out;
}

Recommendation recommend(const std::vector<ScaleStats>& per_scale, const formats::Format& f) {
  Recommendation r;
  if (per_scale.empty()) return r;
  const ScaleStats& any = per_scale.front();
  r.has_values = any.nonzero_finite() > 0;
  if (r.has_values) {
    // Overflow is monotone in the scale for a fixed value; the largest |x| decides.
    r.largest_safe_log2 = -150;
    for (int k = 127; k >= -149; --k) {
      const double s = std::ldexp(1.0, k);
      const float m = static_cast<float>(any.max_abs);
      const bool exact_float = static_cast<double>(m) == any.max_abs;
      const bool over = exact_float ? scale_and_round(m, static_cast<float>(s), f).overflow
                                    : scale_and_round(any.max_abs, s, f).overflow;
      if (!over) { r.largest_safe_log2 = k; break; }
    }
  }
  const bool some_scale = std::any_of(per_scale.begin(), per_scale.end(), [](const ScaleStats& s) {
    return !std::isnan(s.scale);
  });
  for (const ScaleStats& s : per_scale)
    if (!std::isnan(s.scale) && s.overflow == 0 && (!r.some_scale_safe || s.scale > r.best.scale)) {
      r.best = s;
      r.some_scale_safe = true;
    }
  std::string line = f.name + ": ";
  if (!r.has_values) {
    line += "no non-zero finite values; nothing to scale";
  } else {
    if (r.largest_safe_log2 < -149) line += "the largest value overflows at every scale";
    else line += "largest power-of-two scale without overflow: 2^" + std::to_string(r.largest_safe_log2);
    if (r.some_scale_safe) {
      line += "; of the scales analysed, " + scale_text(r.best.scale) + " is the largest without overflow: " +
              percent(r.best.rate(r.best.underflow_to_zero)) + " underflow to zero, " +
              percent(r.best.rate(r.best.subnormal)) + " subnormal";
      if (r.largest_safe_log2 >= -149 && std::ldexp(1.0, r.largest_safe_log2) > r.best.scale)
        line += " (add larger scales up to 2^" + std::to_string(r.largest_safe_log2) + " to see less underflow)";
    } else if (some_scale) {
      line += "; every scale analysed overflows";
    }
  }
  r.line = line;
  return r;
}

}  // namespace mpverify::analysis
