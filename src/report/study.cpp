#include "report/study.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "emu/exponent_histogram.h"
#include "gpu/device.h"
#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "record/histogram_json.h"
#include "record/run_log.h"
#include "report/gate_table.h"
#include "report/html_page.h"
#include "report/output_files.h"
#include "report/svg_histogram.h"
#include "report/run_series.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "training/base_config.h"
#include "training/ensemble.h"
#include "training/run_queue.h"
#include "training/trainer.h"

namespace mpverify::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Side {
  std::string name;  // the run directory under `out`, and the label
  std::string title; // for tables and legends
  training::TrainConfig config;
};

// The study's CNN on the experiments' shared configuration (SGD 0.05, momentum 0.9, batch 64, fp16 studied).
training::TrainConfig base_config(const StudyConfig& c) {
  training::ExperimentBase base;
  base.model = "cnn";
  base.data = c.data;
  base.data_dir = c.data_dir;
  base.train_size = c.train_size;
  base.test_size = c.test_size;
  base.steps = c.steps;
  return training::experiment_config(base);
}

std::vector<Side> study_sides(const StudyConfig& c, const std::string& gpu_reason) {
  std::vector<Side> sides;
  Side fp32{"fp32-ref", "fp32 (ref)", base_config(c)};
  fp32.config.recipe = "fp32";
  fp32.config.scaler = "none";
  fp32.config.backend = nn::BackendKind::ref;
  sides.push_back(fp32);
  const auto o2 = [&](nn::BackendKind backend, const char* name, const char* title) {
    Side s{name, title, base_config(c)};
    s.config.recipe = "o2";
    s.config.scaler = "torch";
    s.config.backend = backend;
    sides.push_back(s);
  };
  if (c.backend == "emu" || c.backend == "auto") o2(nn::BackendKind::emu, "o2-emu", "o2 (emu)");
  if (c.backend == "gpu" || (c.backend == "auto" && gpu_reason.empty())) o2(nn::BackendKind::gpu, "o2-gpu", "o2 (gpu)");
  return sides;
}

}  // namespace

namespace {

bool in_rounds(const StudyConfig& c) { return c.seeds == 0; }

std::string looks_list(const std::vector<std::size_t>& looks) {
  std::string text;
  for (std::size_t n : looks) {
    if (!text.empty()) text += ',';
    text += std::to_string(n);
  }
  return text;
}

// The most seeds the study may run: the last look, or --seeds.
std::size_t most_seeds(const StudyConfig& c) { return in_rounds(c) ? c.looks.back() : c.seeds; }

}  // namespace

void validate_study(const StudyConfig& c) {
  if (in_rounds(c)) {
    try {
      metrics::check_design({c.looks, c.spending});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--looks: ") + e.what());
    }
  } else if (c.seeds < 2) {
    throw std::invalid_argument("--seeds " + std::to_string(c.seeds) +
                                ": the paired gate needs at least 2 seeds per side (use 2 or more)");
  }
  if (most_seeds(c) > training::kMaxSeeds)
    throw std::invalid_argument((in_rounds(c) ? "--looks: the last look " : "--seeds ") +
                                std::to_string(most_seeds(c)) + ": at most " + std::to_string(training::kMaxSeeds));
  if (c.steps < 1) throw std::invalid_argument("--steps must be at least 1");
  if (c.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (c.backend != "emu" && c.backend != "gpu" && c.backend != "auto")
    throw std::invalid_argument("--backend '" + c.backend + "': use emu, gpu or auto");
  if (c.backend == "gpu" && !gpu::gpu_unavailable_reason().empty())
    throw std::invalid_argument("--backend gpu: no usable GPU (" + gpu::gpu_unavailable_reason() +
                                "); use --backend emu or auto");
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.out.empty()) throw std::invalid_argument("--out: give the directory for the runs");
  if (!(c.margin > 0) || !(c.loss_margin > 0) || !(c.alpha > 0 && c.alpha < 0.5))
    throw std::invalid_argument("margins must be > 0 and alpha in (0, 0.5)");
  for (const Side& side : study_sides(c, gpu::gpu_unavailable_reason())) {
    training::TrainConfig t = side.config;
    t.seed = 1;
    const training::Trainer check(t);  // throws for a setting it cannot run (or data it cannot load)
  }
}

