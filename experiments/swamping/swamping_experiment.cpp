#include "swamping/swamping_experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "formats/format.h"
#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "record/run_log.h"
#include "report/gate_table.h"
#include "report/output_files.h"
#include "report/run_series.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "swamping/census_json.h"
#include "swamping/update_census.h"
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
using report::percent;

namespace {

struct Side {
  std::string name;   // the run directory under lr-<lr>/ (or diagnosis/)
  std::string title;  // for tables and legends
  std::string recipe;
  nn::BackendKind backend;
};

const std::vector<Side>& sweep_sides() {
  static const std::vector<Side> sides{{"fp32-ref", "fp32 (ref)", "fp32", nn::BackendKind::ref},
                                       {"o2-emu", "o2 (emu)", "o2", nn::BackendKind::emu},
                                       {"fp16-pure-emu", "fp16-pure (emu)", "fp16-pure", nn::BackendKind::emu}};
  return sides;
}

constexpr double kDiagnosisLr = 0.05, kDiagnosisMomentum = 0.9;  // the default study's SGD

training::TrainConfig run_config(const SwampingConfig& c, const std::string& model, const Side& side, double lr,
                                 double momentum, std::size_t steps) {
  training::TrainConfig t = training::experiment_config({.model = model, .data = c.data, .data_dir = c.data_dir,
                                                         .train_size = c.train_size, .test_size = c.test_size,
                                                         .steps = steps, .lr = lr, .momentum = momentum});
  t.recipe = side.recipe;
  t.scaler = side.recipe == "fp32" ? "none" : "torch";
  t.backend = side.backend;
  t.recorders = true;   // the per-step lost-update rates the census is checked against
  t.record_every = 0;   // no per-tensor lines or histograms: nothing here reads them
  t.histograms = false;
  return t;
}

// The format the run's optimizer writes the (non-norm) weights in.
formats::Format master_format(const std::string& recipe) { return training::parse_recipe(recipe).precision.master; }

double rate(std::uint64_t n, std::uint64_t d) { return d ? static_cast<double>(n) / static_cast<double>(d) : 0.0; }

std::string lr_text(double lr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", lr);
  return buf;
}

// A rate for a table: a percentage with two decimals, or with more digits
// when it is below 0.01% (so that a small rate is not printed as 0.00).
std::string rate_cell(double r) {
  if (r == 0) return "0";
  if (r >= 1e-4) return percent(r) + "%";
  std::string s = general(100 * r);
  s += "%";
  return s;
}

std::optional<double> accuracy_of(const json& summary) {
  const json& a = summary["evaluation"]["test_accuracy"];
  if (!a.is_number()) return std::nullopt;
  return 100.0 * a.get<double>();
}

struct Run {
  const Side* side = nullptr;
  double lr = 0;
  std::uint64_t seed = 0;
  bool diagnosis = false;
  fs::path dir;
  std::unique_ptr<UpdateCensus> census;
  json summary;
};

// The recorder's per-step rate against the census's count, for every step
// that updated: the two are independent computations of the same definition
// (emu::add_arrays in the trainer, round_value of the double sum here).
struct Agreement {
  std::size_t steps = 0, equal = 0;
};

Agreement recorder_agreement(const Run& run) {
  Agreement a;
  const std::vector<json> lines = record::read_steps(run.dir);
  std::map<std::size_t, const json*> by_step;
  for (const json& l : lines) by_step[l["step"].get<std::size_t>()] = &l;
  for (const CensusStep& s : run.census->steps()) {
    const auto it = by_step.find(s.step);
    if (it == by_step.end()) continue;
    a.steps += 1;
    const json& r = (*it->second)["lost_update_rate"];
    a.equal += r.is_number() && r.get<double>() == rate(s.all.lost, s.all.updates);
  }
  return a;
}

report::LineSeries series_from(const std::string& label, const std::vector<std::pair<double, double>>& points,
                               bool dashed = false) {
  report::LineSeries s;
  s.label = label;
  s.points = points;
  s.dashed = dashed;
  return s;
}

}  // namespace

std::string learning_rate_directory(double lr) { return "lr-" + lr_text(lr); }

std::vector<double> parse_learning_rates(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(v) || !(v > 0))
      throw std::invalid_argument("--lrs: '" + item + "' is not a positive number (write e.g. --lrs 0.001,0.01,0.1)");
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw std::invalid_argument("--lrs: " + item + " is listed twice");
    out.push_back(v);
  }
  if (out.empty() || text.empty() || text.back() == ',')
    throw std::invalid_argument("--lrs '" + text + "': give a comma-separated list of learning rates, e.g. 0.001,0.01,0.1");
  return out;
}

void validate_swamping(const SwampingConfig& c) {
  if (c.model != "mlp" && c.model != "cnn")
    throw std::invalid_argument("--model '" + c.model + "': use mlp or cnn (the classifiers)");
  if (c.learning_rates.empty() || c.learning_rates.size() > 12)
    throw std::invalid_argument("--lrs: give 1 to 12 learning rates");
  std::set<std::string> names;
  for (double lr : c.learning_rates) {
    if (!std::isfinite(lr) || !(lr > 0) || lr > 10)
      throw std::invalid_argument("--lrs: " + lr_text(lr) + " is not a learning rate in (0, 10]");
    if (!names.insert(learning_rate_directory(lr)).second)
      throw std::invalid_argument("--lrs: " + lr_text(lr) + " is listed twice (or prints like another)");
  }
  if (c.seeds < 2)
    throw std::invalid_argument("--seeds " + std::to_string(c.seeds) +
                                ": the paired gate needs at least 2 seeds per side (use 2 or more)");
  if (c.seeds > training::kMaxSeeds)
    throw std::invalid_argument("--seeds " + std::to_string(c.seeds) + ": at most " +
                                std::to_string(training::kMaxSeeds));
  if (c.steps < 2) throw std::invalid_argument("--steps must be at least 2 (the census checks each update against the next step's weights)");
  if (!(c.momentum >= 0 && c.momentum < 1)) throw std::invalid_argument("--momentum must be in [0, 1)");
  if (c.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (!(c.margin > 0) || !(c.alpha > 0 && c.alpha < 0.5))
    throw std::invalid_argument("--margin must be > 0 and --alpha in (0, 0.5)");
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.runs.empty()) throw std::invalid_argument("--runs: give the directory for the runs");
  // Each configuration once: a Trainer validates it and loads the data.
  for (const Side& side : sweep_sides()) {
    training::TrainConfig t = run_config(c, c.model, side, c.learning_rates.front(), c.momentum, c.steps);
    t.seed = 1;
    const training::Trainer check(t);
  }
  if (c.diagnosis_steps != 0) {
    training::TrainConfig t = run_config(c, "cnn", sweep_sides()[1], kDiagnosisLr, kDiagnosisMomentum, c.diagnosis_steps);
    t.seed = 1;
    const training::Trainer check(t);
  }
}

