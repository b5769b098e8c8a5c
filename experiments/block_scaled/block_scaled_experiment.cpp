#include "block_scaled/block_scaled_experiment.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "emu/block_quantize.h"
#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "record/run_log.h"
#include "report/output_files.h"
#include "training/base_config.h"
#include "training/ensemble.h"
#include "training/recipe.h"
#include "training/run_queue.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kModels[] = {"cnn", "transformer"};

bool block_scaled(const std::string& recipe) {
  return recipe.starts_with("mxfp8") || recipe.starts_with("nvfp4") || recipe.starts_with("fp8-blockwise");
}

// The transformer's text under --quick: a few sentences of the alphabet, repeated.
std::string quick_text() {
  std::string text;
  for (int i = 0; i < 120; ++i)
    text += "In the beginning God created the heaven and the earth. And the earth was without form, and void; "
            "and darkness was upon the face of the deep.\n";
  return text;
}

// Which runs go first: the slowest (measured per step on one core: a transformer step under a
// block-scaled recipe costs the most, the CNN's fp32 on ref the least), so that the threads end together.
int cost_rank(const std::string& model, const std::string& recipe) {
  const int base = model == "transformer" ? 0 : 3;
  if (block_scaled(recipe)) return base;
  if (recipe == "fp32") return base + 2;
  return base + 1;
}

std::optional<double> number_at(const json& j, const char* a, const char* b) {
  const auto x = j.find(a);
  if (x == j.end() || !x->is_object()) return std::nullopt;
  const auto y = x->find(b);
  if (y == x->end() || !y->is_number()) return std::nullopt;
  const double v = y->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

}  // namespace

BlockScaledConfig quick_block_scaled_config() {
  BlockScaledConfig c;
  c.seeds = 2;
  c.cnn_steps = 3;
  c.cnn_batch = 16;
  c.train_size = 128;
  c.test_size = 64;
  c.transformer_steps = 3;
  c.transformer_batch = 2;
  c.context_length = 16;
  c.test_windows = 4;
  c.record_every = 1;
  c.text_for_tests = quick_text();
  c.quick = true;
  return c;
}

std::vector<std::string> block_scaled_recipes() {
  return {"fp32",
          "bf16-o1",
          "mxfp8",
          "nvfp4",
          "fp8-blockwise",
          "mxfp8:scale_rule=floor",
          "nvfp4:high_precision_last=0",
          "nvfp4:hadamard=off",
          "nvfp4:dy_rounding=rne"};
}

std::string block_scaled_side_name(const std::string& recipe) {
  if (recipe == "fp32") return "fp32-ref";
  std::string name = recipe;
  std::replace_if(name.begin(), name.end(), [](char ch) { return ch == ':' || ch == ',' || ch == '='; }, '-');
  return name + "-emu";
}

training::TrainConfig block_scaled_train_config(const BlockScaledConfig& c, const std::string& model,
                                                const std::string& recipe) {
  training::TrainConfig t;
  if (model == "cnn") {
    t = training::experiment_config(
        {.model = "cnn", .data = "synthetic", .data_dir = {}, .train_size = c.train_size, .test_size = c.test_size,
         .steps = c.cnn_steps});
    t.batch_size = c.cnn_batch;
  } else {
    t.model = "transformer";
    t.data = "kjv";
    t.steps = c.transformer_steps;
    t.batch_size = c.transformer_batch;
    t.context_length = c.context_length;
    t.test_size = c.test_windows;
    t.optimizer = training::OptimizerKind::adam;
    t.adam.lr = 3e-3;
    t.text_for_tests = c.text_for_tests;
  }
  t.recipe = recipe;
  t.scaler = "none";
  t.backend = recipe == "fp32" ? nn::BackendKind::ref : nn::BackendKind::emu;
  t.recorders = block_scaled(recipe);  // blocks.jsonl; the other sides log the loss either way
  t.histograms = false;
  t.record_every = c.record_every;
  return t;
}

