#include "gan_parity/gan_parity_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>

#include "io/npy.h"
#include "io/sha256.h"
#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "metrics/parity_gate.h"
#include "record/run_log.h"
#include "report/gate_table.h"
#include "report/output_files.h"
#include "report/run_series.h"
#include "report/svg_image_grid.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "training/ensemble.h"
#include "training/feature_extractor.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;
using report::add_cell;
using report::fixed;
using report::general;
using report::power_of_two_text;
using report::sentence;

namespace {

std::optional<double> number_at(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string fid_text(const std::optional<double>& v) { return v ? fixed(*v, 2) : std::string("diverged"); }

metrics::Ensemble read_one(const fs::path& runs, const std::string& name, std::uint64_t seed) {
  metrics::Ensemble e;
  e.name = name + "/seed-" + std::to_string(seed);
  e.runs.push_back(metrics::read_run_directory(training::seed_directory(runs / name, seed), false));
  e.runs.back().name = e.name;
  return e;
}

// The grid's images of a run (samples.npy), empty when the run wrote none (it diverged).
std::vector<float> grid_images(const fs::path& dir) {
  if (!fs::exists(dir / "samples.npy")) return {};
  const io::DoubleArray a = io::read_npy_f64(dir / "samples.npy");
  std::vector<float> v;
  v.reserve(a.values.size());
  for (const double x : a.values) v.push_back(static_cast<float>(x));  // float32 on disk: exact both ways
  return v;
}

struct KidTest {
  std::optional<metrics::EquivalenceResult> test;
  std::string diverged;  // the run that has no KID, when one has none
};

}  // namespace

namespace {

// What the report reads back from the run directories, and the gates it evaluates on them.
struct GanEvidence {
  std::map<std::string, std::vector<json>> summaries;  // side -> summary.json of every seed
  std::map<std::string, std::vector<json>> steps;      // side -> seed 1's steps.jsonl
  // The margins as the rule gives them (NaN when an fp32 run has no value),
  // and as the gates used them (a placeholder then: the gate says "not equivalent" anyway).
  double fid_margin_value = 0, kid_margin_value = 0;
  double fid_margin = 1, kid_margin = 1;
  // The fp32 runs' mean FID (NaN when one diverged), and the real-vs-real FID
  // (real_reference_fid) the convergence criterion compares it with.
  double fp32_mean_fid = 0, real_fid = 0;
  bool unconverged = false;
  std::vector<metrics::GateResult> fid_gates;                // paired over the seeds, per candidate
  std::vector<std::vector<metrics::GateResult>> seed_gates;  // per candidate, per seed
  std::vector<KidTest> kid_tests;                            // per candidate