namespace {

using Say = std::function<void(const std::string&)>;

constexpr const char* kRateAxis = "fraction of non-zero updates (log; 0 not drawn)";

// The runs, slowest first (the diagnosis CNN on the emulator, then the
// emulator's sweep runs), so that the threads finish close together.
std::vector<Run> plan_runs(const SwampingConfig& c) {
  const std::vector<Side>& sides = sweep_sides();
  const Side& fp32 = sides[0];
  const Side& o2 = sides[1];
  const Side& pure = sides[2];
  std::vector<Run> runs;
  const auto add = [&](const Side& side, double lr, std::uint64_t seed, bool diagnosis) {
    Run r;
    r.side = &side;
    r.lr = lr;
    r.seed = seed;
    r.diagnosis = diagnosis;
    r.dir = training::seed_directory(c.runs / (diagnosis ? std::string("diagnosis") : learning_rate_directory(lr)) / side.name, seed);
    r.census = std::make_unique<UpdateCensus>(master_format(side.recipe));
    runs.push_back(std::move(r));
  };
  if (c.diagnosis_steps != 0) add(o2, kDiagnosisLr, 1, true);
  for (const Side* side : {&pure, &o2, &fp32}) {
    if (c.diagnosis_steps != 0 && side == &fp32) add(fp32, kDiagnosisLr, 1, true);
    for (double lr : c.learning_rates)
      for (std::uint64_t s = 1; s <= c.seeds; ++s) add(*side, lr, s, false);
  }
  return runs;
}

// Trains every run (replacing the sweep's directories, unless an interrupted queue resumes: every run
// here has a census observer, so all are trained again), writes each run's
// census.json and each side's ensemble manifest, as `train --seeds` does.
std::vector<training::FinishedRun> train_runs(const SwampingConfig& c, std::vector<Run>& runs, const Say& say) {
  const std::vector<Side>& sides = sweep_sides();
  std::vector<training::QueuedRun> queue;
  for (const Run& r : runs) {
    training::QueuedRun q;
    q.config = r.diagnosis ? run_config(c, "cnn", *r.side, kDiagnosisLr, kDiagnosisMomentum, c.diagnosis_steps)
                           : run_config(c, c.model, *r.side, r.lr, c.momentum, c.steps);
    q.config.seed = r.seed;
    q.config.extra_observer = r.census.get();
    q.dir = r.dir;
    q.label = (r.diagnosis ? std::string("diagnosis cnn ") : std::string()) + r.side->name + " lr " + lr_text(r.lr) +
              " seed " + std::to_string(r.seed);
    queue.push_back(std::move(q));
  }
  say("swamping: " + std::to_string(queue.size()) + " runs, " + std::to_string(std::min(c.jobs, queue.size())) +
      " at a time, into " + c.runs.string());
  const fs::path journal = c.runs / "queue.json";  // an interrupted experiment resumes (training/run_queue.h)
  const auto start = [&](bool resuming) {
    if (resuming) {
      say("swamping: resuming the interrupted runs in " + c.runs.string());
      return;
    }
    for (double lr : c.learning_rates) fs::remove_all(c.runs / learning_rate_directory(lr));
    fs::remove_all(c.runs / "diagnosis");
  };
  const std::vector<training::FinishedRun> finished =
      training::run_queue(queue, c.jobs, [&](const std::string& line) { say("swamping: " + line); }, journal, start);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].summary = finished[i].summary;
    record::write_file_atomically(runs[i].dir / "census.json", census_json(*runs[i].census).dump(1) + "\n");
  }

  // Each side of each learning rate an ensemble directory, as `train --seeds` writes it.
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= c.seeds; ++s) seeds.push_back(s);
  for (double lr : c.learning_rates)
    for (const Side& side : sides) training::write_ensemble_manifest(c.runs / learning_rate_directory(lr) / side.name, seeds);
  return finished;
}

const Run& find_run(const std::vector<Run>& runs, const Side& side, double lr, std::uint64_t seed, bool diagnosis) {
  for (const Run& r : runs)
    if (r.side == &side && r.lr == lr && r.seed == seed && r.diagnosis == diagnosis) return r;
  throw std::logic_error("swamping: run missing");
}

// Per learning rate: the gates, the accuracies, the pooled census rates.
struct LrResult {
  double lr = 0;
  std::map<std::string, std::vector<std::optional<double>>> accuracy;  // side -> per seed
  metrics::GateResult gate_o2, gate_pure;
  std::map<std::string, CensusCount> pooled;  // side -> census totals over seeds
  std::uint64_t pure_at_least = 0, pure_above = 0, pure_above_twice = 0;
  double o2_if_fp16 = 0;  // the recorders' lost_update_rate_without_master, mean over steps and seeds
};

std::vector<LrResult> learning_rate_results(const SwampingConfig& c, const std::vector<Run>& runs) {
  const std::vector<Side>& sides = sweep_sides();
  const Side& fp32 = sides[0];
  const Side& o2 = sides[1];
  const Side& pure = sides[2];
  std::vector<LrResult> per_lr;
  for (double lr : c.learning_rates) {
    LrResult res;
    res.lr = lr;
    const std::string dir = learning_rate_directory(lr);
    const auto read_side = [&](const Side& side) {
      return metrics::read_named_ensemble(c.runs, dir + "/" + side.name, true);
    };
    const metrics::Ensemble baseline = read_side(fp32);
    metrics::GateOptions acc;
    acc.metric = metrics::GateMetric::accuracy;
    acc.margin = c.margin;
    acc.alpha = c.alpha;
    res.gate_o2 = metrics::evaluate_gate(baseline, read_side(o2), acc);
    res.gate_pure = metrics::evaluate_gate(baseline, read_side(pure), acc);
    double if_fp16_sum = 0;
    std::size_t if_fp16_n = 0;
    for (const Side& side : sides)
      for (std::uint64_t s = 1; s <= c.seeds; ++s) {
        const Run& r = find_run(runs, side, lr, s, false);
        res.accuracy[side.name].push_back(accuracy_of(r.summary));
        const CensusCount t = r.census->total();
        res.pooled[side.name].updates += t.updates;
        res.pooled[side.name].lost += t.lost;
        if (&side == &pure)
          for (const CensusStep& st : r.census->steps()) {
            res.pure_at_least += st.ratio_at_least;
            res.pure_above += st.ratio_above;
            res.pure_above_twice += st.ratio_above_twice;
          }
        if (&side == &o2) {
          const double m = report::finite_mean(report::step_values(record::read_steps(r.dir), "lost_update_rate_without_master"));
          if (std::isfinite(m)) {
            if_fp16_sum += m;
            ++if_fp16_n;
          }
        }
      }
    res.o2_if_fp16 = if_fp16_n ? if_fp16_sum / static_cast<double>(if_fp16_n) : std::nan("");
    per_lr.push_back(std::move(res));
  }
  return per_lr;
}

// The checks of the census against the recorders and against the weights.
struct CensusChecks {
  std::size_t agree_steps = 0, agree_equal = 0;
  std::uint64_t checked_updates = 0, unchanged = 0, unchanged_kept = 0, changed_lost = 0, counted_lost = 0;
};