void validate_block_scaled(const BlockScaledConfig& c) {
  const auto positive = [](std::size_t v, const char* option) {
    if (v < 1) throw std::invalid_argument(std::string(option) + " must be at least 1");
  };
  positive(c.seeds, "--seeds");
  if (c.seeds > training::kMaxSeeds)
    throw std::invalid_argument("--seeds " + std::to_string(c.seeds) + ": at most " +
                                std::to_string(training::kMaxSeeds));
  positive(c.cnn_steps, "--steps");
  positive(c.transformer_steps, "--transformer-steps");
  positive(c.cnn_batch, "--batch");
  positive(c.transformer_batch, "--transformer-batch");
  positive(c.record_every, "--record-every");
  positive(c.jobs, "--jobs");
  if (c.record_every > std::min(c.cnn_steps, c.transformer_steps))
    throw std::invalid_argument("--record-every " + std::to_string(c.record_every) +
                                ": larger than the steps; no step would be recorded");
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.runs.empty()) throw std::invalid_argument("--runs: give the directory for the runs");
  if (!(c.margin > 0) || !std::isfinite(c.margin) || !(c.loss_margin > 0) || !std::isfinite(c.loss_margin))
    throw std::invalid_argument("--margin and --loss-margin must be finite and > 0");
  if (!(c.alpha > 0 && c.alpha < 0.5)) throw std::invalid_argument("--alpha must be in (0, 0.5)");
  for (const char* model : kModels)
    for (const std::string& recipe : block_scaled_recipes()) {
      training::TrainConfig t = block_scaled_train_config(c, model, recipe);
      t.seed = 1;
      const training::Trainer check(t);  // throws for a setting it cannot run (or data it cannot load)
    }
}

// --- Reading the run directories -------------------------------------------------

namespace {

std::vector<json> block_lines(const fs::path& side_dir, std::size_t seeds) {
  std::vector<json> lines;
  for (std::uint64_t s = 1; s <= seeds; ++s) {
    const fs::path file = training::seed_directory(side_dir, s) / "blocks.jsonl";
    for (json& line : record::read_json_lines(file)) lines.push_back(std::move(line));
  }
  return lines;
}

double number_or(const json& line, const char* key, double otherwise) {
  const auto v = line.find(key);
  return v != line.end() && v->is_number() ? v->get<double>() : otherwise;
}

}  // namespace

std::vector<OperandRates> operand_rates(const fs::path& side_dir, std::size_t seeds) {
  struct Sums {
    OperandRates r;
    double sat = 0, under = 0, sqnr = 0;
    std::size_t sqnr_n = 0;
  };
  std::vector<Sums> sums;
  for (const json& line : block_lines(side_dir, seeds)) {
    const std::string layer = line.at("layer"), operand = line.at("operand");
    auto at = std::find_if(sums.begin(), sums.end(),
                           [&](const Sums& s) { return s.r.layer == layer && s.r.operand == operand; });
    if (at == sums.end()) {
      sums.push_back({});
      at = sums.end() - 1;
      at->r.layer = layer;
      at->r.operand = operand;
    }
    ++at->r.lines;
    at->sat += number_or(line, "saturation_rate", 0);
    at->under += number_or(line, "underflow_rate", 0);
    const double q = number_or(line, "sqnr_db", std::nan(""));
    if (std::isfinite(q)) {
      at->sqnr += q;
      ++at->sqnr_n;
    }
  }
  std::vector<OperandRates> rates;
  for (Sums& s : sums) {
    const double n = static_cast<double>(s.r.lines);
    s.r.saturation_rate = s.sat / n;
    s.r.underflow_rate = s.under / n;
    if (s.sqnr_n > 0) s.r.sqnr_db = s.sqnr / static_cast<double>(s.sqnr_n);
    rates.push_back(s.r);
  }
  return rates;
}

SaturationTotals saturation_totals(const fs::path& side_dir, std::size_t seeds) {
  SaturationTotals t;
  for (const json& line : block_lines(side_dir, seeds)) {
    const auto saturated = line.at("saturated").get<std::uint64_t>();
    t.elements += line.at("elements").get<std::uint64_t>();
    t.blocks += line.at("blocks").get<std::uint64_t>();
    t.saturated += saturated;
    ++t.lines;
    t.lines_saturated += saturated > 0;
  }
  return t;
}