  // Not const: a summary without an "evaluation" reads as null, as it always has.
  const json& evaluation(const std::string& side, std::uint64_t seed) { return summaries[side][seed - 1]["evaluation"]; }
};

std::string margin_text(double v, double k) {
  return std::isfinite(v) ? general(v) + " (" + general(k) + " × the fp32 runs' standard deviation over the seeds)"
                          : std::string("- (an fp32 run has no value, or the fp32 values do not vary)");
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;  // a NaN (diverged) propagates
  return v.empty() ? std::nan("") : sum / static_cast<double>(v.size());
}

std::string figure_link(const fs::path& report, const char* what, const char* alt) {
  std::string s = "![";
  s += alt;
  s += "](";
  s += report::figure_path(report, what).filename().string();
  s += ")\n\n";
  return s;
}

// summary.json of every run, by side and seed (read back: the report says what the files hold).
void read_runs(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& summaries = ev.summaries;
  std::map<std::string, std::vector<json>>& steps = ev.steps;
  for (const GanSide& side : sides)
    for (std::uint64_t s = 1; s <= n_seeds; ++s) {
      const fs::path dir = training::seed_directory(c.runs / side.name, s);
      summaries[side.name].push_back(metrics::read_json_document(dir / "summary.json"));
      if (s == 1) steps[side.name] = record::read_steps(dir);
    }
}

// The margins: k times the fp32 runs' standard deviation of FID and of KID
// over the seeds. A diverged fp32 run leaves no spread; the gate then says
// "not equivalent" whatever the margin, so any positive placeholder serves
// (and is printed as "-").
void set_margins(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev) {
  const std::size_t n_seeds = c.seeds;
  const auto evaluation = [&](const std::string& side, std::uint64_t seed) -> const json& {
    return ev.evaluation(side, seed);
  };
  std::vector<double> base_fid, base_kid;
  for (std::uint64_t s = 1; s <= n_seeds; ++s) {
    base_fid.push_back(number_at(evaluation(sides[0].name, s), "fid").value_or(std::nan("")));
    base_kid.push_back(number_at(evaluation(sides[0].name, s), "kid").value_or(std::nan("")));
  }
  ev.fid_margin_value = gan_margin(c.margin_sd, base_fid);
  ev.kid_margin_value = gan_margin(c.margin_sd, base_kid);
  ev.fp32_mean_fid = mean_of(base_fid);
  ev.unconverged = gan_unconverged(ev.fp32_mean_fid, ev.real_fid, c.unconverged_ratio);
  ev.fid_margin = std::isfinite(ev.fid_margin_value) ? ev.fid_margin_value : 1.0;
  ev.kid_margin = std::isfinite(ev.kid_margin_value) ? ev.kid_margin_value : 1.0;
}

// The gates: FID paired over the seeds (the verdict), FID per seed on the
// bootstrap standard errors, and KID paired over the seeds.
void evaluate_gates(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, const std::function<void(const std::string&)>& say) {
  const std::size_t n_seeds = c.seeds;
  const auto evaluation = [&](const std::string& side, std::uint64_t seed) -> const json& {
    return ev.evaluation(side, seed);
  };
  const metrics::Ensemble baseline = metrics::read_named_ensemble(c.runs, sides[0].name, true);
  metrics::GateOptions fid_options;
  fid_options.metric = metrics::GateMetric::fid;
  fid_options.margin = ev.fid_margin;
  fid_options.alpha = c.alpha;
  for (std::size_t k = 1; k < sides.size(); ++k) {
    ev.fid_gates.push_back(metrics::evaluate_gate(baseline, metrics::read_named_ensemble(c.runs, sides[k].name, true), fid_options));
    say(metrics::gate_verdict_line(ev.fid_gates.back()));
    ev.seed_gates.emplace_back();
    metrics::GateOptions single_options = fid_options;  // per seed: the bootstrap errors, as the table says
    single_options.accept_single_run = true;
    for (std::uint64_t s = 1; s <= n_seeds; ++s)
      ev.seed_gates.back().push_back(metrics::evaluate_gate(read_one(c.runs, sides[0].name, s),
                                                         read_one(c.runs, sides[k].name, s), single_options));
    KidTest kid;
    std::vector<double> b, a;
    for (std::uint64_t s = 1; s <= n_seeds && kid.diverged.empty(); ++s) {
      const auto kb = number_at(evaluation(sides[0].name, s), "kid");
      const auto ka = number_at(evaluation(sides[k].name, s), "kid");
      if (!kb) kid.diverged = sides[0].name + "/seed-" + std::to_string(s);
      else if (!ka) kid.diverged = sides[k].name + "/seed-" + std::to_string(s);
      else {
        b.push_back(*kb);
        a.push_back(*ka);
      }
    }
    if (kid.diverged.empty()) kid.test = metrics::paired_tost(b, a, {ev.kid_margin, c.alpha});
    ev.kid_tests.push_back(kid);
  }
}

// --- Figures -------------------------------------------------------------------

// FID over training, every run.
void draw_fid_chart(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::vector<fs::path>& files) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& summaries = ev.summaries;
  report::LineChart fid_chart{"FID over training (N = " + std::to_string(c.fid_samples) +
                                  " generated vs 2000 test images; lower is better)",
                              "step", "FID (our MNIST feature extractor)", false, {}};
  for (const GanSide& side : sides)
    for (std::uint64_t s = 1; s <= n_seeds; ++s) {
      report::LineSeries series{side.title + ", seed " + std::to_string(s), {}, side.emulated};
      for (const json& p : summaries[side.name][s - 1]["checkpoints"]) {
        const auto f = number_at(p, "fid");
        series.points.emplace_back(p["step"].get<double>(), f ? *f : std::nan(""));
      }
      fid_chart.series.push_back(series);
    }
  report::write_output(report::figure_path(c.report, "fid"), report::svg_line_chart(fid_chart), files);
}

// Samples of seed 1: the same latent codes on every side, and |side - fp32|.
void draw_samples(const GanParityConfig& c, const std::vector<GanSide>& sides, std::vector<fs::path>& files) {
  report::ImageGridFigure grid;
  grid.title = "Generated digits, seed 1, step " + std::to_string(c.steps) + ": the same " + std::to_string(c.grid) +
               " latent codes on each side";
  grid.columns = 8;
  grid.scale = 2;
  const std::vector<float> base_images = grid_images(training::seed_directory(c.runs / sides[0].name, 1));
  for (const GanSide& side : sides) {
    report::ImagePanel panel{side.title, grid_images(training::seed_directory(c.runs / side.name, 1)), "diverged: no images"};
    grid.panels.push_back(panel);
  }
  for (std::size_t k = 1; k < sides.size(); ++k) {
    report::ImagePanel diff{"|" + sides[k].title + " − " + sides[0].title + "| (white: 1)", {}, "no images to compare"};
    const std::vector<float>& other = grid.panels[k].images;
    if (!base_images.empty() && other.size() == base_images.size())
      for (std::size_t i = 0; i < other.size(); ++i) diff.images.push_back(std::fabs(other[i] - base_images[i]));
    grid.panels.push_back(diff);
  }
  grid.note = "Pixel value 1 is white (MNIST's ink); each cell is one latent code, the same cell on every panel.";
  report::write_output(report::figure_path(c.report, "samples"), report::svg_image_grid(grid), files);
}

// Losses of seed 1.
void draw_losses(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::vector<fs::path>& files) {
  std::map<std::string, std::vector<json>>& steps = ev.steps;
  report::LineChart loss{"Losses per step, seed 1 (binary cross-entropy with logits)", "step", "loss", false, {}};
  for (const GanSide& side : sides) {
    loss.series.push_back(report::series_of(side.title + ": discriminator (real and generated batch)",
                                            report::step_values(steps[side.name], "loss_d"), side.emulated));
    loss.series.push_back(report::series_of(side.title + ": generator (generated half, target real)",
                                            report::step_values(steps[side.name], "loss_g"), side.emulated));
  }
  report::write_output(report::figure_path(c.report, "loss"), report::svg_line_chart(loss), files);
}

// The loss scale of the mixed-precision runs.
void draw_loss_scale(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::vector<fs::path>& files) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& steps = ev.steps;
  report::LineChart scale{"Loss scale per step (torch GradScaler, one scaler for both losses)", "step", "loss scale",
                          true, {}};
  for (const GanSide& side : sides) {
    if (!side.emulated) continue;
    for (std::uint64_t s = 1; s <= n_seeds; ++s) {
      const fs::path dir = training::seed_directory(c.runs / side.name, s);
      const std::vector<json> run_steps = s == 1 ? steps[side.name] : record::read_steps(dir);
      scale.series.push_back(report::series_of(side.title + ", seed " + std::to_string(s) + ": discriminator step",
                                               report::step_values(run_steps, "scale")));
      scale.series.push_back(report::series_of(side.title + ", seed " + std::to_string(s) + ": generator step",
                                               report::step_values(run_steps, "scale_g"), true));
    }
  }
  report::write_output(report::figure_path(c.report, "scale"), report::svg_line_chart(scale), files);
}

