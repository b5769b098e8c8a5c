#include "parity_table/parity_table_experiment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "record/run_log.h"
#include "report/gate_table.h"
#include "report/output_files.h"
#include "report/run_series.h"
#include "report/svg_interval_plot.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "training/base_config.h"
#include "training/ensemble.h"
#include "training/recipe.h"
#include "training/run_queue.h"
#include "training/trainer.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;
using report::add_cell;
using report::fixed;
using report::general;

namespace {

constexpr const char* kBaseline = "fp32-ref";

struct Side {
  std::string name;    // the run directory under `runs`
  std::string recipe;  // "fp32" for the baseline
  training::TrainConfig config;
};

training::TrainConfig base_config(const ParityTableConfig& c) {
  training::TrainConfig t = training::experiment_config({.model = c.model, .data = c.data, .data_dir = c.data_dir,
                                                         .train_size = c.train_size, .test_size = c.test_size,
                                                         .steps = c.steps});
  t.recorders = false;
  return t;
}

std::vector<Side> sides_of(const ParityTableConfig& c) {
  std::vector<Side> sides;
  Side fp32{kBaseline, "fp32", base_config(c)};
  fp32.config.recipe = "fp32";
  fp32.config.scaler = "none";
  fp32.config.backend = nn::BackendKind::ref;
  sides.push_back(fp32);
  for (const std::string& recipe : c.recipes) {
    // The run directory's name: the recipe with its settings spelled without ':', ',' or '='.
    std::string name = recipe;
    std::replace_if(name.begin(), name.end(), [](char ch) { return ch == ':' || ch == ',' || ch == '='; }, '-');
    Side s{name + "-emu", recipe, base_config(c)};
    s.config.recipe = recipe;
    s.config.scaler = parity_table_scaler(recipe);
    s.config.backend = nn::BackendKind::emu;
    sides.push_back(s);
  }
  return sides;
}

// Which runs go first: the slowest (measured per step on one core: fp8 and
// bf16 about 0.55 s, the fp16 recipes about 0.25 s, fp32 on ref 0.03 s), so
// that the threads finish close together.
int cost_rank(const std::string& recipe) {
  if (recipe.starts_with("fp8")) return 0;
  if (recipe.starts_with("bf16")) return 1;
  if (recipe == "fp32") return 3;
  return 2;
}

std::optional<double> accuracy_points(const json& summary) {
  const auto e = summary.find("evaluation");
  if (e == summary.end() || !e->is_object()) return std::nullopt;
  const auto a = e->find("test_accuracy");
  if (a == e->end() || !a->is_number()) return std::nullopt;
  return 100.0 * a->get<double>();
}

std::string mean_sd(double mean, double sd) { return fixed(mean, 2) + " ± " + fixed(sd, 2); }

std::string signed_fixed(double v, int digits) {
  std::string s = fixed(v, digits);
  if (v >= 0 && s.front() != '-') s.insert(s.begin(), '+');
  return s;
}

// Micikevicius et al., "Mixed Precision Training" (ICLR 2018), Table 1: ILSVRC12
// top-1 accuracy (%), one run each side; and other published pairs.
struct LiteratureRow {
  const char* source;
  const char* model;
  double fp32, mixed;
  const char* spread;  // what the source says about the spread ("" for none)
};
constexpr LiteratureRow kLiterature[] = {
    {"Micikevicius et al. 2018, Table 1", "AlexNet (ImageNet top-1)", 56.77, 56.93, ""},
    {"Micikevicius et al. 2018, Table 1", "VGG-D", 65.40, 65.43, ""},
    {"Micikevicius et al. 2018, Table 1", "GoogLeNet (Inception v1)", 68.33, 68.43, ""},
    {"Micikevicius et al. 2018, Table 1", "Inception v2", 70.03, 70.02, ""},
    {"Micikevicius et al. 2018, Table 1", "Inception v3", 73.85, 74.13, ""},
    {"Micikevicius et al. 2018, Table 1", "ResNet-50", 75.92, 76.04, ""},
    {"BERT fine-tuning (published pair)", "BERT", 91.18, 91.24, ""},
    {"MXNet (published pair)", "ResNeXt-50 (ImageNet top-1)", 77.3, 77.5, ""},
    {"NVIDIA, ResNet-50 AMP vs FP32 (1)", "ResNet-50", 77.01, 76.88, "± 0.16 both sides"},
    {"NVIDIA, ResNet-50 AMP vs FP32 (2)", "ResNet-50", 77.23, 77.10, "FP32 ± 0.04, AMP ± 0.06"},
    {"NVIDIA, ResNet-50 AMP vs FP32 (3)", "ResNet-50", 76.04, 75.81, "FP32 ± 0.05, AMP ± 0.08"},
};

// The sample correlation; nullopt for fewer than 2 points or a constant side.
std::optional<double> pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n < 2) return std::nullopt;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace

