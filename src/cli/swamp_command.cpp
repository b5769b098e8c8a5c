// mpverify swamp --weights PATH (--updates PATH | --grads PATH --lr X)
// mpverify swamp DIR            (or --dump DIR: a dump's step-NNNNNN directories)
//                [--format F[,F...]]... [--json | --json-out FILE] [--csv | --csv-out FILE] [--plot FILE.svg]
// Per tensor, the exact rate of lost updates (w + u rounded once equals w)
// in each format (fp16 and bf16 by default), with the weights stored in that
// format and with an fp32 master copy, and the share of updates with
// |w| / |u| > 2^p, a rule of thumb only (the help says where it and the exact
// count part ways; analysis/swamp_analysis.h). Tensors are paired by name
// (two files) or by relative file path and name (two directories); a dump's
// steps each pair their weights with the updates beside them
// (analysis/swamp_dump.h), reported per step and tensor, per tensor over the
// steps, and in total.
//
// Exit codes: 0; 2 for bad usage or a file that cannot be read, with nothing
// written (--skip-unreadable analyses the rest and lists the failures).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "analysis/dump_steps.h"
#include "analysis/swamp_analysis.h"
#include "analysis/swamp_dump.h"
#include "cli/commands.h"
#include "cli/tensor_report_output.h"
#include "formats/format.h"
#include "io/file_error.h"
#include "io/tensor_directory.h"
#include "record/histogram_json.h"
#include "record/run_log.h"
#include "report/svg_histogram.h"

namespace mpverify::cli {

namespace {

struct SwampOptions {
  std::string weights, updates, grads, dump;
  double lr = 0;
  std::vector<std::string> formats;
  bool json = false;
  std::string json_out;
  bool csv = false;
  std::string csv_out;
  std::string plot;
  bool skip_unreadable = false;
};

nlohmann::json counts_json(const record::LostUpdateCounts& c) {
  return {{"precision", c.precision}, {"elements", c.elements}, {"updates", c.updates}, {"lost", c.lost},
          {"ratio_needed", c.ratio_needed}, {"ratio_sufficient", c.ratio_sufficient}, {"lost_rate", c.lost_rate},
          {"ratio_needed_rate", c.ratio_needed_rate}, {"ratio_sufficient_rate", c.ratio_sufficient_rate}};
}

// One key per format ("fp16": {"without_master": ..., "with_master": ...}) beside the tensor's name.
nlohmann::json report_json(const analysis::SwampReport& r) {
  nlohmann::json j = {{"tensor", r.name}, {"elements", r.elements}};
  for (const analysis::FormatLostUpdates& f : r.per_format)
    j[f.format] = {{"without_master", counts_json(f.stats.without_master)},
                   {"with_master", counts_json(f.stats.with_master)}};
  j["ratio_histogram"] = record::histogram_to_json(r.ratio_histogram);
  return j;
}

nlohmann::json reports_json(const std::vector<analysis::SwampReport>& reports) {
  nlohmann::json out = nlohmann::json::array();
  for (const analysis::SwampReport& r : reports) out.push_back(report_json(r));
  return out;
}

// The printed table and the CSV, one row per report; a dump's rows carry their step first.
class SwampTable {
 public:
  SwampTable(const std::vector<formats::Format>& formats, bool with_step) : formats_(formats), with_step_(with_step) {
    char cell[64];
    if (with_step_) {
      std::snprintf(cell, sizeof cell, "%8s ", "step");
      text_ << cell;
      csv_ << "step,";
    }
    std::snprintf(cell, sizeof cell, "%-40s %12s", "tensor", "updates");
    text_ << cell;
    csv_ << "tensor,elements,updates";
    for (const formats::Format& f : formats_) {
      const std::string p = std::to_string(f.precision()), p1 = std::to_string(f.precision() + 1);
      for (const std::string& h : {f.name + " lost", f.name + "+master", f.name + ">=2^" + p, f.name + ">2^" + p1})
        text_ << ' ' << pad(h);
      csv_ << ',' << f.name << "_lost," << f.name << "_lost_master," << f.name << "_ratio_needed," << f.name
           << "_ratio_sufficient";
    }
    text_ << '\n';
    csv_ << '\n';
  }