// --- The report's sections -------------------------------------------------------

// The headline: the verdict, its margin, and whether the generators are
// converged (the criterion of gan_unconverged), in words a reader cannot miss.
std::string headline(const GanParityConfig& c, const GanEvidence& ev) {
  const metrics::GateResult& g = ev.fid_gates.front();
  std::string verdict = metrics::to_string(g.verdict);
  std::transform(verdict.begin(), verdict.end(), verdict.begin(), [](unsigned char ch) { return std::toupper(ch); });
  const std::string margin =
      std::isfinite(ev.fid_margin_value)
          ? "a margin of ±" + general(ev.fid_margin_value) + " FID (" + general(c.margin_sd) +
                " × the fp32 seeds' standard deviation, " + general(ev.fid_margin_value / c.margin_sd) + ")"
          : std::string("no margin (an fp32 run has no FID, or the fp32 FIDs do not vary)");
  const std::size_t n_real = std::min(c.fid_samples, c.train_size);
  const std::string ratio = std::isfinite(ev.fp32_mean_fid) && ev.real_fid > 0
                                ? general(ev.fp32_mean_fid / ev.real_fid) + "×"
                                : std::string("-");
  const std::string real = "the FID of real images against the held-out real images (" + general(ev.real_fid) +
                           ": the first " + std::to_string(n_real) + " training images against the 2000 test images, "
                           "through the same extractor)";
  if (!std::isfinite(ev.fp32_mean_fid))
    return "**Headline:** " + verdict + " at " + margin + ". An fp32 run diverged, so whether the generators "
           "converged is not decided.\n\n";
  if (ev.unconverged)
    return "**Headline: the generators are unconverged, so this verdict is about unconverged models.** " + verdict +
           " at " + margin + ". The fp32 runs' mean FID, " + general(ev.fp32_mean_fid) + ", is " + ratio + " " + real +
           ", above the " + general(c.unconverged_ratio) + "× this report takes as the limit of a converged generator "
           "(`--unconverged-ratio`): the comparison is of two partly trained GANs, and says nothing yet about mixed "
           "precision on a converged one.\n\n";
  return "**Headline:** " + verdict + " at " + margin + ". The generators count as converged by this report's "
         "criterion: the fp32 runs' mean FID, " + general(ev.fp32_mean_fid) + ", is " + ratio + " " + real +
         ", within the " + general(c.unconverged_ratio) + "× of `--unconverged-ratio`.\n\n";
}

// Why k standard deviations, and what the rule replaced.
std::string margin_rationale(const GanParityConfig& c, const GanEvidence& ev) {
  const std::string sd = std::isfinite(ev.fid_margin_value) ? general(ev.fid_margin_value / c.margin_sd) : "-";
  std::string md =
      "**Why this margin.** FID has no scale of its own (it depends on the feature extractor and on N), so no absolute "
      "margin carries over from elsewhere. The margin is " + general(c.margin_sd) + " standard deviations of the fp32 "
      "runs' FIDs over the seeds (`--margin-sd`, default 2; KID takes the same rule on the fp32 KIDs): the spread that "
      "re-seeding the fp32 recipe itself produces. Two fp32 runs that differ only in their seed differ by about "
      "N(0, 2σ²), so by more than 2σ in 16% of pairs (P(|Z| > √2) = 0.157): a mixed-precision shift inside ±2σ is one "
      "that changing the fp32 seed often gives, and one beyond it stands out from the seed noise. Here σ = " + sd +
      " FID, estimated from the same " + std::to_string(c.seeds) + " fp32 runs (" + std::to_string(c.seeds - 1) +
      " degree(s) of freedom, so σ itself may be off by a factor of several), which makes the verdict approximate at "
      "the stated alpha; more seeds narrow both the margin's uncertainty and the interval.\n\n";
  const double old_margin = 0.1 * ev.fp32_mean_fid;
  md += "**What changed.** Earlier versions of this report took 10% of the fp32 runs' mean FID as the margin (";
  md += std::isfinite(old_margin) ? "±" + general(old_margin) + " FID on these runs" : std::string("undefined here");
  if (std::isfinite(old_margin) && std::isfinite(ev.fid_margin_value))
    md += ", " + general(old_margin / (ev.fid_margin_value / c.margin_sd)) + " fp32 seed standard deviations";
  md += "), which on generators whose FID is large let through shifts many times the seed noise, and the headline "
        "did not say that the generators were unconverged. The margin now comes from the fp32 seed-to-seed spread, "
        "and the headline states the convergence criterion's outcome.\n\n";
  return md;
}