namespace {

using Say = std::function<void(const std::string&)>;
// Each side's per-step records of seed 1 (the run with the recorders on), by side name.
using SeedOneSteps = std::map<std::string, std::vector<json>>;

struct Job {
  const Side* side;
  std::uint64_t seed;
};

// Seeds first..last of every side; seed 1 of each side (recorders on, the
// slowest) first, so that the two threads finish close together.
std::vector<Job> study_jobs(const std::vector<Side>& sides, std::uint64_t first, std::uint64_t last) {
  std::vector<Job> jobs;
  for (std::uint64_t s = first; s <= last; ++s)
    for (const Side& side : sides) jobs.push_back({&side, s});
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    return (a.seed == 1) > (b.seed == 1);
  });
  return jobs;
}

// Every job's run: its side's configuration with the job's seed, into its seed directory.
std::vector<training::QueuedRun> study_queue(const StudyConfig& c, const std::vector<Job>& jobs) {
  std::vector<training::QueuedRun> queue;
  for (const Job& job : jobs) {
    training::QueuedRun q{job.side->config, {}, {}};
    q.config.seed = job.seed;
    q.config.recorders = job.seed == 1;
    q.dir = training::seed_directory(c.out / job.side->name, job.seed);
    q.label = job.side->name + " seed " + std::to_string(job.seed) + (q.config.recorders ? " (recorders on)" : "");
    queue.push_back(std::move(q));
  }
  return queue;
}

// Trains every job (c.jobs at a time) into its seed directory and appends it to result.runs. The first
// round replaces a previous study's runs; later rounds add seeds beside the earlier rounds'.
void train_runs(const StudyConfig& c, const std::vector<Side>& sides, const std::vector<Job>& jobs,
                StudyResult& result, const Say& say, bool first_round) {
  const std::size_t before = result.runs.size();
  result.runs.resize(before + jobs.size());
  std::vector<training::QueuedRun> queue = study_queue(c, jobs);
  // A round killed before its runs finished resumes (run_queue's journal); otherwise a previous
  // study's runs are replaced (a stale seed directory would be ignored by ensemble.json anyway, but
  // would mislead a reader).
  const fs::path journal = c.out / "queue.json";
  const auto start = [&](bool resuming) {
    if (resuming) say("study: resuming the interrupted round in " + c.out.string());
    else if (first_round)
      for (const char* name : {"fp32-ref", "o2-emu", "o2-gpu"}) fs::remove_all(c.out / name);
  };
  say("study: " + std::to_string(jobs.size()) + " runs (" + std::to_string(sides.size()) + " sides x seeds " +
      std::to_string(jobs.front().seed) + "-" + std::to_string(jobs.back().seed) + ", " + std::to_string(c.steps) +
      " steps each), " + std::to_string(std::min(c.jobs, jobs.size())) + " at a time, into " + c.out.string());
  if (first_round && !result.gpu_reason.empty() && c.backend == "auto")
    say("study: no GPU side (" + result.gpu_reason + ")");
  const std::vector<training::FinishedRun> finished =
      training::run_queue(queue, c.jobs, [&](const std::string& line) { say("study: " + line); }, journal, start);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    StudyRun& run = result.runs[before + i];
    run.side = jobs[i].side->name;
    run.seed = jobs[i].seed;
    run.recorders = queue[i].config.recorders;
    run.wall_seconds = finished[i].wall_seconds;
    run.summary = finished[i].summary;
  }
}