  // `step`: the step's number, "all" for a sum over steps (empty in the CSV), or "" outside a dump.
  void row(const std::string& step, const analysis::SwampReport& r) {
    char cell[64];
    if (with_step_) {
      std::snprintf(cell, sizeof cell, "%8s ", step.c_str());
      text_ << cell;
      csv_ << (step == "all" ? "" : step) << ',';
    }
    const std::uint64_t updates = r.per_format.empty() ? 0 : r.per_format.front().stats.without_master.updates;
    std::snprintf(cell, sizeof cell, "%-40s %12llu", r.name.c_str(), static_cast<unsigned long long>(updates));
    text_ << cell;
    csv_ << csv_field(r.name) << ',' << r.elements << ','
         << (r.per_format.empty() ? 0 : r.per_format.front().stats.with_master.updates);
    for (const analysis::FormatLostUpdates& f : r.per_format) {
      const record::LostUpdateCounts &low = f.stats.without_master, &master = f.stats.with_master;
      for (const double v : {low.lost_rate, master.lost_rate, low.ratio_needed_rate, low.ratio_sufficient_rate})
        text_ << ' ' << pad(percent(v));
      csv_ << ',' << low.lost << ',' << master.lost << ',' << low.ratio_needed << ',' << low.ratio_sufficient;
    }
    text_ << '\n';
    csv_ << '\n';
  }

  void line(const std::string& s) { text_ << s << '\n'; }
  std::string text() const { return text_.str(); }
  std::string csv() const { return csv_.str(); }

 private:
  static std::string pad(const std::string& s) { return std::string(s.size() < 12 ? 12 - s.size() : 0, ' ') + s; }
  static std::string percent(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f%%", 100 * v);
    return b;
  }

  std::vector<formats::Format> formats_;
  bool with_step_;
  std::ostringstream text_, csv_;
};

// The definitions under the table, with each format's p.
std::string legend(const std::vector<formats::Format>& formats) {
  std::string ps;
  for (const formats::Format& f : formats) ps += (ps.empty() ? "" : ", ") + std::to_string(f.precision()) + " (" + f.name + ")";
  return "lost: w + u rounded once equals w != 0 (weights stored in the format; +master: fp32 master weights); "
         ">=2^p: |w|/|u| >= 2^p, needed for a loss (w normal); >2^(p+1): lost whatever w; p = " + ps;
}

void write_ratio_plot(const std::string& file, const std::string& of, const std::vector<formats::Format>& formats,
                      const emu::ExponentHistogram& ratios) {
  std::vector<report::AxisMark> marks;
  for (const formats::Format& f : formats) marks.push_back({f.name + " 2^" + std::to_string(f.precision()), f.precision()});
  marks.push_back({"fp32 2^24", 24});
  record::write_file_atomically(file, report::svg_histogram("|w| / |u| of " + of, {{"all tensors", ratios}}, marks,
                                                            "log2(|w|/|u|)"));
}

std::vector<formats::Format> chosen_formats(const SwampOptions& o) {
  if (o.formats.empty()) return analysis::default_swamp_formats();
  std::vector<formats::Format> out;
  for (const std::string& name : o.formats) {
    const formats::Format f = formats::parse_format(name);  // FormatError: exit 2
    if (std::any_of(out.begin(), out.end(), [&](const formats::Format& g) { return g.name == f.name; }))
      throw UsageError("--format " + name + " is given twice (name each format once)");
    out.push_back(f);
  }
  return out;
}

void check_output_options(const SwampOptions& o) {
  if ((o.json && !o.json_out.empty()) || (o.csv && !o.csv_out.empty()))
    throw UsageError("give --json or --json-out FILE (and --csv or --csv-out FILE), not both");
  if (o.json && o.csv) throw UsageError("--json and --csv both print to stdout; send one to a file (--csv-out FILE)");
}

// Files first (each atomic), stdout last.
int write_outputs(const SwampOptions& o, const nlohmann::json& j, const SwampTable& table) {
  if (!o.json_out.empty()) emit(o.json_out, j.dump(1) + "\n");
  if (!o.csv_out.empty()) emit(o.csv_out, table.csv());
  if (o.json) emit("", j.dump(1) + "\n");
  else if (o.csv) emit("", table.csv());
  else std::cout << table.text();
  return 0;
}

void check_path(const std::string& p, const char* option) {
  try {
    if (io::find_tensor_files(p).empty()) throw UsageError(std::string(option) + " " + p + ": no tensor files there");
  } catch (const io::FileError&) {
    throw UsageError(std::string(option) + " " + p + ": no such file or directory");
  }
}

int run_swamp_pair(const SwampOptions& o, const CLI::App& app, const std::vector<formats::Format>& formats) {
  const bool sgd = app.count("--grads") > 0;
  if (o.weights.empty())
    throw UsageError("give a dump directory (mpverify swamp DIR), or --weights PATH with --updates PATH");
  if (sgd == (app.count("--updates") > 0)) throw UsageError("give either --updates PATH, or --grads PATH with --lr X");
  if (sgd && !(app.count("--lr") > 0)) throw UsageError("--grads needs --lr X (the SGD learning rate)");
  if (!sgd && app.count("--lr") > 0) throw UsageError("--lr goes with --grads (with --updates the update is given)");
  if (sgd && !(std::isfinite(o.lr) && o.lr > 0 && std::isfinite(static_cast<float>(o.lr))))
    throw UsageError("--lr must be a finite positive number (used as the nearest float32, as PyTorch does)");
  const std::string second = sgd ? o.grads : o.updates;
  const char* second_option = sgd ? "--grads" : "--updates";
  check_path(o.weights, "--weights");
  check_path(second, second_option);
  std::error_code ec;
  if (std::filesystem::equivalent(o.weights, second, ec))
    throw UsageError(std::string("--weights ") + o.weights + " and " + second_option + " " + second +
                     " are the same file (give the step's weights and, beside them, its " +
                     (sgd ? "gradients" : "updates") + ")");
  const std::optional<float> lr = sgd ? std::optional<float>(static_cast<float>(o.lr)) : std::nullopt;
  const analysis::SwampAnalysis a = analysis::swamp_paths(o.weights, second, lr, formats);
  refuse_unreadable("swamp", a.failures, o.skip_unreadable);

  nlohmann::json j;
  j["update"] = sgd ? "u = fl32(-lr * g)" : "given";
  if (sgd) j["lr"] = static_cast<float>(o.lr);
  for (const formats::Format& f : formats) j["formats"].push_back(f.name);
  j["tensors"] = reports_json(a.tensors);
  j["total"] = report_json(a.total);
  j["unmatched"] = a.unmatched;
  j["failures"] = failures_json(a.failures);

  SwampTable table(formats, false);
  for (const analysis::SwampReport& r : a.tensors) table.row("", r);
  table.row("", a.total);
  for (const std::string& u : a.unmatched) table.line("unmatched: " + u);
  for (const analysis::ReadFailure& fl : a.failures) table.line("FAILED: " + failure_line(fl));
  table.line(legend(formats));
  if (!o.plot.empty()) write_ratio_plot(o.plot, o.weights, formats, a.total.ratio_histogram);
  return write_outputs(o, j, table);
}

// A dump's step directories, each with a weights/updates pair; UsageError when there is none to count.
std::vector<analysis::StepDirectory> dump_steps(const std::string& dump) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dump, ec))
    throw UsageError(dump + ": not a directory (give the dump directory holding step-NNNNNN/, or --weights and " +
                     "--updates for two files)");
  std::vector<analysis::StepDirectory> steps;
  try {
    steps = analysis::find_step_directories(dump);
  } catch (const analysis::StepLayoutError& e) {
    throw UsageError(e.what());
  }
  if (steps.empty())
    throw UsageError(dump + ": no step-NNNNNN directories (for one step's files give --weights " + dump +
                     "/weights.safetensors --updates " + dump + "/updates.safetensors)");
  std::string reasons;
  for (const analysis::StepDirectory& d : steps) {
    const analysis::StepPair p = analysis::pair_step_files(d.path);
    if (p.weights) return steps;
    if (reasons.size() < 400) reasons += (reasons.empty() ? "" : "; ") + d.name + ": " + p.why_not;
  }
  throw UsageError(dump + ": no step directory holds weights with updates beside them (" + reasons + ")");
}