ClaimComparison compare_claim(const BlockScaledConfig& c, const std::string& model, const std::string& variant) {
  ClaimComparison cmp;
  cmp.model = model;
  cmp.variant = variant;
  const auto test_loss = [&](const std::string& recipe, std::uint64_t seed) {
    const fs::path dir = training::seed_directory(c.runs / model / block_scaled_side_name(recipe), seed);
    return number_at(metrics::read_json_document(dir / "summary.json"), "evaluation", "test_loss");
  };
  std::vector<double> d;
  bool variant_only_diverged = true, any_diverged = false;
  for (std::uint64_t s = 1; s <= c.seeds; ++s) {
    cmp.variant_loss.push_back(test_loss(variant, s));
    cmp.reference_loss.push_back(test_loss(cmp.reference, s));
    cmp.bf16_loss.push_back(test_loss("bf16-o1", s));
    const auto &v = cmp.variant_loss.back(), &r = cmp.reference_loss.back();
    any_diverged = any_diverged || !v || !r;
    variant_only_diverged = variant_only_diverged && !v && r;
    if (v && r) d.push_back(*v - *r);
  }
  if (any_diverged) {
    cmp.verdict = variant_only_diverged ? "reproduced (the variant diverged in every seed)"
                                        : "undecided (a run diverged)";
    return cmp;
  }
  double mean = 0;
  for (double x : d) mean += x;
  mean /= static_cast<double>(d.size());
  cmp.mean_difference = mean;
  if (d.size() < 2) {
    cmp.verdict = "undecided (one seed)";
    return cmp;
  }
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  const double n = static_cast<double>(d.size());
  const double half = metrics::student_t_quantile(1 - c.alpha, n - 1) * std::sqrt(ss / (n - 1)) / std::sqrt(n);
  cmp.lower = mean - half;
  cmp.upper = mean + half;
  cmp.verdict = *cmp.lower > 0 ? "reproduced" : *cmp.upper < 0 ? "refuted" : "not reproduced at this scale";
  return cmp;
}

std::string combined_verdict(const std::vector<std::string>& verdicts) {
  const auto all = [&](const std::string& prefix) {
    return !verdicts.empty() && std::all_of(verdicts.begin(), verdicts.end(),
                                            [&](const std::string& v) { return v.starts_with(prefix); });
  };
  const auto any = [&](const std::string& prefix) {
    return std::any_of(verdicts.begin(), verdicts.end(), [&](const std::string& v) { return v.starts_with(prefix); });
  };
  if (all("reproduced")) return "reproduced";
  if (any("refuted") && !any("reproduced")) return "refuted";
  if (any("reproduced") || any("refuted")) return "mixed: reproduced in some rows only";
  if (any("undecided")) return "undecided";
  return "not reproduced at this scale";
}

// --- Claim (a) on real tensors ----------------------------------------------------