// Each side an ensemble directory, as `train --seeds` writes it.
void write_ensemble_manifests(const StudyConfig& c, const std::vector<Side>& sides, std::size_t seeds_run) {
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= seeds_run; ++s) seeds.push_back(s);
  for (const Side& side : sides) training::write_ensemble_manifest(c.out / side.name, seeds);
}

// One accuracy gate and one loss gate per candidate side (k-th entry: sides[k + 1]).
struct StudyGates {
  std::vector<metrics::GateResult> accuracy, loss;
};

// The gate, on directories named relative to `out` (so the report does not
// depend on where the runs were written).
StudyGates evaluate_study_gates(const StudyConfig& c, const std::vector<Side>& sides, const Say& say) {
  say("study: parity gate");
  const auto read_side = [&](const std::string& name) { return metrics::read_named_ensemble(c.out, name, true); };
  const metrics::Ensemble baseline = read_side("fp32-ref");
  StudyGates gates;
  for (std::size_t k = 1; k < sides.size(); ++k) {
    const metrics::Ensemble candidate = read_side(sides[k].name);
    metrics::GateOptions acc;
    acc.metric = metrics::GateMetric::accuracy;
    acc.margin = c.margin;
    acc.alpha = c.alpha;
    metrics::GateOptions loss = acc;
    if (in_rounds(c)) acc.sequential = metrics::SequentialDesign{c.looks, c.spending};
    gates.accuracy.push_back(metrics::evaluate_gate(baseline, candidate, acc));
    loss.metric = metrics::GateMetric::loss;
    loss.margin = c.loss_margin;
    gates.loss.push_back(metrics::evaluate_gate(baseline, candidate, loss));
    say("study: " + metrics::gate_verdict_line(gates.accuracy.back()));
  }
  return gates;
}

SeedOneSteps read_seed_one_steps(const StudyConfig& c, const std::vector<Side>& sides) {
  SeedOneSteps steps;
  for (const Side& side : sides)
    steps[side.name] = record::read_steps(training::seed_directory(c.out / side.name, 1));
  return steps;
}

void write_loss_and_scale_figures(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps,
                                  std::vector<fs::path>& files) {
  LineChart loss{"Training loss per step (seed 1)", "step", "loss (softmax cross-entropy, mini-batch)", false, {}};
  for (const Side& side : sides) loss.series.push_back(series_of(side.title, step_values(steps.at(side.name), "loss")));
  write_output(figure_path(c.report, "loss"), svg_line_chart(loss), files);

  LineChart scale{"Loss scale per step (seed 1; torch GradScaler)", "step", "loss scale", true, {}};
  for (std::size_t k = 1; k < sides.size(); ++k)
    scale.series.push_back(series_of(sides[k].title, step_values(steps.at(sides[k].name), "scale")));
  write_output(figure_path(c.report, "scale"), svg_line_chart(scale), files);
}

void write_underflow_figure(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps,
                            std::vector<fs::path>& files) {
  LineChart underflow{"Gradients lost in fp16 at the step's scale (seed 1)", "step",
                      "fraction of non-zero gradients (log; 0 not drawn)", false, {}};
  underflow.log10_y = true;
  for (const Side& side : sides) {
    underflow.series.push_back(
        series_of(side.title + ": underflow to zero", step_values(steps.at(side.name), "underflow_rate")));
    underflow.series.push_back(
        series_of(side.title + ": subnormal", step_values(steps.at(side.name), "subnormal_rate"), true));
  }
  write_output(figure_path(c.report, "underflow"), svg_line_chart(underflow), files);
}