nlohmann::json dump_json(const SwampOptions& o, const std::vector<formats::Format>& formats, const analysis::SwampDump& a) {
  nlohmann::json j;
  j["dump"] = o.dump;
  j["update"] = "given";
  for (const formats::Format& f : formats) j["formats"].push_back(f.name);
  nlohmann::json steps = nlohmann::json::array();
  for (const analysis::SwampStep& s : a.steps)
    steps.push_back({{"step", s.step}, {"directory", s.directory}, {"weights", s.weights}, {"updates", s.updates},
                     {"tensors", reports_json(s.analysis.tensors)}, {"total", report_json(s.analysis.total)},
                     {"unmatched", s.analysis.unmatched}});
  j["steps"] = steps;
  j["tensors"] = reports_json(a.tensors);
  j["total"] = report_json(a.total);
  j["unpaired"] = a.unpaired;
  j["failures"] = failures_json(a.failures);
  return j;
}

int run_swamp_dump(const SwampOptions& o, const CLI::App& app, const std::vector<formats::Format>& formats) {
  for (const char* option : {"--weights", "--updates", "--grads", "--lr"})
    if (app.count(option) > 0)
      throw UsageError(std::string(option) + " goes with two files; a dump directory pairs each step's weights " +
                       "with its updates itself (give one or the other)");
  const std::vector<analysis::StepDirectory> steps = dump_steps(o.dump);
  const analysis::SwampDump a = analysis::swamp_dump(o.dump, steps, formats);
  refuse_unreadable("swamp", a.failures, o.skip_unreadable);

  SwampTable table(formats, true);
  for (const analysis::SwampStep& s : a.steps) {
    for (const analysis::SwampReport& r : s.analysis.tensors) table.row(std::to_string(s.step), r);
    table.row(std::to_string(s.step), s.analysis.total);
  }
  for (const analysis::SwampReport& r : a.tensors) table.row("all", r);
  table.row("all", a.total);
  for (const analysis::SwampStep& s : a.steps)
    for (const std::string& u : s.analysis.unmatched) table.line("unmatched: " + s.directory + ": " + u);
  for (const std::string& u : a.unpaired) table.line("unpaired: " + u);
  for (const analysis::ReadFailure& fl : a.failures) table.line("FAILED: " + failure_line(fl));
  table.line(legend(formats));
  if (!o.plot.empty()) write_ratio_plot(o.plot, o.dump, formats, a.total.ratio_histogram);
  return write_outputs(o, dump_json(o, formats, a), table);
}

