#include "scalers_report.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "record/run_log.h"
#include "report/output_files.h"
#include "report/run_series.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "scalers_analysis.h"
#include "training/loss_scaler.h"
#include "training/scaler_replay.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;
using report::add_cell;
using report::fixed;
using report::general;
using report::power_of_two_text;

namespace {

// The FP8 amax replay reads this recorded tensor: the loss gradient, the
// backward (E5M2) operand of fc2's two gradient GEMMs.
constexpr const char* kAmaxLayer = "loss";
constexpr const char* kAmaxTensor = "dlogits";
// ... of the run that trains every step (the non-saturating delayed run skips most).
constexpr const char* kAmaxSide = "fp8-delayed";

struct Runs {
  const std::vector<ScalersRun>& all;
  const ScalersRun* find(const std::string& scenario, const std::string& side, std::uint64_t seed) const {
    for (const ScalersRun& r : all)
      if (r.scenario == scenario && r.side == side && r.seed == seed) return &r;
    return nullptr;
  }
  std::vector<const ScalersRun*> seeds_of(const std::string& scenario, const std::string& side) const {
    std::vector<const ScalersRun*> v;
    for (const ScalersRun& r : all)
      if (r.scenario == scenario && r.side == side) v.push_back(&r);
    std::sort(v.begin(), v.end(), [](const ScalersRun* a, const ScalersRun* b) { return a->seed < b->seed; });
    return v;
  }
};

std::optional<double> accuracy_of(const ScalersRun& r) {
  const json& a = r.summary["evaluation"]["test_accuracy"];
  if (!a.is_number()) return std::nullopt;
  return a.get<double>();
}

const StrategySpec& spec_of(const std::vector<StrategySpec>& specs, const std::string& side) {
  for (const StrategySpec& s : specs)
    if (s.side == side) return s;
  throw std::logic_error("scalers report: no strategy " + side);
}

double floor_of(const StrategySpec& s) { return training::make_scaler(s.scaler, s.options)->floor(); }

TrajectoryStats stats_of(const ScalersRun& r, const StrategySpec& s) {
  return trajectory_stats(r.steps, r.summary["final_scale"].get<double>(), floor_of(s));
}

std::string seeds_text(std::size_t n) { return n == 1 ? std::string("seed 1") : "seeds 1–" + std::to_string(n); }

bool constant(const StrategySpec& s) { return s.scaler == "none" || s.scaler == "static"; }

std::string scale_text(double v) {
  if (v == 0) return "0";
  return power_of_two_text(v);
}

std::string origins_text(const std::map<std::string, std::size_t>& origins) {
  if (origins.empty()) return "none";
  std::string text;
  for (const auto& [where, n] : origins) {
    if (!text.empty()) text += "; ";
    text += "`" + where + "`: " + std::to_string(n);
  }
  return text;
}

std::string gap_text(const std::optional<PairedGap>& g) {
  if (!g) return "- (a run diverged)";
  std::string t = fixed(g->mean, 2);
  if (g->lower) t += " [" + fixed(*g->lower, 2) + ", " + fixed(*g->upper, 2) + "]";
  return t;
}

std::string link(const fs::path& report, const std::string& what, const std::string& alt) {
  return "![" + alt + "](" + report::figure_path(report, what).filename().string() + ")\n\n";
}

report::LineSeries cumulative_skips(const std::string& label, const std::vector<json>& steps) {
  std::vector<double> v;
  double n = 0;
  for (const json& s : steps) {
    n += s["skipped"].get<bool>() ? 1 : 0;
    v.push_back(n);
  }
  return report::series_of(label, v);
}

// What a strategy's seeds did: their skipped steps ("3, 0, 1"), each test
// accuracy (none where the run diverged), and the sum and count of those
// that exist.
struct SeedOutcomes {
  std::string skipped;
  std::vector<std::optional<double>> accuracy;
  double sum = 0;
  std::size_t finite = 0;
};

SeedOutcomes outcomes_of(const std::vector<const ScalersRun*>& seeds) {
  SeedOutcomes o;
  for (const ScalersRun* r : seeds) {
    if (!o.skipped.empty()) o.skipped += ", ";
    o.skipped += r->summary["skipped_steps"].dump();
    o.accuracy.push_back(accuracy_of(*r));
    if (o.accuracy.back()) {
      o.sum += *o.accuracy.back();
      ++o.finite;
    }
  }
  return o;
}

// The per-strategy table of the normal and backward-overflow scenarios.
std::string strategy_table(const Runs& runs, const std::string& scenario, const std::vector<StrategySpec>& strategies,
                           bool with_origins) {
  std::string md =
      "| strategy | skipped steps (per seed) | lowest scale (seed 1), share of steps at it | steps at the floor "
      "(seed 1) | final scale (seed 1) | test accuracy % (mean) | − fp32, points [90% CI] | gradient underflow rate "
      "(seed 1) |";
  if (with_origins) md += " first applied update (seed 1) | first non-finite value of a step (seed 1): steps |";
  md += "\n|---|---:|---:|---:|---:|---:|---:|---:|";
  if (with_origins) md += "---:|---|";
  md += "\n";
  std::vector<std::optional<double>> base;
  for (const ScalersRun* r : runs.seeds_of(scenario, "fp32")) base.push_back(accuracy_of(*r));
  for (const StrategySpec& s : strategies) {
    const std::vector<const ScalersRun*> seeds = runs.seeds_of(scenario, s.side);
    if (seeds.empty()) continue;
    std::string row = "| " + s.title + " |";
    const SeedOutcomes o = outcomes_of(seeds);
    add_cell(row, o.skipped);
    const ScalersRun& first = *seeds.front();
    const TrajectoryStats t = stats_of(first, s);
    add_cell(row, scale_text(t.lowest_scale) + ", " + report::percent(static_cast<double>(t.steps_at_lowest) /
                                                                      static_cast<double>(t.steps)) + "%");
    add_cell(row, constant(s)  ? std::string("constant")
                  : t.floor > 0 ? std::to_string(t.steps_at_floor) + " (floor " + scale_text(t.floor) + ")"
                                : std::string("no floor"));
    add_cell(row, scale_text(t.final_scale));
    const std::size_t n = o.finite;
    const std::string mean = n == 0 ? std::string("diverged") : fixed(100.0 * o.sum / static_cast<double>(n), 2);
    add_cell(row, n == 0 || n == o.accuracy.size()
                      ? mean
                      : mean + " (" + std::to_string(o.accuracy.size() - n) + " diverged)");
    add_cell(row, s.side == "fp32" ? std::string("-") : gap_text(paired_gap(base, o.accuracy)));
    add_cell(row, general(report::finite_mean(report::step_values(first.steps, "underflow_rate"))));
    if (with_origins) {
      add_cell(row, t.first_clean ? "step " + std::to_string(*t.first_clean) : std::string("none"));
      add_cell(row, origins_text(nonfinite_origins(first.steps)));
    }
    md += row + "\n";
  }
  return md;
}

// The line charts cycle through 7 colours: with 8 strategies megatron shares
// none's, and apex's line lies on torch's wherever they agree, so those
// (and torch at its defaults) are dashed.
bool dashed_side(const std::string& side) { return side == "torch-defaults" || side == "apex" || side == "megatron"; }

report::LineChart scale_chart(const Runs& runs, const std::string& scenario, const std::vector<StrategySpec>& strategies,
                              const std::string& title) {
  report::LineChart chart{title, "step", "loss scale the step ran with", true, {}};
  for (const StrategySpec& s : strategies)
    if (const ScalersRun* r = runs.find(scenario, s.side, 1))
      chart.series.push_back(report::series_of(s.title, report::step_values(r->steps, "scale"), dashed_side(s.side)));
  return chart;
}

}  // namespace

