// mpverify swamp --weights PATH (--updates PATH | --grads PATH --lr X)
//                [--json | --json-out FILE] [--csv | --csv-out FILE] [--plot FILE.svg]
// Per tensor, the exact rate of lost updates (w + u rounded once equals w)
// in fp16 and bf16, with the weights stored in that format and with an fp32
// master copy, and the share of updates with |w| / |u| > 2^p, a rule of
// thumb only (the help says where it and the exact count part ways;
// analysis/swamp_analysis.h). Tensors are paired by name (two files) or by
// relative file path and name (two directories).
//
// Exit codes: 0; 1 when some file could not be read (the rest is analysed and
// the failures listed); 2 for bad usage, with nothing written.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/swamp_analysis.h"
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
  std::string weights, updates, grads;
  double lr = 0;
  bool json = false;
  std::string json_out;
  bool csv = false;
  std::string csv_out;
  std::string plot;
};

nlohmann::json counts_json(const record::LostUpdateCounts& c) {
  return {{"precision", c.precision}, {"elements", c.elements}, {"updates", c.updates}, {"lost", c.lost},
          {"ratio_needed", c.ratio_needed}, {"ratio_sufficient", c.ratio_sufficient}, {"lost_rate", c.lost_rate},
          {"ratio_needed_rate", c.ratio_needed_rate}, {"ratio_sufficient_rate", c.ratio_sufficient_rate}};
}

nlohmann::json report_json(const analysis::SwampReport& r) {
  return {{"tensor", r.name},
          {"elements", r.elements},
          {"fp16", {{"without_master", counts_json(r.fp16.without_master)}, {"with_master", counts_json(r.fp16.with_master)}}},
          {"bf16", {{"without_master", counts_json(r.bf16.without_master)}, {"with_master", counts_json(r.bf16.with_master)}}},
          {"ratio_histogram", record::histogram_to_json(r.ratio_histogram)}};
}

void check_path(const std::string& p, const char* option) {
  try {
    if (io::find_tensor_files(p).empty()) throw UsageError(std::string(option) + " " + p + ": no tensor files there");
  } catch (const io::FileError&) {
    throw UsageError(std::string(option) + " " + p + ": no such file or directory");
  }
}