std::string parity_table_scaler(const std::string& recipe_with_settings) {
  const std::string recipe = recipe_with_settings.substr(0, recipe_with_settings.find(':'));
  if (recipe == "o1" || recipe == "o2" || recipe == "fp16-pure") return "torch";
  return "none";  // bf16-*: fp32's exponent range; fp8: per-tensor operand scaling
}

double paired_half_width(double sd, std::size_t n, double alpha) {
  if (n < 2) throw std::invalid_argument("paired_half_width: n must be at least 2");
  return metrics::student_t_quantile(1 - alpha, static_cast<double>(n - 1)) * sd / std::sqrt(static_cast<double>(n));
}

std::size_t pairs_for_half_width(double sd, double half_width, double alpha, std::size_t limit) {
  if (!(half_width > 0)) return 0;
  for (std::size_t n = 2; n <= limit; ++n)
    if (paired_half_width(sd, n, alpha) <= half_width) return n;
  return 0;
}

void validate_parity_table(const ParityTableConfig& c) {
  if (c.seeds < 2)
    throw std::invalid_argument("--seeds " + std::to_string(c.seeds) +
                                ": the paired gate needs at least 2 seeds per side (use 2 or more)");
  if (c.seeds > training::kMaxSeeds)
    throw std::invalid_argument("--seeds " + std::to_string(c.seeds) + ": at most " +
                                std::to_string(training::kMaxSeeds));
  if (c.steps < 1) throw std::invalid_argument("--steps must be at least 1");
  if (c.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (c.model != "cnn" && c.model != "mlp")
    throw std::invalid_argument("--model '" + c.model + "': the table is of classifiers; use cnn or mlp");
  if (c.recipes.empty()) throw std::invalid_argument("--recipes: give at least one candidate recipe");
  const std::vector<std::string> known = training::recipe_names();
  std::set<std::string> seen;
  for (const std::string& r : c.recipes) {
    if (r == "fp32")
      throw std::invalid_argument("--recipes: fp32 is the baseline (always run); list the mixed recipes only");
    if (std::find(known.begin(), known.end(), r.substr(0, r.find(':'))) == known.end()) {
      std::string list;
      for (const std::string& k : known)
        if (k != "fp32") list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument("--recipes: unknown recipe '" + r + "'; use some of " + list);
    }
    if (!seen.insert(r).second) throw std::invalid_argument("--recipes: '" + r + "' is listed twice");
  }
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.runs.empty()) throw std::invalid_argument("--runs: give the directory for the runs");
  if (!(c.margin > 0) || !std::isfinite(c.margin) || !(c.loss_margin > 0) || !std::isfinite(c.loss_margin))
    throw std::invalid_argument("--margin and --loss-margin must be finite and > 0");
  if (!(c.alpha > 0 && c.alpha < 0.5)) throw std::invalid_argument("--alpha must be in (0, 0.5)");
  for (const Side& side : sides_of(c)) {
    training::TrainConfig t = side.config;
    t.seed = 1;
    const training::Trainer check(t);  // throws for a setting it cannot run (or data it cannot load)
  }
}

namespace {

using Say = std::function<void(const std::string&)>;

// Per-seed test accuracies by side (points; nullopt: diverged).
using Accuracies = std::map<std::string, std::vector<std::optional<double>>>;

// The interval's level as the report prints it ("90%").
std::string interval_level(const ParityTableConfig& c) { return general(100 * (1 - 2 * c.alpha)) + "%"; }

std::string model_title(const ParityTableConfig& c) { return c.model == "cnn" ? "CNN" : "MLP"; }

// Trains every run (replacing the sides' directories, unless an interrupted queue resumes) into result.runs,
// the slowest recipes first.
void train_runs(const ParityTableConfig& c, const std::vector<Side>& sides, ParityTableResult& result, const Say& say) {
  struct Job {
    const Side* side;
    std::uint64_t seed;
  };
  std::vector<Job> jobs;
  for (std::uint64_t s = 1; s <= c.seeds; ++s)
    for (const Side& side : sides) jobs.push_back({&side, s});
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const Job& a, const Job& b) { return cost_rank(a.side->recipe) < cost_rank(b.side->recipe); });
  say(std::to_string(jobs.size()) + " runs (" + std::to_string(sides.size()) + " sides x " +
      std::to_string(c.seeds) + " seeds, " + std::to_string(c.steps) + " steps each), " +
      std::to_string(std::min(c.jobs, jobs.size())) + " at a time, into " + c.runs.string());
  std::vector<training::QueuedRun> queue;
  for (const Job& job : jobs) {
    training::QueuedRun q{job.side->config, training::seed_directory(c.runs / job.side->name, job.seed), {}};
    q.config.seed = job.seed;
    q.label = job.side->name + " seed " + std::to_string(job.seed);
    queue.push_back(std::move(q));
  }
  const fs::path journal = c.runs / "queue.json";  // an interrupted experiment resumes (training/run_queue.h)
  const auto start = [&](bool resuming) {
    if (resuming) say("resuming the interrupted runs in " + c.runs.string());
    else
      for (const Side& side : sides) fs::remove_all(c.runs / side.name);
  };
  const std::vector<training::FinishedRun> finished =
      training::run_queue(queue, c.jobs, [&](const std::string& line) { say(line); }, journal, start);
  for (std::size_t i = 0; i < jobs.size(); ++i)
    result.runs.push_back({jobs[i].side->name, jobs[i].seed, finished[i].wall_seconds, finished[i].summary});
}