namespace {

// The sides of the report's tables and figures.
struct Strategies {
  std::vector<StrategySpec> fp16, fp8;
  std::vector<ScenarioSpec> scenes;     // normal, backward, forward
  std::vector<StrategySpec> with_fp32;  // the fp32 baseline, then fp16
  std::vector<StrategySpec> every;      // with_fp32, then fp8
};

Strategies strategies_of(const ScalersConfig& c) {
  Strategies strategies;
  strategies.fp16 = fp16_strategies(c);
  strategies.fp8 = fp8_strategies();
  strategies.scenes = scenarios(c);
  const StrategySpec fp32{"fp32", "fp32 (ref)", "fp32", "none", {}};
  strategies.with_fp32 = {fp32};
  strategies.with_fp32.insert(strategies.with_fp32.end(), strategies.fp16.begin(), strategies.fp16.end());
  strategies.every = strategies.with_fp32;
  strategies.every.insert(strategies.every.end(), strategies.fp8.begin(), strategies.fp8.end());
  return strategies;
}

// The self-consistency of the replay: every run, its own trace.
struct OwnReplays {
  std::map<std::string, std::pair<std::size_t, std::size_t>> agree_by_side;  // side -> (agreeing, runs)
  std::vector<std::string> disagreements;
};

OwnReplays replay_own_traces(const std::vector<ScalersRun>& all, const Strategies& strategies, ScalersReport& out) {
  const std::vector<StrategySpec>& every = strategies.every;
  OwnReplays own;
  auto& agree_by_side = own.agree_by_side;
  std::vector<std::string>& disagreements = own.disagreements;
  out.replay_checks = nlohmann::ordered_json::array();
  out.replays_agree = true;
  for (const ScalersRun& r : all) {
    const StrategySpec* spec = nullptr;
    for (const StrategySpec& s : every)
      if (s.side == r.side) spec = &s;
    if (!spec) throw std::logic_error("scalers report: unknown side " + r.side);
    const ReplayCheck check = check_replay(spec->scaler, spec->options, r.steps, r.summary["final_scale"].get<double>());
    out.replays_agree = out.replays_agree && check.agrees;
    auto& [ok, n] = agree_by_side[r.side];
    ok += check.agrees ? 1 : 0;
    ++n;
    if (!check.agrees)
      disagreements.push_back(r.scenario + "/" + r.side + " seed " + std::to_string(r.seed) + ": " +
                              check.first_difference);
    out.replay_checks.push_back({{"scenario", r.scenario}, {"side", r.side}, {"seed", r.seed},
                                 {"agrees", check.agrees}, {"steps_compared", check.steps_compared},
                                 {"first_difference", check.first_difference}});
  }
  return own;
}

// --- Figures -------------------------------------------------------------------

void draw_normal_figures(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::vector<fs::path>& files) {
  const std::vector<StrategySpec>& fp16 = strategies.fp16;
  const std::vector<StrategySpec>& fp8 = strategies.fp8;
  const std::vector<StrategySpec>& with_fp32 = strategies.with_fp32;
  report::write_output(report::figure_path(c.report, "normal-scale"),
                       report::svg_line_chart(scale_chart(runs, "normal", fp16,
                                                          "Loss scale per step, normal model (o2, seed 1)")),
                       files);
  {
    report::LineChart acc{"Test accuracy during training, normal model (seed 1)", "steps done", "test accuracy", false,
                          {}};
    std::vector<StrategySpec> sides = with_fp32;
    sides.insert(sides.end(), fp8.begin(), fp8.end());
    for (const StrategySpec& s : sides) {
      const ScalersRun* r = runs.find("normal", s.side, 1);
      if (!r) continue;
      report::LineSeries series{s.title, {}, acc.series.size() >= 7};  // past the 7 colours
      for (const json& line : r->steps)
        if (line.contains("evaluation") && line["evaluation"]["test_accuracy"].is_number())
          series.points.emplace_back(line["step"].get<double>() + 1, line["evaluation"]["test_accuracy"].get<double>());
      acc.series.push_back(std::move(series));
    }
    report::write_output(report::figure_path(c.report, "normal-accuracy"), report::svg_line_chart(acc), files);
  }
}

void draw_overflow_figures(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::vector<fs::path>& files) {
  const std::vector<StrategySpec>& fp16 = strategies.fp16;
  report::write_output(report::figure_path(c.report, "backward-scale"),
                       report::svg_line_chart(scale_chart(runs, "backward", fp16,
                                                          "Loss scale per step, backward-overflow model (seed 1)")),
                       files);
  {
    report::LineChart skips{"Skipped steps so far, backward-overflow model (seed 1)", "step",
                            "skipped steps (cumulative)", false, {}};
    for (const StrategySpec& s : fp16)
      if (const ScalersRun* r = runs.find("backward", s.side, 1)) {
        skips.series.push_back(cumulative_skips(s.title, r->steps));
        skips.series.back().dashed = dashed_side(s.side);
      }
    report::write_output(report::figure_path(c.report, "backward-skipped"), report::svg_line_chart(skips), files);
  }
  report::write_output(report::figure_path(c.report, "forward-scale"),
                       report::svg_line_chart(scale_chart(runs, "forward", fp16,
                                                          "Loss scale per step, forward-overflow model (seed 1)")),
                       files);
}

// The cross-strategy replay of one recorded trace: the backward torch run's found_inf flags.
struct CrossReplay {
  std::vector<training::TraceStep> trace;
  std::size_t trace_infs = 0;
  std::vector<std::pair<const StrategySpec*, training::Replay>> replays;
};

CrossReplay replay_backward_trace(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::vector<fs::path>& files) {
  const std::vector<StrategySpec>& fp16 = strategies.fp16;
  CrossReplay cross;
  const ScalersRun* source = runs.find("backward", "torch", 1);
  if (!source) throw std::logic_error("scalers report: the backward torch run is missing");
  cross.trace = found_inf_trace(source->steps);
  for (const training::TraceStep& t : cross.trace) cross.trace_infs += t.value == 1 ? 1 : 0;
  report::LineChart replay_chart{"Every strategy fed the found_inf flags of the backward-overflow torch run (seed 1)",
                                 "step", "loss scale the step would run with", true, {}};
  for (const StrategySpec& s : fp16) {
    auto scaler = training::make_scaler(s.scaler, s.options);
    training::Replay r = training::replay(*scaler, cross.trace, s.scaler);
    std::vector<double> scales;
    for (const training::ReplayStep& step : r.steps) scales.push_back(step.scale);
    replay_chart.series.push_back(report::series_of(s.title, scales, dashed_side(s.side)));
    cross.replays.emplace_back(&s, std::move(r));
  }
  report::write_output(report::figure_path(c.report, "replay"), report::svg_line_chart(replay_chart), files);
  return cross;
}

// The FP8 amax replay: the loss gradient's recorded amax through each FP8 scaling rule.
struct AmaxReplay {
  std::vector<double> amax;
  bool have_amax = false;
  std::string amax_table;
};

AmaxReplay replay_amax(const ScalersConfig& c, const Runs& runs, std::vector<fs::path>& files) {
  AmaxReplay replay;
  std::vector<double>& amax = replay.amax;
  bool& have_amax = replay.have_amax;
  std::string& amax_table = replay.amax_table;
  if (const ScalersRun* r = runs.find("normal", kAmaxSide, 1)) {
    for (const json& line : record::read_json_lines(r->dir / "tensors.jsonl"))
      if (line.value("layer", "") == kAmaxLayer && line.value("tensor", "") == kAmaxTensor)
        amax.push_back(line["max_abs"].get<double>());
    have_amax = !amax.empty();
  }
  struct AmaxSide {
    std::string title, scaler;
    training::ScalerOptions options;
    bool decodes = false;  // mxfp8's X decodes: its encoding scale is 1 / X
  };
  const std::vector<AmaxSide> amax_sides{
      {"delayed (TE default: history 1024, max)", "delayed", {{"fp8", "e5m2"}}},
      {"delayed (Megatron: history 1, most_recent)", "delayed", {{"fp8", "e5m2"}, {"history", "1"}, {"algo", "most_recent"}}},
      {"current", "current", {{"fp8", "e5m2"}}},
      {"current, power of two", "current", {{"fp8", "e5m2"}, {"pow2", "true"}}},
      {"mxfp8 (one block's amax; 1 / X)", "mxfp8", {{"fp8", "e5m2"}}, true},
  };
  if (have_amax) {
    std::vector<training::TraceStep> amax_trace;
    for (std::size_t k = 0; k < amax.size(); ++k) amax_trace.push_back({static_cast<int>(k) + 1, amax[k]});
    report::LineChart fp8_chart{"FP8 scales for the recorded amax of the loss gradient (E5M2; saturating fp8 delayed run, seed 1)",
                                "step", "encoding scale (element = x · scale)", true, {}};
    amax_table = "| strategy | scale at step 0 | scale at the last step | lowest | highest | steps where amax · scale "
                 "overflows E5M2 (≥ 61440: rounds past 57344) |\n|---|---:|---:|---:|---:|---:|\n";
    for (const AmaxSide& a : amax_sides) {
      auto scaler = training::make_scaler(a.scaler, a.options);
      const training::Replay r = training::replay(*scaler, amax_trace, a.scaler);
      std::vector<double> enc;
      std::size_t over = 0;
      for (std::size_t k = 0; k < r.steps.size(); ++k) {
        // An all-zero block's X (2^-127) encodes nothing: not drawn, not counted.
        enc.push_back(!a.decodes ? r.steps[k].scale : amax[k] > 0 ? 1.0 / r.steps[k].scale : std::nan(""));
        // fl32(amax · scale) is the largest operand x_s = fl32(x · s) (nn/operand_scaling.h). It
        // overflows E5M2 when it rounds past 57344: at or above 57344 + half an E5M2 ulp (2^13 / 2)
        // = 61440 (a tie goes to the even 65536). Below that it rounds to 57344 and fits, which
        // covers current scaling's fl32(57344 / amax) rounded up by an fp32 ulp.
        over += static_cast<float>(amax[k]) * static_cast<float>(enc.back()) >= 61440.0f ? 1 : 0;
      }
      fp8_chart.series.push_back(report::series_of(a.title, enc));
      double lo = INFINITY, hi = -INFINITY;
      for (double v : enc)
        if (std::isfinite(v)) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      amax_table += "| " + a.title + " | " + general(enc.front()) + " | " + general(enc.back()) + " | " +
                    general(lo) + " | " + general(hi) + " | " + std::to_string(over) + " |\n";
    }
    report::write_output(report::figure_path(c.report, "fp8-scales"), report::svg_line_chart(fp8_chart), files);
  }
  return replay;
}

// --- The report's sections -------------------------------------------------------

void what_ran_section(const ScalersConfig& c, const Strategies& strategies, std::string& md) {
  const ScenarioSpec& normal = strategies.scenes[0];
  const ScenarioSpec& backward = strategies.scenes[1];
  const ScenarioSpec& forward = strategies.scenes[2];
  md += "## What ran\n\n";
  md += "- Model: the `" + c.model + "` (784 → 128 → ReLU → 10, no normalization) on `" + c.data + "` (" +
        std::to_string(c.train_size) + " training images at most, test set " + std::to_string(c.test_size) +
        "), SGD with momentum 0.9, batch 64, lr " + general(kLearningRate) + " on the normal model. The MLP, not "
        "the CNN: the CNN's batch norm divides an input scale back out, so its gradients cannot be driven to "
        "overflow by scaling the images, and an MLP step costs a fraction of a CNN step, which lets every "
        "strategy train on several seeds within the budget.\n";
  md += "- Every fp16 strategy under the `o2` recipe (fp16 weights, activations and gradients; fp32 master "
        "weights) on the bit-exact fp16 emulator: `none` (scale 1), `static` (S = " + scale_text(c.static_scale) +
        ", MXNet's example), both applying a non-finite step as PyTorch without a GradScaler and Apex's static "
        "scaler do (their non-finite update reaches the weights; `skip=true` would skip it, as DeepSpeed's and "
        "Megatron's constant scalers do), "
        "`torch` (GradScaler), `apex`, `keras` (Keras 3), `deepspeed` (its documented config: 2^16, hysteresis 2, "
        "min 1, raise at the minimum) and `megatron` (2^32, hysteresis 2, min 1), each with the frameworks' "
        "initial scales. Their growth intervals (1000–2000 steps) would never be reached in " +
        std::to_string(c.steps) + " steps, so they run with the interval shortened to **" +
        std::to_string(c.growth_interval) + " steps**; `torch (defaults)` keeps interval 2000. The exact rules "
        "are in `src/training/loss_scaler.h`.\n";
  md += "- Baseline: the `fp32` recipe on the Eigen FP32 reference backend, the same seeds (paired: the same "
        "initial weights and batches).\n";
  md += "- Scenarios: **" + normal.title + "** (" + std::to_string(normal.steps) + " steps, " +
        seeds_text(normal.seeds) + "); **" + backward.title + "** (" + std::to_string(backward.steps) + " steps, " +
        seeds_text(backward.seeds) + "); **" + forward.title + "** (" + std::to_string(forward.steps) +
        " steps, seed 1). The images are multiplied in fp32 as they enter the model (`TrainConfig::input_scale`; "
        "training batches and test set alike). The MLP is positively homogeneous in its input (biases aside), so "
        "fc1's output, the logits and every weight gradient grow about linearly with the factor: × " +
        scale_text(c.backward_input_scale) + " keeps the forward pass inside fp16 while the gradients overflow at "
        "the usual scales; × " + scale_text(c.forward_input_scale) + " puts the input itself and fc1's output "
        "beyond fp16's largest finite value 65504 (a pixel of 0.5 becomes 65536), so the forward pass is not "
        "finite. A scaled model trains with lr / factor (" + general(backward.lr) + " and " +
        general(forward.lr) + "): its weight gradients are that many times larger, and lr / factor changes each "
        "weight by the same fraction per step as on the normal model; with lr " + general(kLearningRate) +
        " (a trial with the images × 2^10, not part of this report) the first update blew the model up and every "
        "later step overflowed in the forward pass.\n";
  if (c.fp8)
    md += "- FP8: the `fp8` recipe (OCP E4M3 forward; backward, an E5M2 gradient times an E4M3 weight or "
          "activation, Transformer Engine's HYBRID; saturating casts; bf16 elsewhere, fp32 master weights; no "
          "loss scaling, as Transformer Engine trains) with operand scaling `delayed` (TE's DelayedScaling, "
          "history 1024, max), `current` (per tensor, just in time) and `none`, on the normal model, the same "
          "seeds. Earlier versions of this report ran an IEEE-like E4M3 with infinities and a largest value of "
          "240 (not a format any GPU has), E5M2 for both operands of the backward GEMMs, and non-saturating "
          "casts unless asked.\n";
  md += "- Changed in this version: `none` and `static` apply a non-finite step, as PyTorch without a GradScaler "
        "does (earlier versions skipped it, as only a scaler that checks for overflow does): on the backward-overflow model static 2^7 "
        "skipped 134 of 200 steps on seed 1 and kept training, and now takes the non-finite update and diverges; "
        "the fp8 run without saturation (scaler `none`) skipped 42, 44 and 39 steps and reached 90.20%, and now "
        "diverges, as the same run would in PyTorch. Transformer Engine's delayed scaling follows its bulk kernel "
        "(an amax of 0 neither enters the history nor changes the scale); the saturating fp8 runs' numbers are the "
        "same as before. DeepSpeed's ZeRO scaler follows DeepSpeed 0.17.1 and later: it grows once stable = "
        "iteration - last overflow - 1 is a positive multiple of the interval, one iteration later than the rule "
        "of 0.17.0 and older that earlier versions of this report ran (`deepspeed.version=0.17.0` keeps it); its "
        "skipped steps are the same, its mean test accuracy moved from 91.23% to 91.15% on the normal model and "
        "from 70.58% to 70.45% on the backward-overflow model.\n";
  md += "- Seed 1 of every side ran with the recorders on (underflow rates" + std::string(c.fp8 ? ", the FP8 amax trace" : "") +
        ") and evaluated the test set every " + std::to_string(c.eval_every) + " steps; the other seeds ran with "
        "the recorders off (they only observe: nothing the training computes changes).\n";
  md += "- Options: `--seeds " + std::to_string(c.seeds) + " --overflow-seeds " + std::to_string(c.overflow_seeds) +
        " --steps " + std::to_string(c.steps) + " --forward-steps " + std::to_string(c.forward_steps) +
        " --growth-interval " + std::to_string(c.growth_interval) + " --static-scale " + general(c.static_scale) +
        " --backward-input-scale " + general(c.backward_input_scale) + " --forward-input-scale " +
        general(c.forward_input_scale) + "`.\n\n";

  md += "Reading the tables: *skipped steps* are steps whose gradients held an inf or NaN after unscaling (the "
        "update was not applied); *lowest scale* is the smallest scale a step ran with and the share of the run's "
        "steps spent at it; *the floor* is the strategy's own minimum (DeepSpeed and Megatron: 1; torch, apex and "
        "keras have none); the accuracy gap is paired on the seeds, with the two-sided 90% Student-t interval of "
        "the mean difference (n − 1 degrees of freedom; none for one seed); the underflow rate is the mean over "
        "the steps of the fraction of non-zero gradient values that became zero in fp16 at the step's scale.\n\n";
}

void normal_section(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::string& md) {
  const std::vector<StrategySpec>& fp16 = strategies.fp16;
  const std::vector<StrategySpec>& with_fp32 = strategies.with_fp32;
  md += "## The normal model\n\n";
  md += strategy_table(runs, "normal", with_fp32, false);
  md += "\n" + link(c.report, "normal-scale", "Loss scale per step, normal model");
  {
    std::vector<std::string> lines;
    for (const StrategySpec& s : fp16) {
      const ScalersRun* r = runs.find("normal", s.side, 1);
      if (!r) continue;
      const TrajectoryStats t = stats_of(*r, s);
      std::string line = "- " + s.title + ": " + std::to_string(t.skipped) + " skipped of " + std::to_string(t.steps) +
                         " steps, scale " + scale_text(t.first_scale) + " at step 0, " + scale_text(t.lowest_scale) +
                         " at its lowest, " + scale_text(t.final_scale) + " after the last step";
      if (s.scaler != "none" && s.scaler != "static" && s.side != "torch-defaults") {
        const double intervals = static_cast<double>(t.steps) / static_cast<double>(c.growth_interval);
        line += "; " + general(static_cast<double>(t.skipped) / intervals) + " skipped steps per growth interval";
      }
      lines.push_back(line + ".\n");
    }
    for (const std::string& l : lines) md += l;
    md += "\n";
  }
  md += link(c.report, "normal-accuracy", "Test accuracy during training, normal model");
}

void backward_section(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::string& md) {
  md += "## A model made to overflow in the backward pass\n\n";
  md += "The images × " + scale_text(c.backward_input_scale) + ". The forward pass stays finite; the gradients are "
        "about " + scale_text(c.backward_input_scale) + " times larger, so a scale that fit the normal model "
        "overflows them.\n\n";
  md += strategy_table(runs, "backward", strategies.with_fp32, true);
  md += "\n" + link(c.report, "backward-scale", "Loss scale per step, backward-overflow model");
  md += link(c.report, "backward-skipped", "Cumulative skipped steps, backward-overflow model");
}

void forward_section(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::string& md) {
  md += "## A model made to overflow in the forward pass\n\n";
  md += "The images × " + scale_text(c.forward_input_scale) + ": the brightest pixels and fc1's output exceed "
        "fp16's 65504 before any loss scale is applied, so the logits and the loss are not finite whatever the "
        "scale. The recorders watch the tensors the layers store (not the operands a GEMM rounds as it reads them), "
        "so the first non-finite value they name is fc1's output `y`, in the forward pass. What each strategy does "
        "(seed 1):\n\n";
  md += "| strategy | steps run | skipped | aborted at step | scale at step 0 → after the last step | steps at the "
        "floor | first non-finite value of a step: steps | test accuracy % |\n|---|---:|---:|---:|---|---:|---|---:|\n";
  for (const StrategySpec& s : strategies.with_fp32) {
    const ScalersRun* r = runs.find("forward", s.side, 1);
    if (!r) continue;
    const TrajectoryStats t = stats_of(*r, s);
    std::string row = "| " + s.title + " |";
    add_cell(row, std::to_string(t.steps));
    add_cell(row, std::to_string(t.skipped));
    add_cell(row, t.aborted_at ? std::to_string(*t.aborted_at) : std::string("-"));
    add_cell(row, scale_text(t.first_scale) + " → " + scale_text(t.final_scale));
    add_cell(row, constant(s)    ? std::string("constant")
                  : t.floor > 0 ? std::to_string(t.steps_at_floor) + " (floor " + scale_text(t.floor) + ")"
                                : std::string("no floor"));
    add_cell(row, origins_text(nonfinite_origins(r->steps)));
    const auto a = accuracy_of(*r);
    add_cell(row, a ? fixed(100.0 * *a, 2) : "diverged (" + r->summary["evaluation"].value("reason", std::string()) + ")");
    md += row + "\n";
  }
  md += "\n" + link(c.report, "forward-scale", "Loss scale per step, forward-overflow model");
}

void replays_section(const ScalersConfig& c, const Strategies& strategies, const CrossReplay& cross, const OwnReplays& own,
                     bool replays_agree, std::string& md) {
  const std::vector<StrategySpec>& every = strategies.every;
  const std::vector<training::TraceStep>& trace = cross.trace;
  const std::size_t trace_infs = cross.trace_infs;
  md += "## One recorded trace replayed through every strategy\n\n";
  md += "The found_inf flags of the backward-overflow `torch (interval " + std::to_string(c.growth_interval) +
        ")` run, seed 1 (" + std::to_string(trace.size()) + " steps, " + std::to_string(trace_infs) +
        " with an inf), fed to every strategy (`training::replay`, what `mpverify replay-scalers` runs). The flags "
        "were recorded at torch's scales; another strategy at other scales would have overflowed on other steps, "
        "so this compares the rules on one sequence of events, not the trainings.\n\n";
  md += link(c.report, "replay", "Replayed scale trajectories");
  md += "| strategy | skipped steps | steps at the floor | lowest scale | final scale | aborted at step |\n"
        "|---|---:|---:|---:|---:|---:|\n";
  for (const auto& [s, r] : cross.replays) {
    double lowest = r.steps.empty() ? 0 : r.steps.front().scale;
    for (const training::ReplayStep& step : r.steps) lowest = std::min(lowest, step.scale);
    const double fl = floor_of(*s);
    md += "| " + s->title + " | " + std::to_string(r.skipped_steps) + " | " +
          (constant(*s) ? std::string("constant") : fl > 0 ? std::to_string(r.steps_at_min) : std::string("no floor")) +
          " | " + scale_text(lowest) + " | " +
          scale_text(r.final_scale) + " | " + (r.aborted_at ? std::to_string(*r.aborted_at) : std::string("-")) + " |\n";
  }
  md += "\n**The replay against the training.** Every run's own found_inf flags, replayed through a fresh instance "
        "of its strategy, must give the scale of every step (exactly), its skip flag, the aborting step and the "
        "final scale that the training recorded. " +
        std::string(replays_agree ? "They do, for every run:" : "**They do not for every run:**") + "\n\n";
  md += "| side | runs whose replay agrees (every scenario and seed) |\n|---|---:|\n";
  for (const StrategySpec& s : every)
    if (const auto it = own.agree_by_side.find(s.side); it != own.agree_by_side.end())
      md += "| " + s.title + " | " + std::to_string(it->second.first) + " of " + std::to_string(it->second.second) + " |\n";
  for (const std::string& d : own.disagreements) md += "\n- " + d;
  md += "\n";
}

void fp8_section(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, const AmaxReplay& replay, std::string& md) {
  const std::vector<StrategySpec>& fp8 = strategies.fp8;
  const std::vector<double>& amax = replay.amax;
  md += "## FP8 scaling\n\n";
  md += "FP8 scales are per tensor and per step, not one loss scale: what compares across the strategies is "
        "skipped steps (the loss scaler is `none`: scale 1, and a step whose gradients hold an inf or NaN is "
        "applied, as PyTorch applies it without a GradScaler), the accuracy, and the scale each rule picks for the same amax sequence. The `fp8` recipe's "
        "casts to OCP E4M3 and E5M2 saturate (clamp to ±448 / ±57344), as Transformer Engine's do (CUDA's "
        "`__nv_fp8_e4m3(float)` converts with `__NV_SATFINITE`); the run without saturation uses PyTorch's "
        "casts instead (E4M3 has no infinity: an overflow is NaN; E5M2 overflows to inf). Backward GEMMs "
        "multiply an E5M2 gradient by an E4M3 weight or activation (Transformer Engine's HYBRID).\n\n";
  md += "| recipe | skipped steps (per seed) | first non-finite value of a step (seed 1): steps | test accuracy % "
        "(mean) | − fp32, points [90% CI] |\n|---|---:|---|---:|---:|\n";
  std::vector<std::optional<double>> base;
  for (const ScalersRun* r : runs.seeds_of("normal", "fp32")) base.push_back(accuracy_of(*r));
  for (const StrategySpec& s : fp8) {
    const std::vector<const ScalersRun*> seeds = runs.seeds_of("normal", s.side);
    if (seeds.empty()) continue;
    const SeedOutcomes o = outcomes_of(seeds);
    const std::map<std::string, std::size_t> origins = nonfinite_origins(seeds.front()->steps);
    md += "| " + s.title + " (`" + s.recipe + "`) | " + o.skipped + " | " + origins_text(origins) + " | " +
          (o.finite ? fixed(100.0 * o.sum / static_cast<double>(o.finite), 2) : std::string("diverged")) + " | " +
          gap_text(paired_gap(base, o.accuracy)) + " |\n";
  }
  if (replay.have_amax) {
    const auto [lo, hi] = std::minmax_element(amax.begin(), amax.end());
    md += "\nThe amax replay: the largest |value| of the loss gradient (`" + std::string(kAmaxLayer) + " " +
          kAmaxTensor + "`, the E5M2 operand of fc2's backward GEMMs) at each of the " +
          std::to_string(amax.size()) + " steps of the saturating fp8 delayed run, seed 1 (from its tensors.jsonl: between " +
          general(*lo) + " and " + general(*hi) + "), fed to each FP8 rule for E5M2 (max 57344). The recorder "
          "reads the values before they are stored in bf16, so an amax may differ from the operand's by one bf16 "
          "rounding; the scales the training used per operand are not logged, so this replay is not checked "
          "against them. MXFP8 is shown as the encoding scale 1 / X of a single 32-element block whose amax is "
          "the tensor's (the block holding the largest value); its other blocks get their own X.\n\n";
    md += link(c.report, "fp8-scales", "FP8 scales for one amax sequence");
    md += replay.amax_table;
    md += "\nDelayed scaling runs each step with the scale computed from the amaxes of the steps before it "
          "(the step-0 scale is 1), so a tensor whose amax grows past its history's maximum by more than the "
          "rounding margin (E5M2: 61440 / 57344, 7%) overflows the format at that step: with a saturating cast a few values are clamped, with a non-saturating one "
          "the step has an inf or NaN and is skipped (the table above). Current scaling uses this step's own "
          "amax and does not overflow.\n";
  }
  md += "\nMXFP8 is not a training recipe here (the emulator scales FP8 operands per tensor, not per 32-element "
        "block), so it appears only in the replay.\n\n";
}

void claims_section(const ScalersConfig& c, const Runs& runs, const Strategies& strategies, std::string& md) {
  const std::vector<StrategySpec>& fp16 = strategies.fp16;
  md += "## The literature's claims and ours\n\n";
  md += "| claim (source) | theirs | ours |\n|---|---|---|\n";
  {
    const ScalersRun* t = runs.find("normal", "torch", 1);
    if (t) {
      const TrajectoryStats st = stats_of(*t, spec_of(fp16, "torch"));
      md += "| Normal skips: about one per growth interval (users' reports, `../shared/reference/loss-scalers.md`, "
            "pain point 2) | ~1 per interval | torch (interval " + std::to_string(c.growth_interval) + "), normal model, "
            "seed 1: " + std::to_string(st.skipped) + " skipped in " + std::to_string(st.steps) + " steps = " +
            general(static_cast<double>(st.skipped) * c.growth_interval / static_cast<double>(st.steps)) +
            " per interval |\n";
    }
    const auto skips_per_seed = [&](const std::string& scenario) {
      std::string text;
      for (const ScalersRun* r : runs.seeds_of(scenario, "static")) {
        if (!text.empty()) text += ", ";
        text += r->summary["skipped_steps"].dump();
      }
      return text;
    };
    auto diverged_of = [&](const std::string& scenario, const std::string& side) {
      std::size_t n = 0;
      for (const ScalersRun* r : runs.seeds_of(scenario, side)) n += !accuracy_of(*r).has_value();
      return std::to_string(n);
    };
    if (runs.find("normal", "static", 1) && runs.find("backward", "static", 1))
      md += "| A static scale such as 128 works if it does not overflow (MXNet talk, 2018) | S = 128 suggested | "
            "static " + scale_text(c.static_scale) + ", skipped steps per seed: " + skips_per_seed("normal") +
            " on the normal model; on the backward-overflow model " + diverged_of("backward", "static") + " of " +
            std::to_string(runs.seeds_of("backward", "static").size()) + " runs diverged (a static scale cannot "
            "back off, and without a skip its non-finite updates reach the weights) |\n";
    const ScalersRun* fd = runs.find("forward", "deepspeed", 1);
    const ScalersRun* ft = runs.find("forward", "torch", 1);
    if (fd && ft) {
      const TrajectoryStats d = stats_of(*fd, spec_of(fp16, "deepspeed"));
      const TrajectoryStats tt = stats_of(*ft, spec_of(fp16, "torch"));
      md += "| The scale collapses to the minimum, often because of a forward overflow no scale can fix "
            "(DeepSpeed #4017, apex #318, pytorch #157436) | collapse reported | forward-overflow model: torch "
            "skipped " + std::to_string(tt.skipped) + " of " + std::to_string(tt.steps) + " steps, scale " +
            scale_text(tt.first_scale) + " → " + scale_text(tt.final_scale) + "; DeepSpeed " +
            (d.aborted_at ? "aborted at step " + std::to_string(*d.aborted_at) + " at scale " + scale_text(d.lowest_scale)
                          : std::string("did not abort")) + "; the first non-finite value is reported in the "
            "forward pass (table above) |\n";
    }
    const ScalersRun* mn = runs.find("normal", "megatron", 1);
    if (mn) {
      const TrajectoryStats m = stats_of(*mn, spec_of(fp16, "megatron"));
      md += "| Megatron starts at 2^32 with hysteresis 2 (its defaults) | - | normal model: " +
            std::to_string(m.skipped) + " skipped steps while its scale came down from " + scale_text(m.first_scale) +
            " to " + scale_text(m.lowest_scale) + " |\n";
    }
    std::vector<std::optional<double>> base, cand;
    for (const ScalersRun* r : runs.seeds_of("normal", "fp32")) base.push_back(accuracy_of(*r));
    for (const ScalersRun* r : runs.seeds_of("normal", "torch-defaults")) cand.push_back(accuracy_of(*r));
    md += "| Mixed precision with loss scaling is as accurate as FP32 (NVIDIA's AMP talk: ResNet-50 75.92 → 76.04; "
          "MXNet: ResNeXt-50 77.3 → 77.5) | +0.1 to +0.2 points on ImageNet | torch (defaults) − fp32 on the "
          "MNIST MLP: " + gap_text(paired_gap(base, cand)) + " points (" + seeds_text(base.size()) + ", paired) |\n";
  }
  md += "\nWhere we differ: our models and runs are small (an MLP on MNIST, " + std::to_string(c.steps) +
        " steps) and the growth intervals are shortened, so skips per interval are measured on few intervals; the "
        "overflowing models are made so on purpose (scaled images), not found in the wild; the sources give no "
        "numbers for skips or collapse, only reports, so there the comparison is of behaviour, not of figures. "
        "The accuracy intervals with " + seeds_text(c.seeds) + " are wide: a gap inside them is not a "
        "demonstrated equivalence.\n";
}

}  // namespace

