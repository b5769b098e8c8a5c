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


// A cell: the scale used, " S" when skipped, " ABORT" at the abort.
std::string cell(const training::ReplayStep& r) {
  return scale_text(r.scale) + (r.aborted ? " ABORT" : r.skipped ? " S" : "");
}

std::string pad(const std::string& text, std::size_t w) { return text + std::string(w - std::min(w, text.size()), ' '); }

// Written row by row, not built whole: a trace of millions of steps makes a table of hundreds of megabytes.
void write_table(std::ostream& out, const ReplayResults& results) {
  const auto& lanes = results.lanes;
  std::size_t rows = 0;
  for (const auto& l : lanes) rows = std::max(rows, l.replay.steps.size());
  std::vector<std::size_t> width(lanes.size());
  for (std::size_t s = 0; s < lanes.size(); ++s) {
    width[s] = std::max<std::size_t>(lanes[s].label().size(), 8);
    for (const auto& r : lanes[s].replay.steps) width[s] = std::max(width[s], cell(r).size());
  }
  std::string line;
  auto end_line = [&] {
    while (line.ends_with(' ')) line.pop_back();
    out << line << '\n';
    line.clear();
  };
  line += pad("step", 7);
  for (std::size_t s = 0; s < lanes.size(); ++s) line += "  " + pad(lanes[s].label(), width[s]);
  end_line();
  for (std::size_t k = 0; k < rows; ++k) {
    line += pad(std::to_string(k), 7);
    for (std::size_t s = 0; s < lanes.size(); ++s)
      line += "  " + pad(k < lanes[s].replay.steps.size() ? cell(lanes[s].replay.steps[k]) : "", width[s]);
    end_line();
  }
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

void write_replay_text(std::ostream& os, const ReplayResults& results) {
  os << overflow_source_line(results.mode);
  write_table(os, results);
  std::string out = "\nsummary (S = skipped; scale = the scale the step ran with; overflow: found_inf for the loss scalers, "
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
  os << out;
}

namespace {

nlohmann::ordered_json optional_count(const std::optional<std::size_t>& n) {
  return n ? nlohmann::ordered_json(*n) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json step_json(const training::ReplayStep& step) {
  nlohmann::ordered_json j{{"step", step.step}, {"scale", json_number(step.scale)}, {"skipped", step.skipped}};
  if (step.aborted) j["aborted"] = true;
  if (step.trace_step) j["trace_step"] = *step.trace_step;
  j["overflow"] = step.overflow;
  if (step.flushed) j["flushed"] = *step.flushed;
  if (step.underflow) j["underflow"] = *step.underflow;
  return j;
}

// `j` as dump(2) writes it when it sits `indent` spaces deep in a document.
void write_indented(std::ostream& os, const nlohmann::ordered_json& j, std::size_t indent) {
  const std::string text = j.dump(2), margin = "\n" + std::string(indent, ' ');
  std::size_t begin = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', begin)) {
    os << std::string_view(text).substr(begin, nl - begin) << margin;
    begin = nl + 1;
  }
  os << std::string_view(text).substr(begin);
}

// One lane's steps as the array dump(2) would write at `indent`, a step at a time: the whole array as JSON
// values costs several hundred bytes a step.
void write_steps(std::ostream& os, const Replay& r, std::size_t indent) {
  if (r.steps.empty()) {
    os << "[]";
    return;
  }
  const std::string inner(indent + 2, ' ');
  os << "[";
  for (std::size_t k = 0; k < r.steps.size(); ++k) {
    os << (k == 0 ? "\n" : ",\n") << inner;
    write_indented(os, step_json(r.steps[k]), indent + 2);
  }
  os << "\n" << std::string(indent, ' ') << "]";
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

// The document dump(2) would write for {overflow_from, grad_format, [optimizers,] STRATEGY: steps (or
// {OPTIMIZER: steps}) ..., summary}, written a key at a time.
void write_replay_json(std::ostream& os, const ReplayResults& results) {
  const bool amax = results.mode.overflow_from == training::OverflowSource::amax;
  const bool by_optimizer = !results.optimizers.empty();
  nlohmann::ordered_json summary = nlohmann::ordered_json::object();
  auto key = [&os](const std::string& name, bool first) {
    os << (first ? "{\n  " : ",\n  ") << nlohmann::ordered_json(name).dump() << ": ";
  };
  key("overflow_from", true);
  os << nlohmann::ordered_json(amax ? "amax" : "found_inf").dump();
  key("grad_format", false);
  os << (amax ? nlohmann::ordered_json(training::grad_format_name(results.mode.grad_format)).dump() : "null");
  if (by_optimizer) {
    key("optimizers", false);
    write_indented(os, nlohmann::ordered_json(results.optimizers), 2);
  }
  // Lanes are strategy-major: a strategy's optimizers are consecutive.
  for (std::size_t i = 0; i < results.lanes.size(); ++i) {
    const ReplayLane& l = results.lanes[i];
    const bool first_of_strategy = i == 0 || results.lanes[i - 1].strategy != l.strategy;
    const bool last_of_strategy = i + 1 == results.lanes.size() || results.lanes[i + 1].strategy != l.strategy;
    if (!by_optimizer) {
      key(l.strategy, false);
      write_steps(os, l.replay, 2);
      summary[l.strategy] = summary_json(l.replay);
      continue;
    }
    if (first_of_strategy) key(l.strategy, false);
    os << (first_of_strategy ? "{\n    " : ",\n    ") << nlohmann::ordered_json(l.optimizer).dump() << ": ";
    write_steps(os, l.replay, 4);
    if (last_of_strategy) os << "\n  }";
    summary[l.strategy][l.optimizer] = summary_json(l.replay);
  }
  key("summary", false);
  write_indented(os, summary, 2);
  os << "\n}\n";
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