// The fp32 run writes fp32 weights; its recorder measures the updates
// against fp16 (the study format), where both of its rates are the same
// figure: what fp16 weights would lose.
void write_lost_updates_figure(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps,
                               std::vector<fs::path>& files) {
  LineChart lost{"Lost weight updates (w + u == w), seed 1", "step", "fraction of parameters (log; 0 not drawn)",
                 false, {}};
  lost.log10_y = true;
  lost.series.push_back(series_of("fp32 (ref): if its weights were fp16",
                                  step_values(steps.at("fp32-ref"), "lost_update_rate_without_master"), true));
  for (std::size_t k = 1; k < sides.size(); ++k) {
    lost.series.push_back(series_of(sides[k].title + ": fp32 master weights (what it does)",
                                    step_values(steps.at(sides[k].name), "lost_update_rate")));
    lost.series.push_back(series_of(sides[k].title + ": if the weights were fp16 (no master copy)",
                                    step_values(steps.at(sides[k].name), "lost_update_rate_without_master"), true));
  }
  write_output(figure_path(c.report, "lost-updates"), svg_line_chart(lost), files);
}

// Exponent histograms of the gradients at the first, middle and last step of each side.
void write_gradient_histograms(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps,
                               std::vector<fs::path>& files) {
  std::vector<std::size_t> hist_steps{0, c.steps / 2, c.steps - 1};
  hist_steps.erase(std::unique(hist_steps.begin(), hist_steps.end()), hist_steps.end());
  std::vector<HistogramSeries> panels;
  for (const Side& side : sides) {
    const std::vector<json> lines =
        record::read_json_lines(training::seed_directory(c.out / side.name, 1) / "histograms.jsonl");
    const std::vector<double> scales = step_values(steps.at(side.name), "scale");
    for (const std::size_t s : hist_steps) {
      if (s >= scales.size()) continue;
      panels.push_back({side.title + ", step " + std::to_string(s) + ", gradients x " + power_of_two_text(scales[s]),
                        step_histogram(lines, s, {"weight_grad", "activation_grad"})});
    }
  }
  const emu::FormatThresholds fp16 = emu::format_thresholds(formats::parse_format("fp16"));
  write_output(figure_path(c.report, "gradients"),
        svg_histogram("Every gradient value (weights and activations) times the loss scale, seed 1; fp16's limits",
                      panels,
                      {{"min subnormal 2^" + std::to_string(fp16.min_subnormal_exponent), fp16.min_subnormal_exponent},
                       {"min normal 2^" + std::to_string(fp16.min_normal_exponent), fp16.min_normal_exponent},
                       // 65504 = 2^16 - 2^5 sits at the top of its binade: the mark is that binade's
                       // right edge, where overflow starts (as analyze --plot draws it).
                       {"65504", fp16.max_finite_exponent + 1}}),
        files);
}

// Figures from seed 1 of each side (the runs with the recorders on).
void write_figures(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps,
                   std::vector<fs::path>& files) {
  write_loss_and_scale_figures(c, sides, steps, files);
  write_underflow_figure(c, sides, steps, files);
  write_lost_updates_figure(c, sides, steps, files);
  write_gradient_histograms(c, sides, steps, files);
}

// How the rounds went and why these defaults: the design, where it stopped, the spread it met.
std::string rounds_paragraph(const StudyConfig& c, const metrics::GateResult& main_gate, std::size_t seeds_run) {
  const metrics::SequentialDesign design{c.looks, c.spending};
  std::string md = "The study ran in rounds (the sequential gate, `mpverify gate --sequential`, "
                   "docs/parity-gate.md): " + metrics::design_text(design) + " of alpha " +
                   general(c.alpha) + ", so the chance of passing a recipe whose true difference lies on the margin "
                   "stays at most " + general(c.alpha) + " over all the looks together. It ran " +
                   std::to_string(seeds_run) + " seeds per side and stopped ";
  md += seeds_run == c.looks.back() ? std::string("at the last look, which always decides.")
                                    : "at the first look that decided.";
  md += "\n\n**Why these defaults for a first look.** The margin of ±" + general(c.margin) +
        " point of test accuracy is the smallest difference a user of this model would act on, and " +
        std::to_string(c.test_size) + " test images resolve it (accuracy moves in steps of " +
        general(100.0 / static_cast<double>(c.test_size)) + " points).";
  if (main_gate.test && main_gate.test->method == metrics::EquivalenceMethod::paired)
    md += " The per-seed differences of these runs spread with standard deviation " +
          fixed(main_gate.test->sd_difference, 2) + " points; the simulated calibration "
          "([gate-calibration.md](gate-calibration.md), \"In rounds\") gives, for spreads around that, how often "
          "this design passes a recipe with no true difference and how many seeds it takes on average against a "
          "fixed count with the same power.";
  md += " Each further seed costs one run per side without recorders (seconds on the CNN), so even the last look "
        "keeps the study within a few minutes on 2 cores, and the rounds stop as soon as the evidence suffices.\n\n";
  return md;
}

