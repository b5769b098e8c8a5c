// mpverify analyze PATH --format F [--scale S | --scales 1,8,...,65536 | --at-step-scale]
//                  [--only GLOB]... [--exclude GLOB]... [--per-layer]
//                  [--json | --json-out FILE] [--csv | --csv-out FILE] [--plot FILE.svg] [--progress]
// Tensors dumped from PyTorch, JAX or NumPy (.npy, .npz, .safetensors; a file
// or a directory of them): per tensor and in total, at each scale, what
// casting x * S to the format does (analysis/scaled_rounding.h defines every
// category; analysis/dump_analysis.h does the work). A dump written during
// training (DIR/step-NNNNNN/, analysis/dump_steps.h) is also summarised per
// layer over its steps (analysis/layer_summary.h).
//
// Exit codes: 0; 2 for a file that cannot be read (each failure is reported
// with file, tensor and byte offset; --skip-unreadable analyses the others and
// lists the failures in the outputs) and for bad usage (unknown format,
// a scale that is not a positive float value, a path that does not exist or
// holds no tensor files, globs that keep no tensor, a step.json that
// contradicts its directory), with nothing written.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/dump_analysis.h"
#include "analysis/dump_steps.h"
#include "analysis/layer_summary.h"
#include "analysis/scale_sweep.h"
#include "analysis/scaled_rounding.h"
#include "cli/commands.h"
#include "cli/json_value.h"
#include "cli/tensor_report_output.h"
#include "emu/exponent_histogram.h"
#include "formats/format.h"
#include "io/file_error.h"
#include "io/tensor_directory.h"
#include "record/histogram_json.h"
#include "record/run_log.h"
#include "report/svg_histogram.h"

