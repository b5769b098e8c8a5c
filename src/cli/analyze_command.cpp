// mpverify analyze PATH --format F [--scale S | --scales 1,8,...,65536]
//                  [--json | --json-out FILE] [--csv | --csv-out FILE] [--plot FILE.svg] [--progress]
// Tensors dumped from PyTorch, JAX or NumPy (.npy, .npz, .safetensors; a file
// or a directory of them): per tensor and in total, at each scale, what
// casting x * S to the format does (analysis/scaled_rounding.h defines every
// category; analysis/dump_analysis.h does the work).
//
// Exit codes: 0; 1 when some file could not be read (the others are analysed,
// each failure is reported with file, tensor and byte offset, and the outputs
// are still written, listing the failures); 2 for bad usage (unknown format,
// a scale that is not a positive float value, a path that does not exist or
// holds no tensor files), with nothing written.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/dump_analysis.h"
#include "analysis/scale_sweep.h"
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
};

nlohmann::json stats_json(const std::string& tensor, const analysis::ScaleStats& s, const formats::Format& f) {
  return {{"tensor", tensor},
          {"scale", s.scale},
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
          {"headroom_log2", json_number(s.headroom_log2(f))},
          {"histogram", record::histogram_to_json(s.histogram)}};
}

std::string fixed(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string text_table(const analysis::DumpAnalysis& a, const formats::Format& f, const analysis::Recommendation& r) {
  std::ostringstream out;
  out << "format " << f.name << "; " << a.files << " file(s), " << a.tensors.size() << " tensor(s)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-40s %12s %14s %10s %10s %10s %9s\n", "tensor", "scale", "nonzero", "to-zero",
                "subnormal", "overflow", "headroom");
  out << line;
  const auto row = [&](const std::string& name, const analysis::ScaleStats& s) {
    std::snprintf(line, sizeof line, "%-40s %12.6g %14llu %9.4f%% %9.4f%% %9.4f%% %9s\n", name.c_str(), s.scale,
                  static_cast<unsigned long long>(s.nonzero_finite()), 100 * s.rate(s.underflow_to_zero),
                  100 * s.rate(s.subnormal), 100 * s.rate(s.overflow), fixed(s.headroom_log2(f), "%.2f").c_str());
    out << line;
  };
  for (const analysis::TensorReport& t : a.tensors)
    for (const analysis::ScaleStats& s : t.per_scale) row(t.name, s);
  for (const analysis::ScaleStats& s : a.total) row("(total)", s);
  for (const std::string& s : a.skipped) out << "skipped: " << s << "\n";
  for (const analysis::ReadFailure& fl : a.failures) out << "FAILED: " << failure_line(fl) << "\n";
  out << r.line << "\n";
  return out.str();
}

std::string csv_table(const analysis::DumpAnalysis& a, const formats::Format& f) {
  std::ostringstream out;
  out << "tensor,scale,count,zeros_in,nan_or_inf_in,underflow_to_zero,subnormal,overflow,max_abs,headroom_log2\n";
  const auto row = [&](const std::string& name, const analysis::ScaleStats& s) {
    out << csv_field(name) << ',' << fixed(s.scale, "%.9g") << ',' << s.count << ',' << s.zeros_in << ','
        << s.nan_or_inf_in << ',' << s.underflow_to_zero << ',' << s.subnormal << ',' << s.overflow << ','
        << fixed(s.max_abs, "%.9g") << ',' << fixed(s.headroom_log2(f), "%.17g") << '\n';
  };
  for (const analysis::TensorReport& t : a.tensors)
    for (const analysis::ScaleStats& s : t.per_scale) row(t.name, s);
  for (const analysis::ScaleStats& s : a.total) row("(total)", s);
  return out.str();
}