std::string verdict_section(const StudyConfig& c, const StudyGates& gates, std::size_t seeds_run) {
  const metrics::GateResult& main_gate = gates.accuracy.front();
  std::string md = "## Verdict\n\n";
  md += "```\n" + metrics::gate_verdict_line(main_gate) + "\n```\n\n";
  md += "The parity gate (`metrics/parity_gate.h`, the library call behind `mpverify gate`) on held-out test "
        "accuracy: margin ±" + general(c.margin) + " percentage points, alpha " + general(c.alpha) + ", method " +
        (main_gate.test ? std::string(metrics::to_string(main_gate.test->method)) : std::string("-")) +
        " (the same seeds on both sides). " + sentence(main_gate.reason) + "\n\n";
  if (in_rounds(c)) md += rounds_paragraph(c, main_gate, seeds_run);
  if (main_gate.verdict == metrics::Verdict::inconclusive)
    md += "**Inconclusive is an honest outcome here, not a failure of the job**: with " + std::to_string(seeds_run) +
          " seeds per side the interval is wide. Run `mpverify study` without `--seeds`: it trains in rounds "
          "until the gate decides.\n\n";
  md += gate_table_header(c.alpha);
  for (std::size_t k = 0; k < gates.accuracy.size(); ++k) md += gate_table_row(gates.accuracy[k]) + "\n" + gate_table_row(gates.loss[k]) + "\n";
  md += "\nThe loss row gates the mean training loss over the last 10% of the steps (margin ±" +
        general(c.loss_margin) + ", one TOST on every seed run); it is reported alongside, the accuracy row is the "
        "verdict. Reproduce either from the run directories: `mpverify gate --baseline OUT/fp32-ref --candidate "
        "OUT/o2-emu --metric accuracy --margin " + general(c.margin) +
        (in_rounds(c) ? " --sequential " + looks_list(c.looks) : std::string()) +
        "` (OUT is the study's `--out`, default `runs/study`).\n\n";
  return md;
}

std::string what_ran_section(const StudyConfig& c, const std::string& gpu_reason, std::size_t seeds_run) {
  std::string md = "## What ran\n\n";
  md += "- Model: the `cnn` (conv 8 → batch norm → ReLU → max-pool → conv 16 → batch norm → ReLU → max-pool → "
        "linear), on `" + c.data + "` (" + std::to_string(c.train_size) + " training images at most, test set " +
        std::to_string(c.test_size) + "), " + std::to_string(c.steps) + " steps of SGD (lr 0.05, momentum 0.9), "
        "batch 64.\n";
  md += "- Baseline **fp32 (ref)**: the `fp32` recipe on the Eigen FP32 reference backend.\n";
  md += "- Candidate **o2 (emu)**: the `o2` recipe (fp16 weights, activations and gradients; fp32 master weights, "
        "fp32 accumulation) with the `torch` loss scaler (GradScaler's defaults: initial scale 2^16, halved on an "
        "overflow, doubled after 2000 clean steps) on the bit-exact fp16 emulator.\n";
  if (gpu_reason.empty()) {
    md += "- Candidate **o2 (gpu)**: the same recipe on the CUDA backend (cuBLAS, cuDNN, CUDA kernels).\n";
  } else {
    md += "- **No GPU was present** (" + gpu_reason + "): the GPU side (o2 on the CUDA backend) was not run. "
          "On a machine with a usable GPU the study adds it automatically.\n";
  }
  md += "- Seeds 1–" + std::to_string(seeds_run) + " on every side (paired: the same initial weights and batches). "
        "Seed 1 ran with every recorder on (per-step rates, exponent histograms: the figures below); " +
        (seeds_run == 2 ? std::string("seed 2") : "seeds 2–" + std::to_string(seeds_run)) + " ran with `--no-recorders` to fit the time budget (the recorders only observe; "
        "they change no number the training computes).\n";
  md += "- Why these sizes: an o2 CNN step on the emulator costs about 0.4 s with the recorders on and a fp32 step "
        "on the reference about 0.1 s on one core, so " + std::to_string(seeds_run) + " seeds × " +
        std::to_string(c.steps) + " steps per side, two runs at a time, keep the whole job within a few minutes "
        "on 2 cores.\n\n";
  return md;
}