// The title, the headline, the verdict and why this margin.
void verdict_section(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::string& md) {
  const std::size_t n_seeds = c.seeds;
  const metrics::GateResult& main_gate = ev.fid_gates.front();
  md += "# GAN FID parity: the DCGAN on MNIST in fp32 and in o2 mixed precision\n\n";
  md += "Written by `build/experiments/gan_parity` (experiment 5). Every number and figure below is read "
        "from the run directories it trained; the same seeds give the same report, byte for byte. No GPU was used: "
        "the mixed-precision side is the bit-exact fp16 emulator.\n\n";
  md += "## Verdict\n\n" + headline(c, ev);
  md += "```\n" + metrics::gate_verdict_line(main_gate) + "\n```\n\n";
  md += "The parity gate (`metrics/parity_gate.h`, the library call behind `mpverify gate --metric fid`) on the FID "
        "of each run's final generator: margin ±" + margin_text(ev.fid_margin_value, c.margin_sd) + " FID, alpha " +
        general(c.alpha) + ", the " + std::to_string(n_seeds) + " seeds paired (same initial weights, batches and "
        "latent codes on both sides). " + sentence(main_gate.reason) + "\n\n";
  md += report::gate_table_header(c.alpha);
  for (const metrics::GateResult& g : ev.fid_gates) md += report::gate_table_row(g) + "\n";
  md += "\n";
  for (std::size_t k = 0; k < ev.kid_tests.size(); ++k) {
    const KidTest& kt = ev.kid_tests[k];
    md += "KID, " + sides[k + 1].title + " against " + sides[0].title + " (the same paired equivalence test, "
          "`metrics::paired_tost`, margin ±" + margin_text(ev.kid_margin_value, c.margin_sd) + "): ";
    if (kt.test)
      md += std::string("**") + metrics::to_string(kt.test->verdict) + "**, difference " + general(kt.test->difference) +
            ", " + general(100 * (1 - 2 * c.alpha)) + "% CI [" + general(kt.test->lower) + ", " +
            general(kt.test->upper) + "].\n\n";
    else
      md += "**not equivalent**: " + kt.diverged + " has no KID (it diverged).\n\n";
  }
  md += "Reproduce the FID verdict from the run directories: `mpverify gate --baseline RUNS/" + sides[0].name +
        " --candidate RUNS/" + sides[1].name + " --metric fid --margin " + general(ev.fid_margin) +
        "` (RUNS is `--runs`, default `runs/gan_parity`).\n\n";
  md += margin_rationale(c, ev);
}

void claims_section(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::string& md) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& summaries = ev.summaries;
  md += "## The literature's claims and ours\n\n";
  md += "| claim | literature | here |\n|---|---|---|\n";
  {
    double worst = 0;
    std::size_t worst_step = 0;
    bool all = true;
    for (std::uint64_t s = 1; s <= n_seeds; ++s) {
      const json& a = summaries[sides[0].name][s - 1]["checkpoints"];
      const json& b = summaries[sides[1].name][s - 1]["checkpoints"];
      for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const auto fa = number_at(a[i], "fid"), fb = number_at(b[i], "fid");
        if (!fa || !fb) {
          all = false;
          continue;
        }
        if (std::fabs(*fb - *fa) > worst) {
          worst = std::fabs(*fb - *fa);
          worst_step = a[i]["step"].get<std::size_t>();
        }
      }
    }
    md += "| FID of the mixed-precision run tracks the FP32 run over training | GauGAN/SPADE, apex `amp` O1, 8 V100, "
          "512×512: stated as curves, no FID numbers quoted in our source | " +
          std::string(all ? "" : "some checkpoints diverged; ") + "largest absolute o2 − fp32 FID difference at a checkpoint, over " +
          std::to_string(n_seeds) + " seeds and " + std::to_string(c.checkpoints) + " checkpoints: " + fixed(worst, 2) +
          " (step " + std::to_string(worst_step) + "); see the figure below |\n";
    md += "| one loss scaler per loss (`amp.initialize(..., num_losses=2)`) | GauGAN/SPADE | **not what our DCGAN "
          "does**: one torch GradScaler serves both losses (below) |\n";
    md += "| parameters in FP32, cast to FP16 for compute, loss scaling | AC-GAN (TensorFlow) | yes: o2 keeps fp32 "
          "master weights and casts them to fp16 every step, dynamic loss scaling |\n";
    md += "| 1.58× less time per iteration (O1 vs FP32) | GauGAN, V100 | not measured: no GPU here, and the "
          "emulator's speed says nothing about a GPU's |\n";
    md += "| mixed precision produced recognisable classes where FP32 still produced noise (same wall time) | AC-GAN, "
          "Quick-Draw, 7 minutes on a V100 | not tested: both sides here run the same number of steps |\n\n";
  }
}