// Each side an ensemble directory, as `train --seeds` writes it, so that
// `mpverify gate` reproduces every verdict from the directories.
void write_manifests(const ParityTableConfig& c, const std::vector<Side>& sides) {
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= c.seeds; ++s) seeds.push_back(s);
  for (const Side& side : sides) training::write_ensemble_manifest(c.runs / side.name, seeds);
}

// The gate, on directories named relative to `runs` (the report does not
// depend on where the runs were written).
void gate_sides(const ParityTableConfig& c, const std::vector<Side>& sides, ParityTableResult& result, const Say& say) {
  say("parity gates");
  const auto read_side = [&](const std::string& name) { return metrics::read_named_ensemble(c.runs, name, true); };
  const metrics::Ensemble baseline = read_side(kBaseline);
  for (std::size_t k = 1; k < sides.size(); ++k) {
    const metrics::Ensemble candidate = read_side(sides[k].name);
    metrics::GateOptions acc;
    acc.metric = metrics::GateMetric::accuracy;
    acc.margin = c.margin;
    acc.alpha = c.alpha;
    acc.pairing = metrics::Pairing::paired;
    metrics::GateOptions loss = acc;
    loss.metric = metrics::GateMetric::loss;
    loss.margin = c.loss_margin;
    result.rows.push_back({sides[k].recipe, sides[k].name, sides[k].config.scaler,
                           metrics::evaluate_gate(baseline, candidate, acc),
                           metrics::evaluate_gate(baseline, candidate, loss)});
    say(sides[k].recipe + ": " + metrics::gate_verdict_line(result.rows.back().accuracy));
  }
}

Accuracies accuracies_of(const ParityTableConfig& c, const std::vector<Side>& sides, const ParityTableResult& result) {
  Accuracies accuracy;
  for (const Side& side : sides) accuracy[side.name].resize(c.seeds);
  for (const ParityTableRun& r : result.runs) accuracy[r.side][r.seed - 1] = accuracy_points(r.summary);
  return accuracy;
}

// Mixed − FP32 of one seed (NaN when either diverged).
double accuracy_difference(const Accuracies& accuracy, const std::string& side, std::size_t i) {
  const auto a = accuracy.at(side)[i], b = accuracy.at(kBaseline)[i];
  return a && b ? *a - *b : std::numeric_limits<double>::quiet_NaN();
}

std::int64_t skipped_steps(const std::vector<ParityTableRun>& runs, const std::string& side, std::size_t seed) {
  for (const ParityTableRun& r : runs)
    if (r.side == side && r.seed == seed) return r.summary.value("skipped_steps", std::int64_t{0});
  return 0;
}

// The model's size, for the report (built once more, as the sides train it).
std::size_t parameter_count_of(const std::vector<Side>& sides) {
  std::size_t parameter_count = 0;
  training::TrainConfig t = sides.front().config;
  t.seed = 1;
  training::Trainer model(t);
  for (const nn::Parameter* p : model.parameters()) parameter_count += p->size();
  return parameter_count;
}

// --- Figures -------------------------------------------------------------------