CensusChecks census_checks(const std::vector<Run>& runs) {
  CensusChecks checks;
  std::size_t& agree_steps = checks.agree_steps;
  std::size_t& agree_equal = checks.agree_equal;
  std::uint64_t& checked_updates = checks.checked_updates;
  std::uint64_t& unchanged = checks.unchanged;
  std::uint64_t& unchanged_kept = checks.unchanged_kept;
  std::uint64_t& changed_lost = checks.changed_lost;
  std::uint64_t& counted_lost = checks.counted_lost;
  for (const Run& r : runs) {
    const Agreement a = recorder_agreement(r);
    agree_steps += a.steps;
    agree_equal += a.equal;
    for (const CensusStep& s : r.census->steps()) {
      if (!s.unchanged) continue;
      checked_updates += s.all.updates;
      counted_lost += s.all.lost;
      unchanged += *s.unchanged;
      unchanged_kept += s.unchanged_but_counted_kept.value_or(0);
      changed_lost += s.changed_but_counted_lost.value_or(0);
    }
  }
  return checks;
}

// The rule comparison, pooled over every fp16-pure run of the sweep.
struct RuleComparison {
  std::array<std::array<CensusCount, 3>, 3> regions{};
  RatioProfile profile;
  CensusCount pure_total;
  std::uint64_t pure_at_least = 0, pure_above = 0, pure_above_twice = 0;
  // Lost although |w|/|u| < 2^p: possible only for zero and subnormal w.
  std::uint64_t lost_below = 0, lost_below_normal = 0, kept_above_twice = 0, kept_between = 0, lost_between = 0;

  const CensusCount& region(WeightClass w, RatioRegion g) const {
    return regions[static_cast<std::size_t>(w)][static_cast<std::size_t>(g)];
  }
};

RuleComparison rule_comparison(const std::vector<Run>& runs) {
  const Side& pure = sweep_sides()[2];
  RuleComparison rule;
  auto& regions = rule.regions;
  RatioProfile& profile = rule.profile;
  CensusCount& pure_total = rule.pure_total;
  std::uint64_t& pure_at_least = rule.pure_at_least;
  std::uint64_t& pure_above = rule.pure_above;
  std::uint64_t& pure_above_twice = rule.pure_above_twice;
  for (const Run& r : runs) {
    if (r.side != &pure || r.diagnosis) continue;
    profile.first_log2 = r.census->profile().first_log2;
    for (std::size_t w = 0; w < 3; ++w)
      for (std::size_t g = 0; g < 3; ++g) {
        regions[w][g].updates += r.census->regions()[w][g].updates;
        regions[w][g].lost += r.census->regions()[w][g].lost;
      }
    for (std::size_t part = 0; part < profile.bins.size(); ++part)
      for (std::size_t b = 0; b < profile.bins[part].size(); ++b) {
        profile.bins[part][b].updates += r.census->profile().bins[part][b].updates;
        profile.bins[part][b].lost += r.census->profile().bins[part][b].lost;
      }
    const CensusCount t = r.census->total();
    pure_total.updates += t.updates;
    pure_total.lost += t.lost;
    for (const CensusStep& st : r.census->steps()) {
      pure_at_least += st.ratio_at_least;
      pure_above += st.ratio_above;
      pure_above_twice += st.ratio_above_twice;
    }
  }
  const auto region = [&](WeightClass w, RatioRegion g) -> const CensusCount& { return rule.region(w, g); };
  std::uint64_t& lost_below = rule.lost_below;
  std::uint64_t& kept_above_twice = rule.kept_above_twice;
  std::uint64_t& kept_between = rule.kept_between;
  std::uint64_t& lost_between = rule.lost_between;
  for (WeightClass w : {WeightClass::zero, WeightClass::subnormal, WeightClass::normal}) {
    lost_below += region(w, RatioRegion::below).lost;
    kept_above_twice += region(w, RatioRegion::above).updates - region(w, RatioRegion::above).lost;
    kept_between += region(w, RatioRegion::between).updates - region(w, RatioRegion::between).lost;
    lost_between += region(w, RatioRegion::between).lost;
  }
  rule.lost_below_normal = region(WeightClass::normal, RatioRegion::below).lost;
  return rule;
}

// --- Figures -------------------------------------------------------------------

void draw_lost_per_step(const SwampingConfig& c, const std::vector<Run>& runs, std::vector<fs::path>& files) {
  const Side& o2 = sweep_sides()[1];
  const Side& pure = sweep_sides()[2];
  report::LineChart per_step{"Lost updates per step, seed 1: fp16-pure (fp16 weights) and o2 (fp32 master weights)",
                             "step", kRateAxis, false, {}};
  per_step.log10_y = true;
  for (double lr : c.learning_rates) {
    const Run& r = find_run(runs, pure, lr, 1, false);
    std::vector<std::pair<double, double>> pts;
    for (const CensusStep& s : r.census->steps())
      pts.emplace_back(static_cast<double>(s.step), rate(s.all.lost, s.all.updates));
    per_step.series.push_back(series_from("fp16-pure, lr " + lr_text(lr), pts));
  }
  // o2 at the smallest and the largest rate only: its lines lie far below fp16-pure's, and twelve lines
  // would not be told apart.
  for (double lr : {c.learning_rates.front(), c.learning_rates.back()}) {
    if (lr == c.learning_rates.back() && c.learning_rates.size() == 1) break;
    const Run& r = find_run(runs, o2, lr, 1, false);
    std::vector<std::pair<double, double>> pts;
    for (const CensusStep& s : r.census->steps())
      pts.emplace_back(static_cast<double>(s.step), rate(s.all.lost, s.all.updates));
    per_step.series.push_back(series_from("o2 (fp32 master), lr " + lr_text(lr), pts, true));
  }
  report::write_output(report::figure_path(c.report, "lost-per-step"), report::svg_line_chart(per_step), files);
}

void draw_accuracy_gap(const SwampingConfig& c, const std::vector<LrResult>& per_lr, std::vector<fs::path>& files) {
  report::LineChart gap{"Test accuracy minus fp32's (paired over seeds; mean and 90% interval)",
                        "log10(learning rate)", "accuracy difference (percentage points)", false, {}};
  for (const auto& [title, pick, dashed] :
       {std::tuple{std::string("fp16-pure − fp32"), 0, false}, std::tuple{std::string("o2 − fp32"), 1, false}}) {
    std::vector<std::pair<double, double>> mean, lower, upper;
    for (const LrResult& res : per_lr) {
      const metrics::GateResult& g = pick == 0 ? res.gate_pure : res.gate_o2;
      const double x = std::log10(res.lr);
      if (!g.test) continue;
      mean.emplace_back(x, g.test->difference);
      lower.emplace_back(x, g.test->lower);
      upper.emplace_back(x, g.test->upper);
    }
    gap.series.push_back(series_from(title + ": mean", mean, dashed));
    gap.series.push_back(series_from(title + ": 90% interval, lower", lower, true));
    gap.series.push_back(series_from(title + ": 90% interval, upper", upper, true));
  }
  report::write_output(report::figure_path(c.report, "accuracy-gap"), report::svg_line_chart(gap), files);
}