void what_ran_section(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, const fs::path& extractor, const std::string& extractor_sha,
                      const training::FeatureExtractor& fx, std::string& md) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& summaries = ev.summaries;
  const auto meta = [&](const char* key) {
    const auto it = fx.metadata().find(key);
    return it == fx.metadata().end() ? std::string("?") : it->second;
  };
  md += "## What ran\n\n";
  md += "- Model: the project's DCGAN (`nn::make_dcgan`): generator latent 32 → linear 3136 → batch norm → ReLU → "
        "transposed conv 64→32 (4×4, stride 2) → batch norm → ReLU → transposed conv 32→1 → tanh; discriminator conv "
        "1→32 (4×4, stride 2) → leaky ReLU 0.2 → conv 32→64 → batch norm → leaky ReLU → linear → 1 logit.\n";
  md += "- Data: MNIST (`--data mnist`), " + std::to_string(c.train_size) + " training images, batch " +
        std::string("64") + ", " + std::to_string(c.steps) + " steps per run, Adam (lr 2e-4, β1 0.5, β2 "
        "0.999: the DCGAN paper's settings) for both players.\n";
  md += "- One step: a discriminator step on the real batch and a generated one concatenated (targets 1 and 0), then a "
        "generator step through the updated discriminator on the same kind of batch (the real half and a new "
        "generated half; the loss on the generated half with target 1).\n";
  md += "- Sides: **" + sides[0].title + "**, the `fp32` recipe on the Eigen FP32 reference backend; **" + sides[1].title +
        "**, the `o2` recipe (fp16 weights, activations and gradients, fp32 master weights, fp32 accumulation) with "
        "the `torch` scaler (initial scale 2^16, halved on an overflow, doubled after 2000 clean steps) on the fp16 "
        "emulator";
  if (sides.size() > 2) md += "; **o1 (emu)**, the `o1` recipe with the same scaler";
  md += ".\n";
  md += "- Seeds 1–" + std::to_string(n_seeds) + " on every side: seed s gives the same initial weights, batches and "
        "latent codes (training and evaluation) on every side.\n";
  md += "- Evaluation after the last step: " + std::to_string(c.fid_samples) + " generated images (latent codes "
        "seeded by the run's seed) against the 2000 held-out MNIST test images, both through the feature extractor; "
        "FID (nuclear-norm route) with a " + std::to_string(c.bootstrap) + "-replicate bootstrap (90% percentile "
        "interval and standard error), KID over " + std::to_string(c.kid_subsets) + " subsets of 1000. FID over "
        "training: the same N and latent codes at steps ";
  {
    std::string list;
    for (const json& p : summaries[sides[0].name][0]["checkpoints"]) {
      if (!list.empty()) list += ", ";
      list += p["step"].dump();
    }
    md += list;
  }
  md += " (FID only).\n";
  md += "- Feature extractor (no Inception weights can be loaded here): our MNIST CNN (`training/feature_extractor.h`), "
        "784 features per image (pool2), ";
  if (c.extractor.empty())
    md += "trained by this experiment (seed " + meta("seed") + ", " + meta("steps") + " steps of SGD on the 8000 "
          "training images; test accuracy " + meta("test_accuracy") + ") and saved as `RUNS/extractor/" +
          extractor.filename().string() + "`";
  else
    md += "read from `" + extractor.filename().string() + "` (seed " + meta("seed") + ", " + meta("steps") +
          " steps; test accuracy " + meta("test_accuracy") + ")";
  md += "; sha256 `" + extractor_sha + "`. FIDs from another extractor are not comparable with these.\n";
  md += "- Why these sizes: an emulated o2 DCGAN step costs about 1 s on one core (the fp32 reference step about "
        "0.2 s; the emulated transposed convolutions take most of it), and each evaluation with its bootstrap and KID "
        "about a minute, so " + std::to_string(n_seeds) + " seeds × " + std::to_string(c.steps) + " steps per side "
        "keep the whole run within 10 minutes on 2 cores (estimated from the CPU time it took).";
  {
    // Converged or not, as the checkpoints say: the fp32 side's mean FID over
    // the seeds at the last two checkpoints.
    const json& cp = summaries[sides[0].name][0]["checkpoints"];
    if (cp.size() >= 2) {
      double before = 0, last = 0;
      bool ok = true;
      for (std::uint64_t s = 1; s <= n_seeds; ++s) {
        const json& p = summaries[sides[0].name][s - 1]["checkpoints"];
        const auto a = p.size() >= 2 ? number_at(p[p.size() - 2], "fid") : std::nullopt;
        const auto b = p.empty() ? std::nullopt : number_at(p.back(), "fid");
        if (!a || !b) ok = false;
        else {
          before += *a;
          last += *b;
        }
      }
      if (ok && last < before)
        md += " The fp32 FID was still falling at the last checkpoint (mean over the seeds " +
              fixed(before / static_cast<double>(n_seeds), 2) + " at step " + cp[cp.size() - 2]["step"].dump() +
              ", " + fixed(last / static_cast<double>(n_seeds), 2) + " at step " + cp.back()["step"].dump() +
              "): these generators are not converged, and the comparison is of two partly trained GANs.";
      else if (ok)
        md += " The fp32 FID did not fall between the last two checkpoints (mean over the seeds " +
              fixed(before / static_cast<double>(n_seeds), 2) + " at step " + cp[cp.size() - 2]["step"].dump() +
              ", " + fixed(last / static_cast<double>(n_seeds), 2) + " at step " + cp.back()["step"].dump() + ").";
    }
  }
  md += "\n\n";
}