int run_swamp(const SwampOptions& o, const CLI::App& app) {
  const std::vector<formats::Format> formats = chosen_formats(o);
  check_output_options(o);
  return o.dump.empty() ? run_swamp_pair(o, app, formats) : run_swamp_dump(o, app, formats);
}

}  // namespace

void add_swamp_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<SwampOptions>();
  auto* app = root.add_subcommand("swamp", "Lost updates (swamping) of dumped weights and updates in fp16, bf16 or any format");
  app->add_option("dump,--dump", o->dump,
                  "A dump directory: each step-NNNNNN/ pairs weights.safetensors with updates.safetensors\n"
                  "(or .npz, .npy, or weights/ with updates/ directories of .npy files)")
      ->type_name("DIR");
  app->add_option("--weights", o->weights, "Weights before the step: a tensor file or directory");
  app->add_option("--updates", o->updates, "The step's updates u (w_new = w + u), same names and shapes");
  app->add_option("--grads", o->grads, "Gradients instead of updates: u = fl32(-lr * g) (plain SGD)");
  app->add_option("--lr", o->lr, "SGD learning rate, with --grads");
  app->add_option("--format", o->formats,
                  "Weight formats to count in (repeatable or a comma list; default fp16,bf16): any name\n"
                  "'mpverify formats' lists, e.g. fp8-e4m3 or e5m7")
      ->type_name("FORMAT")
      ->delimiter(',')
      ->allow_extra_args(false);
  app->add_flag("--json", o->json, "Print JSON instead of a table");
  app->add_option("--json-out", o->json_out, "Also write that JSON to FILE");
  app->add_flag("--csv", o->csv, "Print CSV rows instead of a table");
  app->add_option("--csv-out", o->csv_out, "Also write the CSV to FILE");
  app->add_option("--plot", o->plot, "Write the histogram of log2(|w|/|u|) as an SVG, marked at each format's 2^p and 2^24");
  app->add_flag("--skip-unreadable", o->skip_unreadable,
                "Analyse the rest when some file cannot be read, listing it in the outputs (default: exit 2, "
                "nothing written)");
  app->footer(
      "Definitions, per tensor and format (fp16: p = 11, bf16: p = 8; p counts the hidden bit):\n"
      "  updates      pairs with u != 0 and w, u finite: the denominator of both rates\n"
      "  lost         (the lost-update or swamping rate) updates to a w != 0 whose sum w + u, rounded once to\n"
      "               nearest even, equals w: with the weights stored in the format (w rounded to it first), and\n"
      "               +master: with an fp32 master copy (w as given, the sum rounded to fp32). A u added to\n"
      "               w = 0 that rounds to 0 is underflow, not counted here.\n"
      "  >=2^p        updates with |w|/|u| >= 2^p (w as stored in the format): with round-to-nearest-even a lost\n"
      "               update to a normal w needs this, so it bounds the lost rate from above (normal w)\n"
      "  >2^(p+1)     updates with |w|/|u| > 2^(p+1): each of these is lost, whatever w; a bound from below.\n"
      "               In between it depends on where w sits in its binade (fp16: w = 2047, u = 0.8999, ratio\n"
      "               about 2275, gives 2048: the update is kept).\n"
      "A dump (swamp DIR): rows per step and tensor, the step's total, each tensor over all steps ('all'), and\n"
      "the total over everything; the JSON has \"steps\" (each with its tensors and total), \"tensors\", \"total\".\n"
      "A file is never paired with itself: --weights X --updates X is refused.\n"
      "Exit: 0; 1 some files unreadable (rest analysed); 2 bad usage (nothing written).");
  commands.push_back({app, [o, app] { return run_swamp(*o, *app); }});
}

}  // namespace mpverify::cli