const StudyRun& run_of(const StudyResult& result, const std::string& side, std::uint64_t seed) {
  for (const StudyRun& r : result.runs)
    if (r.side == side && r.seed == seed) return r;
  throw std::logic_error("study: run missing");
}

// Held-out test accuracy in percent; none when the run diverged.
std::optional<double> accuracy_of(const StudyRun& r) {
  const json& a = r.summary["evaluation"]["test_accuracy"];
  if (!a.is_number()) return std::nullopt;
  return 100.0 * a.get<double>();
}

// One row per seed: each side's accuracy, each candidate's difference to fp32, its skipped steps and final scale.
std::string runs_section(const std::vector<Side>& sides, const StudyResult& result) {
  std::string md = "## Runs\n\n| seed |";
  for (const Side& side : sides) md += " " + side.title + " test accuracy (%) |";
  for (std::size_t k = 1; k < sides.size(); ++k) md += " " + sides[k].title + " − fp32 (points) |";
  for (std::size_t k = 1; k < sides.size(); ++k) md += " " + sides[k].title + " skipped steps, final scale |";
  md += "\n|---|";
  for (std::size_t k = 0; k < sides.size() + 2 * (sides.size() - 1); ++k) md += "---:|";
  md += "\n";
  for (std::uint64_t s = 1; s <= result.seeds_run; ++s) {
    md += "| " + std::to_string(s) + " |";
    for (const Side& side : sides) {
      const auto a = accuracy_of(run_of(result, side.name, s));
      add_cell(md, a ? fixed(*a, 2) : std::string("diverged"));
    }
    const auto base = accuracy_of(run_of(result, "fp32-ref", s));
    for (std::size_t k = 1; k < sides.size(); ++k) {
      const auto a = accuracy_of(run_of(result, sides[k].name, s));
      add_cell(md, a && base ? fixed(*a - *base, 2) : std::string("-"));
    }
    for (std::size_t k = 1; k < sides.size(); ++k) {
      const StudyRun& r = run_of(result, sides[k].name, s);
      std::string cell = r.summary["skipped_steps"].dump();
      cell += ", ";
      cell += power_of_two_text(r.summary["final_scale"].get<double>());
      add_cell(md, cell);
    }
    md += "\n";
  }
  return md;
}

std::string loss_and_scale_section(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps) {
  std::string md = "\n## Loss and loss scale\n\n";
  md += "![Training loss per step](" + figure_path(c.report, "loss").filename().string() + ")\n\n";
  md += "![Loss scale per step](" + figure_path(c.report, "scale").filename().string() + ")\n\n";
  for (std::size_t k = 1; k < sides.size(); ++k) {
    const std::vector<json>& side_steps = steps.at(sides[k].name);
    const std::vector<double> sc = step_values(side_steps, "scale");
    const auto skipped = std::count_if(side_steps.begin(), side_steps.end(),
                                       [](const json& s) { return s.value("skipped", false); });
    md += "- " + sides[k].title + ", seed 1: " + std::to_string(skipped) + " skipped step(s) (an inf or NaN in a "
          "gradient at the scale), scale " + power_of_two_text(sc.front()) + " at step 0 and " + power_of_two_text(sc.back()) +
          " at the last step.\n";
  }
  return md;
}

