#include "analysis/run_summary.h"

#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "emu/exponent_histogram.h"
#include "formats/format.h"
#include "record/histogram_json.h"

namespace mpverify::analysis {

// Named, not anonymous: the module compiles in unity batches, where another file's private helpers share
// the translation unit.
namespace run_summary_impl {

using nlohmann::json;

// "<run>/FILE line N": the records are the file's lines (the run logs write no blank line).
struct Where {
  const std::string& run;
  const char* file;
  std::size_t index;
  std::string at(const std::string& key) const {
    return run + "/" + file + " line " + std::to_string(index + 1) + ": \"" + key + "\"";
  }
};

const json& field(const json& line, const std::string& key, const Where& w) {
  if (!line.is_object()) throw std::invalid_argument(w.run + "/" + w.file + " line " + std::to_string(w.index + 1) +
                                                     ": not a JSON object");
  const auto it = line.find(key);
  if (it == line.end()) throw std::invalid_argument(w.at(key) + " is missing");
  return *it;
}

std::string text_field(const json& line, const std::string& key, const Where& w) {
  const json& v = field(line, key, w);
  if (!v.is_string()) throw std::invalid_argument(w.at(key) + " must be a string, not " + v.dump());
  return v.get<std::string>();
}

std::int64_t step_field(const json& line, const Where& w) {
  const json& v = field(line, "step", w);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
    throw std::invalid_argument(w.at("step") + " must be a whole number >= 0, not " + v.dump());
  return v.get<std::int64_t>();
}

// A number; nullopt for null (how the run logs write a non-finite value) when `nullable`.
std::optional<double> number_field(const json& line, const std::string& key, const Where& w, bool nullable) {
  const json& v = field(line, key, w);
  if (v.is_null() && nullable) return std::nullopt;
  if (!v.is_number()) throw std::invalid_argument(w.at(key) + " must be a number, not " + v.dump());
  return v.get<double>();
}

double rate_field(const json& line, const std::string& key, const Where& w) {
  const double r = *number_field(line, key, w, false);
  if (!(r >= 0 && r <= 1)) throw std::invalid_argument(w.at(key) + " must be a rate in [0, 1], not " + json(r).dump());
  return r;
}

// A finite positive power of two: its exponent.
std::optional<int> power_of_two_log2(double v) {
  if (!(v > 0) || !std::isfinite(v)) return std::nullopt;
  int e = 0;
  if (std::frexp(v, &e) != 0.5) return std::nullopt;
  return e - 1;
}

using KindKey = std::tuple<std::string, std::string, std::string>;  // layer, tensor, role

bool is_loss_scaled(const std::string& role) { return role == "weight_grad" || role == "activation_grad"; }

// Per step: its scale (nullopt: none recorded or non-finite).
using StepScales = std::map<std::int64_t, std::optional<double>>;

void add_mean(std::optional<double>& sum, std::optional<double>& max, double v) {
  sum = sum.value_or(0) + v;
  max = max ? std::fmax(*max, v) : v;
}

// steps.jsonl: counts, scales, lost updates, non-finite events.
StepScales read_steps(const RunSummaryInput& in, const RunSummaryOptions& options, RunSummary& s) {
  StepScales scales;
  std::optional<double> lost_sum, lost_without_sum, unused_max;
  std::size_t lost_n = 0, lost_without_n = 0;
  for (std::size_t i = 0; i < in.steps.size(); ++i) {
    const Where w{in.name, "steps.jsonl", i};
    const json& line = in.steps[i];
    const std::int64_t step = step_field(line, w);
    ++s.steps;
    const std::optional<double> scale = line.contains("scale") ? number_field(line, "scale", w, true) : std::nullopt;
    scales[step] = scale;
    if (scale) {
      if (!s.first_scale) s.first_scale = scale;
      s.last_scale = scale;
      s.min_scale = s.min_scale ? std::fmin(*s.min_scale, *scale) : *scale;
      s.max_scale = s.max_scale ? std::fmax(*s.max_scale, *scale) : *scale;
    }
    if (line.value("skipped", false) == true) ++s.skipped_steps;
    if (line.contains("lost_update_rate") && !line["lost_update_rate"].is_null()) {
      add_mean(lost_sum, s.lost_update_rate_max, rate_field(line, "lost_update_rate", w));
      ++lost_n;
    }
    if (line.contains("lost_update_rate_without_master") && !line["lost_update_rate_without_master"].is_null()) {
      add_mean(lost_without_sum, unused_max, rate_field(line, "lost_update_rate_without_master", w));
      ++lost_without_n;
    }
    const auto nf = line.find("nonfinite");
    if (nf != line.end() && !nf->is_null()) {
      ++s.nonfinite_steps;
      if (s.first_nonfinite.size() < options.max_events) {
        const Where e{in.name, "steps.jsonl", i};
        NonfiniteEvent event{step, text_field(*nf, "layer", e), text_field(*nf, "tensor", e),
                             nf->contains("pass") ? text_field(*nf, "pass", e) : std::string(), std::nullopt,
                             std::nullopt};
        if (nf->contains("count") && (*nf)["count"].is_number_unsigned()) event.count = (*nf)["count"].get<std::uint64_t>();
        if (nf->contains("after")) event.after = (*nf)["after"].is_null() ? std::string() : text_field(*nf, "after", e);
        s.first_nonfinite.push_back(event);
      }
    }
  }
  if (lost_n) s.lost_update_rate_mean = *lost_sum / static_cast<double>(lost_n);
  if (lost_without_n) s.lost_update_rate_without_master_mean = *lost_without_sum / static_cast<double>(lost_without_n);
  return scales;
}

// rate x n back to the count it was computed from (rates are k / n in double: exact for n < 2^53).
std::uint64_t count_of(double rate, std::uint64_t n) {
  return static_cast<std::uint64_t>(std::llround(rate * static_cast<double>(n)));
}

// One tensors.jsonl line into its kind.
void add_tensor_line(const json& line, const Where& w, TensorKindSummary& k, double& worst_rate) {
  const json& n_json = field(line, "nonzero_finite", w);
  const bool count = n_json.is_number_unsigned() || (n_json.is_number_integer() && n_json.get<std::int64_t>() >= 0);
  if (!count) throw std::invalid_argument(w.at("nonzero_finite") + " must be a count, not " + n_json.dump());
  const std::uint64_t n = n_json.get<std::uint64_t>();
  const double under = rate_field(line, "underflow_to_zero_rate", w);
  ++k.recorded_steps;
  k.nonzero += n;
  k.underflow += count_of(under, n);
  k.steps.push_back({step_field(line, w), n, count_of(under, n)});
  k.subnormal += count_of(rate_field(line, "subnormal_rate", w), n);
  k.overflow += count_of(rate_field(line, "overflow_rate", w), n);
  if (const auto h = number_field(line, "headroom_log2", w, true))
    k.min_headroom_log2 = k.min_headroom_log2 ? std::fmin(*k.min_headroom_log2, *h) : *h;
  if (under > worst_rate) {  // none while nothing underflowed
    worst_rate = under;
    k.worst_step = step_field(line, w);
  }
}

// tensors.jsonl: every kind, in the order it first appears.
std::map<KindKey, std::size_t> read_tensors(const RunSummaryInput& in, RunSummary& s) {
  std::map<KindKey, std::size_t> index;
  std::vector<double> worst;
  std::map<std::int64_t, bool> recorded;
  for (std::size_t i = 0; i < in.tensors.size(); ++i) {
    const Where w{in.name, "tensors.jsonl", i};
    const json& line = in.tensors[i];
    const KindKey key{text_field(line, "layer", w), text_field(line, "tensor", w), text_field(line, "role", w)};
    auto [it, added] = index.emplace(key, s.kinds.size());
    if (added) {
      TensorKindSummary k;
      std::tie(k.layer, k.tensor, k.role) = key;
      k.pass = line.contains("pass") ? text_field(line, "pass", w) : "";
      k.format = text_field(line, "format", w);
      k.loss_scaled = is_loss_scaled(k.role);
      s.kinds.push_back(k);
      worst.push_back(0);
    }
    add_tensor_line(line, w, s.kinds[it->second], worst[it->second]);
    recorded[step_field(line, w)] = true;
  }
  s.recorded_steps = recorded.size();
  return index;
}

// The [certain, possible] counts of one histogram shifted by k binades, into b (see the header).
void add_shifted(const emu::ExponentHistogram& h, int k, const emu::FormatThresholds& t, WhatIfBounds& b) {
  const int m = t.min_subnormal_exponent, top = t.max_finite_exponent;
  for (int e = emu::ExponentHistogram::min_exponent; e <= emu::ExponentHistogram::max_exponent; ++e) {
    const std::uint64_t n = h.at(e);
    if (n == 0) continue;
    const int shifted = e + k;
    b.of += n;
    if (shifted <= m - 2) b.underflow_certain += n;
    if (shifted <= m - 1) b.underflow_possible += n;
    if (shifted >= top + 1) b.overflow_certain += n;
    if (shifted >= top) b.overflow_possible += n;
  }
  // Outside the histogram's range the binade is unknown: possible on its own side, certain only if even
  // the range's edge would be.
  b.of += h.below_range + h.above_range;
  b.underflow_possible += h.below_range;
  if (emu::ExponentHistogram::min_exponent - 1 + k <= m - 2) b.underflow_certain += h.below_range;
  b.overflow_possible += h.above_range;
  if (emu::ExponentHistogram::max_exponent + 1 + k >= top + 1) b.overflow_certain += h.above_range;
}

// histograms.jsonl: every kind's histograms summed over its steps (for the figures).
void add_histograms(const RunSummaryInput& in, const std::map<KindKey, std::size_t>& index, RunSummary& s) {
  if (!in.histograms) return;
  for (std::size_t i = 0; i < in.histograms->size(); ++i) {
    const Where w{in.name, "histograms.jsonl", i};
    const json& line = (*in.histograms)[i];
    const auto it = index.find({text_field(line, "layer", w), text_field(line, "tensor", w), text_field(line, "role", w)});
    if (it == index.end()) continue;
    try {
      std::optional<emu::ExponentHistogram>& pooled = s.kinds[it->second].histogram;
      if (!pooled) pooled.emplace();
      *pooled += record::histogram_from_json(line);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(w.at("counts") + ": " + e.what());
    }
  }
}

// histograms.jsonl: the what-if bounds of every loss-scaled kind; "" or why there are none.
std::string add_what_if(const RunSummaryInput& in, const RunSummaryOptions& options, const StepScales& scales,
                        const std::map<KindKey, std::size_t>& index, RunSummary& s) {
  if (options.what_if_log2.empty()) return "";
  if (!in.histograms) return "no histograms.jsonl in the run (the what-if scales are computed from it)";
  for (TensorKindSummary& k : s.kinds)
    if (k.loss_scaled)
      for (int log2 : options.what_if_log2) k.what_if.push_back({log2, 0, 0, 0, 0, 0});
  for (std::size_t i = 0; i < in.histograms->size(); ++i) {
    const Where w{in.name, "histograms.jsonl", i};
    const json& line = (*in.histograms)[i];
    const auto it = index.find({text_field(line, "layer", w), text_field(line, "tensor", w), text_field(line, "role", w)});
    if (it == index.end() || !s.kinds[it->second].loss_scaled) continue;
    const std::int64_t step = step_field(line, w);
    const auto scale = scales.find(step);
    const std::optional<int> s_log2 = scale == scales.end() || !scale->second ? std::nullopt
                                                                              : power_of_two_log2(*scale->second);
    if (!s_log2) return "step " + std::to_string(step) + "'s loss scale is not a power of two (or not recorded): the "
                        "histogram's binades cannot be shifted to another scale";
    const formats::Format f = formats::parse_format(text_field(line, "format", w));
    const emu::FormatThresholds t = emu::format_thresholds(f);
    if (t.min_subnormal_exponent == t.min_normal_exponent)
      return "format " + f.name + " has no subnormals: the what-if bounds assume rounding into subnormals";
    emu::ExponentHistogram h;
    try {
      h = record::histogram_from_json(line);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(w.at("counts") + ": " + e.what());
    }
    for (WhatIfBounds& b : s.kinds[it->second].what_if) add_shifted(h, b.scale_log2 - *s_log2, t, b);
  }
  return "";
}

}  // namespace run_summary_impl

RunSummary summarize_run(const RunSummaryInput& in, const RunSummaryOptions& options) {
  RunSummary s;
  s.name = in.name;
  s.what_if_log2 = options.what_if_log2;
  namespace impl = run_summary_impl;
  const impl::StepScales scales = impl::read_steps(in, options, s);
  const std::map<impl::KindKey, std::size_t> index = impl::read_tensors(in, s);
  impl::add_histograms(in, index, s);
  s.what_if_note = impl::add_what_if(in, options, scales, index, s);
  if (!s.what_if_note.empty())
    for (TensorKindSummary& k : s.kinds) k.what_if.clear();
  return s;
}

nlohmann::ordered_json run_summary_json(const RunSummary& s) {
  using oj = nlohmann::ordered_json;
  const auto optional = [](const std::optional<double>& v) { return v ? oj(*v) : oj(nullptr); };
  const auto rate = [](std::uint64_t k, std::uint64_t n) { return n ? oj(static_cast<double>(k) / static_cast<double>(n)) : oj(nullptr); };
  oj kinds = oj::array();
  for (const TensorKindSummary& k : s.kinds) {
    oj what_if = oj::array();
    for (const WhatIfBounds& b : k.what_if)
      what_if.push_back({{"scale_log2", b.scale_log2}, {"of", b.of},
                         {"underflow_certain", b.underflow_certain}, {"underflow_possible", b.underflow_possible},
                         {"overflow_certain", b.overflow_certain}, {"overflow_possible", b.overflow_possible}});
    kinds.push_back({{"layer", k.layer}, {"tensor", k.tensor}, {"pass", k.pass}, {"role", k.role},
                     {"format", k.format}, {"loss_scaled", k.loss_scaled}, {"recorded_steps", k.recorded_steps},
                     {"nonzero", k.nonzero}, {"underflow", k.underflow}, {"subnormal", k.subnormal},
                     {"overflow", k.overflow}, {"underflow_rate", rate(k.underflow, k.nonzero)},
                     {"subnormal_rate", rate(k.subnormal, k.nonzero)}, {"overflow_rate", rate(k.overflow, k.nonzero)},
                     {"min_headroom_log2", optional(k.min_headroom_log2)},
                     {"worst_step", k.worst_step ? oj(*k.worst_step) : oj(nullptr)}, {"what_if", what_if}});
  }
  oj events = oj::array();
  for (const NonfiniteEvent& e : s.first_nonfinite) {
    oj event{{"step", e.step}, {"layer", e.layer}, {"tensor", e.tensor}, {"pass", e.pass},
             {"count", e.count ? oj(*e.count) : oj(nullptr)}};
    if (e.after) event["after"] = e.after->empty() ? oj(nullptr) : oj(*e.after);  // null: before any module
    events.push_back(std::move(event));
  }
  return {{"run", s.name},
          {"steps", s.steps},
          {"recorded_steps", s.recorded_steps},
          {"skipped_steps", s.skipped_steps},
          {"scale", {{"first", optional(s.first_scale)}, {"last", optional(s.last_scale)},
                     {"min", optional(s.min_scale)}, {"max", optional(s.max_scale)}}},
          {"lost_updates", {{"rate_mean", optional(s.lost_update_rate_mean)},
                            {"rate_max", optional(s.lost_update_rate_max)},
                            {"rate_without_master_mean", optional(s.lost_update_rate_without_master_mean)}}},
          {"nonfinite_steps", s.nonfinite_steps},
          {"first_nonfinite", events},
          {"what_if_log2", s.what_if_log2},
          {"what_if_note", s.what_if_note.empty() ? oj(nullptr) : oj(s.what_if_note)},
          {"kinds", kinds}};
}

std::string made_after_text(const NonfiniteEvent& e) {
  if (!e.after) return {};
  return e.after->empty() ? "made before any module" : "made after " + *e.after;
}

}  // namespace mpverify::analysis