void draw_lost_vs_lr(const SwampingConfig& c, const std::vector<LrResult>& per_lr, std::vector<fs::path>& files) {
  const std::vector<Side>& sides = sweep_sides();
  const Side& fp32 = sides[0];
  const Side& o2 = sides[1];
  const Side& pure = sides[2];
  report::LineChart by_lr{"Lost updates by learning rate (pooled over steps and seeds)", "log10(learning rate)",
                          kRateAxis, false, {}};
  by_lr.log10_y = true;
  {
    std::vector<std::pair<double, double>> exact, at_least, above_twice, o2_master, fp32_own, o2_fp16;
    for (const LrResult& res : per_lr) {
      const double x = std::log10(res.lr);
      const CensusCount& p = res.pooled.at(pure.name);
      exact.emplace_back(x, rate(p.lost, p.updates));
      at_least.emplace_back(x, rate(res.pure_at_least, p.updates));
      above_twice.emplace_back(x, rate(res.pure_above_twice, p.updates));
      o2_master.emplace_back(x, rate(res.pooled.at(o2.name).lost, res.pooled.at(o2.name).updates));
      fp32_own.emplace_back(x, rate(res.pooled.at(fp32.name).lost, res.pooled.at(fp32.name).updates));
      o2_fp16.emplace_back(x, res.o2_if_fp16);
    }
    by_lr.series.push_back(series_from("fp16-pure: lost, exact (fl16(w + u) == w)", exact));
    by_lr.series.push_back(series_from("fp16-pure: |w|/|u| >= 2048 (the rule)", at_least, true));
    by_lr.series.push_back(series_from("fp16-pure: |w|/|u| > 4096", above_twice, true));
    by_lr.series.push_back(series_from("o2: lost in its fp32 master weights", o2_master));
    by_lr.series.push_back(series_from("o2: if its weights were fp16 (recorder, mean per step)", o2_fp16, true));
    by_lr.series.push_back(series_from("fp32: lost in its fp32 weights", fp32_own));
  }
  report::write_output(report::figure_path(c.report, "lost-vs-lr"), report::svg_line_chart(by_lr), files);
}

void draw_ratio_rule(const SwampingConfig& c, const RatioProfile& profile, std::vector<fs::path>& files) {
  const Side& pure = sweep_sides()[2];
  report::LineChart rule{"fp16-pure: fraction of updates lost by |w|/|u| and by where |w| sits in its binade",
                         "log2(|w| / |u|)", "fraction lost (normal w)", false, {}};
  {
    const int p = master_format(pure.recipe).precision();
    const auto x_of = [&](std::size_t b) {
      return profile.first_log2 + (static_cast<double>(b) + 0.5) / kBinsPerOctave;
    };
    static const char* parts[kBinadeParts] = {"[1, 1.25)", "[1.25, 1.5)", "[1.5, 1.75)", "[1.75, 2)"};
    for (std::size_t part = 0; part < profile.bins.size(); ++part) {
      std::vector<std::pair<double, double>> pts;
      for (std::size_t b = 0; b < profile.bins[part].size(); ++b) {
        const CensusCount& n = profile.bins[part][b];
        pts.emplace_back(x_of(b), n.updates ? rate(n.lost, n.updates) : std::nan(""));
      }
      rule.series.push_back(series_from(std::string("exact, |w| = m 2^e with m in ") + parts[part], pts));
    }
    std::vector<std::pair<double, double>> r1, r2;
    for (std::size_t b = 0; b < static_cast<std::size_t>(kRatioBins); ++b) {
      r1.emplace_back(x_of(b), x_of(b) >= p ? 1.0 : 0.0);
      r2.emplace_back(x_of(b), x_of(b) > p + 1 ? 1.0 : 0.0);
    }
    rule.series.push_back(series_from("rule: lost when |w|/|u| >= 2^" + std::to_string(p), r1, true));
    rule.series.push_back(series_from("rule: lost when |w|/|u| > 2^" + std::to_string(p + 1), r2, true));
  }
  report::write_output(report::figure_path(c.report, "ratio-rule"), report::svg_line_chart(rule), files);
}

// The diagnosis of o2's lost fp32 updates (when it ran).
void draw_diagnosis(const SwampingConfig& c, const Run* diag_o2, const Run* diag_fp32, std::vector<fs::path>& files) {
  if (diag_o2) {
    report::LineChart d{"The default study's CNN (lr 0.05, seed 1): updates lost in fp32 weights", "step", kRateAxis,
                        false, {}};
    d.log10_y = true;
    const auto series = [&](const Run& r, const std::string& label, auto pick, bool dashed) {
      std::vector<std::pair<double, double>> pts;
      for (const CensusStep& s : r.census->steps()) pts.emplace_back(static_cast<double>(s.step), rate(pick(s), s.all.updates));
      d.series.push_back(series_from(label, pts, dashed));
    };
    series(*diag_o2, "o2 (emu): lost in its fp32 master weights", [](const CensusStep& s) { return s.all.lost; }, false);
    series(*diag_o2, "o2 (emu): ... of which the step's gradient was exactly 0",
           [](const CensusStep& s) { return s.lost_grad_zero; }, true);
    series(*diag_o2, "o2 (emu): ... of which the gradient underflowed in fp16",
           [](const CensusStep& s) { return s.lost_grad_underflowed; }, true);
    series(*diag_fp32, "fp32 (ref): lost in its fp32 weights", [](const CensusStep& s) { return s.all.lost; }, false);
    report::write_output(report::figure_path(c.report, "master-diagnosis"), report::svg_line_chart(d), files);
  }
}

// --- The report's sections -------------------------------------------------------

// The title, the claim and what ran.
std::string report_opening(const SwampingConfig& c) {
  const Side& pure = sweep_sides()[2];
  const int p16 = master_format(pure.recipe).precision();
  std::string md = "# Swamping: fp16 weights without a master copy, across learning rates\n\n";
  md += "Written by `build/experiments/swamping` (experiments/swamping/). Every number and figure below comes from "
        "the runs it trained; the same configuration gives the same report, byte for byte.\n\n";

  md += "## The claim\n\n";
  md += "- MXNet's mixed-precision talk: *an update is lost when it is more than 2048× smaller than the weight* "
        "(\"float16 addition causes update to become 0\"); keep an fp32 master copy (`multi_precision=True`).\n";
  md += "- Micikevicius et al. (ICLR 2018): updating fp16 weights directly, without an fp32 master copy, cost 80% "
        "relative accuracy on their Mandarin speech model (about 5% of its weight-gradient values had exponents "
        "below −24).\n";
  md += "- The exact statement (formats.md): for 2^e ≤ |w| < 2^(e+1) in a format of p significand bits, "
        "round-to-nearest-even loses u (fl(w + u) == w) when |u| < 2^(e−p), and may lose it at exactly 2^(e−p) "
        "(a tie). For fp16 (p = 11): lost ⇒ |w|/|u| ≥ 2048 for normal w; |w|/|u| > 4096 ⇒ lost for every w; "
        "between the two it depends on where |w| sits in its binade; a zero or subnormal w has the fixed ulp "
        "2^−24.\n\n";

  md += "## What ran\n\n";
  md += "- The sweep: the `" + c.model + "` on `" + c.data + "` (" + std::to_string(c.train_size) +
        " training images at most, test set " + std::to_string(c.test_size) + "), " + std::to_string(c.steps) +
        " steps of SGD with momentum " + general(c.momentum) + ", batch 64, at learning rates ";
  for (std::size_t i = 0; i < c.learning_rates.size(); ++i) md += (i ? ", " : "") + lr_text(c.learning_rates[i]);
  md += "; seeds 1–" + std::to_string(c.seeds) + " on every side (paired: the same initial weights and batches).\n";
  md += "- **fp32 (ref)**: the `fp32` recipe on the Eigen FP32 reference backend (the baseline).\n";
  md += "- **o2 (emu)**: fp16 weights, activations and gradients, **fp32 master weights** and fp32 momentum, "
        "the `torch` loss scaler (GradScaler's defaults), on the bit-exact fp16 emulator.\n";
  md += "- **fp16-pure (emu)**: the same with **no master copy**: the optimizer adds the fp32 update u to the fp16 "
        "weights and rounds once to fp16 (w ← fl16(w + u)); its momentum buffer and batch-norm parameters are fp16 "
        "too (the `fp16-pure` recipe). Same loss scaler.\n";
  if (c.model == "mlp")
    md += "- Why the MLP and not the study's CNN: a CNN step on the emulator costs about 0.4 s on one core, an "
          "MLP step about 0.02 s; " + std::to_string(c.learning_rates.size()) + " learning rates × 3 sides × " +
          std::to_string(c.seeds) + " seeds × " + std::to_string(c.steps) +
          " steps fit in a few minutes only with the MLP. The CNN appears below in the diagnosis of o2's fp32 "
          "lost updates (the default study's configuration).\n";
  md += "- Every update of every run was classified (experiments/swamping/update_census.h): lost or not "
        "(fl(w + u) == w in the format the optimizer writes: fp16 for fp16-pure, fp32 for o2 and fp32), "
        "|w|/|u| against 2^" + std::to_string(p16) + " and 2^" + std::to_string(p16 + 1) +
        ", the weight's class and binade position, and whether the step's weight gradient was zero. "
        "An update is counted when u ≠ 0 (and w, u finite); rates are fractions of those.\n";
  if (c.diagnosis_steps)
    md += "- The diagnosis: the default study's configuration (the `cnn` on `" + c.data + "`, SGD lr 0.05, momentum "
          "0.9, batch 64, seed 1, " + std::to_string(c.diagnosis_steps) + " steps), fp32 (ref) and o2 (emu).\n";
  md += "\n";
  return md;
}