std::string underflow_section(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps) {
  std::string md = "\n## Gradient underflow\n\n";
  md += "![Gradient exponent histograms](" + figure_path(c.report, "gradients").filename().string() + ")\n\n";
  md += "Every gradient value of the step (weight gradients and activation gradients, as the ops produced them, "
        "before rounding), multiplied by the step's loss scale, binned by binade; the dashed lines are fp16's "
        "smallest subnormal, smallest normal and largest finite value. Left of the first line a value becomes "
        "zero in fp16, between the first two it keeps fewer bits (subnormal). The fp32 run uses no scale: its "
        "panels show what fp16 storage would do to its gradients without loss scaling.\n\n";
  md += "![Underflow rates per step](" + figure_path(c.report, "underflow").filename().string() + ")\n\n";
  md += "| run (seed 1) | mean underflow-to-zero rate | mean subnormal rate | mean overflow rate |\n|---|---:|---:|---:|\n";
  for (const Side& side : sides)
    md += "| " + side.title + " | " + general(finite_mean(step_values(steps.at(side.name), "underflow_rate"))) + " | " +
          general(finite_mean(step_values(steps.at(side.name), "subnormal_rate"))) + " | " +
          general(finite_mean(step_values(steps.at(side.name), "overflow_rate"))) + " |\n";
  md += "\nRates are fractions of the non-zero gradient values of the step, measured against fp16 at the step's "
        "scale (for the fp32 run: at scale 1, what fp16 would lose).\n\n";
  return md;
}

std::string lost_updates_section(const StudyConfig& c, const std::vector<Side>& sides, const SeedOneSteps& steps) {
  std::string md = "## Lost updates\n\n";
  md += "![Lost-update rates per step](" + figure_path(c.report, "lost-updates").filename().string() + ")\n\n";
  md += "A lost update: the optimizer's update u is non-zero but w + u rounds back to w. With fp32 master weights "
        "(o2) few are lost; the dashed lines show the rate if the weights were kept in fp16 (no master copy), the "
        "swamping that master weights exist to avoid. The fp32 run keeps fp32 weights; its recorder measures its "
        "updates against fp16 (`--study-format`), so its line says what fp16 weights would lose.\n\n";
  md += "| run (seed 1) | mean lost-update rate, as run | mean lost-update rate, if the weights were fp16 |\n"
        "|---|---:|---:|\n";
  for (const Side& side : sides) {
    md += "| " + side.title + " | ";
    md += side.name == "fp32-ref" ? std::string("- (fp32 weights)")
                                  : general(finite_mean(step_values(steps.at(side.name), "lost_update_rate")));
    md += " | " + general(finite_mean(step_values(steps.at(side.name), "lost_update_rate_without_master"))) + " |\n";
  }
  return md;
}

std::string study_markdown(const StudyConfig& c, const std::vector<Side>& sides, const StudyResult& result,
                           const StudyGates& gates, const SeedOneSteps& steps) {
  std::string md = "# The default study: FP32 against o2 mixed precision on the MNIST CNN\n\n";
  md += "Written by `mpverify study` (the first command of the README, `./run-main`). Every number and figure "
        "below comes from the run directories it trained; the same seeds give the same report, byte for byte.\n\n";
  md += verdict_section(c, gates, result.seeds_run);
  md += what_ran_section(c, result.gpu_reason, result.seeds_run);
  md += runs_section(sides, result);
  md += loss_and_scale_section(c, sides, steps);
  md += underflow_section(c, sides, steps);
  md += lost_updates_section(c, sides, steps);
  return md;
}