namespace {

// Keeps the stored activations and activation gradients of the steps it is shown.
class TensorCapture : public nn::StoreObserver {
 public:
  std::vector<std::vector<float>> tensors;
  void on_store(std::string_view, std::string_view, nn::Role role, nn::Pass, std::span<const float>,
                std::span<const float> stored, const formats::Format&) override {
    if (role != nn::Role::activation && role != nn::Role::activation_grad) return;
    if (stored.size() >= 32) tensors.emplace_back(stored.begin(), stored.end());
  }
};

// Counts, block by block, what floor and rceil do to one tensor cut into 1 x 32 blocks of the check's scheme.
// OCP's floor scale is 2^(floor(log2 amax) - emax_elem), so amax / X = s * 2^emax_elem for amax's
// significand s: above max_elem / 2^emax_elem (the threshold) the largest element saturates.
void check_tensor(const std::vector<float>& x, AmaxCheck& check) {
  const emu::BlockScheme& scheme = *emu::find_block_scheme(check.scheme);
  const std::size_t shape[] = {x.size()};
  emu::BlockQuantizeOptions floor_rule, rceil_rule;
  floor_rule.scale_rule = emu::ScaleRule::floor;
  rceil_rule.scale_rule = emu::ScaleRule::rceil;
  const emu::BlockQuantized f = emu::block_quantize(x, shape, 0, scheme, floor_rule);
  const emu::BlockQuantized r = emu::block_quantize(x, shape, 0, scheme, rceil_rule);
  const double max_elem = scheme.element.max_finite();
  const int emax_elem = scheme.element.emax();
  ++check.tensors;
  check.elements += f.counters.elements;
  check.floor_saturated_elements += f.counters.saturated;
  for (std::size_t b = 0; b * 32 < x.size(); ++b) {
    const std::size_t lo = b * 32, hi = std::min(x.size(), lo + 32);
    float amax = 0;
    bool finite = true;
    for (std::size_t i = lo; i < hi; ++i) {
      finite = finite && std::isfinite(x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    if (!finite || amax == 0) continue;
    int e = 0;
    const double significand = 2 * std::frexp(static_cast<double>(amax), &e);  // in [1, 2)
    if (e - 1 - emax_elem < -127) continue;  // the floor scale would be clamped: the rule does not apply
    const auto saturates = [&](const emu::BlockQuantized& q) {
      for (std::size_t i = lo; i < hi; ++i)
        if (std::fabs(static_cast<double>(x[i])) > max_elem * static_cast<double>(q.scales[b])) return true;
      return false;
    };
    ++check.blocks;
    const bool floor_sat = saturates(f);
    if (significand > check.threshold) {
      ++check.above;
      check.above_saturated += floor_sat;
    } else {
      check.below_saturated += floor_sat;
    }
    check.rceil_saturated += saturates(r);
  }
}

}  // namespace

std::vector<AmaxCheck> block_amax_check(const BlockScaledConfig& c, const std::string& model, std::size_t steps) {
  TensorCapture capture;
  training::TrainConfig t = block_scaled_train_config(c, model, "mxfp8:scale_rule=floor");
  t.seed = 1;
  t.recorders = false;
  t.extra_observer = &capture;
  training::Trainer trainer(t);
  std::vector<AmaxCheck> checks;
  for (const char* name : kAmaxCheckSchemes) {
    const formats::Format& element = emu::find_block_scheme(name)->element;
    checks.push_back({model, name, element.max_finite() / std::ldexp(1.0, element.emax())});
  }
  for (std::size_t s = 0; s < steps && s < t.steps; ++s) {
    (void)trainer.step();
    for (const std::vector<float>& x : capture.tensors)
      for (AmaxCheck& check : checks) check_tensor(x, check);
    capture.tensors.clear();
  }
  return checks;
}

// --- Running ---------------------------------------------------------------------

namespace {

using Say = std::function<void(const std::string&)>;

void train_runs(const BlockScaledConfig& c, const Say& say) {
  struct Job {
    std::string model, recipe;
    std::uint64_t seed;
  };
  std::vector<Job> jobs;
  for (std::uint64_t s = 1; s <= c.seeds; ++s)
    for (const char* model : kModels)
      for (const std::string& recipe : block_scaled_recipes()) jobs.push_back({model, recipe, s});
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    return cost_rank(a.model, a.recipe) < cost_rank(b.model, b.recipe);
  });
  say(std::to_string(jobs.size()) + " runs (2 models x " + std::to_string(block_scaled_recipes().size()) +
      " recipes x " + std::to_string(c.seeds) + " seeds), " + std::to_string(std::min(c.jobs, jobs.size())) +
      " at a time, into " + c.runs.string());
  std::vector<training::QueuedRun> queue;
  for (const Job& job : jobs) {
    const std::string side = block_scaled_side_name(job.recipe);
    training::QueuedRun q{block_scaled_train_config(c, job.model, job.recipe),
                          training::seed_directory(c.runs / job.model / side, job.seed), {}};
    q.config.seed = job.seed;
    q.label = job.model + " " + side + " seed " + std::to_string(job.seed);
    queue.push_back(std::move(q));
  }
  const fs::path journal = c.runs / "queue.json";  // an interrupted experiment resumes (training/run_queue.h)
  const auto start = [&](bool resuming) {
    if (resuming) say("resuming the interrupted runs in " + c.runs.string());
    else
      for (const char* model : kModels) fs::remove_all(c.runs / model);
  };
  (void)training::run_queue(queue, c.jobs, [&](const std::string& line) { say(line); }, journal, start);
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= c.seeds; ++s) seeds.push_back(s);
  for (const char* model : kModels)
    for (const std::string& recipe : block_scaled_recipes())
      training::write_ensemble_manifest(c.runs / model / block_scaled_side_name(recipe), seeds);
}