ScalersReport write_scalers_report(const ScalersConfig& c, const std::vector<ScalersRun>& all,
                                   std::vector<fs::path>& files) {
  const Runs runs{all};
  ScalersReport out;
  const Strategies strategies = strategies_of(c);
  fs::create_directories(c.report.parent_path().empty() ? fs::path(".") : c.report.parent_path());
  const OwnReplays own = replay_own_traces(all, strategies, out);

  draw_normal_figures(c, runs, strategies, files);
  draw_overflow_figures(c, runs, strategies, files);
  const CrossReplay cross = replay_backward_trace(c, runs, strategies, files);
  const AmaxReplay amax = replay_amax(c, runs, files);

  std::string md = "# Loss-scale strategies: normal skips, backward and forward overflow, replays\n\n";
  md += "Written by `build/experiments/scalers` (experiment 3). Every number and figure below comes from "
        "the run directories it trained; the same options give the same report, byte for byte.\n\n";
  what_ran_section(c, strategies, md);
  normal_section(c, runs, strategies, md);
  backward_section(c, runs, strategies, md);
  forward_section(c, runs, strategies, md);
  replays_section(c, strategies, cross, own, out.replays_agree, md);
  if (c.fp8) fp8_section(c, runs, strategies, amax, md);
  claims_section(c, runs, strategies, md);

  report::write_output(c.report, md, files);
  return out;
}

}  // namespace mpverify::experiments
