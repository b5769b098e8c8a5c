#include "analysis/layer_summary.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

#include "analysis/dump_steps.h"

namespace mpverify::analysis {

namespace {

struct StepReport {
  std::int64_t step;
  const TensorReport* report;
};

std::optional<double> least_squares_slope(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) return std::nullopt;
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) {
    mx += x;
    my += y;
  }
  mx /= static_cast<double>(xy.size());
  my /= static_cast<double>(xy.size());
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
  }
  if (sxx == 0) return std::nullopt;  // one step number only
  return sxy / sxx;
}

LayerScaleSummary summarize_scale(const std::vector<StepReport>& steps, std::size_t k) {
  LayerScaleSummary s;
  s.steps = steps.size();
  std::vector<std::pair<double, double>> xy;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const ScaleStats& st = steps[i].report->per_scale[k];
    const double under = st.rate(st.underflow_to_zero), over = st.rate(st.overflow);
    const std::int64_t step = steps[i].step;
    if (i == 0) s.scale = st.scale;
    else if (st.scale != s.scale) s.scale = std::numeric_limits<double>::quiet_NaN();
    if (i == 0 || under > s.worst_underflow_to_zero_rate) {
      s.worst_underflow_step = step;
      s.worst_underflow_to_zero_rate = under;
    }
    if (i == 0 || over > s.worst_overflow_rate) {
      s.worst_overflow_step = step;
      s.worst_overflow_rate = over;
    }
    if (i == 0) {
      s.first_step = step;
      s.first_underflow_to_zero_rate = under;
    }
    s.last_step = step;
    s.last_underflow_to_zero_rate = under;
    xy.emplace_back(static_cast<double>(step), under);
  }
  s.underflow_to_zero_slope = least_squares_slope(xy);
  return s;
}

}  // namespace

std::vector<LayerSummary> summarize_layers(const std::vector<TensorReport>& tensors) {
  std::vector<LayerSummary> layers;
  std::vector<std::vector<StepReport>> steps;  // parallel to layers
  std::map<std::string, std::size_t> index;
  for (const TensorReport& t : tensors) {
    const std::optional<StepName> in_step = split_step_name(t.file);
    if (!in_step) continue;
    const std::string layer = in_step->within + ":" + t.tensor;
    const auto [it, added] = index.emplace(layer, layers.size());
    if (added) {
      layers.push_back({layer, step_file_kind(in_step->within), t.tensor, {}});
      steps.emplace_back();
    }
    steps[it->second].push_back({*step_number(in_step->directory), &t});
  }
  for (std::size_t g = 0; g < layers.size(); ++g) {
    std::stable_sort(steps[g].begin(), steps[g].end(),
                     [](const StepReport& a, const StepReport& b) { return a.step < b.step; });
    const std::size_t slots = steps[g].front().report->per_scale.size();
    for (std::size_t k = 0; k < slots; ++k) layers[g].per_scale.push_back(summarize_scale(steps[g], k));
  }
  return layers;
}

}  // namespace mpverify::analysis