// --json: the main verdict, every gate, the runs (with wall times) and the files written.
nlohmann::ordered_json study_json(const StudyConfig& c, const StudyResult& result, const StudyGates& gates) {
  const metrics::GateResult& main_gate = gates.accuracy.front();
  json runs = json::array();
  for (const StudyRun& r : result.runs)
    runs.push_back({{"side", r.side}, {"seed", r.seed}, {"recorders", r.recorders},
                    {"wall_seconds", r.wall_seconds},
                    {"test_accuracy", r.summary["evaluation"]["test_accuracy"]},
                    {"skipped_steps", r.summary["skipped_steps"]}, {"final_scale", r.summary["final_scale"]}});
  nlohmann::ordered_json j;
  j["verdict"] = metrics::to_string(main_gate.verdict);
  j["exit_code"] = metrics::gate_exit_code(main_gate.verdict);
  j["line"] = metrics::gate_verdict_line(main_gate);
  j["seeds_run"] = result.seeds_run;
  j["looks"] = in_rounds(c) ? json(c.looks) : json(nullptr);
  j["spending"] = in_rounds(c) ? json(metrics::to_string(c.spending)) : json(nullptr);
  nlohmann::ordered_json gate_list = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < gates.accuracy.size(); ++k) {
    gate_list.push_back(metrics::gate_json(gates.accuracy[k]));
    gate_list.push_back(metrics::gate_json(gates.loss[k]));
  }
  j["gates"] = gate_list;
  j["gpu"] = result.gpu_reason.empty() ? json("ran") : json(result.gpu_reason);
  j["runs"] = runs;
  j["files"] = result.files;
  return j;
}

// Every look's seeds (or --seeds at once), the gates after each, until the accuracy gate of every
// candidate decides (the last look always does); result.seeds_run says how far it went.
StudyGates train_and_gate(const StudyConfig& c, const std::vector<Side>& sides, StudyResult& result, const Say& say) {
  const std::vector<std::size_t> looks = in_rounds(c) ? c.looks : std::vector<std::size_t>{c.seeds};
  for (std::size_t k = 0; k < looks.size(); ++k) {
    if (in_rounds(c))
      say("study: look " + std::to_string(k + 1) + " of " + std::to_string(looks.size()) + ": seeds 1-" +
          std::to_string(looks[k]) + " on every side");
    train_runs(c, sides, study_jobs(sides, result.seeds_run + 1, looks[k]), result, say, k == 0);
    result.seeds_run = looks[k];
    write_ensemble_manifests(c, sides, result.seeds_run);
    StudyGates gates = evaluate_study_gates(c, sides, say);
    const bool decided = std::none_of(gates.accuracy.begin(), gates.accuracy.end(), [](const metrics::GateResult& g) {
      return g.verdict == metrics::Verdict::inconclusive;
    });
    if (decided || k + 1 == looks.size()) return gates;
  }
  throw std::logic_error("study: no look");
}

}  // namespace

StudyResult run_study(const StudyConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_study(c);
  StudyResult result;
  result.gpu_reason = gpu::gpu_unavailable_reason();
  const std::vector<Side> sides = study_sides(c, result.gpu_reason);
  const Say say = [&](const std::string& line) {
    if (progress) progress(line);
  };

  const StudyGates gates = train_and_gate(c, sides, result, say);

  say("study: figures and report");
  const SeedOneSteps steps = read_seed_one_steps(c, sides);
  const fs::path report_dir = c.report.parent_path().empty() ? fs::path(".") : c.report.parent_path();
  fs::create_directories(report_dir);
  write_figures(c, sides, steps, result.files);
  write_output(c.report, study_markdown(c, sides, result, gates, steps), result.files);
  std::vector<std::string> left_out;  // figures of other reports in the folder that the page refused
  write_output(report_dir / "index.html",
               html_page("mpverify reports", report_files(report_dir, {c.report.filename().string()}), &left_out),
               result.files);
  for (const std::string& line : left_out) say("study: warning: " + line);

  result.json = study_json(c, result, gates);
  return result;
}

}  // namespace mpverify::report
