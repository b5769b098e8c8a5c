#include "underflow/underflow_experiment.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "analysis/scaled_rounding.h"
#include "formats/format.h"
#include "metrics/ensemble.h"
#include "record/run_log.h"
#include "report/gate_table.h"
#include "report/output_files.h"
#include "report/run_series.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "training/base_config.h"
#include "training/ensemble.h"
#include "training/recipe.h"
#include "training/run_queue.h"
#include "training/trainer.h"
#include "underflow/binade_figure.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;
using report::add_cell;
using report::fixed;
using report::general;
using report::percent;
using report::power_of_two_text;

namespace {

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  ((s += parts), ...);
  return s;
}

std::string str(std::size_t v) { return std::to_string(v); }

constexpr const char* kGroups[] = {"classifier", "discriminator", "generator"};
constexpr GradientRole kRoles[] = {GradientRole::activation_grad, GradientRole::weight_grad};

std::string group_title(const std::string& group) {
  if (group == "classifier") return "CNN";
  if (group == "discriminator") return "DCGAN discriminator";
  return "DCGAN generator";
}

std::string role_slug(GradientRole r) { return r == GradientRole::activation_grad ? "activation-grads" : "weight-grads"; }
std::string group_slug(const std::string& g) { return g == "classifier" ? "cnn" : g; }

std::set<std::size_t> census_steps(std::size_t steps) { return {0, steps / 2, steps - 1}; }

training::ExperimentBase experiment_base(const UnderflowConfig& c, const std::string& model, std::size_t steps) {
  return {.model = model, .data = c.data, .data_dir = c.data_dir, .train_size = c.train_size,
          .test_size = c.test_size, .steps = steps};
}

training::TrainConfig cnn_config(const UnderflowConfig& c) {
  training::TrainConfig t = training::experiment_config(experiment_base(c, "cnn", c.cnn_steps));
  t.recipe = "fp32";
  t.scaler = "none";
  t.backend = nn::BackendKind::ref;
  t.recorders = false;
  return t;
}

training::TrainConfig candidate_config(const UnderflowConfig& c, double scale) {
  training::TrainConfig t = cnn_config(c);
  t.recipe = c.recipe;
  t.backend = nn::BackendKind::emu;
  t.scaler = "static";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", scale);
  // A step that overflows at S is skipped (as DeepSpeed's and Megatron's
  // constant scalers do), so that the runs measure underflow, not NaN weights.
  t.scaler_options = {{"scale", buf}, {"skip", "true"}};
  return t;
}

training::TrainConfig gan_config(const UnderflowConfig& c) {
  training::TrainConfig t = training::experiment_config(experiment_base(c, "dcgan", c.gan_steps));
  t.optimizer = training::OptimizerKind::adam;
  t.adam.lr = 2e-4;
  t.recipe = "fp32";
  t.scaler = "none";
  t.backend = nn::BackendKind::ref;
  t.recorders = false;
  t.seed = 1;
  return t;
}

bool is_power_of_two(double s) {
  if (!(s > 0) || !std::isfinite(s)) return false;
  int e = 0;
  return std::frexp(s, &e) == 0.5;
}

// Sums of a group's census over its steps (and over both roles when `role` is empty).
analysis::ScaleStats census_sum(const std::map<CensusKey, CensusCell>& census, const std::string& group,
                                std::optional<GradientRole> role, std::size_t scale_index) {
  analysis::ScaleStats s;
  bool first = true;
  for (const auto& [key, cell] : census) {
    if (key.group != group || (role && key.role != *role)) continue;
    if (first) {
      s = cell.at[scale_index];
      first = false;
    } else {
      s += cell.at[scale_index];
    }
  }
  return s;
}

emu::ExponentHistogram fp32_sum(const std::map<CensusKey, CensusCell>& census, const std::string& group,
                                GradientRole role) {
  emu::ExponentHistogram h;
  for (const auto& [key, cell] : census)
    if (key.group == group && key.role == role) h += cell.fp32;
  return h;
}

std::uint64_t bins_between(const emu::ExponentHistogram& h, int from, int to) {  // binades [from, to)
  std::uint64_t n = 0;
  for (int e = std::max(from, emu::ExponentHistogram::min_exponent);
       e < std::min(to, emu::ExponentHistogram::max_exponent + 1); ++e)
    n += h.at(e);
  return n;
}

std::uint64_t nonzero_finite(const emu::ExponentHistogram& h) {
  return h.total() - h.zeros - h.nans - h.infinities;
}

std::string share(std::uint64_t part, std::uint64_t whole) {
  return whole ? percent(static_cast<double>(part) / static_cast<double>(whole)) + "%" : std::string("-");
}

}  // namespace

std::vector<double> UnderflowConfig::default_scales() {
  std::vector<double> s;
  for (int k = 0; k <= 24; k += 3) s.push_back(std::ldexp(1.0, k));
  return s;
}

std::vector<double> parse_scale_list(const std::string& text) {
  std::vector<double> out;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = text.find(',', begin);
    const std::string item = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const auto bad = [&] {
      return std::invalid_argument(cat("--scales: '", item, "' is not a number or 2^k (write e.g. 1,2^3,64)"));
    };
    if (item.empty()) throw bad();
    double v = 0;
    std::size_t used = 0;
    try {
      if (item.starts_with("2^")) {
        const int k = std::stoi(item.substr(2), &used);
        if (used != item.size() - 2 || k < -1000 || k > 1000) throw bad();
        v = std::ldexp(1.0, k);
      } else {
        v = std::stod(item, &used);
        if (used != item.size()) throw bad();
      }
    } catch (const std::logic_error&) {  // stoi/stod: invalid_argument, out_of_range
      throw bad();
    }
    out.push_back(v);
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return out;
}