void accuracy_section(const SwampingConfig& c, const std::vector<LrResult>& per_lr, std::string& md) {
  const std::vector<Side>& sides = sweep_sides();
  const Side& fp32 = sides[0];
  const Side& o2 = sides[1];
  const Side& pure = sides[2];
  md += "## Accuracy and lost updates by learning rate\n\n";
  md += "Test accuracy (%), mean over the seeds (a diverged run is counted in the `diverged` column, not in the "
        "mean), and each candidate's paired difference to fp32 with its " + fixed(100 * (1 - 2 * c.alpha), 0) +
        "% interval and the parity gate's verdict at a margin of ±" + general(c.margin) + " points "
        "(`metrics::evaluate_gate`, as `mpverify gate`).\n\n";
  md += "| lr | fp32 | o2 | fp16-pure | diverged (o2, fp16-pure) | o2 − fp32 [90% CI], verdict | fp16-pure − fp32 [90% CI], verdict |\n";
  md += "|---:|---:|---:|---:|---:|---|---|\n";
  const auto mean_of = [](const std::vector<std::optional<double>>& v, std::size_t& diverged) {
    double sum = 0;
    std::size_t n = 0;
    diverged = 0;
    for (const auto& a : v) {
      if (a) {
        sum += *a;
        ++n;
      } else {
        ++diverged;
      }
    }
    return n ? fixed(sum / static_cast<double>(n), 2) : std::string("-");
  };
  const auto gate_cell = [](const metrics::GateResult& g) {
    std::string s;
    if (g.test) {
      s = fixed(g.test->difference, 2);
      s += " [";
      s += fixed(g.test->lower, 2);
      s += ", ";
      s += fixed(g.test->upper, 2);
      s += "], ";
    }
    s += metrics::to_string(g.verdict);
    return s;
  };
  for (const LrResult& res : per_lr) {
    std::string row = "| " + lr_text(res.lr) + " |";
    std::size_t d32 = 0, d2 = 0, dp = 0;
    add_cell(row, mean_of(res.accuracy.at(fp32.name), d32));
    add_cell(row, mean_of(res.accuracy.at(o2.name), d2));
    add_cell(row, mean_of(res.accuracy.at(pure.name), dp));
    add_cell(row, std::to_string(d2) + ", " + std::to_string(dp));
    add_cell(row, gate_cell(res.gate_o2));
    add_cell(row, gate_cell(res.gate_pure));
    md += row + "\n";
  }
  md += "\nLost updates, pooled over every step and seed (lost / non-zero updates). fp16-pure's exact rate is what "
        "its optimizer lost; the rule columns are the same updates judged by |w|/|u|; o2's first column is what "
        "its fp32 master weights lost, the second what fp16 weights would have lost (the recorder's "
        "`lost_update_rate_without_master`, mean of the per-step rates); fp32's is what its fp32 weights lost.\n\n";
  md += "| lr | fp16-pure: lost (exact) | fp16-pure: ratio ≥ 2048 | fp16-pure: ratio > 4096 | o2: lost in fp32 master | "
        "o2: if fp16 | fp32: lost in fp32 |\n|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const LrResult& res : per_lr) {
    const CensusCount& p = res.pooled.at(pure.name);
    std::string row = "| " + lr_text(res.lr) + " |";
    add_cell(row, rate_cell(rate(p.lost, p.updates)));
    add_cell(row, rate_cell(rate(res.pure_at_least, p.updates)));
    add_cell(row, rate_cell(rate(res.pure_above_twice, p.updates)));
    add_cell(row, rate_cell(rate(res.pooled.at(o2.name).lost, res.pooled.at(o2.name).updates)));
    add_cell(row, std::isfinite(res.o2_if_fp16) ? rate_cell(res.o2_if_fp16) : std::string("-"));
    add_cell(row, rate_cell(rate(res.pooled.at(fp32.name).lost, res.pooled.at(fp32.name).updates)));
    md += row + "\n";
  }
  md += "\n![Accuracy difference to fp32 by learning rate](" + report::figure_path(c.report, "accuracy-gap").filename().string() +
        ")\n\n";
  md += "![Lost updates by learning rate](" + report::figure_path(c.report, "lost-vs-lr").filename().string() + ")\n\n";
  md += "![Lost updates per step](" + report::figure_path(c.report, "lost-per-step").filename().string() + ")\n\n";
  md += "Solid: fp16-pure, the fraction of its non-zero updates that left the fp16 weight unchanged, per step "
        "(seed 1). Dashed: o2, the same fraction in its fp32 master weights (at the smallest and the largest "
        "learning rate). A step where nothing was lost is not "
        "drawn (log axis).\n\n";
}

// fp16-pure's largest mean loss of accuracy against fp32 (worst_lr empty: none).
struct WorstLoss {
  std::string worst_lr;
  double worst_relative = 0;
};