int run_analyze(const AnalyzeOptions& o, const CLI::App& app) {
  formats::Format f = formats::parse_format(o.format);  // FormatError: exit 2
  std::vector<double> scales;
  if (app.count("--scales")) scales = parse_scales(o.scales);
  else scales = parse_scales(fixed(o.scale, "%.17g"));
  if ((o.json && !o.json_out.empty()) || (o.csv && !o.csv_out.empty()))
    throw UsageError("give --json or --json-out FILE (and --csv or --csv-out FILE), not both");
  if (o.json && o.csv) throw UsageError("--json and --csv both print to stdout; send one to a file (--csv-out FILE)");
  std::vector<io::FoundFile> found;
  try {
    found = io::find_tensor_files(o.path);
  } catch (const io::FileError& e) {
    throw UsageError(o.path + ": no such file or directory (give a .npy, .npz or .safetensors file, or a directory of them)");
  }
  if (found.empty()) throw UsageError(o.path + ": no .npy, .npz or .safetensors files in this directory");

  const analysis::SweepPlan plan(f, scales);
  const bool show_progress = o.progress || ::isatty(2);
  const analysis::DumpAnalysis a = analysis::analyze_path(o.path, plan, [&](std::size_t done, std::size_t total) {
    if (show_progress) std::cerr << "\ranalyze: " << done << "/" << total << " files" << (done == total ? "\n" : "")
                                 << std::flush;
  });
  const analysis::Recommendation r = analysis::recommend(a.total, f);

  nlohmann::json j;
  if (o.json || !o.json_out.empty()) {
    j["format"] = f.name;
    j["scales"] = scales;
    j["thresholds"] = record::thresholds_to_json(emu::format_thresholds(f));
    j["files"] = a.files;
    nlohmann::json results = nlohmann::json::array();
    nlohmann::json tensors = nlohmann::json::array();
    for (const analysis::TensorReport& t : a.tensors) {
      tensors.push_back({{"tensor", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
      for (const analysis::ScaleStats& s : t.per_scale) results.push_back(stats_json(t.name, s, f));
    }
    j["tensors"] = tensors;
    j["results"] = results;
    nlohmann::json total = nlohmann::json::array();
    for (const analysis::ScaleStats& s : a.total) total.push_back(stats_json("(total)", s, f));
    j["total"] = total;
    j["skipped"] = a.skipped;
    j["failures"] = failures_json(a.failures);
    j["recommendation"] = {{"largest_safe_scale_log2", r.has_values && r.largest_safe_log2 >= -149
                                                             ? nlohmann::json(r.largest_safe_log2)
                                                             : nlohmann::json(nullptr)},
                           {"best_scale", r.some_scale_safe ? nlohmann::json(r.best.scale) : nlohmann::json(nullptr)},
                           {"underflow_to_zero_rate_at_best",
                            r.some_scale_safe ? nlohmann::json(r.best.rate(r.best.underflow_to_zero)) : nlohmann::json(nullptr)},
                           {"line", r.line}};
  }
  // Files first (each atomic), stdout last.
  if (!o.plot.empty()) {
    std::vector<report::HistogramSeries> series;
    for (const analysis::ScaleStats& s : a.total) series.push_back({"scale " + fixed(s.scale, "%.9g"), s.histogram});
    const emu::FormatThresholds t = emu::format_thresholds(f);
    // The largest finite value sits at the top of its binade (fp16's 65504 is
    // 2^16 - 2^5): its mark is the binade's right edge, where overflow starts.
    const std::vector<report::AxisMark> marks = {{"min subnormal", t.min_subnormal_exponent},
                                                 {"min normal", t.min_normal_exponent},
                                                 {"max finite", t.max_finite_exponent + 1}};
    record::write_file_atomically(o.plot, report::svg_histogram("x * S of " + o.path + " against " + f.name, series, marks));
  }
  if (!o.json_out.empty()) emit(o.json_out, j.dump(1) + "\n");
  if (!o.csv_out.empty()) emit(o.csv_out, csv_table(a, f));
  if (o.json) emit("", j.dump(1) + "\n");
  else if (o.csv) emit("", csv_table(a, f));
  else std::cout << text_table(a, f, r);
  for (const analysis::ReadFailure& fl : a.failures) std::cerr << "mpverify analyze: " << failure_line(fl) << "\n";
  return a.failures.empty() ? 0 : 1;
}

}  // namespace

void add_analyze_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<AnalyzeOptions>();
  auto* app = root.add_subcommand(
      "analyze",
      "What casting dumped tensors (x * S) to a format would do: underflow, subnormals, overflow, headroom, histogram");
  app->add_option("path", o->path, "A .npy, .npz or .safetensors file, or a directory of them")->required();
  app->add_option("--format", o->format, "Target format: fp16, bf16, fp8-e4m3, fp8-e5m2, or any eXmY[:modifiers]")
      ->required();
  auto* scale = app->add_option("--scale", o->scale, "One loss scale (a positive float32 value; default 1)");
  app->add_option("--scales", o->scales, "Several scales, e.g. 1,8,64,512,4096,65536 or 2^0,2^8,2^16")->excludes(scale);
  app->add_flag("--json", o->json, "Print JSON (per tensor and scale, totals, recommendation) instead of a table");
  app->add_option("--json-out", o->json_out, "Also write that JSON to FILE");
  app->add_flag("--csv", o->csv, "Print CSV rows (tensor, scale, counts) instead of a table");
  app->add_option("--csv-out", o->csv_out, "Also write the CSV to FILE");
  app->add_option("--plot", o->plot, "Write the total's exponent histogram at each scale as an SVG");
  app->add_flag("--progress", o->progress, "Progress on stderr (default: only when stderr is a terminal)");
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
      "Exit: 0; 1 some files unreadable (rest analysed); 2 bad usage.");
  commands.push_back({app, [o, app] { return run_analyze(*o, *app); }});
}

}  // namespace mpverify::cli