void loss_scaling_section(std::string& md) {
  md += "## Loss scaling with two losses\n\n";
  md += "Our DCGAN (`training/trainer.cpp`) has **one loss scaler for both losses**: the discriminator's loss is "
        "scaled by the current scale, its gradients unscaled and checked, and the scaler stepped; then the "
        "generator's loss is scaled by the scale *after* that step, checked, and the scaler stepped again (as one "
        "`torch.cuda.amp.GradScaler` with `scaler.update()` after each optimizer). An overflow in either player's "
        "gradients halves the scale both use. GauGAN's apex recipe (`num_losses=2`) keeps one scaler per loss, so "
        "one player's overflow does not lower the other's scale; we have not implemented that variant. The steps log "
        "both scales (`scale` for the discriminator's step, `scale_g` for the generator's).\n\n";
}

void runs_section(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::string& md) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& summaries = ev.summaries;
  const auto evaluation = [&](const std::string& side, std::uint64_t seed) -> const json& {
    return ev.evaluation(side, seed);
  };
  const std::vector<std::vector<metrics::GateResult>>& seed_gates = ev.seed_gates;
  md += "## Runs\n\n";
  md += "| seed |";
  for (const GanSide& side : sides) md += " " + side.title + " FID [90% bootstrap] |";
  for (std::size_t k = 1; k < sides.size(); ++k) md += " " + sides[k].title + " − fp32 FID |";
  for (const GanSide& side : sides) md += " " + side.title + " KID (± sd over subsets) |";
  for (std::size_t k = 1; k < sides.size(); ++k) md += " " + sides[k].title + " skipped steps, final scale |";
  md += "\n|---|";
  for (std::size_t k = 0; k < 2 * sides.size() + 2 * (sides.size() - 1); ++k) md += "---:|";
  md += "\n";
  for (std::uint64_t s = 1; s <= n_seeds; ++s) {
    md += "| " + std::to_string(s) + " |";
    for (const GanSide& side : sides) {
      const json& e = evaluation(side.name, s);
      const auto f = number_at(e, "fid");
      std::string cell = fid_text(f);
      if (f && e["fid_interval"].is_array())
        cell += " [" + fixed(e["fid_interval"][0].get<double>(), 2) + ", " + fixed(e["fid_interval"][1].get<double>(), 2) + "]";
      add_cell(md, cell);
    }
    const auto base = number_at(evaluation(sides[0].name, s), "fid");
    for (std::size_t k = 1; k < sides.size(); ++k) {
      const auto f = number_at(evaluation(sides[k].name, s), "fid");
      add_cell(md, f && base ? fixed(*f - *base, 2) : std::string("-"));
    }
    for (const GanSide& side : sides) {
      const json& e = evaluation(side.name, s);
      const auto k = number_at(e, "kid"), sd = number_at(e, "kid_stderr");
      add_cell(md, k ? general(*k) + (sd ? " ± " + general(*sd) : std::string()) : std::string("diverged"));
    }
    for (std::size_t k = 1; k < sides.size(); ++k) {
      const json& sum = summaries[sides[k].name][s - 1];
      std::string cell = sum["skipped_steps"].dump();
      cell += ", ";
      cell += power_of_two_text(sum["final_scale"].get<double>());
      add_cell(md, cell);
    }
    md += "\n";
  }
  md += "\nFID per seed with one run per side (the gate's `stderr-t` method, `--accept-single-run`: the two bootstrap "
        "standard errors, t with B - 1 degrees of freedom for B replicates; it covers the evaluation's sampling noise "
        "only, not the seed-to-seed spread; earlier versions took the normal quantile, which with few replicates "
        "gave narrower intervals, and the gate now calls one run per side inconclusive unless asked):\n\n";
  md += report::gate_table_header(c.alpha);
  for (const std::vector<metrics::GateResult>& per_seed : seed_gates)
    for (const metrics::GateResult& g : per_seed) md += report::gate_table_row(g) + "\n";
  md += "\nThe bootstrap resamples the generated and the real features (" + std::to_string(c.bootstrap) +
        " replicates; its standard error is itself uncertain by about 1/√(2(B − 1)) = " +
        fixed(100.0 / std::sqrt(2.0 * static_cast<double>(c.bootstrap - 1)), 0) + "%). Its replicates sit above the "
        "full-set FID (a resample holds about 63% distinct images, and FID grows as N falls), which is why a "
        "run's FID can lie near the low end of its interval. KID's ± is the standard deviation over its subsets.\n\n";
}