std::vector<BlockScaledGate> gate_sides(const BlockScaledConfig& c, const Say& say) {
  std::vector<BlockScaledGate> gates;
  if (c.seeds < 2) return gates;  // the paired gate needs 2 seeds per side
  say("parity gates");
  for (const char* model : kModels) {
    const fs::path parent = c.runs / model;
    const metrics::Ensemble baseline = metrics::read_named_ensemble(parent, "fp32-ref", true);
    for (const std::string& recipe : block_scaled_recipes()) {
      if (recipe == "fp32") continue;
      const metrics::Ensemble candidate = metrics::read_named_ensemble(parent, block_scaled_side_name(recipe), true);
      metrics::GateOptions acc;
      acc.metric = metrics::GateMetric::accuracy;
      acc.margin = c.margin;
      acc.alpha = c.alpha;
      acc.pairing = metrics::Pairing::paired;
      metrics::GateOptions loss = acc;
      loss.metric = metrics::GateMetric::loss;
      loss.margin = c.loss_margin;
      gates.push_back({model, recipe, metrics::evaluate_gate(baseline, candidate, acc),
                       metrics::evaluate_gate(baseline, candidate, loss)});
    }
  }
  return gates;
}

void decide_claims(const BlockScaledConfig& c, BlockScaledResult& result) {
  // (a): rceil never saturates, floor does, and the blocks follow the 1.75 (E4M3) and 1.5 (E2M1) rules exactly.
  std::uint64_t floor_sat = 0, rceil_sat = 0;
  for (const char* model : kModels) {
    floor_sat += saturation_totals(c.runs / model / block_scaled_side_name("mxfp8:scale_rule=floor"), c.seeds).saturated;
    rceil_sat += saturation_totals(c.runs / model / block_scaled_side_name("mxfp8"), c.seeds).saturated;
  }
  bool rule_holds = true;
  for (const AmaxCheck& a : result.amax_checks)
    rule_holds = rule_holds && a.above_saturated == a.above && a.below_saturated == 0 && a.rceil_saturated == 0;
  if (rceil_sat > 0 || !rule_holds) result.verdict_a = "refuted";
  else if (floor_sat == 0) result.verdict_a = "not reproduced at this scale (floor saturated nothing)";
  else result.verdict_a = "reproduced";
  std::vector<std::string> b, cc;
  for (const ClaimComparison& cmp : result.claims)
    (cmp.variant == "nvfp4:high_precision_last=0" ? b : cc).push_back(cmp.verdict);
  result.verdict_b = combined_verdict(b);
  result.verdict_c = combined_verdict(cc);
}

nlohmann::ordered_json result_json(const BlockScaledResult& result) {
  nlohmann::ordered_json j;
  j["claims"] = {{"a", result.verdict_a}, {"b", result.verdict_b}, {"c", result.verdict_c}};
  nlohmann::ordered_json gates = nlohmann::ordered_json::array();
  for (const BlockScaledGate& g : result.gates)
    gates.push_back({{"model", g.model}, {"recipe", g.recipe}, {"accuracy", metrics::gate_json(g.accuracy)},
                     {"loss", metrics::gate_json(g.loss)}});
  j["gates"] = gates;
  nlohmann::ordered_json claims = nlohmann::ordered_json::array();
  for (const ClaimComparison& cmp : result.claims)
    claims.push_back({{"model", cmp.model}, {"variant", cmp.variant}, {"verdict", cmp.verdict},
                      {"mean_difference", cmp.mean_difference ? json(*cmp.mean_difference) : json()}});
  j["comparisons"] = claims;
  j["files"] = result.files;
  return j;
}

}  // namespace

BlockScaledResult run_block_scaled(const BlockScaledConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_block_scaled(c);
  const Say say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  BlockScaledResult result;
  train_runs(c, say);
  result.gates = gate_sides(c, say);
  if (c.amax_check) {
    say("claim (a): the 1.75 and 1.5 rules on real blocks");
    for (const char* model : kModels)
      for (AmaxCheck& a : block_amax_check(c, model, 2)) result.amax_checks.push_back(std::move(a));
  }
  for (const char* model : kModels)
    for (const char* variant : {"nvfp4:high_precision_last=0", "nvfp4:hadamard=off", "nvfp4:dy_rounding=rne"})
      result.claims.push_back(compare_claim(c, model, variant));
  decide_claims(c, result);
  say("figures and report");
  fs::create_directories(c.report.parent_path().empty() ? fs::path(".") : c.report.parent_path());
  write_block_scaled_figures(c, result.files);
  result.report_text = block_scaled_report(c, result);
  report::write_output(c.report, result.report_text, result.files);
  result.json = result_json(result);
  return result;
}

}  // namespace mpverify::experiments
