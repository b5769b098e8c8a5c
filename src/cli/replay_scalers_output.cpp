#include "cli/replay_scalers_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/json_value.h"
#include "report/svg_line_chart.h"

namespace mpverify::cli {

namespace {

using training::Replay;

std::string count_text(const std::optional<std::size_t>& n) { return n ? std::to_string(*n) : "-"; }


std::string table(const ReplayResults& results) {
  const auto& lanes = results.lanes;
  std::size_t rows = 0;
  for (const auto& l : lanes) rows = std::max(rows, l.replay.steps.size());
  // A cell: the scale used, " S" when skipped, " ABORT" at the abort.
  auto cell = [&](std::size_t s, std::size_t k) -> std::string {
    if (k >= lanes[s].replay.steps.size()) return "";
    const auto& r = lanes[s].replay.steps[k];
    return scale_text(r.scale) + (r.aborted ? " ABORT" : r.skipped ? " S" : "");
  };
  std::vector<std::size_t> width(lanes.size());
  for (std::size_t s = 0; s < lanes.size(); ++s) {
    width[s] = std::max<std::size_t>(lanes[s].label().size(), 8);
    for (std::size_t k = 0; k < lanes[s].replay.steps.size(); ++k) width[s] = std::max(width[s], cell(s, k).size());
  }
  std::string out;
  auto pad = [](const std::string& text, std::size_t w) {
    return text + std::string(w - std::min(w, text.size()), ' ');
  };
  auto end_line = [&out] {
    while (out.ends_with(' ')) out.pop_back();
    out += "\n";
  };
  out += pad("step", 7);
  for (std::size_t s = 0; s < lanes.size(); ++s) out += "  " + pad(lanes[s].label(), width[s]);
  end_line();
  for (std::size_t k = 0; k < rows; ++k) {
    out += pad(std::to_string(k), 7);
    for (std::size_t s = 0; s < lanes.size(); ++s) out += "  " + pad(cell(s, k), width[s]);
    end_line();
  }
  return out;
}

}  // namespace

std::string overflow_source_line(const training::ReplayMode& mode) {
  if (mode.overflow_from == training::OverflowSource::amax)
    return "fp16/bf16 strategies' overflow: decided from each step's gradient amax at each strategy's own scale (" +
           training::grad_format_name(mode.grad_format) + " gradients)\n";
  return "fp16/bf16 strategies' overflow: the recorded found_inf flags\n";
}

std::string scale_text(double v) {
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : std::string("?");
}

std::string replay_text(const ReplayResults& results) {
  std::string out = overflow_source_line(results.mode) + table(results);
  out += "\nsummary (S = skipped; scale = the scale the step ran with; overflow: found_inf for the loss scalers, "
         "amax x scale past the FP8 format's max for delayed/current/mxfp8; flushed: amax x scale rounds to 0; "
         "underflow: amin x scale rounds to 0; -: not known)\n";
  std::size_t name_width = 12;
  for (const auto& l : results.lanes) name_width = std::max(name_width, l.label().size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %13s %13s  %-24s %15s %9s %9s %9s  %s\n", static_cast<int>(name_width),
                "strategy", "skipped_steps", "steps_at_min", "final_scale", "aborted_at_step", "overflow", "flushed",
                "underflow", "format");
  out += line;
  for (const auto& l : results.lanes) {
    const Replay& r = l.replay;
    std::snprintf(line, sizeof line, "%-*s %13zu %13zu  %-24s %15s %9zu %9s %9s  %s\n", static_cast<int>(name_width),
                  l.label().c_str(), r.skipped_steps, r.steps_at_min, scale_text(r.final_scale).c_str(),
                  r.aborted_at ? std::to_string(*r.aborted_at).c_str() : "-", r.overflow_steps,
                  count_text(r.flush_steps).c_str(), count_text(r.underflow_steps).c_str(),
                  r.range_format.empty() ? "recorded" : r.range_format.c_str());
    out += line;
  }
  return out;
}

namespace {

nlohmann::ordered_json optional_count(const std::optional<std::size_t>& n) {
  return n ? nlohmann::ordered_json(*n) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json steps_json(const Replay& r) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const auto& step : r.steps) {
    nlohmann::ordered_json j{{"step", step.step}, {"scale", json_number(step.scale)}, {"skipped", step.skipped}};
    if (step.aborted) j["aborted"] = true;
    if (step.trace_step) j["trace_step"] = *step.trace_step;
    j["overflow"] = step.overflow;
    if (step.flushed) j["flushed"] = *step.flushed;
    if (step.underflow) j["underflow"] = *step.underflow;
    steps.push_back(std::move(j));
  }
  return steps;
}

nlohmann::ordered_json summary_json(const Replay& r) {
  return {{"skipped_steps", r.skipped_steps},
          {"steps_at_min", r.steps_at_min},
          {"final_scale", json_number(r.final_scale)},
          {"aborted_at_step", r.aborted_at ? nlohmann::ordered_json(*r.aborted_at) : nullptr},
          {"overflow_steps", r.overflow_steps},
          {"flush_steps", optional_count(r.flush_steps)},
          {"underflow_steps", optional_count(r.underflow_steps)},
          {"overflow_format", r.range_format.empty() ? nlohmann::ordered_json(nullptr)
                                                     : nlohmann::ordered_json(r.range_format)}};
}

}  // namespace

std::string replay_json(const ReplayResults& results) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object(), summary = nlohmann::ordered_json::object();
  const bool amax = results.mode.overflow_from == training::OverflowSource::amax;
  out["overflow_from"] = amax ? "amax" : "found_inf";
  out["grad_format"] = amax ? nlohmann::ordered_json(training::grad_format_name(results.mode.grad_format))
                            : nlohmann::ordered_json(nullptr);
  if (!results.optimizers.empty()) out["optimizers"] = results.optimizers;
  for (const auto& l : results.lanes) {
    if (results.optimizers.empty()) {
      out[l.strategy] = steps_json(l.replay);
      summary[l.strategy] = summary_json(l.replay);
    } else {
      out[l.strategy][l.optimizer] = steps_json(l.replay);
      summary[l.strategy][l.optimizer] = summary_json(l.replay);
    }
  }
  out["summary"] = std::move(summary);
  return out.dump(2) + "\n";
}

std::string replay_svg(const ReplayResults& results) {
  report::LineChart chart{"Scale per step (skipped steps marked with a cross)", "step", "scale", true, {}};
  for (const auto& l : results.lanes) {
    report::LineSeries s{l.label(), {}, false};
    for (const auto& step : l.replay.steps) {
      const double x = static_cast<double>(step.step);
      s.points.emplace_back(x, step.scale);
      if (step.skipped || step.aborted) s.marked.emplace_back(x, step.scale);
    }
    chart.series.push_back(std::move(s));
  }
  return report::svg_line_chart(chart);
}

}  // namespace mpverify::cli