void draw_differences(const ParityTableConfig& c, const Accuracies& accuracy, ParityTableResult& result) {
  std::vector<fs::path>& files = result.files;
  const std::string ci = interval_level(c);
  const auto difference = [&](const std::string& side, std::size_t i) { return accuracy_difference(accuracy, side, i); };
  report::IntervalPlot plot;
  plot.title = "Test accuracy, mixed − FP32, per seed (dots) and the paired mean with its " + ci + " interval";
  plot.y_label = "difference (percentage points)";
  plot.margin = c.margin;
  plot.legend = "Dots: one per seed (mixed − FP32, same seed). Red: the paired mean and its " + ci +
                " interval (the gate's).\nGreen band: the margin ±" + general(c.margin) +
                " point. The gate says equivalent when the whole interval lies inside the band.";
  for (const ParityTableRow& row : result.rows) {
    report::IntervalGroup g;
    g.label = row.recipe;
    for (std::size_t i = 0; i < c.seeds; ++i) g.values.push_back(difference(row.side, i));
    if (row.accuracy.test) {
      g.estimate = row.accuracy.test->difference;
      g.lower = row.accuracy.test->lower;
      g.upper = row.accuracy.test->upper;
    }
    plot.groups.push_back(g);
  }
  report::write_output(report::figure_path(c.report, "differences"), report::svg_interval_plot(plot), files);
}

void draw_losses(const ParityTableConfig& c, const std::vector<Side>& sides, ParityTableResult& result) {
  report::LineChart loss_chart{"Training loss per step, seed 1 (the same initial weights and batches on every side)",
                               "step", "loss (softmax cross-entropy, mini-batch)", false, {}};
  for (const Side& side : sides)
    loss_chart.series.push_back(report::series_of(
        side.recipe + (side.recipe == "fp32" ? " (ref)" : " (emu)"),
        report::step_values(record::read_steps(training::seed_directory(c.runs / side.name, 1)), "loss"),
        side.recipe != "fp32" && side.recipe != "o2"));
  report::write_output(report::figure_path(c.report, "loss"), report::svg_line_chart(loss_chart), result.files);
}

// --- The report's sections -------------------------------------------------------

void table_section(const ParityTableConfig& c, const ParityTableResult& result, std::string& md) {
  const std::string ci = interval_level(c);
  const auto skipped_total = [&](const std::string& side) {
    std::int64_t total = 0;
    for (std::size_t s = 1; s <= c.seeds; ++s) total += skipped_steps(result.runs, side, s);
    return total;
  };
  md += "## The table\n\n";
  md += "Test accuracy (%) on the " + std::to_string(c.test_size) + " held-out images, mean ± sample standard "
        "deviation over seeds 1–" + std::to_string(c.seeds) + "; the difference is the paired mean of (mixed − FP32) "
        "over the same seeds, with its " + ci + " interval (paired t, the interval of the gate's two one-sided "
        "tests); the verdict is the parity gate's (`metrics::evaluate_gate`, as `mpverify gate` runs it) at margin ±" +
        general(c.margin) + " point, alpha " + general(c.alpha) + ".\n\n";
  md += "| recipe (emu) | loss scaling | FP32 (ref) | mixed | difference (points) | " + ci +
        " interval | verdict (margin ±" + general(c.margin) + ") | seeds | skipped steps (all seeds) |\n";
  md += "|---|---|---:|---:|---:|---|---|---:|---:|\n";
  for (const ParityTableRow& row : result.rows) {
    std::string line = "| " + row.recipe + " |";
    add_cell(line, row.scaler == "torch" ? std::string("dynamic (`torch` GradScaler)")
                   : row.recipe.starts_with("fp8") ? std::string("per-tensor operand scaling, no loss scale")
                                                   : std::string("none"));
    if (const auto& t = row.accuracy.test) {
      add_cell(line, mean_sd(t->mean_baseline, t->sd_baseline));
      add_cell(line, mean_sd(t->mean_candidate, t->sd_candidate));
      add_cell(line, signed_fixed(t->difference, 2));
      add_cell(line, "[" + fixed(t->lower, 2) + ", " + fixed(t->upper, 2) + "]");
    } else {
      for (int k = 0; k < 4; ++k) add_cell(line, "-");
    }
    add_cell(line, "**" + std::string(metrics::to_string(row.accuracy.verdict)) + "**");
    add_cell(line, std::to_string(c.seeds) + " paired");
    add_cell(line, std::to_string(skipped_total(row.side)));
    md += line + "\n";
  }
  md += "\nThe gate's own lines (each reproducible with `mpverify gate --baseline RUNS/" + std::string(kBaseline) +
        " --candidate RUNS/<recipe>-emu --metric accuracy --margin " + general(c.margin) +
        "`, RUNS being the experiment's `--runs`, default `runs/parity_table`):\n\n```\n";
  for (const ParityTableRow& row : result.rows)
    md += row.recipe + ": " + metrics::gate_verdict_line(row.accuracy) + "\n";
  md += "```\n\n";
  md += "![Per-seed differences, intervals and the margin band](" +
        report::figure_path(c.report, "differences").filename().string() + ")\n\n";
  md += "The same gates as the study prints them, with the mean training loss over the last 10% of the steps "
        "gated alongside (margin ±" + general(c.loss_margin) + "; reported, the accuracy row is the verdict):\n\n";
  md += report::gate_table_header(c.alpha);
  for (const ParityTableRow& row : result.rows)
    md += report::gate_table_row(row.accuracy) + "\n" + report::gate_table_row(row.loss) + "\n";
}

