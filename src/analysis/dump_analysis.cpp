#include "analysis/dump_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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

DumpAnalysis analyze_path(const std::filesystem::path& path, const SweepPlan& plan,
                          const std::function<void(std::size_t, std::size_t)>& progress) {
  DumpAnalysis out;
  for (const double s : plan.scales()) {
    ScaleStats t;
    t.scale = s;
    out.total.push_back(t);
  }
  const bool directory = std::filesystem::is_directory(path);
  const std::vector<io::FoundFile> files = io::find_tensor_files(path);
  out.files = files.size();
  for (std::size_t i = 0; i < files.size(); ++i) {
    const io::FoundFile& found = files[i];
    try {
      const io::TensorFile f = io::open_tensor_file(found.path);
      std::vector<TensorReport> reports;
      for (const io::TensorEntry& e : f.tensors) {
        TensorReport r;
        r.name = directory ? found.relative + ":" + e.name : e.name;
        r.dtype = std::string(io::to_string(e.dtype));
        r.shape = e.shape;
        r.per_scale = analyze_tensor(e, plan);
        reports.push_back(std::move(r));
      }
      // Added only once the whole file was read.
      for (TensorReport& r : reports) {
        for (std::size_t k = 0; k < r.per_scale.size(); ++k) out.total[k] += r.per_scale[k];
        out.tensors.push_back(std::move(r));
      }
      for (const std::string& s : f.skipped) out.skipped.push_back(found.relative + ": " + s);
    } catch (const io::FileError& err) {
      out.failures.push_back({found.relative, err.tensor(), err.offset(), err.reason()});
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
  for (const ScaleStats& s : per_scale)
    if (s.overflow == 0 && (!r.some_scale_safe || s.scale > r.best.scale)) {
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
    } else {
      line += "; every scale analysed overflows";
    }
  }
  r.line = line;
  return r;
}

}  // namespace mpverify::analysis