namespace mpverify::cli {

namespace {

struct AnalyzeOptions {
  std::string path;
  std::string format;
  double scale = 1;
  std::string scales;
  bool json = false;
  std::string json_out;
  bool csv = false;
  std::string csv_out;
  std::string plot;
  bool progress = false;
  std::vector<std::string> only, exclude;
  bool per_layer = false;
  bool at_step_scale = false;
  bool skip_unreadable = false;
  bool recommend_from_all = false;
};

// A total whose slot mixed several scales (--at-step-scale) has scale NaN: no one scale to name.
nlohmann::json scale_json(double scale) { return std::isnan(scale) ? nlohmann::json(nullptr) : nlohmann::json(scale); }

nlohmann::json stats_json(const std::string& tensor, const analysis::ScaleStats& s, const formats::Format& f) {
  return {{"tensor", tensor},
          {"scale", scale_json(s.scale)},
          {"count", s.count},
          {"zeros_in", s.zeros_in},
          {"nan_or_inf_in", s.nan_or_inf_in},
          {"nonzero_finite", s.nonzero_finite()},
          {"underflow_to_zero", s.underflow_to_zero},
          {"subnormal", s.subnormal},
          {"overflow", s.overflow},
          {"underflow_to_zero_rate", s.rate(s.underflow_to_zero)},
          {"subnormal_rate", s.rate(s.subnormal)},
          {"overflow_rate", s.rate(s.overflow)},
          {"max_abs", s.max_abs},
          {"headroom_log2", std::isnan(s.scale) ? nlohmann::json(nullptr) : json_number(s.headroom_log2(f))},
          {"histogram", record::histogram_to_json(s.histogram)}};
}

std::string fixed(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// The scale column: the scale, or "per step" for a total over steps at their own scales.
std::string scale_text(double scale, const char* fmt) { return std::isnan(scale) ? "per step" : fixed(scale, fmt); }

std::string tensor_rows(const analysis::DumpAnalysis& a, const formats::Format& f, bool totals_only) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-40s %12s %14s %10s %10s %10s %9s\n", "tensor", "scale", "nonzero", "to-zero",
                "subnormal", "overflow", "headroom");
  out << line;
  const auto row = [&](const std::string& name, const analysis::ScaleStats& s) {
    const std::string headroom = std::isnan(s.scale) ? "-" : fixed(s.headroom_log2(f), "%.2f");
    std::snprintf(line, sizeof line, "%-40s %12s %14llu %9.4f%% %9.4f%% %9.4f%% %9s\n", name.c_str(),
                  scale_text(s.scale, "%.6g").c_str(), static_cast<unsigned long long>(s.nonzero_finite()),
                  100 * s.rate(s.underflow_to_zero), 100 * s.rate(s.subnormal), 100 * s.rate(s.overflow),
                  headroom.c_str());
    out << line;
  };
  if (!totals_only)
    for (const analysis::TensorReport& t : a.tensors)
      for (const analysis::ScaleStats& s : t.per_scale) row(t.name, s);
  for (const analysis::ScaleStats& s : a.total) row("(total)", s);
  return out.str();
}

std::string layer_rows(const std::vector<analysis::LayerSummary>& layers) {
  std::ostringstream out;
  out << "per layer over the steps (rates of underflow to zero unless named; worst: the step with the highest rate;\n"
         "trend: least-squares slope of the underflow-to-zero rate against the step number, in % per step)\n";
  char line[320];
  std::snprintf(line, sizeof line, "%-40s %12s %6s %10s %10s %19s %19s %13s\n", "layer", "scale", "steps", "first",
                "last", "worst (step)", "overflow (step)", "trend %/step");
  out << line;
  for (const analysis::LayerSummary& l : layers)
    for (const analysis::LayerScaleSummary& s : l.per_scale) {
      const std::string worst = fixed(100 * s.worst_underflow_to_zero_rate, "%.4f%%") + " (" +
                                std::to_string(s.worst_underflow_step) + ")";
      const std::string over =
          fixed(100 * s.worst_overflow_rate, "%.4f%%") + " (" + std::to_string(s.worst_overflow_step) + ")";
      const std::string trend = s.underflow_to_zero_slope ? fixed(100 * *s.underflow_to_zero_slope, "%+.3g") : "-";
      std::snprintf(line, sizeof line, "%-40s %12s %6zu %9.4f%% %9.4f%% %19s %19s %13s\n", l.layer.c_str(),
                    scale_text(s.scale, "%.6g").c_str(), s.steps, 100 * s.first_underflow_to_zero_rate,
                    100 * s.last_underflow_to_zero_rate, worst.c_str(), over.c_str(), trend.c_str());
      out << line;
    }
  return out.str();
}

std::string text_table(const analysis::DumpAnalysis& a, const formats::Format& f, const analysis::Recommendation& r,
                       const std::vector<std::string>& notes, const std::vector<analysis::LayerSummary>& layers,
                       std::size_t steps, bool per_layer) {
  std::ostringstream out;
  out << "format " << f.name << "; " << a.files << " file(s), " << a.tensors.size() << " tensor(s)";
  if (steps > 0) out << ", " << steps << " step(s), " << layers.size() << " layer(s)";
  out << "\n" << tensor_rows(a, f, per_layer);
  if (steps > 0) out << layer_rows(layers);
  for (const std::string& s : a.skipped) out << "skipped: " << s << "\n";
  for (const analysis::ReadFailure& fl : a.failures) out << "FAILED: " << failure_line(fl) << "\n";
  for (const std::string& n : notes) out << "note: " << n << "\n";
  out << r.line << "\n";
  return out.str();
}

std::string csv_table(const analysis::DumpAnalysis& a, const formats::Format& f) {
  std::ostringstream out;
  out << "tensor,scale,count,zeros_in,nan_or_inf_in,underflow_to_zero,subnormal,overflow,max_abs,headroom_log2\n";
  const auto row = [&](const std::string& name, const analysis::ScaleStats& s) {
    const bool mixed = std::isnan(s.scale);  // a total over steps at their own scales: no scale, no headroom
    out << csv_field(name) << ',' << (mixed ? "" : fixed(s.scale, "%.9g")) << ',' << s.count << ',' << s.zeros_in
        << ',' << s.nan_or_inf_in << ',' << s.underflow_to_zero << ',' << s.subnormal << ',' << s.overflow << ','
        << fixed(s.max_abs, "%.9g") << ',' << (mixed ? "" : fixed(s.headroom_log2(f), "%.17g")) << '\n';
  };
  for (const analysis::TensorReport& t : a.tensors)
    for (const analysis::ScaleStats& s : t.per_scale) row(t.name, s);
  for (const analysis::ScaleStats& s : a.total) row("(total)", s);
  return out.str();
}

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
nlohmann::json optional_json(const std::optional<bool>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json layers_json(const std::vector<analysis::LayerSummary>& layers) {
  nlohmann::json out = nlohmann::json::array();
  for (const analysis::LayerSummary& l : layers) {
    nlohmann::json per_scale = nlohmann::json::array();
    for (const analysis::LayerScaleSummary& s : l.per_scale)
      per_scale.push_back({{"scale", scale_json(s.scale)},
                           {"steps", s.steps},
                           {"first_step", s.first_step},
                           {"last_step", s.last_step},
                           {"first_underflow_to_zero_rate", s.first_underflow_to_zero_rate},
                           {"last_underflow_to_zero_rate", s.last_underflow_to_zero_rate},
                           {"worst_underflow_step", s.worst_underflow_step},
                           {"worst_underflow_to_zero_rate", s.worst_underflow_to_zero_rate},
                           {"worst_overflow_step", s.worst_overflow_step},
                           {"worst_overflow_rate", s.worst_overflow_rate},
                           {"underflow_to_zero_rate_slope_per_step", optional_json(s.underflow_to_zero_slope)}});
    out.push_back({{"layer", l.layer}, {"kind", l.kind}, {"tensor", l.tensor}, {"per_scale", per_scale}});
  }
  return out;
}

nlohmann::json steps_json(const std::vector<analysis::StepDirectory>& steps) {
  nlohmann::json out = nlohmann::json::array();
  for (const analysis::StepDirectory& d : steps) {
    const analysis::StepRecord r = d.record.value_or(analysis::StepRecord{});
    out.push_back({{"step", d.step}, {"directory", d.name}, {"step_json", d.record.has_value()},
                   {"scale", optional_json(r.scale)}, {"found_inf", optional_json(r.found_inf)},
                   {"skipped", optional_json(r.skipped)}, {"loss", optional_json(r.loss)}});
  }
  return out;
}

// Which tensors the recommended scale is drawn from, and what a reader must know about the rows. A dump's
// gradients (grads, activation_grads) are what training multiplies by the loss scale, so in a dump that
// holds them the recommendation comes from them alone: weights and updates would cap it at a scale they
// never meet.
struct RecommendationBasis {
  std::string from = "all";  // "gradients" or "all"
  std::size_t tensors = 0;   // how many tensors it is drawn from
  std::vector<analysis::ScaleStats> total;
  std::vector<std::string> notes;
};

RecommendationBasis recommendation_basis(const analysis::DumpAnalysis& a, bool at_step_scale, bool from_all) {
  RecommendationBasis b;
  std::size_t gradients = 0, unscaled = 0;
  for (const analysis::TensorReport& t : a.tensors) {
    const std::string kind = analysis::dump_kind(t.name);
    gradients += analysis::loss_scaled_kind(kind) ? 1 : 0;
    unscaled += kind == "weights" || kind == "updates" ? 1 : 0;
  }
  if (unscaled > 0 && at_step_scale)
    b.notes.push_back("weights and updates (" + std::to_string(unscaled) +
                      " tensors) are measured as stored, at scale 1: training scales only the gradients");
  else if (unscaled > 0)
    b.notes.push_back("the scales multiply weights and updates too (" + std::to_string(unscaled) +
                      " tensors), which training never scales: their rows, and the totals, say what such a scale "
                      "would do to them (keep the gradients alone with --only '*grads*:*')");
  if (gradients > 0 && gradients < a.tensors.size() && !from_all) {
    b.from = "gradients";
    for (const analysis::TensorReport& t : a.tensors)
      if (analysis::loss_scaled_kind(analysis::dump_kind(t.name))) analysis::add_to_total(b.total, t.per_scale);
    b.tensors = gradients;
    b.notes.push_back("the recommendation is drawn from the " + std::to_string(gradients) +
                      " gradient tensors alone (grads, activation_grads); --recommend-from all draws it from every "
                      "tensor");
    return b;
  }
  if (gradients > 0 && gradients == a.tensors.size()) b.from = "gradients";
  b.total = a.total;
  b.tensors = a.tensors.size();
  return b;
}

nlohmann::json recommendation_json(const analysis::Recommendation& r) {
  return {{"largest_safe_scale_log2",
           r.has_values && r.largest_safe_log2 >= -149 ? nlohmann::json(r.largest_safe_log2) : nlohmann::json(nullptr)},
          {"best_scale", r.some_scale_safe ? nlohmann::json(r.best.scale) : nlohmann::json(nullptr)},
          {"underflow_to_zero_rate_at_best",
           r.some_scale_safe ? nlohmann::json(r.best.rate(r.best.underflow_to_zero)) : nlohmann::json(nullptr)},
          {"line", r.line}};
}

// Everything the JSON output holds beside the inputs' description.
struct AnalyzeResult {
  const analysis::DumpAnalysis& a;
  const analysis::Recommendation& r;
  const RecommendationBasis& basis;
  const std::vector<analysis::StepDirectory>& steps;
  const std::vector<analysis::LayerSummary>& layers;
};

nlohmann::json analysis_json(const AnalyzeOptions& o, const formats::Format& f, const std::vector<double>& scales,
                             const AnalyzeResult& res) {
  nlohmann::json j;
  j["format"] = f.name;
  j["scales"] = scales;
  j["at_step_scale"] = o.at_step_scale;
  j["selection"] = {{"only", o.only}, {"exclude", o.exclude}, {"tensors_seen", res.a.selection.seen},
                    {"tensors_kept", res.a.selection.kept}};
  j["thresholds"] = record::thresholds_to_json(emu::format_thresholds(f));
  j["files"] = res.a.files;
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json tensors = nlohmann::json::array();
  for (const analysis::TensorReport& t : res.a.tensors) {
    tensors.push_back({{"tensor", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
    for (const analysis::ScaleStats& s : t.per_scale) results.push_back(stats_json(t.name, s, f));
  }
  j["tensors"] = tensors;
  j["results"] = results;
  nlohmann::json total = nlohmann::json::array();
  for (const analysis::ScaleStats& s : res.a.total) total.push_back(stats_json("(total)", s, f));
  j["total"] = total;
  j["steps"] = steps_json(res.steps);
  j["layers"] = layers_json(res.layers);
  j["skipped"] = res.a.skipped;
  j["failures"] = failures_json(res.a.failures);
  j["recommendation"] = recommendation_json(res.r);
  j["recommendation"]["from"] = res.basis.from;
  j["recommendation"]["tensors"] = res.basis.tensors;
  j["notes"] = res.basis.notes;
  return j;
}

// "--only 'a', --only 'b'".
std::string quoted_list(const std::vector<std::string>& items, const char* option) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + std::string(option) + " '" + i + "'";
  return s;
}

// Why an input that held tensor files gave no tensor to analyse, and how to fix it.
std::string nothing_matched(const AnalyzeOptions& o, const analysis::DumpAnalysis& a) {
  if (a.selection.seen == 0) {
    std::string s = o.path + ": no floating-point tensor to analyse in " + std::to_string(a.files) +
                    " tensor file(s) (analyze reads F16, BF16, F32, F64 and FP8 tensors)";
    for (std::size_t i = 0; i < a.skipped.size() && i < 5; ++i) s += (i ? "; " : "; skipped: ") + a.skipped[i];
    return s;
  }
  const std::string globs =
      quoted_list(o.only, "--only") + (o.only.empty() || o.exclude.empty() ? "" : " with ") + quoted_list(o.exclude, "--exclude");
  std::string s = o.path + ": " + globs + " kept none of its " + std::to_string(a.selection.seen) +
                  " tensor(s), which are named like: ";
  for (std::size_t i = 0; i < a.selection.first_names.size(); ++i) s += (i ? ", " : "") + a.selection.first_names[i];
  return s + " (a glob matches the whole name, with *, ? and [...], and * matches '/' too: '*/grads.safetensors:*')";
}

// The steps' own scales (--at-step-scale): one plan per distinct scale, found by each file's step directory.
struct StepPlans {
  std::map<double, analysis::SweepPlan> by_scale;
  std::map<std::string, const analysis::SweepPlan*> by_directory;
  std::vector<double> scales;  // the distinct scales, ascending
};

StepPlans step_plans(const formats::Format& f, const std::string& path, const std::vector<analysis::StepDirectory>& steps) {
  if (steps.empty())
    throw UsageError("--at-step-scale: " + path + " has no step-NNNNNN directories (give the dump directory whose " +
                     "step directories hold step.json with the loss scale, or give --scales)");
  StepPlans p;
  for (const analysis::StepDirectory& d : steps) {
    const std::string json = (d.path / "step.json").string();
    if (!d.record) throw UsageError("--at-step-scale: " + json + " does not exist (a dump without step.json records " +
                                    "no scale; give --scales instead)");
    if (!d.record->scale) throw UsageError("--at-step-scale: " + json + " gives no \"scale\" (give --scales instead)");
    try {
      analysis::check_scale(*d.record->scale);
    } catch (const std::invalid_argument& e) {
      throw UsageError("--at-step-scale: " + json + ": \"scale\": " + e.what());
    }
    auto it = p.by_scale.find(*d.record->scale);
    if (it == p.by_scale.end()) it = p.by_scale.emplace(*d.record->scale, analysis::SweepPlan(f, {*d.record->scale})).first;
    p.by_directory[d.name] = &it->second;
  }
  for (const auto& [scale, plan] : p.by_scale) p.scales.push_back(scale);
  return p;
}

std::vector<analysis::StepDirectory> step_directories(const std::string& path) {
  try {
    return analysis::find_step_directories(path);
  } catch (const analysis::StepLayoutError& e) {
    throw UsageError(e.what());
  }
}

void check_output_options(const AnalyzeOptions& o) {
  if ((o.json && !o.json_out.empty()) || (o.csv && !o.csv_out.empty()))
    throw UsageError("give --json or --json-out FILE (and --csv or --csv-out FILE), not both");
  if (o.json && o.csv) throw UsageError("--json and --csv both print to stdout; send one to a file (--csv-out FILE)");
}

void check_tensor_files(const std::string& path) {
  std::vector<io::FoundFile> found;
  try {
    found = io::find_tensor_files(path);
  } catch (const io::FileError&) {
    throw UsageError(path + ": no such file or directory (give a .npy, .npz or .safetensors file, or a directory of them)");
  }
  if (found.empty())
    throw UsageError(path + ": no .npy, .npz or .safetensors files in this directory or below it (give the dump " +
                     "directory, e.g. the one holding step-000000/, or a tensor file)");
}

void write_plot(const AnalyzeOptions& o, const formats::Format& f, const analysis::DumpAnalysis& a) {
  std::vector<report::HistogramSeries> series;
  for (const analysis::ScaleStats& s : a.total)
    series.push_back({"scale " + scale_text(s.scale, "%.9g"), s.histogram});
  const emu::FormatThresholds t = emu::format_thresholds(f);
  // The largest finite value sits at the top of its binade (fp16's 65504 is
  // 2^16 - 2^5): its mark is the binade's right edge, where overflow starts.
  const std::vector<report::AxisMark> marks = {{"min subnormal", t.min_subnormal_exponent},
                                               {"min normal", t.min_normal_exponent},
                                               {"max finite", t.max_finite_exponent + 1}};
  record::write_file_atomically(o.plot, report::svg_histogram("x * S of " + o.path + " against " + f.name, series, marks));
}

void warn_unmatched_globs(const AnalyzeOptions& o, const analysis::DumpAnalysis& a) {
  for (std::size_t k = 0; k < o.only.size() && k < a.selection.only_matches.size(); ++k)
    if (a.selection.only_matches[k] == 0)
      std::cerr << "mpverify analyze: warning: --only '" << o.only[k] << "' matched no tensor\n";
}

int run_analyze(const AnalyzeOptions& o, const CLI::App& app) {
  const formats::Format f = formats::parse_format(o.format);  // FormatError: exit 2
  check_output_options(o);
  std::vector<double> scales;
  if (!o.at_step_scale) scales = parse_scales(app.count("--scales") ? o.scales : fixed(o.scale, "%.17g"));
  check_tensor_files(o.path);
  const std::vector<analysis::StepDirectory> steps = step_directories(o.path);
  if (o.per_layer && steps.empty())
    throw UsageError("--per-layer: " + o.path + " has no step-NNNNNN directories to summarise over (give the dump " +
                     "directory that holds them, or leave --per-layer out)");
  analysis::DumpRequest request;
  request.selection = {o.only, o.exclude};
  std::optional<analysis::SweepPlan> plan;
  StepPlans per_step;
  const analysis::SweepPlan as_stored(f, {1.0});
  if (o.at_step_scale) {
    per_step = step_plans(f, o.path, steps);
    scales = per_step.scales;
    // Training multiplies only the gradients by the loss scale: weights and updates are measured as stored.
    request.plan_for = [&per_step, &as_stored](const io::FoundFile& found) -> const analysis::SweepPlan* {
      const std::optional<analysis::StepName> in_step = analysis::split_step_name(found.relative);
      if (!in_step) return nullptr;
      const std::string kind = analysis::step_file_kind(in_step->within);
      if (kind == "weights" || kind == "updates") return &as_stored;
      return per_step.by_directory.at(in_step->directory);
    };
    request.left_out_because = "not in a step directory, so it has no recorded scale (--at-step-scale)";
  } else {
    plan.emplace(f, scales);
    request.plan = &*plan;
  }

  const bool show_progress = o.progress || ::isatty(2);
  const analysis::DumpAnalysis a = analysis::analyze_path(o.path, request, [&](std::size_t done, std::size_t total) {
    if (show_progress) std::cerr << "\ranalyze: " << done << "/" << total << " files" << (done == total ? "\n" : "")
                                 << std::flush;
  });
  if (a.tensors.empty() && a.failures.empty()) throw UsageError(nothing_matched(o, a));
  refuse_unreadable("analyze", a.failures, o.skip_unreadable);
  if (a.tensors.empty()) throw UsageError("no tensor could be read from " + o.path + " (every file failed; listed above)");
  warn_unmatched_globs(o, a);
  const RecommendationBasis basis = recommendation_basis(a, o.at_step_scale, o.recommend_from_all);
  const analysis::Recommendation r = analysis::recommend(basis.total, f);
  const std::vector<analysis::LayerSummary> layers = analysis::summarize_layers(a.tensors);
  const AnalyzeResult result{a, r, basis, steps, layers};

  // Files first (each atomic), stdout last.
  if (!o.plot.empty()) write_plot(o, f, a);
  if (!o.json_out.empty()) emit(o.json_out, analysis_json(o, f, scales, result).dump(1) + "\n");
  if (!o.csv_out.empty()) emit(o.csv_out, csv_table(a, f));
  if (o.json) emit("", analysis_json(o, f, scales, result).dump(1) + "\n");
  else if (o.csv) emit("", csv_table(a, f));
  else std::cout << text_table(a, f, r, basis.notes, layers, steps.size(), o.per_layer);
  return 0;
}

}  // namespace

void add_analyze_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<AnalyzeOptions>();
  auto* app = root.add_subcommand(
      "analyze",
      "What casting dumped tensors (x * S) to a format would do: underflow, subnormals, overflow, headroom, histogram");
  app->add_option("path", o->path, "A .npy, .npz or .safetensors file, or a directory of them (a dump: DIR/step-NNNNNN/)")
      ->required();
  app->add_option("--format", o->format, "Target format: fp16, bf16, fp8-e4m3, fp8-e5m2, or any eXmY[:modifiers]")
      ->required();
  auto* scale = app->add_option("--scale", o->scale, "One loss scale (a positive float32 value; default 1)");
  auto* scales =
      app->add_option("--scales", o->scales, "Several scales, e.g. 1,8,64,512,4096,65536 or 2^0,2^8,2^16")->excludes(scale);
  app->add_flag("--at-step-scale", o->at_step_scale,
                "Analyse each step directory's gradients at the scale its step.json records (instead of\n"
                "--scale(s)); weights and updates at scale 1, as stored (training scales only the gradients);\n"
                "tensors outside step directories are left out")
      ->excludes(scale)
      ->excludes(scales);
  app->add_option("--only", o->only,
                  "Keep only tensors whose name matches GLOB (repeatable: any of them); names as printed,\n"
                  "e.g. '*/grads.safetensors:*' for a dump's weight gradients")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  app->add_option("--exclude", o->exclude, "Leave out tensors whose name matches GLOB (repeatable)")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  app->add_flag("--per-layer", o->per_layer,
                "For a dump of step-NNNNNN directories: print the per-layer summary over the steps and the totals,\n"
                "without the per-tensor rows (the JSON holds both)");
  app->add_flag("--json", o->json, "Print JSON (per tensor and scale, totals, layers, recommendation) instead of a table");
  app->add_option("--json-out", o->json_out, "Also write that JSON to FILE");
  app->add_flag("--csv", o->csv, "Print CSV rows (tensor, scale, counts) instead of a table");
  app->add_option("--csv-out", o->csv_out, "Also write the CSV to FILE");
  app->add_option("--plot", o->plot, "Write the total's exponent histogram at each scale as an SVG");
  app->add_flag("--progress", o->progress, "Progress on stderr (default: only when stderr is a terminal)");
  app->add_option_function<std::string>(
         "--recommend-from",
         [o](const std::string& v) {
           if (v != "gradients" && v != "all") throw CLI::ValidationError("--recommend-from", "gradients or all");
           o->recommend_from_all = v == "all";
         },
         "Which tensors of a dump the recommended scale is drawn from: gradients (the default: grads and "
         "activation_grads, what training scales) or all")
      ->type_name("gradients|all");
  app->add_flag("--skip-unreadable", o->skip_unreadable,
                "Analyse the other files when some cannot be read, listing the failures in the outputs (default: "
                "exit 2, nothing written)");
  app->footer(
      "Definitions. The product x*S is computed in the tensor's own type (float32 for f16/bf16/fp8/f32, as\n"
      "tensor.mul(S) does), then rounded once, to nearest even, into the format. Counted per tensor and scale:\n"
      "  nonzero             finite non-zero x: the denominator of every rate (zeros, NaN and inf are left out)\n"
      "  to-zero (underflow) non-zero finite x whose result is 0, as a share of nonzero\n"
      "  subnormal           x whose result is a non-zero subnormal of the format, as a share of nonzero\n"
      "  overflow            finite x whose result is inf or NaN or raises the overflow flag (saturating\n"
      "                      formats), as a share of nonzero\n"
      "  headroom            log2(max finite / (S * max |x|)): how many binades the largest scaled value stays\n"
      "                      below the format's largest finite value; negative: it lies beyond it (and\n"
      "                      overflows unless it rounds down to it); inf: no non-zero value\n"
      "Names: a tensor of a directory is named 'relative/file:name' (step-000010/grads.safetensors:fc1.weight).\n"
      "--only/--exclude globs match the whole name: * (also across '/'), ?, [...].\n"
      "Dumps: PATH/step-NNNNNN/{weights,grads,updates,activation_grads}.safetensors and an optional step.json\n"
      "({\"step\": N, \"scale\": S, ...}; its step must be the directory's). Then a per-layer table follows: per\n"
      "tensor name within a step and per scale, the steps, the first and last step's to-zero rate, the worst\n"
      "step for to-zero and for overflow, and the trend: the least-squares slope of the to-zero rate per step.\n"
      "Exit: 0; 1 some files unreadable (rest analysed); 2 bad usage, or no tensor to analyse (nothing written).");
  commands.push_back({app, [o, app] { return run_analyze(*o, *app); }});
}

}  // namespace mpverify::cli