int run_swamp(const SwampOptions& o, const CLI::App& app) {
  const bool sgd = app.count("--grads") > 0;
  if (sgd == (app.count("--updates") > 0)) throw UsageError("give either --updates PATH, or --grads PATH with --lr X");
  if (sgd && !(app.count("--lr") > 0)) throw UsageError("--grads needs --lr X (the SGD learning rate)");
  if (!sgd && app.count("--lr") > 0) throw UsageError("--lr goes with --grads (with --updates the update is given)");
  if (sgd && !(std::isfinite(o.lr) && o.lr > 0 && std::isfinite(static_cast<float>(o.lr))))
    throw UsageError("--lr must be a finite positive number (used as the nearest float32, as PyTorch does)");
  if ((o.json && !o.json_out.empty()) || (o.csv && !o.csv_out.empty()))
    throw UsageError("give --json or --json-out FILE (and --csv or --csv-out FILE), not both");
  if (o.json && o.csv) throw UsageError("--json and --csv both print to stdout; send one to a file (--csv-out FILE)");
  const std::string second = sgd ? o.grads : o.updates;
  check_path(o.weights, "--weights");
  check_path(second, sgd ? "--grads" : "--updates");
  const std::optional<float> lr = sgd ? std::optional<float>(static_cast<float>(o.lr)) : std::nullopt;
  const analysis::SwampAnalysis a = analysis::swamp_paths(o.weights, second, lr);

  nlohmann::json j;
  j["update"] = sgd ? "u = fl32(-lr * g)" : "given";
  if (sgd) j["lr"] = static_cast<float>(o.lr);
  nlohmann::json tensors = nlohmann::json::array();
  for (const analysis::SwampReport& r : a.tensors) tensors.push_back(report_json(r));
  j["tensors"] = tensors;
  j["total"] = report_json(a.total);
  j["unmatched"] = a.unmatched;
  j["failures"] = failures_json(a.failures);

  std::ostringstream csv;
  csv << "tensor,elements,updates,fp16_lost,fp16_lost_master,fp16_ratio_needed,fp16_ratio_sufficient,"
         "bf16_lost,bf16_lost_master,bf16_ratio_needed,bf16_ratio_sufficient\n";
  std::ostringstream text;
  char line[400];
  std::snprintf(line, sizeof line, "%-40s %12s %12s %12s %12s %12s %12s %12s %12s %12s\n", "tensor", "updates",
                "fp16 lost", "fp16+master", "fp16>=2^11", "fp16>2^12", "bf16 lost", "bf16+master", "bf16>=2^8",
                "bf16>2^9");
  text << line;
  const auto rows = [&](const analysis::SwampReport& r) {
    const auto pct = [](double v) { char b[32]; std::snprintf(b, sizeof b, "%.4f%%", 100 * v); return std::string(b); };
    const record::LostUpdateCounts &h = r.fp16.without_master, &b = r.bf16.without_master;
    std::snprintf(line, sizeof line, "%-40s %12llu %12s %12s %12s %12s %12s %12s %12s %12s\n", r.name.c_str(),
                  static_cast<unsigned long long>(h.updates), pct(h.lost_rate).c_str(),
                  pct(r.fp16.with_master.lost_rate).c_str(), pct(h.ratio_needed_rate).c_str(),
                  pct(h.ratio_sufficient_rate).c_str(), pct(b.lost_rate).c_str(),
                  pct(r.bf16.with_master.lost_rate).c_str(), pct(b.ratio_needed_rate).c_str(),
                  pct(b.ratio_sufficient_rate).c_str());
    text << line;
    csv << csv_field(r.name) << ',' << r.elements << ',' << r.fp16.with_master.updates << ',' << h.lost << ','
        << r.fp16.with_master.lost << ',' << h.ratio_needed << ',' << h.ratio_sufficient << ',' << b.lost << ','
        << r.bf16.with_master.lost << ',' << b.ratio_needed << ',' << b.ratio_sufficient << '\n';
  };
  for (const analysis::SwampReport& r : a.tensors) rows(r);
  rows(a.total);
  for (const std::string& u : a.unmatched) text << "unmatched: " << u << "\n";
  for (const analysis::ReadFailure& fl : a.failures) text << "FAILED: " << failure_line(fl) << "\n";
  text << "lost: w + u rounded once equals w != 0 (weights stored in the format; +master: fp32 master weights); "
          ">=2^p: |w|/|u| >= 2^p, needed for a loss (w normal); >2^(p+1): lost whatever w; p = 11 (fp16), 8 (bf16)\n";

  if (!o.plot.empty()) {
    const std::vector<report::AxisMark> marks = {{"bf16 2^8", 8}, {"fp16 2^11", 11}, {"fp32 2^24", 24}};
    record::write_file_atomically(o.plot, report::svg_histogram("|w| / |u| of " + o.weights,
                                                                {{"all tensors", a.total.ratio_histogram}}, marks,
                                                                "log2(|w|/|u|)"));
  }
  if (!o.json_out.empty()) emit(o.json_out, j.dump(1) + "\n");
  if (!o.csv_out.empty()) emit(o.csv_out, csv.str());
  if (o.json) emit("", j.dump(1) + "\n");
  else if (o.csv) emit("", csv.str());
  else std::cout << text.str();
  for (const analysis::ReadFailure& fl : a.failures) std::cerr << "mpverify swamp: " << failure_line(fl) << "\n";
  return a.failures.empty() ? 0 : 1;
}

}  // namespace

void add_swamp_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<SwampOptions>();
  auto* app = root.add_subcommand("swamp", "Lost updates (swamping) of dumped weights and updates in fp16 and bf16");
  app->add_option("--weights", o->weights, "Weights before the step: a tensor file or directory")->required();
  app->add_option("--updates", o->updates, "The step's updates u (w_new = w + u), same names and shapes");
  app->add_option("--grads", o->grads, "Gradients instead of updates: u = fl32(-lr * g) (plain SGD)");
  app->add_option("--lr", o->lr, "SGD learning rate, with --grads");
  app->add_flag("--json", o->json, "Print JSON instead of a table");
  app->add_option("--json-out", o->json_out, "Also write that JSON to FILE");
  app->add_flag("--csv", o->csv, "Print CSV rows instead of a table");
  app->add_option("--csv-out", o->csv_out, "Also write the CSV to FILE");
  app->add_option("--plot", o->plot, "Write the histogram of log2(|w|/|u|) as an SVG, marked at 2^8, 2^11, 2^24");
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
      "Exit: 0; 1 some files unreadable (rest analysed); 2 bad usage.");
  commands.push_back({app, [o, app] { return run_swamp(*o, *app); }});
}

}  // namespace mpverify::cli