// What the numbers say, in sentences computed from them.
WorstLoss what_this_shows(const std::vector<LrResult>& per_lr, std::string& md) {
  const Side& o2 = sweep_sides()[1];
  const Side& pure = sweep_sides()[2];
  WorstLoss loss;
  std::string& worst_lr = loss.worst_lr;
  double& worst_relative = loss.worst_relative;
  md += "### What this shows\n\n";
  {
    const LrResult& lo = per_lr.front();
    const LrResult& hi = per_lr.back();
    const CensusCount& plo = lo.pooled.at(pure.name);
    const CensusCount& phi = hi.pooled.at(pure.name);
    md += "- fp16-pure lost " + rate_cell(rate(plo.lost, plo.updates)) + " of its updates at lr " + lr_text(lo.lr) +
          " and " + rate_cell(rate(phi.lost, phi.updates)) + " at lr " + lr_text(hi.lr) + "; o2's fp32 master weights lost " +
          rate_cell(rate(lo.pooled.at(o2.name).lost, lo.pooled.at(o2.name).updates)) + " and " +
          rate_cell(rate(hi.pooled.at(o2.name).lost, hi.pooled.at(o2.name).updates)) + ".\n";
    std::size_t pure_not_eq = 0, pure_eq = 0, o2_not_eq = 0;
    double worst = 0;
    for (const LrResult& res : per_lr) {
      pure_not_eq += res.gate_pure.verdict == metrics::Verdict::not_equivalent;
      pure_eq += res.gate_pure.verdict == metrics::Verdict::equivalent;
      o2_not_eq += res.gate_o2.verdict == metrics::Verdict::not_equivalent;
      if (res.gate_pure.test && res.gate_pure.test->difference < worst) {
        worst = res.gate_pure.test->difference;
        worst_lr = lr_text(res.lr);
      }
    }
    md += "- The gate found fp16-pure not equivalent to fp32 at " + std::to_string(pure_not_eq) + " of " +
          std::to_string(per_lr.size()) + " learning rates and equivalent at " + std::to_string(pure_eq) +
          " (the rest inconclusive); o2 not equivalent at " + std::to_string(o2_not_eq) + ".";
    if (!worst_lr.empty()) {
      md += " fp16-pure's largest mean loss of accuracy was " + fixed(-worst, 2) + " points, at lr " + worst_lr;
      for (const LrResult& res : per_lr)
        if (lr_text(res.lr) == worst_lr && res.gate_pure.test && res.gate_pure.test->mean_baseline > 0) {
          worst_relative = -worst / res.gate_pure.test->mean_baseline;
          md += ", where fp32 reached " + fixed(res.gate_pure.test->mean_baseline, 2) + "%: a relative loss of " +
                percent(worst_relative) + "%";
        }
      md += ".";
    }
    md += "\n";
  }
  md += "\n";
  return loss;
}

void rule_section(const SwampingConfig& c, const RuleComparison& rule, std::string& md) {
  const CensusCount& pure_total = rule.pure_total;
  const auto region = [&](WeightClass w, RatioRegion g) -> const CensusCount& { return rule.region(w, g); };
  const std::uint64_t pure_at_least = rule.pure_at_least, pure_above = rule.pure_above,
                      pure_above_twice = rule.pure_above_twice, lost_below = rule.lost_below,
                      lost_below_normal = rule.lost_below_normal, kept_above_twice = rule.kept_above_twice,
                      lost_between = rule.lost_between, kept_between = rule.kept_between;
  md += "## The exact rate against the 2048-ratio rule\n\n";
  md += "Every update of the fp16-pure runs (all learning rates and seeds, " + std::to_string(pure_total.updates) +
        " non-zero updates), judged exactly (fl16(w + u) == w) and by the ratio r = |w|/|u| (compared exactly: |w| "
        "against 2048·|u| in double):\n\n";
  md += "| measure | updates | fraction |\n|---|---:|---:|\n";
  const auto frac_row = [&](const std::string& what, std::uint64_t n) {
    md += "| " + what + " | " + std::to_string(n) + " | " + rate_cell(rate(n, pure_total.updates)) + " |\n";
  };
  frac_row("lost, exact: fl16(w + u) == w", pure_total.lost);
  frac_row("r ≥ 2048 (\"more than 2048× smaller\", ties included)", pure_at_least);
  frac_row("r > 2048 (the rule's strict form)", pure_above);
  frac_row("r > 4096", pure_above_twice);
  frac_row("lost although r < 2048", lost_below);
  frac_row("... of which w was normal (the theorem says none)", lost_below_normal);
  frac_row("kept although r > 4096 (the theorem says none)", kept_above_twice);
  frac_row("r in [2048, 4096]: lost", lost_between);
  frac_row("r in [2048, 4096]: kept", kept_between);
  md += "\nBy the weight's class and the ratio's region:\n\n";
  md += "| w in fp16 | r | updates | lost | fraction lost |\n|---|---|---:|---:|---:|\n";
  static const char* region_names[3] = {"< 2048", "2048 to 4096", "> 4096"};
  for (WeightClass w : {WeightClass::zero, WeightClass::subnormal, WeightClass::normal})
    for (RatioRegion g : {RatioRegion::below, RatioRegion::between, RatioRegion::above}) {
      const CensusCount& n = region(w, g);
      md += std::string("| ") + to_string(w) + " | " + region_names[static_cast<int>(g)] + " | " +
            std::to_string(n.updates) + " | " + std::to_string(n.lost) + " | " +
            (n.updates ? rate_cell(rate(n.lost, n.updates)) : std::string("-")) + " |\n";
    }
  md += "\n![Fraction lost by ratio and binade position](" + report::figure_path(c.report, "ratio-rule").filename().string() +
        ")\n\n";
  md += "Normal weights only, pooled as above; each line is the fraction lost among updates whose |w|/|u| falls in "
        "a bin of 1/" + std::to_string(kBinsPerOctave) + " binade, for weights |w| = m·2^e with m in a quarter of "
        "the binade (a bin without updates is not drawn). The dashed steps are the two rules. By the exact "
        "statement an update is lost when |u| < 2^(e−11), i.e. |w|/|u| > m·2048: the step of each line sits at "
        "log2(|w|/|u|) = 11 + log2 m, at 11 for weights at the bottom of their binade and at 12 for those at the "
        "top. The 2048 rule is right only for weights at the bottom of a binade; the 4096 rule only at the top.\n\n";
}

void counts_section(const CensusChecks& checks, std::string& md) {
  const std::size_t agree_steps = checks.agree_steps, agree_equal = checks.agree_equal;
  const std::uint64_t checked_updates = checks.checked_updates, unchanged = checks.unchanged,
                      unchanged_kept = checks.unchanged_kept, changed_lost = checks.changed_lost,
                      counted_lost = checks.counted_lost;
  md += "## Are the counts right?\n\n";
  md += "- The census's lost counts (w + u in double, rounded once with `emu::round_value`) against the recorders' "
        "`lost_update_rate` (`emu::add_arrays`, in the trainer): equal at " + std::to_string(agree_equal) + " of " +
        std::to_string(agree_steps) + " run-steps.\n";
  md += "- Against what the optimizer did: of " + std::to_string(checked_updates) + " non-zero updates followed by "
        "another step (every run), " + std::to_string(unchanged) + " left the weight unchanged and " +
        std::to_string(counted_lost) + " were counted lost; " + std::to_string(unchanged_kept) +
        " were unchanged although counted kept (a weight 0 left 0 by an underflowing update is not a lost one), " + std::to_string(changed_lost) + " changed although counted lost.\n";
  md += "- The recorder fix in this change: at step 0 the trainer measured fp16-pure's updates against its initial "
        "weights before they were rounded to fp16 (the optimizer rounds them first), so step 0 counted almost no "
        "lost updates; it now measures against the rounded weights (src/training/trainer.cpp, tested by "
        "`SwampingRecorder.Fp16PureStepZeroMeasuresTheRoundedWeights`).\n\n";
}