void fid_over_training_section(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::string& md) {
  const std::size_t n_seeds = c.seeds;
  std::map<std::string, std::vector<json>>& summaries = ev.summaries;
  const auto link = [&](const char* what, const char* alt) { return figure_link(c.report, what, alt); };
  md += "## FID over training\n\n" + link("fid", "FID over training");
  md += "| step |";
  for (const GanSide& side : sides) md += " " + side.title + " FID, seeds 1–" + std::to_string(n_seeds) + " |";
  for (std::size_t k = 1; k < sides.size(); ++k) md += " " + sides[k].title + " − fp32, mean over seeds |";
  md += "\n|---:|";
  for (std::size_t k = 0; k < 2 * sides.size() - 1; ++k) md += "---|";
  md += "\n";
  const json& points = summaries[sides[0].name][0]["checkpoints"];
  for (std::size_t i = 0; i < points.size(); ++i) {
    md += "| " + points[i]["step"].dump() + " |";
    std::map<std::string, std::vector<std::optional<double>>> at;
    for (const GanSide& side : sides) {
      std::string cell;
      for (std::uint64_t s = 1; s <= n_seeds; ++s) {
        const json& cp = summaries[side.name][s - 1]["checkpoints"];
        const std::optional<double> f = i < cp.size() ? number_at(cp[i], "fid") : std::nullopt;
        at[side.name].push_back(f);
        if (s > 1) cell += " / ";
        cell += fid_text(f);
      }
      add_cell(md, cell);
    }
    for (std::size_t k = 1; k < sides.size(); ++k) {
      double sum = 0;
      bool ok = true;
      for (std::size_t s = 0; s < n_seeds; ++s) {
        const auto a = at[sides[0].name][s], b = at[sides[k].name][s];
        if (!a || !b) ok = false;
        else sum += *b - *a;
      }
      add_cell(md, ok ? fixed(sum / static_cast<double>(n_seeds), 2) : std::string("-"));
    }
    md += "\n";
  }
  md += "\nSolid lines: " + sides[0].title + "; dashed: the mixed-precision side. Each checkpoint uses the same " +
        std::to_string(c.fid_samples) + " latent codes as the final evaluation, so the curves of one seed differ only "
        "by the weights the two sides reached.\n\n";
}

void samples_section(const GanParityConfig& c, std::string& md) {
  const auto link = [&](const char* what, const char* alt) { return figure_link(c.report, what, alt); };
  md += "## Samples\n\n" + link("samples", "Generated digits from the same latent codes on each side");
  md += "Seed 1's generators after the last step, on the first " + std::to_string(c.grid) + " latent codes of the "
        "evaluation (the same codes on every side, so cell k of one panel and cell k of another show what the two "
        "generators make of the same input). The difference panel shows where the sides' pixels part.\n\n";
}

void losses_section(const GanParityConfig& c, const std::vector<GanSide>& sides, GanEvidence& ev, std::string& md) {
  std::map<std::string, std::vector<json>>& steps = ev.steps;
  const auto link = [&](const char* what, const char* alt) { return figure_link(c.report, what, alt); };
  md += "## Losses and loss scale\n\n" + link("loss", "Losses per step") + link("scale", "Loss scale per step");
  for (std::size_t k = 1; k < sides.size(); ++k) {
    const std::vector<json>& st = steps[sides[k].name];
    const auto count = [&](const char* key) {
      return std::count_if(st.begin(), st.end(), [&](const json& j) { return j.value(key, false); });
    };
    const std::vector<double> sc = report::step_values(st, "scale");
    md += "- " + sides[k].title + ", seed 1: " + std::to_string(count("skipped_d")) + " skipped discriminator step(s) "
          "and " + std::to_string(count("skipped_g")) + " skipped generator step(s) (an inf or NaN in a gradient at "
          "the scale); the scale went from " + power_of_two_text(sc.front()) + " at step 0 to " +
          power_of_two_text(sc.back()) + " at the last step.\n";
  }
  md += "\n";
}

void literature_section(const GanParityConfig& c, std::string& md) {
  const std::size_t n_seeds = c.seeds;
  md += "## Where we differ from the literature\n\n";
  md += "- Scale: a small 28×28 DCGAN trained for " + std::to_string(c.steps) + " steps on a CPU, not "
        "GauGAN at 512×512 for days on 8 V100s. The claim reproduced is its shape (FID of the mixed-precision run "
        "against the fp32 run's, over training), not its numbers, which our source does not give.\n";
  md += "- Recipe: o2 (fp16 weights and activations with fp32 master weights), not apex O1 (op-by-op casting with "
        "fp32 weights). Loss scaling: one scaler for both losses, not one per loss.\n";
  md += "- Features: our own MNIST CNN, not Inception-v3: the FID values are on another scale from published ones "
        "and comparable only with FIDs through the same extractor (the sha256 above) at the same N.\n";
  md += "- Hardware: the mixed-precision side is the bit-exact fp16 emulator, not a GPU; no speed is claimed.\n";
  md += "- Seeds: " + std::to_string(n_seeds) + " per side. With so few the paired interval is wide (a t quantile "
        "with " + std::to_string(n_seeds - 1) + " degrees of freedom); an inconclusive verdict says the runs cannot "
        "tell, not that the sides differ. The spread of the per-seed differences is estimated from " + std::to_string(n_seeds - 1) + " degree(s) of freedom, so the interval's width is itself very uncertain: a narrow interval can come from differences that happen to be close.\n";
}