std::string scale_side_name(const std::string& recipe, double scale) {
  std::string name = recipe;
  for (char& ch : name)
    if (ch == ':' || ch == ',' || ch == '=' || ch == '/') ch = '_';
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.0f", scale);
  return cat(name, "-static-", std::string(buf));
}

void validate_underflow(const UnderflowConfig& c) {
  if (c.seeds < 2)
    throw std::invalid_argument(cat("--seeds ", str(c.seeds), ": the paired gate needs at least 2 seeds per side"));
  if (c.seeds > training::kMaxSeeds)
    throw std::invalid_argument(cat("--seeds ", str(c.seeds), ": at most ", str(training::kMaxSeeds)));
  if (c.cnn_steps < 1) throw std::invalid_argument("--cnn-steps must be at least 1");
  if (c.scales.empty()) throw std::invalid_argument("--scales: give at least one loss scale");
  for (std::size_t i = 0; i < c.scales.size(); ++i) {
    const double s = c.scales[i];
    if (!is_power_of_two(s) || s < 1 || s > std::ldexp(1.0, 64))
      throw std::invalid_argument(cat("--scales: ", general(s),
                                      " is not a power of two in [1, 2^64] (a power-of-two scale is exact in fp32; "
                                      "write e.g. 1,8,64,512)"));
    if (i > 0 && !(s > c.scales[i - 1]))
      throw std::invalid_argument("--scales: give the scales in increasing order, each once");
  }
  if (!(c.margin > 0) || !std::isfinite(c.margin))
    throw std::invalid_argument("--margin must be a positive number of percentage points");
  if (!(c.alpha > 0 && c.alpha < 0.5)) throw std::invalid_argument("--alpha must be in (0, 0.5)");
  if (c.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument(cat("--report '", c.report.string(), "': the report is a Markdown file (NAME.md)"));
  if (c.runs.empty()) throw std::invalid_argument("--runs: give the directory for the runs");
  const training::Recipe recipe = training::parse_recipe(c.recipe);  // throws for an unknown recipe
  if (recipe.precision.is_fp32())
    throw std::invalid_argument(cat("--recipe ", c.recipe, ": the candidate must be a mixed-precision recipe (o2, "
                                    "fp16-pure, ...), not fp32"));
  // Build every kind of run once: refuses what the trainer cannot run (and data it cannot load).
  {
    training::TrainConfig t = cnn_config(c);
    t.seed = 1;
    const training::Trainer a(t);
    training::TrainConfig u = candidate_config(c, c.scales.front());
    u.seed = 1;
    const training::Trainer b(u);
  }
  if (c.gan_steps > 0) {
    const training::Trainer g(gan_config(c));
  }
}

namespace {

using Say = std::function<void(const std::string&)>;

const std::string baseline_name = "fp32-ref";

// The candidates' run directories under --runs, one per scale.
std::vector<std::string> candidate_side_names(const UnderflowConfig& c) {
  std::vector<std::string> side_names;
  for (double s : c.scales) side_names.push_back(scale_side_name(c.recipe, s));
  return side_names;
}

// The queue as it ran (its labels name the runs in --json) and what each run returned.
struct TrainedRuns {
  std::vector<training::QueuedRun> queue;
  std::vector<training::FinishedRun> finished;
};

// Trains every run (replacing their directories, unless an interrupted queue resumes). The runs: the slow ones
// (emulator, recorders on) first; the fp32 seed-1 runs feed the censuses.
TrainedRuns train_runs(const UnderflowConfig& c, const std::vector<std::string>& side_names,
                       GradientCensus& cnn_census, GradientCensus& gan_census, const Say& say) {
  TrainedRuns trained;
  std::vector<training::QueuedRun>& queue = trained.queue;
  for (std::uint64_t seed = 1; seed <= c.seeds; ++seed) {
    for (std::size_t k = 0; k < c.scales.size(); ++k) {
      training::QueuedRun q{candidate_config(c, c.scales[k]), {}, {}};
      q.config.seed = seed;
      q.config.recorders = seed == 1;
      q.config.histograms = false;
      q.dir = training::seed_directory(c.runs / side_names[k], seed);
      q.label = cat(side_names[k], " seed ", std::to_string(seed), seed == 1 ? " (recorders on)" : "");
      queue.push_back(std::move(q));
    }
  }
  for (std::uint64_t seed = 1; seed <= c.seeds; ++seed) {
    training::QueuedRun q{cnn_config(c), training::seed_directory(c.runs / baseline_name, seed),
                          cat("fp32-ref seed ", std::to_string(seed))};
    q.config.seed = seed;
    if (seed == 1) {
      q.config.extra_observer = &cnn_census;
      q.label += " (gradient census)";
    }
    queue.push_back(std::move(q));
  }
  if (c.gan_steps > 0) {
    training::QueuedRun q{gan_config(c), c.runs / "dcgan-fp32-ref", "dcgan fp32-ref seed 1 (gradient census)"};
    q.config.extra_observer = &gan_census;
    queue.push_back(std::move(q));
  }
  const fs::path journal = c.runs / "queue.json";  // an interrupted experiment resumes (training/run_queue.h)
  const auto start = [&](bool resuming) {
    if (resuming) {
      say("resuming the interrupted runs in " + c.runs.string());
      return;
    }
    for (const std::string& n : side_names) fs::remove_all(c.runs / n);
    fs::remove_all(c.runs / baseline_name);
    fs::remove_all(c.runs / "dcgan-fp32-ref");
  };
  say(cat(std::to_string(queue.size()), " runs, ", std::to_string(std::min(c.jobs, queue.size())), " at a time, into ",
          c.runs.string()));
  trained.finished = training::run_queue(queue, c.jobs, [&](const std::string& line) { say(line); }, journal, start);
  return trained;
}

void collect_census(const UnderflowConfig& c, const GradientCensus& cnn_census, const GradientCensus& gan_census,
                    UnderflowResult& result) {
  result.census = cnn_census.cells();
  for (auto& [key, cell] : gan_census.cells()) result.census[key] = cell;
  result.weight_grad_max = cnn_census.weight_grad_max();
  for (const auto& [key, m] : gan_census.weight_grad_max()) result.weight_grad_max[key] = m;
  for (std::size_t s : census_steps(c.cnn_steps)) result.census_steps_cnn.push_back(s);
  if (c.gan_steps > 0)
    for (std::size_t s : census_steps(c.gan_steps)) result.census_steps_gan.push_back(s);
}

// Ensemble directories, as `train --seeds` writes them, and each scale's parity gate.
void gate_scales(const UnderflowConfig& c, const std::vector<std::string>& side_names, UnderflowResult& result,
                 const Say& say) {
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= c.seeds; ++s) seeds.push_back(s);
  const auto write_ensemble = [&](const std::string& name) { training::write_ensemble_manifest(c.runs / name, seeds); };
  const auto read_side = [&](const std::string& name) { return metrics::read_named_ensemble(c.runs, name, true); };
  const auto accuracy_of = [](const json& summary) -> std::optional<double> {
    const json& a = summary["evaluation"]["test_accuracy"];
    if (!a.is_number()) return std::nullopt;
    return 100.0 * a.get<double>();
  };
  write_ensemble(baseline_name);
  const metrics::Ensemble baseline = read_side(baseline_name);
  for (const metrics::RunDirectory& r : baseline.runs)
    result.baseline_accuracy.push_back(accuracy_of(r.summary).value_or(std::nan("")));
  say("parity gates");
  for (std::size_t k = 0; k < c.scales.size(); ++k) {
    write_ensemble(side_names[k]);
    const metrics::Ensemble candidate = read_side(side_names[k]);
    ScalePoint p;
    p.scale = c.scales[k];
    metrics::GateOptions o;
    o.metric = metrics::GateMetric::accuracy;
    o.margin = c.margin;
    o.alpha = c.alpha;
    p.gate = metrics::evaluate_gate(baseline, candidate, o);
    for (const metrics::RunDirectory& r : candidate.runs) {
      p.accuracy.push_back(accuracy_of(r.summary));
      p.skipped_steps += r.summary.value("skipped_steps", std::size_t{0});
    }
    const std::vector<json> steps = record::read_steps(training::seed_directory(c.runs / side_names[k], 1));
    p.underflow_rate = report::finite_mean(report::step_values(steps, "underflow_rate"));
    p.subnormal_rate = report::finite_mean(report::step_values(steps, "subnormal_rate"));
    p.overflow_rate = report::finite_mean(report::step_values(steps, "overflow_rate"));
    say(cat("scale ", power_of_two_text(p.scale), ": ", metrics::gate_verdict_line(p.gate)));
    if (!result.smallest_equivalent && p.gate.verdict == metrics::Verdict::equivalent)
      result.smallest_equivalent = p.scale;
    result.points.push_back(std::move(p));
  }
}

// The gradient groups the census saw (classifier, and the DCGAN's when it ran), in kGroups' order.
std::vector<std::string> census_groups(const UnderflowResult& result) {
  std::vector<std::string> groups;
  for (const char* g : kGroups)
    for (const auto& [key, cell] : result.census)
      if (key.group == g) {
        groups.push_back(g);
        break;
      }
  return groups;
}

// --- Figures -------------------------------------------------------------------

void draw_histograms(const UnderflowConfig& c, const std::vector<std::string>& groups, UnderflowResult& result) {
  std::vector<fs::path>& files = result.files;
  const emu::FormatThresholds limits = emu::format_thresholds(formats::parse_format("fp16"));
  for (const std::string& g : groups) {
    for (GradientRole r : kRoles) {
      BinadeFigure f;
      f.title = cat(group_title(g), ": ", to_string(r), " in FP32 (seed 1), by binade; fp16's limits");
      f.x_label = "log2 |gradient|: binade [2^e, 2^(e+1)), FP32 values, loss scale 1";
      f.thresholds = limits;
      for (const auto& [key, cell] : result.census)
        if (key.group == g && key.role == r) f.panels.push_back({cat("step ", std::to_string(key.step)), cell.fp32});
      report::write_output(report::figure_path(c.report, cat(group_slug(g), "-", role_slug(r))),
                           svg_binade_figure(f), files);
    }
  }
}

void draw_scale_charts(const UnderflowConfig& c, const std::vector<std::string>& groups, UnderflowResult& result) {
  std::vector<fs::path>& files = result.files;
  const auto scale_chart = [&](const std::string& title, const std::string& y_label, auto part) {
    report::LineChart chart{title, "log2 of the loss scale S", y_label, false, {}};
    chart.log10_y = true;
    for (const std::string& g : groups)
      for (GradientRole r : kRoles) {
        report::LineSeries s{cat(group_title(g), ", ", to_string(r)), {}, r == GradientRole::weight_grad};
        for (std::size_t k = 0; k < c.scales.size(); ++k) {
          const analysis::ScaleStats st = census_sum(result.census, g, r, k);
          s.points.emplace_back(std::log2(c.scales[k]), st.rate(part(st)));
        }
        chart.series.push_back(std::move(s));
      }
    return report::svg_line_chart(chart);
  };
  report::write_output(report::figure_path(c.report, "scales-zero"),
                       scale_chart("Non-zero FP32 gradients that become zero in fp16 at scale S (census steps)",
                                   "fraction of non-zero values (log; 0 not drawn)",
                                   [](const analysis::ScaleStats& s) { return s.underflow_to_zero; }),
                       files);
  report::write_output(report::figure_path(c.report, "scales-overflow"),
                       scale_chart("Non-zero FP32 gradients that overflow fp16 at scale S (census steps)",
                                   "fraction of non-zero values (log; 0 not drawn)",
                                   [](const analysis::ScaleStats& s) { return s.overflow; }),
                       files);
}

void draw_parity_chart(const UnderflowConfig& c, UnderflowResult& result) {
  std::vector<fs::path>& files = result.files;
  report::LineChart chart{cat("Test accuracy, ", c.recipe, " at static scale S minus fp32 (paired; scales without skipped steps)"),
                          "log2 of the loss scale S", "percentage points", false, {}};
  report::LineSeries diff{"mean difference", {}, false}, lower{cat(fixed(100 * (1 - 2 * c.alpha), 0), "% CI, lower"), {}, true},
      upper{cat(fixed(100 * (1 - 2 * c.alpha), 0), "% CI, upper"), {}, true},
      mlo{cat("margin -", general(c.margin)), {}, true}, mhi{cat("margin +", general(c.margin)), {}, true};
  for (const ScalePoint& p : result.points) {
    if (p.skipped_steps > 0) continue;  // drawn in the rates figure; a run that skipped steps trained less
    const double x = std::log2(p.scale);
    const double nan = std::nan("");
    diff.points.emplace_back(x, p.gate.test ? p.gate.test->difference : nan);
    lower.points.emplace_back(x, p.gate.test ? p.gate.test->lower : nan);
    upper.points.emplace_back(x, p.gate.test ? p.gate.test->upper : nan);
    mlo.points.emplace_back(x, -c.margin);
    mhi.points.emplace_back(x, c.margin);
  }
  chart.series = {diff, lower, upper, mlo, mhi};
  report::write_output(report::figure_path(c.report, "parity"), report::svg_line_chart(chart), files);
}

void draw_rates_chart(const UnderflowConfig& c, UnderflowResult& result) {
  std::vector<fs::path>& files = result.files;
  report::LineChart chart{cat(c.recipe, " at static scale S: its own gradients in fp16 (seed 1) and skipped steps (all seeds)"),
                          "log2 of the loss scale S", "fraction (log; 0 not drawn)", false, {}};
  chart.log10_y = true;
  report::LineSeries zero{"non-zero gradients that became zero", {}, false},
      sub{"non-zero gradients that became subnormal", {}, true}, over{"non-zero gradients that overflowed", {}, false},
      skip{"steps skipped (inf/NaN in a gradient)", {}, true};
  for (const ScalePoint& p : result.points) {
    const double x = std::log2(p.scale);
    zero.points.emplace_back(x, p.underflow_rate);
    sub.points.emplace_back(x, p.subnormal_rate);
    over.points.emplace_back(x, p.overflow_rate);
    skip.points.emplace_back(x, static_cast<double>(p.skipped_steps) / static_cast<double>(c.seeds * c.cnn_steps));
  }
  chart.series = {zero, sub, over, skip};
  report::write_output(report::figure_path(c.report, "rates"), report::svg_line_chart(chart), files);
}

// --- The report's sections -------------------------------------------------------

std::string report_opening() {
  std::string md = "# Gradient underflow in fp16 and loss scaling\n\n";
  md += cat("Written by `build/experiments/underflow` (experiment 1; `--help` lists the options). Every "
            "number and figure below comes from the runs it trained; the same seeds give the same bytes.\n\n");
  md += "## The claim\n\n";
  md += "Micikevicius et al., *Mixed Precision Training* (ICLR 2018): fp16 turns every magnitude below 2^-24 into "
        "zero and keeps those in [2^-24, 2^-14) as subnormals with fewer bits. In their histogram of the activation "
        "gradients of Multibox SSD (FP32 training), 67% of the values were zero already in FP32; values below 2^-27 "
        "did not matter for training, those in [2^-27, 2^-24) did; multiplying the loss by 8 was enough for SSD to "
        "match FP32. A power-of-two scale is exact: it moves every value by whole binades and changes no bit of the "
        "significand, unless a value leaves the format's range.\n\n";
  return md;
}

// Summary findings, and the paper's claims against ours.
void findings_section(const UnderflowConfig& c, const UnderflowResult& result, std::string& md) {
  md += "## What we found\n\n";
  const ScalePoint* last_point = result.points.empty() ? nullptr : &result.points.back();
  {
    const analysis::ScaleStats cnn1 = census_sum(result.census, "classifier", GradientRole::activation_grad, 0);
    const analysis::ScaleStats cnnw = census_sum(result.census, "classifier", GradientRole::weight_grad, 0);
    const emu::ExponentHistogram cnn_act = fp32_sum(result.census, "classifier", GradientRole::activation_grad);
    md += cat("- **Zeros in FP32.** ", share(cnn_act.zeros, cnn_act.total()),
              " of the CNN's activation-gradient values are exactly zero in FP32 at the census steps (SSD: 67%); ",
              "no format or scale changes those.\n");
    md += cat("- **Underflow without scaling.** At scale 1, fp16 would turn ", percent(cnn1.rate(cnn1.underflow_to_zero)),
              "% of the CNN's non-zero activation gradients and ", percent(cnnw.rate(cnnw.underflow_to_zero)),
              "% of its non-zero weight gradients into zero (exact counts, below).\n");
    if (result.smallest_equivalent)
      md += cat("- **Parity.** The smallest scale whose verdict is *equivalent* (test accuracy within ±", general(c.margin),
                " points, paired TOST, alpha ", general(c.alpha), ", ", std::to_string(c.seeds), " seeds) is **",
                power_of_two_text(*result.smallest_equivalent), "** (SSD: 8).\n");
    else
      md += cat("- **Parity.** No scale got the verdict *equivalent* with ", std::to_string(c.seeds),
                " seeds per side (margin ±", general(c.margin), " points): see the table for which were inconclusive "
                "and which were not equivalent. We therefore cannot name a smallest scale that recovers parity; SSD's "
                "was 8.\n");
    if (result.smallest_equivalent && *result.smallest_equivalent == c.scales.front() && c.scales.front() == 1)
      md += cat("- **Why not 8, as for SSD.** Without any scaling, only ", percent(cnn1.rate(cnn1.underflow_to_zero)),
                "% of the CNN's non-zero activation gradients become zero in fp16; most of its small values land in "
                "fp16's subnormal range, which keeps them non-zero (with fewer bits), and the band that mattered for "
                "SSD, [2^-27, 2^-24), which a scale of 8 lifts into fp16's range, holds ",
                share(bins_between(cnn_act, -27, -24), nonzero_finite(cnn_act)),
                " of them. For this model, at this length of training, loss scaling was not needed for parity; that "
                "says nothing about larger models such as SSD.\n");
    const ScalePoint* first_skip = nullptr;
    for (const ScalePoint& p : result.points)
      if (p.skipped_steps > 0) {
        first_skip = &p;
        break;
      }
    if (first_skip && first_skip == last_point)
      md += cat("- **Too large a scale.** Only at S = ", power_of_two_text(first_skip->scale),
                " did the static scaler skip steps (a gradient overflowed fp16 and the step was dropped): ",
                std::to_string(first_skip->skipped_steps), " of ", std::to_string(c.seeds * c.cnn_steps), ".\n");
    else if (first_skip)
      md += cat("- **Too large a scale.** From S = ", power_of_two_text(first_skip->scale),
                " on, the static scaler skipped steps (a gradient overflowed fp16 and the step was dropped): ",
                std::to_string(first_skip->skipped_steps), " of ", std::to_string(c.seeds * c.cnn_steps),
                " there, and ", std::to_string(last_point->skipped_steps), " of ", std::to_string(c.seeds * c.cnn_steps),
                " at ", power_of_two_text(last_point->scale), ".\n");
    else if (last_point)
      md += cat("- **Too large a scale.** No scale up to ", power_of_two_text(last_point->scale),
                " made the static scaler skip a step.\n");
  }
  md += "\n";

  md += "| claim (Micikevicius et al., SSD) | paper | ours (census steps, seed 1) |\n|---|---|---|\n";
  {
    std::string zeros_row = "| activation-gradient values exactly zero in FP32 | 67% |", band_row =
        "| non-zero activation gradients in [2^-27, 2^-24): mattered for SSD's training | (share not given) |";
    std::string zeros_cell, band_cell;
    for (const std::string& g : {std::string("classifier"), std::string("discriminator"), std::string("generator")}) {
      const emu::ExponentHistogram h = fp32_sum(result.census, g, GradientRole::activation_grad);
      if (h.total() == 0) continue;
      zeros_cell += cat(zeros_cell.empty() ? "" : "; ", group_title(g), " ", share(h.zeros, h.total()));
      band_cell += cat(band_cell.empty() ? "" : "; ", group_title(g), " ", share(bins_between(h, -27, -24), nonzero_finite(h)));
    }
    add_cell(zeros_row, zeros_cell);
    add_cell(band_row, band_cell);
    md += zeros_row + "\n" + band_row + "\n";
    std::string scale_row = "| smallest loss scale that matches FP32 | 8 |";
    add_cell(scale_row, result.smallest_equivalent
                            ? cat(power_of_two_text(*result.smallest_equivalent), " (CNN, test accuracy, ",
                                  std::to_string(c.seeds), " paired seeds)")
                            : cat("none of the scales tried was *equivalent* (CNN, ", std::to_string(c.seeds),
                                  " paired seeds; see below)"));
    md += scale_row + "\n\n";
  }
}

void what_ran_section(const UnderflowConfig& c, const UnderflowResult& result, std::string& md) {
  const std::string scales_text = [&] {
    std::string t;
    for (double s : c.scales) t += cat(std::string(t.empty() ? "" : ", "), power_of_two_text(s));
    return t;
  }();
  md += "## What ran\n\n";
  md += cat("- **CNN** (conv 8 → batch norm → ReLU → max-pool → conv 16 → batch norm → ReLU → max-pool → linear) on `",
            c.data, "` (", std::to_string(c.train_size), " training images at most, ", std::to_string(c.test_size),
            " test images), ", std::to_string(c.cnn_steps), " steps of SGD (lr 0.05, momentum 0.9), batch 64.\n");
  md += cat("  - Baseline: `fp32` on the Eigen FP32 reference backend (`ref`), seeds 1–", std::to_string(c.seeds), ".\n");
  md += cat("  - Candidates: `", c.recipe, "` on the bit-exact fp16 emulator (`emu`) with the `static` loss scaler "
            "(skip=true: a step whose gradients hold an inf or NaN is skipped), one ensemble per scale S in {",
            scales_text, "}, the same seeds (paired: same initial weights and batches). Seed 1 ran with the "
            "recorders on (the underflow rates below), the other seeds without (they change nothing computed).\n");
  md += cat("  - Why `", c.recipe, "`: it stores activations, activation gradients and weight gradients in fp16 but "
            "keeps fp32 master weights, so the loss scale is the only thing between a small gradient and zero; "
            "`fp16-pure` would add lost weight updates (fp16 weights), which no loss scale repairs, and blur the "
            "question.\n");
  if (c.gan_steps > 0)
    md += cat("- **DCGAN** (generator: linear → batch norm → ReLU → two transposed convolutions; discriminator: two "
              "convolutions with leaky ReLU and batch norm → linear) on `", c.data, "`, `fp32` on `ref`, Adam lr 2e-4, "
              "batch 64, ", std::to_string(c.gan_steps), " steps, seed 1: the census only (no parity gate: the GAN "
              "has no accuracy, and FID needs far more runs than fit here).\n");
  md += cat("- **The census** (`experiments/underflow/gradient_census.h`): at steps ");
  {
    std::string st;
    for (std::size_t s : result.census_steps_cnn) st += cat(std::string(st.empty() ? "" : ", "), std::to_string(s));
    md += cat(st, " of the CNN's fp32 seed-1 run");
  }
  if (c.gan_steps > 0) {
    std::string st;
    for (std::size_t s : result.census_steps_gan) st += cat(std::string(st.empty() ? "" : ", "), std::to_string(s));
    md += cat(" and steps ", st, " of the DCGAN's run");
  }
  md += ", every activation gradient and weight gradient a layer stores, as the op produced it in FP32. Batch "
        "norm's γ/β gradients are left out (every recipe keeps them in fp32); in the DCGAN, the discriminator's "
        "gradients are those of its own step, and the generator's are the activation gradients of its step "
        "(through the discriminator and the generator) and the generator's weight gradients.\n\n";
}

void histograms_section(const UnderflowConfig& c, const UnderflowResult& result, const std::vector<std::string>& groups,
                        std::string& md) {
  md += "## FP32 gradient histograms (the SSD figure's shape)\n\n";
  md += "Each panel: one census step; bars: the percentage of **all** values of that kind (zeros included in the "
        "denominator, as in the paper's figure) in each binade [2^e, 2^(e+1)); the exact zeros are given in the "
        "caption, not drawn. Shaded: what fp16 does to a value at scale 1 — red, it becomes zero (|v| ≤ 2^-25: "
        "below half the smallest subnormal, or exactly half, which ties to even); amber, it becomes subnormal "
        "(the rest of binade −25 rounds up to 2^-24); grey, it overflows. Dashed: fp16's smallest subnormal "
        "2^-24, smallest normal 2^-14 and largest finite value 65504. A loss scale S = 2^k moves every bar k "
        "binades to the right.\n\n";
  for (const std::string& g : groups)
    for (GradientRole r : kRoles)
      md += cat("![", group_title(g), ", ", to_string(r), "](",
                report::figure_path(c.report, cat(group_slug(g), "-", role_slug(r))).filename().string(), ")\n\n");

  md += "Where the values lie (FP32, census steps summed; % of the non-zero values):\n\n";
  md += "| gradients | values | zero in FP32 | < 2^-27 | [2^-27, 2^-24) | [2^-24, 2^-14) | ≥ 2^-14 |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& g : groups)
    for (GradientRole r : kRoles) {
      const emu::ExponentHistogram h = fp32_sum(result.census, g, r);
      const std::uint64_t nz = nonzero_finite(h);
      std::string row = cat("| ", group_title(g), ", ", to_string(r), " |");
      add_cell(row, std::to_string(h.total()));
      add_cell(row, share(h.zeros, h.total()));
      add_cell(row, share(bins_between(h, -1000, -27) + h.below_range, nz));
      add_cell(row, share(bins_between(h, -27, -24), nz));
      add_cell(row, share(bins_between(h, -24, -14), nz));
      add_cell(row, share(bins_between(h, -14, 1000) + h.above_range, nz));
      md += row + "\n";
    }
  md += "\nThe column \"zero in FP32\" is a percentage of all values; the others of the non-zero ones. The binade "
        "edges 2^-27, 2^-24, 2^-14 are exact bin boundaries, so these shares are exact.\n\n";
}

void scale_losses_section(const UnderflowConfig& c, const UnderflowResult& result,
                          const std::vector<std::string>& groups, std::string& md) {
  md += "## What fp16 would lose at each scale (exact counts)\n\n";
  md += "For every non-zero FP32 gradient value x of the census and every scale S, the value fp16 would store, "
        "fl16(fl32(x·S)) rounded to nearest-even, is classified as PyTorch's `x.mul(S).half()` would produce it "
        "(`analysis/scaled_rounding.h`, counted by `analysis/scale_sweep.h`, the same code as `mpverify analyze`): "
        "**zero**, **subnormal** (non-zero, below 2^-14), or **overflow** (infinite). These are exact counts over "
        "the actual values, not read off the histograms: the tie at exactly 2^-25/S (to zero) and the top of the "
        "binade of 65504 (values from 65520 up overflow) are decided by the rounding itself. Because an FP32 "
        "backward pass is linear in the loss gradient and a power-of-two scale is exact, these are the values an "
        "FP32 run's scaled gradients would have; a mixed-precision run's own gradients differ slightly (its "
        "measured rates are in the parity table).\n\n";
  const auto scale_table = [&](const std::string& what, auto part) {
    std::string t = cat("**", what, "** (% of the non-zero values):\n\n| gradients |");
    for (double s : c.scales) add_cell(t, cat("S = ", power_of_two_text(s)));
    t += "\n|---|";
    for (std::size_t k = 0; k < c.scales.size(); ++k) t += "---:|";
    t += "\n";
    for (const std::string& g : groups)
      for (GradientRole r : kRoles) {
        std::string row = cat("| ", group_title(g), ", ", to_string(r), " |");
        for (std::size_t k = 0; k < c.scales.size(); ++k) {
          const analysis::ScaleStats st = census_sum(result.census, g, r, k);
          add_cell(row, st.nonzero_finite() ? percent(st.rate(part(st))) : std::string("-"));
        }
        t += row + "\n";
      }
    return t + "\n";
  };
  md += scale_table("Become zero", [](const analysis::ScaleStats& s) { return s.underflow_to_zero; });
  md += scale_table("Become subnormal", [](const analysis::ScaleStats& s) { return s.subnormal; });
  md += scale_table("Overflow", [](const analysis::ScaleStats& s) { return s.overflow; });
  md += cat("![Fraction that becomes zero per scale](", report::figure_path(c.report, "scales-zero").filename().string(),
            ")\n\n![Fraction that overflows per scale](",
            report::figure_path(c.report, "scales-overflow").filename().string(), ")\n\n");
  md += "A percentage printed as 0.00 may still be a few values; 0 is drawn nowhere on the log axes.\n\n";
  {
    // Where the smallest weight gradients live: whole tensors far below fp16's range.
    // The biases of the layers that feed straight into batch norm (models.cpp).
    const std::set<std::string> before_norm{"conv1.db", "conv2.db", "d.conv2.db", "g.fc.db", "g.deconv1.db"};
    std::string rows;
    for (const auto& [key, m] : result.weight_grad_max)
      if (m < std::ldexp(1.0, -20))
        rows += cat("| ", group_title(key.first), " | `", key.second, "` | ", general(m), " (binade 2^",
                    std::to_string(m > 0 ? emu::floor_log2(m) : 0), ") | ",
                    before_norm.contains(key.second) ? "yes" : "no", " |\n");
    if (!rows.empty()) {
      md += "**Whole weight-gradient tensors below 2^-20** (largest |value| over the census steps):\n\n"
            "| gradients | tensor | largest \\|value\\| | bias feeding batch norm |\n|---|---|---:|---|\n";
      md += rows;
      md += "\nA bias of a layer that feeds straight into batch norm (`conv1`, `conv2` → `bn1`, `bn2` in the CNN; "
            "`d.conv2` → `d.bn2`, `g.fc` → `g.bn1`, `g.deconv1` → `g.bn2` in the DCGAN) has a true gradient of zero "
            "(batch norm subtracts the channel mean, which absorbs the bias): what FP32 holds for it is rounding "
            "residue. Such tensors are counted in the weight-gradient rows above; losing their values in fp16 loses "
            "nothing real.\n\n";
    }
  }
}

void parity_section(const UnderflowConfig& c, const UnderflowResult& result, const std::string& first_side_name,
                    std::string& md) {
  md += cat("## The smallest scale that recovers parity (", c.recipe, ", static scale, CNN)\n\n");
  md += cat("![Accuracy difference per scale](", report::figure_path(c.report, "parity").filename().string(), ")\n\n");
  md += cat("![Rates per scale](", report::figure_path(c.report, "rates").filename().string(), ")\n\n");
  md += cat("| S | verdict | ", c.recipe, " − fp32 (points) | ", fixed(100 * (1 - 2 * c.alpha), 0),
            "% CI | mean test accuracy (%) | skipped steps (all seeds) | underflow to zero (seed 1) | subnormal (seed 1) "
            "| overflow (seed 1) | census: would become zero |\n"
            "|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t k = 0; k < result.points.size(); ++k) {
    const ScalePoint& p = result.points[k];
    std::string row = cat("| ", power_of_two_text(p.scale), " |");
    add_cell(row, metrics::to_string(p.gate.verdict));
    add_cell(row, p.gate.test ? fixed(p.gate.test->difference, 2) : std::string("-"));
    add_cell(row, p.gate.test ? cat("[", fixed(p.gate.test->lower, 2), ", ", fixed(p.gate.test->upper, 2), "]")
                              : std::string("-"));
    double sum = 0;
    std::size_t n = 0;
    for (const auto& a : p.accuracy)
      if (a) { sum += *a; ++n; }
    add_cell(row, n ? fixed(sum / static_cast<double>(n), 2) : std::string("diverged"));
    add_cell(row, cat(std::to_string(p.skipped_steps), " of ", std::to_string(c.seeds * c.cnn_steps)));
    add_cell(row, cat(percent(p.underflow_rate), "%"));
    add_cell(row, cat(percent(p.subnormal_rate), "%"));
    add_cell(row, cat(percent(p.overflow_rate), "%"));
    const analysis::ScaleStats st = census_sum(result.census, "classifier", std::nullopt, k);
    add_cell(row, cat(percent(st.rate(st.underflow_to_zero)), "%"));
    md += row + "\n";
  }
  {
    double sum = 0;
    for (double a : result.baseline_accuracy) sum += a;
    md += cat("\nfp32 (ref) mean test accuracy: ", fixed(sum / static_cast<double>(result.baseline_accuracy.size()), 2),
              "% over seeds 1–", std::to_string(c.seeds), ". The verdict is the gate's (`metrics::evaluate_gate`, "
              "the library call behind `mpverify gate`; margin ±", general(c.margin), " points, alpha ",
              general(c.alpha), ", paired on the seeds). The rates are the means over seed 1's steps of what the ",
              c.recipe, " run's recorders measured on its own gradients at its scale (`steps.jsonl`: all activation "
              "and weight gradients, batch norm's γ/β included as if fp16); the last column is the census's "
              "prediction from the FP32 run (CNN, both roles, census steps).\n\n");
  }
  md += "Per seed (test accuracy, %):\n\n| S |";
  for (std::uint64_t s = 1; s <= c.seeds; ++s) add_cell(md, cat("seed ", std::to_string(s)));
  md += "\n|---|";
  for (std::uint64_t s = 1; s <= c.seeds; ++s) md += "---:|";
  md += "\n| fp32 |";
  for (double a : result.baseline_accuracy) add_cell(md, std::isfinite(a) ? fixed(a, 2) : std::string("diverged"));
  md += "\n";
  for (const ScalePoint& p : result.points) {
    md += cat("| ", power_of_two_text(p.scale), " |");
    for (const auto& a : p.accuracy) add_cell(md, a ? fixed(*a, 2) : std::string("diverged"));
    md += "\n";
  }
  md += "\n";
  md += report::gate_table_header(c.alpha);
  for (const ScalePoint& p : result.points) md += report::gate_table_row(p.gate) + "\n";
  md += cat("\nReproduce one row from the run directories: `mpverify gate --baseline RUNS/fp32-ref --candidate RUNS/",
            first_side_name, " --metric accuracy --margin ", general(c.margin), "` (RUNS is `--runs`, default "
            "`runs/underflow`).\n\n");
}

void differences_section(const UnderflowConfig& c, const UnderflowResult& result, std::string& md) {
  md += "## Where we differ from the paper, and what this does not show\n\n";
  md += "- Different model and data: a 2-layer CNN on MNIST digits (and a small DCGAN), not Multibox SSD on "
        "detection data; a few hundred steps, not a full training run. The histograms and rates describe these "
        "runs only.\n";
  md += "- The paper's 67% zeros is one histogram over SSD's training; ours are the census steps of one seed.\n";
  if (!result.smallest_equivalent)
    md += cat("- With ", std::to_string(c.seeds), " seeds per side the interval of the accuracy difference is wide; an "
              "*inconclusive* verdict means the runs cannot tell, not that the scale fails. More seeds "
              "(`--seeds`) narrow it.\n");
  md += "- The census predicts the loss from FP32 gradients; whether the values that underflow *matter* for "
        "training (the paper's [2^-27, 2^-24) finding) is only tested through the accuracy gate, at this model's "
        "size and length of training.\n";
  md += "- No GPU was used: the mixed-precision runs are the bit-exact fp16 emulator.\n";
}

// What --json prints.
nlohmann::ordered_json underflow_json(const UnderflowConfig& c, const UnderflowResult& result,
                                      const std::vector<std::string>& groups, const TrainedRuns& trained) {
  const std::vector<training::QueuedRun>& queue = trained.queue;
  const std::vector<training::FinishedRun>& finished = trained.finished;
  nlohmann::ordered_json j;
  j["smallest_equivalent_scale"] = result.smallest_equivalent ? json(*result.smallest_equivalent) : json(nullptr);
  nlohmann::ordered_json pts = nlohmann::ordered_json::array();
  for (const ScalePoint& p : result.points) {
    nlohmann::ordered_json o;
    o["scale"] = p.scale;
    o["verdict"] = metrics::to_string(p.gate.verdict);
    o["line"] = metrics::gate_verdict_line(p.gate);
    o["skipped_steps"] = p.skipped_steps;
    o["underflow_rate_seed1"] = p.underflow_rate;
    o["subnormal_rate_seed1"] = p.subnormal_rate;
    o["overflow_rate_seed1"] = p.overflow_rate;
    pts.push_back(o);
  }
  j["scales"] = pts;
  nlohmann::ordered_json census = nlohmann::ordered_json::array();
  for (const std::string& g : groups)
    for (GradientRole r : kRoles)
      for (std::size_t k = 0; k < c.scales.size(); ++k) {
        const analysis::ScaleStats st = census_sum(result.census, g, r, k);
        census.push_back({{"group", g}, {"role", to_string(r)}, {"scale", c.scales[k]},
                          {"nonzero", st.nonzero_finite()}, {"underflow_to_zero", st.underflow_to_zero},
                          {"subnormal", st.subnormal}, {"overflow", st.overflow}});
      }
  j["census"] = census;
  json runs = json::array();
  for (std::size_t i = 0; i < queue.size(); ++i)
    runs.push_back({{"run", queue[i].label}, {"wall_seconds", finished[i].wall_seconds}});
  j["runs"] = runs;
  j["files"] = result.files;
  return j;
}

}  // namespace