// Why o2's fp32 master weights lose updates: the default study's CNN, every update classified.
void diagnosis_section(const SwampingConfig& c, const Run* diag_o2, const Run* diag_fp32, std::string& md) {
  if (diag_o2) {
    const UpdateCensus& co = *diag_o2->census;
    const UpdateCensus& cf = *diag_fp32->census;
    const CensusStep& last_o2 = co.steps().back();
    const CensusStep& last_f = cf.steps().back();
    std::uint64_t lz = 0, lu = 0, ln = 0;
    for (const CensusStep& s : co.steps()) {
      lz += s.lost_grad_zero;
      lu += s.lost_grad_underflowed;
      ln += s.lost_grad_nonzero;
    }
    const CensusCount to = co.total(), tf = cf.total();
    md += "## Why o2's lost-update rate with fp32 master weights climbs (the default study)\n\n";
    md += "The default study ([study.md](study.md)) shows o2's lost-update rate *with* its fp32 master weights "
          "climbing to about 8% by step 150 (seed 1). The same configuration here, with every update classified:\n\n";
    md += "![Lost fp32 updates in the study's CNN](" + report::figure_path(c.report, "master-diagnosis").filename().string() +
          ")\n\n";
    md += "| run (CNN, lr 0.05, seed 1) | lost at the last step (" + std::to_string(last_o2.step) + ") | lost over all steps | "
          "lost with the step's gradient exactly 0 | lost with the gradient underflowed in fp16 | lost with a non-zero gradient |\n"
          "|---|---:|---:|---:|---:|---:|\n";
    const auto diag_row = [&](const std::string& name, const CensusStep& last, const CensusCount& t,
                              const UpdateCensus& census) {
      std::uint64_t z = 0, u = 0, n = 0;
      for (const CensusStep& s : census.steps()) {
        z += s.lost_grad_zero;
        u += s.lost_grad_underflowed;
        n += s.lost_grad_nonzero;
      }
      md += "| " + name + " | " + rate_cell(rate(last.all.lost, last.all.updates)) + " | " + std::to_string(t.lost) +
            " of " + std::to_string(t.updates) + " (" + rate_cell(rate(t.lost, t.updates)) + ") | " +
            std::to_string(z) + " | " + std::to_string(u) + " | " + std::to_string(n) + " |\n";
    };
    diag_row("o2 (emu), fp32 master", last_o2, to, co);
    diag_row("fp32 (ref), fp32 weights", last_f, tf, cf);
    md += "\nBy parameter, over all steps:\n\n| parameter | o2: updates | o2: lost | o2: lost, gradient exactly 0 | "
          "o2: lost, gradient underflowed | fp32: updates | fp32: lost | fp32: lost, gradient exactly 0 |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    std::uint64_t fp32_bias_nonzero = 0, fp32_nonzero = 0;
    for (const auto& [name, par] : co.parameters()) {
      const auto f = cf.parameters().find(name);
      const CensusParameter fp = f == cf.parameters().end() ? CensusParameter{} : f->second;
      std::string row = "| " + name + " |";
      for (const std::uint64_t v : {par.count.updates, par.count.lost, par.lost_grad_zero, par.lost_grad_underflowed,
                                    fp.count.updates, fp.count.lost, fp.lost_grad_zero})
        add_cell(row, std::to_string(v));
      md += row + "\n";
    }
    for (const auto& [name, par] : cf.parameters()) {
      const std::uint64_t nonzero = par.count.lost - par.lost_grad_zero - par.lost_grad_underflowed;
      fp32_nonzero += nonzero;
      if (name.rfind("conv", 0) == 0 && name.size() > 2 && name.substr(name.size() - 2) == ".b") fp32_bias_nonzero += nonzero;
    }
    // Is the census confirmed for these two runs: the recorder's rate at every
    // step, and the weights the next step read?
    bool confirmed = true;
    for (const Run* r : {diag_o2, diag_fp32}) {
      const Agreement ag = recorder_agreement(*r);
      confirmed = confirmed && ag.steps == ag.equal && ag.steps > 0;
      for (const CensusStep& s : r->census->steps())
        confirmed = confirmed && s.changed_but_counted_lost.value_or(0) == 0 && s.unchanged_but_counted_kept.value_or(0) == 0;
    }
    md += "\n**What it is.** ";
    if (to.lost == 0) {
      md += "In this run o2's fp32 master weights lost no update at all; the study's figure is not reproduced.\n\n";
    } else {
      md += "o2's fp32 master weights lost " + rate_cell(rate(last_o2.all.lost, last_o2.all.updates)) +
            " of the non-zero updates of its last step (the study's figure). Of its " + std::to_string(to.lost) +
            " lost updates over the run, " + rate_cell(rate(lz, to.lost)) +
            " came at a step whose weight gradient was exactly zero (as the op computed it, before any fp16 "
            "rounding), " + rate_cell(rate(lu, to.lost)) + " at a step whose gradient was non-zero but underflowed "
            "to zero in fp16, and " + rate_cell(rate(ln, to.lost)) + " with a non-zero gradient. With a zero "
            "gradient the update is the momentum buffer alone (v ← μ·v, u = −lr·v): it shrinks by μ = 0.9 a step "
            "until it falls below half an fp32 ulp of w (|w|/|u| ≥ 2^24), and from then on fl32(w + u) == w: the "
            "update is lost in fp32, correctly. A linear layer's weight gradient is exactly zero where its input "
            "feature was zero for every image of the batch (here: a pooled ReLU output), so these are weights whose "
            "input went quiet while their momentum decayed. The fp32 baseline, with no fp16 anywhere, loses " +
            rate_cell(rate(last_f.all.lost, last_f.all.updates)) + " at its last step (" +
            rate_cell(rate(tf.lost, tf.updates)) + " over the run); " + std::to_string(fp32_bias_nonzero) + " of its " +
            std::to_string(fp32_nonzero) + " lost updates with a non-zero gradient are the convolution biases, "
            "which feed batch norm: it subtracts the per-channel mean, so their true gradient is zero and the "
            "computed one is rounding noise far below the biases.\n\n";
      md += confirmed ? std::string("**Not a recorder bug**: for both runs the census's counts equal the recorder's "
                                    "`lost_update_rate` at every step, and every update counted lost left its weight "
                                    "unchanged in the next step's weights while every other one changed it. ")
                      : std::string("**Warning**: for these runs the census and the recorder (or the weights that "
                                    "followed) disagree at some step; see the checks above. ");
      md += "What is lost is small: while the gradient stays zero every later update of that weight is smaller "
            "still, and the whole remaining tail sums to at most μ/(1−μ) = 9 times the first lost one, i.e. a few "
            "fp32 ulps of w. fp32 training loses the same kind of update.\n\n";
    }
  }
}