// The range of the published differences (points).
struct LiteratureRange {
  double lo = 0, hi = 0;
};

// What the literature reports, and what our table can say beside it.
LiteratureRange literature_section(const ParityTableConfig& c, const ParityTableResult& result, std::string& md) {
  const std::string model_text = model_title(c);
  md += "\n## The literature's tables beside ours\n\n";
  md += "| source | model | FP32 | mixed | difference (points) | spread given |\n|---|---|---:|---:|---:|---|\n";
  double lit_lo = std::numeric_limits<double>::infinity(), lit_hi = -lit_lo;
  for (const LiteratureRow& r : kLiterature) {
    const double d = r.mixed - r.fp32;
    lit_lo = std::min(lit_lo, d);
    lit_hi = std::max(lit_hi, d);
    md += std::string("| ") + r.source + " | " + r.model + " | " + fixed(r.fp32, 2) + " | " + fixed(r.mixed, 2) +
          " | " + signed_fixed(d, 2) + " | " + (r.spread[0] ? r.spread : "none given") + " |\n";
  }
  for (const ParityTableRow& row : result.rows) {
    std::string line = "| this table (" + std::to_string(c.seeds) + " seeds) | MNIST " + model_text + ", " +
                       row.recipe + " (emu) |";
    if (const auto& t = row.accuracy.test) {
      add_cell(line, fixed(t->mean_baseline, 2));
      add_cell(line, fixed(t->mean_candidate, 2));
      add_cell(line, signed_fixed(t->difference, 2));
      add_cell(line, "sd over seeds: FP32 " + fixed(t->sd_baseline, 2) + ", mixed " + fixed(t->sd_candidate, 2) +
                         "; of the paired differences " + fixed(t->sd_difference, 2));
    } else {
      for (int k = 0; k < 4; ++k) add_cell(line, "-");
    }
    md += line + "\n";
  }
  md += "\nThe published differences run from " + signed_fixed(lit_lo, 2) + " to " + signed_fixed(lit_hi, 2) +
        " points, and practitioners call a pair \"at parity\" within about 0.1–0.25 points. Those are ImageNet-scale "
        "models; NVIDIA's seed-to-seed spreads (± 0.04–0.16) are of the size of the differences themselves, and "
        "Micikevicius et al.'s Table 1 gives no spread or interval, so neither can tell a recipe's effect from a "
        "seed's at that size.\n\n";
  return {lit_lo, lit_hi};
}