// What --json prints.
nlohmann::ordered_json gan_parity_json(const std::vector<GanSide>& sides, GanEvidence& ev, const std::string& extractor_sha,
                                       const GanParityResult& result, double margin_sd) {
  const metrics::GateResult& main_gate = ev.fid_gates.front();
  const double fid_margin_value = ev.fid_margin_value;
  const double kid_margin_value = ev.kid_margin_value;
  const std::vector<metrics::GateResult>& fid_gates = ev.fid_gates;
  const std::vector<std::vector<metrics::GateResult>>& seed_gates = ev.seed_gates;
  const std::vector<KidTest>& kid_tests = ev.kid_tests;
  nlohmann::ordered_json j;
  j["verdict"] = metrics::to_string(main_gate.verdict);
  j["line"] = metrics::gate_verdict_line(main_gate);
  nlohmann::ordered_json gates = nlohmann::ordered_json::array();
  for (const metrics::GateResult& g : fid_gates) gates.push_back(metrics::gate_json(g));
  j["fid_gates"] = gates;
  nlohmann::ordered_json per_seed = nlohmann::ordered_json::array();
  for (const std::vector<metrics::GateResult>& v : seed_gates)
    for (const metrics::GateResult& g : v) per_seed.push_back(metrics::gate_json(g));
  j["fid_gates_per_seed"] = per_seed;
  nlohmann::ordered_json kids = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < kid_tests.size(); ++k) {
    nlohmann::ordered_json t;
    t["candidate"] = sides[k + 1].name;
    if (kid_tests[k].test) {
      t["verdict"] = metrics::to_string(kid_tests[k].test->verdict);
      t["difference"] = kid_tests[k].test->difference;
      t["ci_lower"] = kid_tests[k].test->lower;
      t["ci_upper"] = kid_tests[k].test->upper;
    } else {
      t["verdict"] = "not equivalent";
      t["diverged"] = kid_tests[k].diverged;
    }
    t["margin"] = std::isfinite(kid_margin_value) ? json(kid_margin_value) : json(nullptr);
    kids.push_back(t);
  }
  j["kid_tests"] = kids;
  j["fid_margin"] = std::isfinite(fid_margin_value) ? json(fid_margin_value) : json(nullptr);
  j["margin_sd"] = margin_sd;
  j["fp32_mean_fid"] = std::isfinite(ev.fp32_mean_fid) ? json(ev.fp32_mean_fid) : json(nullptr);
  j["real_fid"] = ev.real_fid;
  j["unconverged"] = ev.unconverged;
  j["extractor_sha256"] = extractor_sha;
  json runs = json::array();
  for (const GanRunResult& r : result.runs)
    runs.push_back({{"side", r.side}, {"seed", r.seed}, {"wall_seconds", r.wall_seconds},
                    {"fid", r.summary["evaluation"]["fid"]}, {"kid", r.summary["evaluation"]["kid"]},
                    {"skipped_steps", r.summary["skipped_steps"]}, {"final_scale", r.summary["final_scale"]}});
  j["runs"] = runs;
  j["files"] = result.files;
  return j;
}

}  // namespace

GanParityResult write_gan_parity_report(const GanParityConfig& c, const std::vector<GanSide>& sides,
                                        const fs::path& extractor, GanParityResult result,
                                        const std::function<void(const std::string&)>& say) {
  GanEvidence ev;
  read_runs(c, sides, ev);
  say("the real-vs-real reference FID");
  ev.real_fid = real_reference_fid(c, extractor);
  set_margins(c, sides, ev);
  evaluate_gates(c, sides, ev, say);

  say("figures and report");
  fs::create_directories(c.report.parent_path().empty() ? fs::path(".") : c.report.parent_path());
  std::vector<fs::path>& files = result.files;
  draw_fid_chart(c, sides, ev, files);
  draw_samples(c, sides, files);
  draw_losses(c, sides, ev, files);
  draw_loss_scale(c, sides, ev, files);

  // The extractor, named by its bytes.
  const std::string extractor_sha = io::sha256_file_hex(extractor);
  const training::FeatureExtractor fx = training::FeatureExtractor::load(extractor);

  std::string md;
  verdict_section(c, sides, ev, md);
  claims_section(c, sides, ev, md);
  what_ran_section(c, sides, ev, extractor, extractor_sha, fx, md);
  loss_scaling_section(md);
  runs_section(c, sides, ev, md);
  fid_over_training_section(c, sides, ev, md);
  samples_section(c, md);
  losses_section(c, sides, ev, md);
  literature_section(c, md);
  report::write_output(c.report, md, files);

  result.json = gan_parity_json(sides, ev, extractor_sha, result, c.margin_sd);
  return result;
}

}  // namespace mpverify::experiments