void literature_section(const SwampingConfig& c, const std::vector<LrResult>& per_lr, const RuleComparison& rule,
                        const WorstLoss& worst, std::string& md) {
  const Side& pure = sweep_sides()[2];
  const std::string& worst_lr = worst.worst_lr;
  const double worst_relative = worst.worst_relative;
  const CensusCount& pure_total = rule.pure_total;
  const std::uint64_t pure_at_least = rule.pure_at_least, lost_below = rule.lost_below,
                      lost_between = rule.lost_between, kept_between = rule.kept_between;
  md += "## Where we differ from the literature\n\n";
  md += "- Micikevicius et al. report an 80% relative accuracy loss without master weights on a Mandarin speech "
        "model; we train a small " + c.model + " on " + c.data + " for " + std::to_string(c.steps) +
        " steps. ";
  {
    double best_fp32 = 0;
    std::string best_lr;
    for (const LrResult& res : per_lr)
      if (res.gate_pure.test && res.gate_pure.test->mean_baseline > best_fp32) {
        best_fp32 = res.gate_pure.test->mean_baseline;
        best_lr = lr_text(res.lr);
      }
    md += worst_lr.empty() ? std::string("fp16-pure lost no accuracy on the mean at any learning rate here")
                           : "Our largest relative loss was " + percent(worst_relative) + "% (lr " + worst_lr + ")";
    md += "; fp32's best mean accuracy over the learning rates was " + fixed(best_fp32, 2) + "% (lr " + best_lr + ").";
    const LrResult& hi = per_lr.back();
    const CensusCount& p = hi.pooled.at(pure.name);
    if (hi.gate_pure.test)
      md += " At lr " + lr_text(hi.lr) + " fp16-pure lost " + rate_cell(rate(p.lost, p.updates)) +
            " of its updates and its accuracy differed from fp32's by " + fixed(hi.gate_pure.test->difference, 2) +
            " points: a lost update is one below half an ulp of its weight, and how much that matters depends on "
            "how many of the updates that carry the learning are that small.";
    md += "\n";
  }
  md += "- \"Lost when more than 2048× smaller\" is neither necessary nor sufficient: above, " +
        std::to_string(lost_between) + " updates with |w|/|u| in [2048, 4096] were lost and " +
        std::to_string(kept_between) + " were kept, " + std::to_string(lost_below) +
        " were lost at a ratio below 2048 (subnormal weights; an update to a zero weight is never a lost "
        "one), and the 2048 rule counted " +
        rate_cell(rate(pure_at_least, pure_total.updates)) + " of the updates against an exact " +
        rate_cell(rate(pure_total.lost, pure_total.updates)) + ".\n";
  md += "- Only SGD with momentum was run (no Adam, no weight decay), on the emulator only (no GPU here).\n";
}

// What --json prints.
SwampingResult swamping_result(const std::vector<LrResult>& per_lr, const RuleComparison& rule, const CensusChecks& checks,
                               const Run* diag_o2, const Run* diag_fp32, const std::vector<Run>& runs,
                               const std::vector<training::FinishedRun>& finished, const std::vector<fs::path>& files) {
  const std::vector<Side>& sides = sweep_sides();
  SwampingResult result;
  nlohmann::ordered_json j;
  nlohmann::ordered_json lrs = nlohmann::ordered_json::array();
  for (const LrResult& res : per_lr) {
    nlohmann::ordered_json e;
    e["lr"] = res.lr;
    for (const Side& side : sides) {
      nlohmann::ordered_json acc = nlohmann::ordered_json::array();
      for (const auto& a : res.accuracy.at(side.name)) acc.push_back(a ? nlohmann::ordered_json(*a) : nlohmann::ordered_json());
      e[side.name] = {{"test_accuracy", acc},
                      {"updates", res.pooled.at(side.name).updates},
                      {"lost", res.pooled.at(side.name).lost}};
    }
    e["fp16_pure_ratio_at_least"] = res.pure_at_least;
    e["fp16_pure_ratio_above"] = res.pure_above;
    e["fp16_pure_ratio_above_twice"] = res.pure_above_twice;
    e["gate_o2"] = metrics::gate_json(res.gate_o2);
    e["gate_fp16_pure"] = metrics::gate_json(res.gate_pure);
    lrs.push_back(e);
  }
  j["learning_rates"] = lrs;
  j["rule"] = {{"updates", rule.pure_total.updates},       {"lost", rule.pure_total.lost},
               {"ratio_at_least", rule.pure_at_least},      {"ratio_above", rule.pure_above},
               {"ratio_above_twice", rule.pure_above_twice}, {"lost_below", rule.lost_below},
               {"lost_below_normal", rule.lost_below_normal}, {"kept_above_twice", rule.kept_above_twice},
               {"lost_between", rule.lost_between},          {"kept_between", rule.kept_between}};
  j["checks"] = {{"recorder_steps", checks.agree_steps},        {"recorder_equal", checks.agree_equal},
                 {"checked_updates", checks.checked_updates},   {"unchanged", checks.unchanged},
                 {"counted_lost", checks.counted_lost},         {"unchanged_but_counted_kept", checks.unchanged_kept},
                 {"changed_but_counted_lost", checks.changed_lost}};
  if (diag_o2) j["diagnosis"] = {{"o2", census_json(*diag_o2->census)}, {"fp32", census_json(*diag_fp32->census)}};
  nlohmann::ordered_json runs_json = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < runs.size(); ++i)
    runs_json.push_back({{"dir", runs[i].dir.string()}, {"wall_seconds", finished[i].wall_seconds}});
  j["runs"] = runs_json;
  j["files"] = files;
  result.json = j;
  result.files = files;
  return result;
}

}  // namespace

SwampingResult run_swamping(const SwampingConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_swamping(c);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::vector<Side>& sides = sweep_sides();
  std::vector<Run> runs = plan_runs(c);
  const std::vector<training::FinishedRun> finished = train_runs(c, runs, say);

  say("swamping: gates, figures and report");
  const std::vector<LrResult> per_lr = learning_rate_results(c, runs);
  const CensusChecks checks = census_checks(runs);
  const RuleComparison rule = rule_comparison(runs);
  const Run* diag_o2 = c.diagnosis_steps ? &find_run(runs, sides[1], kDiagnosisLr, 1, true) : nullptr;
  const Run* diag_fp32 = c.diagnosis_steps ? &find_run(runs, sides[0], kDiagnosisLr, 1, true) : nullptr;

  fs::create_directories(c.report.parent_path().empty() ? fs::path(".") : c.report.parent_path());
  std::vector<fs::path> files;
  draw_lost_per_step(c, runs, files);
  draw_accuracy_gap(c, per_lr, files);
  draw_lost_vs_lr(c, per_lr, files);
  draw_ratio_rule(c, rule.profile, files);
  draw_diagnosis(c, diag_o2, diag_fp32, files);

  std::string md = report_opening(c);
  accuracy_section(c, per_lr, md);
  const WorstLoss worst = what_this_shows(per_lr, md);
  rule_section(c, rule, md);
  counts_section(checks, md);
  diagnosis_section(c, diag_o2, diag_fp32, md);
  literature_section(c, per_lr, rule, worst, md);
  report::write_output(c.report, md, files);

  return swamping_result(per_lr, rule, checks, diag_o2, diag_fp32, runs, finished, files);
}

}  // namespace mpverify::experiments