void can_and_cannot_section(const ParityTableConfig& c, const ParityTableResult& result, const Accuracies& accuracy,
                            const LiteratureRange& literature, std::size_t parameter_count, std::string& md) {
  const std::string ci = interval_level(c);
  const std::string model_text = model_title(c);
  const double lit_lo = literature.lo, lit_hi = literature.hi;
  md += "## What this table can and cannot say\n\n";
  std::vector<double> half_widths, sd_diffs;
  for (const ParityTableRow& row : result.rows)
    if (row.accuracy.test) {
      half_widths.push_back((row.accuracy.test->upper - row.accuracy.test->lower) / 2);
      sd_diffs.push_back(row.accuracy.test->sd_difference);
    }
  // The FP32 side's spread and each recipe's per-seed correlation with it.
  double baseline_sd = 0;
  std::string correlations;
  for (const ParityTableRow& row : result.rows) {
    if (!row.accuracy.test) continue;
    baseline_sd = row.accuracy.test->sd_baseline;
    std::vector<double> b, m;
    for (std::size_t i = 0; i < c.seeds; ++i)
      if (accuracy.at(kBaseline)[i] && accuracy.at(row.side)[i]) {
        b.push_back(*accuracy.at(kBaseline)[i]);
        m.push_back(*accuracy.at(row.side)[i]);
      }
    const std::optional<double> r = pearson(b, m);
    if (!correlations.empty()) correlations += ", ";
    correlations += row.recipe + " " + (r ? fixed(*r, 2) : std::string("undefined"));
  }
  std::size_t equivalent = 0, inconclusive = 0, not_equivalent = 0;
  for (const ParityTableRow& row : result.rows) {
    equivalent += row.accuracy.verdict == metrics::Verdict::equivalent;
    inconclusive += row.accuracy.verdict == metrics::Verdict::inconclusive;
    not_equivalent += row.accuracy.verdict == metrics::Verdict::not_equivalent;
  }
  md += "- **Verdicts**: " + std::to_string(equivalent) + " equivalent, " + std::to_string(inconclusive) +
        " inconclusive, " + std::to_string(not_equivalent) + " not equivalent, of " +
        std::to_string(result.rows.size()) + " recipes. An inconclusive verdict is an honest outcome: the gate says "
        "that " + std::to_string(c.seeds) + " seeds cannot tell, not that the recipe fails. A \"not equivalent\" "
        "needs the whole interval outside the margin.\n";
  if (!half_widths.empty()) {
    const auto [hmin, hmax] = std::minmax_element(half_widths.begin(), half_widths.end());
    const auto [smin, smax] = std::minmax_element(sd_diffs.begin(), sd_diffs.end());
    md += "- **Resolution**: our " + ci + " intervals reach ±" + fixed(*hmin, 2) + " to ±" + fixed(*hmax, 2) +
          " points from the mean difference. The per-seed differences have a standard deviation of " +
          fixed(*smin, 2) + " to " + fixed(*smax, 2) + " points, against " + fixed(baseline_sd, 2) +
          " for the FP32 accuracies themselves (without shared noise the differences' would be about √2 times "
          "that, " + fixed(std::sqrt(2.0) * baseline_sd, 2) + "; the correlation of the FP32 and mixed accuracies "
          "over the seeds is " + correlations + ").";
    const double lit_max = std::max(std::fabs(lit_lo), std::fabs(lit_hi));
    if (*hmin > lit_max)
      md += " Every one of our intervals is wider than the largest published difference (" + fixed(lit_max, 2) +
            " points): this table cannot see a difference of the literature's size either way.\n";
    else
      md += " Some of our intervals are narrower than the largest published difference (" + fixed(lit_max, 2) +
            " points).\n";
    // What more seeds would buy, if the observed spread of the differences holds.
    const double sd = *smax;
    std::string buy = "- **What more seeds would buy** (if the largest observed spread of the differences, " +
                      fixed(sd, 2) + " points, holds): the interval's half-width is t(" + general(1 - c.alpha) +
                      ", n − 1) · sd / √n, so ";
    for (const std::size_t n : {std::size_t{15}, std::size_t{30}}) {
      buy += "±" + fixed(paired_half_width(sd, n, c.alpha), 2) + " at " + std::to_string(n) + " seeds, ";
    }
    const std::size_t for_quarter = pairs_for_half_width(sd, 0.25, c.alpha);
    const std::size_t for_margin = pairs_for_half_width(sd, c.margin / 2, c.alpha);
    buy += "about " + std::to_string(for_margin) + " seeds for a half-width of half the margin (±" +
           general(c.margin / 2) + "; the gate then passes any true difference up to about ±" +
           general(c.margin / 2) + " most of the time), and about " + std::to_string(for_quarter) +
           " seeds for ±0.25 point, the tolerance the literature calls parity. The gate's calibration on real runs "
           "([gate-calibration-real.md](gate-calibration-real.md)) needed 15 seeds per side for the MNIST MLP at "
           "margin 1 point to keep false failures under 1%.\n";
    md += buy;
  }
  md += "- **Scale**: a " + model_text + " of " + std::to_string(parameter_count) + " parameters on " +
        std::to_string(c.train_size) + " " + c.data + " images at most, " + std::to_string(c.steps) +
        " steps, against ImageNet-scale networks. A recipe that holds here need not hold on a large model, nor "
        "the reverse; what this table shows is the method (paired seeds, an interval, a three-way verdict) on a "
        "model that trains in minutes on a CPU.\n";
  md += "- **Emulated, not measured on hardware**: every mixed run is the bit-exact software emulator (`emu`); no "
        "GPU was used, and this table says nothing about one (a GPU's accumulation order and rounding are not the "
        "emulator's, so its per-seed numbers would differ).\n\n";
}