UnderflowResult run_underflow(const UnderflowConfig& c, const Progress& progress) {
  validate_underflow(c);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  UnderflowResult result;
  const formats::Format fp16 = formats::parse_format("fp16");
  GradientCensus cnn_census(census_steps(c.cnn_steps), fp16, c.scales);
  GradientCensus gan_census(census_steps(std::max<std::size_t>(c.gan_steps, 1)), fp16, c.scales);
  const std::vector<std::string> side_names = candidate_side_names(c);
  const TrainedRuns trained = train_runs(c, side_names, cnn_census, gan_census, say);
  collect_census(c, cnn_census, gan_census, result);
  gate_scales(c, side_names, result, say);

  say("figures and report");
  const std::vector<std::string> groups = census_groups(result);
  draw_histograms(c, groups, result);
  draw_scale_charts(c, groups, result);
  draw_parity_chart(c, result);
  draw_rates_chart(c, result);

  std::string md = report_opening();
  findings_section(c, result, md);
  what_ran_section(c, result, md);
  histograms_section(c, result, groups, md);
  scale_losses_section(c, result, groups, md);
  parity_section(c, result, side_names.front(), md);
  differences_section(c, result, md);
  report::write_output(c.report, md, result.files);

  result.json = underflow_json(c, result, groups, trained);
  return result;
}

}  // namespace mpverify::experiments