void what_ran_section(const ParityTableConfig& c, const ParityTableResult& result, std::string& md) {
  md += "## What ran\n\n";
  md += "- Model and data: the `" + c.model + "` on `" + c.data + "` (" + std::to_string(c.train_size) +
        " training images at most, " + std::to_string(c.test_size) + " test images: the fixed stratified split), " +
        std::to_string(c.steps) + " steps of SGD (lr 0.05, momentum 0.9), batch 64; test accuracy evaluated once "
        "after the last step (batch norm in evaluation mode, in the run's own recipe).\n";
  md += "- Baseline **fp32** on the `ref` backend (Eigen FP32).\n";
  for (const ParityTableRow& row : result.rows) {
    md += "- **" + row.recipe + "** on the `emu` backend, loss scaler `" + row.scaler + "`";
    if (row.recipe == "o1") md += ": autocast-style fp16 (fp16 matrix operands and activations, fp32 weights and bias)";
    else if (row.recipe == "o2") md += ": fp16 weights, activations and gradients, fp32 master weights";
    else if (row.recipe == "bf16-o2") md += ": o2 with bf16 instead of fp16, no loss scaling (bf16 keeps fp32's exponent range, and PyTorch's bf16 autocast runs without a GradScaler)";
    else if (row.recipe == "bf16-o1") md += ": o1 with bf16 instead of fp16, no loss scaling";
    else if (row.recipe == "fp8")
      md += ": GEMM and convolution operands in OCP E4M3 forward and, backward, an E5M2 gradient times an E4M3 "
            "weight or activation (Transformer Engine's HYBRID), saturating casts, per-tensor current scaling "
            "(the recipe's default), activations bf16, fp32 master weights; no loss scale (the operand scales "
            "keep gradients in range). Earlier versions of this table ran an IEEE-like E4M3 with a largest value "
            "of 240, which no GPU implements, and E5M2 for both backward operands";
    md += ".\n";
  }
  md += "- Seeds 1–" + std::to_string(c.seeds) + " on every side: a seed fixes the initial weights and the order of "
        "the batches, so the pair (FP32, mixed) of one seed differs only in the arithmetic. Recorders off (they only "
        "observe; the per-step loss is logged either way).\n";
  md += "- Why bf16-o2 and not bf16-o1: o1 and o2 differ in this emulator only in the bias and the loss input (see "
        "`src/training/recipe.h`), so the fp16 pair already shows that difference; bf16-o2 is the stronger test of "
        "bf16 (weights the layers use, activations, gradients and logits all bf16, with only 8 significant bits).\n";
  md += "- Why these sizes: measured on this 2-core machine (one core each, recorders off) a CNN step costs about "
        "0.03 s in fp32 on `ref`, 0.25 s in o1/o2 on the emulator and 0.55 s in bf16-o2 and fp8 (formats without "
        "a SIMD path), and evaluating the 2,000 test images about 4 s in bf16 or fp8. The full default run must stay "
        "within 10 minutes on 2 cores, which buys about 6 seeds of 80 steps for five sides (about 860 CPU-seconds "
        "by those costs); this run: " + std::to_string(c.seeds) + " seeds of " + std::to_string(c.steps) +
        " steps. Why 80 steps and not fewer seeds of more: 8 FP32 seeds measured before choosing (not part of "
        "this run) gave a seed-to-seed sd of test accuracy of 1.6 points after 60 steps, 1.0 after 80, 1.1 after "
        "100 and 0.7–0.8 after 140–160, so halving the seeds to double the steps would narrow the spread by a "
        "quarter at most while widening the interval by more than √2 (fewer seeds, larger t quantile). Margin ±" +
        general(c.margin) + " point: the study's and the gate calibration's.\n\n";
}

void runs_section(const ParityTableConfig& c, const std::vector<Side>& sides, const ParityTableResult& result,
                  const Accuracies& accuracy, std::string& md) {
  const auto difference = [&](const std::string& side, std::size_t i) { return accuracy_difference(accuracy, side, i); };
  const auto skipped_of = [&](const std::string& side, std::size_t seed) { return skipped_steps(result.runs, side, seed); };
  md += "## Runs\n\n| seed | fp32 (ref) |";
  for (const ParityTableRow& row : result.rows) md += " " + row.recipe + " |";
  for (const ParityTableRow& row : result.rows) md += " " + row.recipe + " − fp32 |";
  for (const ParityTableRow& row : result.rows) md += " " + row.recipe + " skipped steps |";
  md += "\n|---|---:|";
  for (std::size_t k = 0; k < 3 * result.rows.size(); ++k) md += "---:|";
  md += "\n";
  for (std::size_t i = 0; i < c.seeds; ++i) {
    std::string line = "| " + std::to_string(i + 1) + " |";
    for (const Side& side : sides) {
      const auto a = accuracy.at(side.name)[i];
      add_cell(line, a ? fixed(*a, 2) : std::string("diverged"));
    }
    for (const ParityTableRow& row : result.rows) {
      const double d = difference(row.side, i);
      add_cell(line, std::isfinite(d) ? signed_fixed(d, 2) : std::string("-"));
    }
    for (const ParityTableRow& row : result.rows) add_cell(line, std::to_string(skipped_of(row.side, i + 1)));
    md += line + "\n";
  }
  md += "\nTest accuracy in %; the differences in points (mixed − FP32, same seed). A skipped step is one the loss "
        "scaler dropped (an inf or NaN in a gradient at the scale: GradScaler starts at 2^16 and halves on an overflow); "
        "the recipes without a loss scaler never skip. The final loss scale of each run is in its `summary.json` and "
        "in `--json`.\n\n";
}

void loss_curves_section(const ParityTableConfig& c, std::string& md) {
  md += "## Loss curves\n\n";
  md += "![Training loss per step, seed 1](" + report::figure_path(c.report, "loss").filename().string() + ")\n\n";
  md += "Seed 1 of every side: the same initial weights and the same batches, so the curves start together and part "
        "as rounding differences accumulate.\n\n";
}

void differences_section(const ParityTableConfig& c, std::string& md) {
  md += "## Where we differ from the literature\n\n";
  md += "- The literature's pairs (ImageNet CNNs in Table 1, BERT fine-tuning, ResNet-50) come without a spread "
        "for Table 1 or as means ± sd of a few runs; their differences are "
        "tenths of a point. Ours are the paired means of " + std::to_string(c.seeds) + " seeds on a tiny model, each "
        "with its interval and a verdict: where the literature reports a number, we report what the seeds can and "
        "cannot decide.\n";
  md += "- Micikevicius et al. trained without loss scaling for Table 1's CNNs; our fp16 recipes use the dynamic "
        "`torch` GradScaler, as PyTorch AMP does by default.\n";
  md += "- fp8 and bf16 have no row in Micikevicius et al.'s table; they are here because current training uses them, "
        "against the same FP32 baseline.\n";
}

// What --json prints.
nlohmann::ordered_json parity_table_json(const ParityTableResult& result) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ParityTableRow& row : result.rows)
    rows.push_back({{"recipe", row.recipe}, {"side", row.side}, {"scaler", row.scaler},
                    {"accuracy", metrics::gate_json(row.accuracy)}, {"loss", metrics::gate_json(row.loss)}});
  j["rows"] = rows;
  json runs = json::array();
  for (const ParityTableRun& r : result.runs)
    runs.push_back({{"side", r.side}, {"seed", r.seed}, {"wall_seconds", r.wall_seconds},
                    {"test_accuracy", r.summary["evaluation"]["test_accuracy"]},
                    {"skipped_steps", r.summary["skipped_steps"]}, {"final_scale", r.summary["final_scale"]}});
  j["runs"] = runs;
  j["files"] = result.files;
  return j;
}

}  // namespace

ParityTableResult run_parity_table(const ParityTableConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_parity_table(c);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::vector<Side> sides = sides_of(c);
  ParityTableResult result;

  train_runs(c, sides, result, say);
  write_manifests(c, sides);
  gate_sides(c, sides, result, say);
  const Accuracies accuracy = accuracies_of(c, sides, result);
  const std::size_t parameter_count = parameter_count_of(sides);

  // Figures.
  say("figures and report");
  fs::create_directories(c.report.parent_path().empty() ? fs::path(".") : c.report.parent_path());
  draw_differences(c, accuracy, result);
  draw_losses(c, sides, result);

  const std::string model_text = model_title(c);
  std::string recipes;
  for (std::size_t i = 0; i < c.recipes.size(); ++i)
    recipes += (i == 0 ? "" : i + 1 == c.recipes.size() ? " and " : ", ") + c.recipes[i];
  std::string md = "# Accuracy parity table: FP32 against " + recipes + " on the MNIST " + model_text + "\n\n";
  md += "Written by `build/experiments/parity_table` (experiment 4). Every number and figure below comes "
        "from the run directories it trained; the same configuration gives the same report, byte for byte.\n\n";
  table_section(c, result, md);
  const LiteratureRange literature = literature_section(c, result, md);
  can_and_cannot_section(c, result, accuracy, literature, parameter_count, md);
  what_ran_section(c, result, md);
  runs_section(c, sides, result, accuracy, md);
  loss_curves_section(c, md);
  differences_section(c, md);
  report::write_output(c.report, md, result.files);
  result.report_text = md;

  result.json = parity_table_json(result);
  return result;
}

}  // namespace mpverify::experiments
