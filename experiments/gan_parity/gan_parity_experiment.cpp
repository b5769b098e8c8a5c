#include "gan_parity/gan_parity_experiment.h"
#include "gan_parity/gan_parity_report.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>

#include "data/data_file_error.h"
#include "data/dataset.h"
#include "io/file_error.h"
#include "io/npy.h"
#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "metrics/fid.h"
#include "metrics/fid_features.h"
#include "metrics/gan_evaluation.h"
#include "metrics/image_features.h"
#include "metrics/parity_gate.h"
#include "record/run_log.h"
#include "report/gate_table.h"
#include "report/output_files.h"
#include "report/run_series.h"
#include "report/svg_image_grid.h"
#include "report/svg_line_chart.h"
#include "report/text_format.h"
#include "training/base_config.h"
#include "training/ensemble.h"
#include "training/feature_extractor.h"
#include "training/trainer.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;
using report::fixed;
using report::general;

namespace {

constexpr std::size_t kBatch = training::kExperimentBatch;
constexpr std::size_t kTestSize = 2000;  // the fixed MNIST test split
constexpr double kAdamLr = 2e-4, kAdamBeta1 = 0.5, kAdamBeta2 = 0.999;
constexpr double kIntervalLevel = 0.90;  // of each FID's bootstrap interval (the gate's 90% intervals too)
constexpr const char* kExtractorFile = "fid-cnn.safetensors";

}  // namespace

training::TrainConfig gan_train_config(const GanParityConfig& c, const GanSide& side, std::uint64_t seed) {
  training::TrainConfig t = training::experiment_config({.model = "dcgan", .data = "mnist", .data_dir = c.data_dir,
                                                         .train_size = c.train_size, .test_size = kTestSize,
                                                         .steps = c.steps});
  t.seed = seed;
  t.optimizer = training::OptimizerKind::adam;
  t.adam.lr = kAdamLr;
  t.adam.beta1 = kAdamBeta1;
  t.adam.beta2 = kAdamBeta2;
  t.recipe = side.recipe;
  t.scaler = side.scaler;
  t.backend = side.emulated ? nn::BackendKind::emu : nn::BackendKind::ref;
  // The recorders only observe (they change no number the training
  // computes) and would double the emulated step's cost; the loss and the
  // scale are logged without them.
  t.recorders = false;
  t.histograms = false;
  t.record_every = 0;
  return t;
}

namespace {

std::vector<std::size_t> checkpoint_steps(const GanParityConfig& c) {
  std::vector<std::size_t> steps;
  for (std::size_t k = 1; k <= c.checkpoints; ++k) steps.push_back(k * c.steps / c.checkpoints);
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

// Runs the jobs `threads` at a time, in the order given; the first failure is
// rethrown once every started job has ended (no new job starts after it).
void run_jobs(const std::vector<std::function<void()>>& jobs, std::size_t threads) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failure;
  const auto worker = [&] {
    for (;;) {
      {
        const std::lock_guard lock(mutex);
        if (failure) return;
      }
      const std::size_t i = next++;
      if (i >= jobs.size()) return;
      try {
        jobs[i]();
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < std::min(threads, jobs.size()); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::optional<std::string> first_nonfinite(const std::vector<float>& images) {
  for (std::size_t i = 0; i < images.size(); ++i)
    if (!std::isfinite(images[i])) return "generated value " + std::to_string(i) + " is not finite";
  return std::nullopt;
}

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::optional<double> number_at(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// One DCGAN run: trains, measures FID at the checkpoints, evaluates at the
// end (FID, bootstrap, KID), saves the grid's images, writes summary.json.
json train_gan_run(const GanParityConfig& c, const GanSide& side, std::uint64_t seed, const fs::path& dir,
                   std::shared_future<fs::path> extractor_file) {  // a copy per thread, as shared_future asks
  fs::remove_all(dir);
  training::Trainer trainer(gan_train_config(c, side, seed));
  record::RunLog steps(dir, 50, "steps.jsonl");
  const std::vector<std::size_t> at = checkpoint_steps(c);
  std::optional<metrics::LoadedExtractor> extractor;
  std::optional<metrics::GaussianStats> real;
  const auto load = [&] {
    if (extractor) return;
    extractor = metrics::load_extractor(extractor_file.get());  // this run's own copy: the extractor is not thread-safe
    const std::vector<double> f = metrics::image_features(*extractor->extractor, trainer.data().test.images);
    real = metrics::gaussian_stats({f, trainer.data().test.size(), training::kFeatureDim, "real test"});
  };
  json checkpoints = json::array();
  for (std::size_t i = 0; i < c.steps && !trainer.aborted(); ++i) {
    steps.append(trainer.step());
    const std::size_t done = i + 1;
    if (done == c.steps || std::find(at.begin(), at.end(), done) == at.end()) continue;
    // FID only (no bootstrap, no KID) at the same N and on the same latent
    // codes as the final evaluation.
    load();
    const std::vector<float> images = trainer.generate(c.fid_samples, seed);
    json point = {{"step", done}, {"fid", nullptr}, {"n", c.fid_samples}, {"diverged", false}};
    if (const auto bad = first_nonfinite(images)) {
      point["diverged"] = true;
      point["reason"] = *bad;
    } else {
      const std::vector<double> f = metrics::image_features(*extractor->extractor, images);
      const metrics::GaussianStats g =
          metrics::gaussian_stats({f, c.fid_samples, training::kFeatureDim, "generated"});
      point["fid"] = number_or_null(metrics::frechet_distance(g, *real).fid);
    }
    checkpoints.push_back(point);
  }
  steps.flush();
  load();
  metrics::GanEvaluationOptions options;
  options.samples = c.fid_samples;
  options.bootstrap_replicates = c.bootstrap;
  options.level = kIntervalLevel;
  options.kid_subsets = c.kid_subsets;
  const json evaluation = metrics::evaluate_gan(trainer, *extractor->extractor, extractor->record, options);
  checkpoints.push_back({{"step", trainer.steps_done()},
                         {"fid", evaluation["fid"]},
                         {"n", c.fid_samples},
                         {"diverged", evaluation["diverged"]}});
  json summary = trainer.summary();
  summary["evaluation"] = evaluation;
  summary["checkpoints"] = checkpoints;
  // The grid's images: the first `grid` latent codes of the evaluation's.
  const std::vector<float> grid = trainer.generate(c.grid, seed);
  if (!first_nonfinite(grid)) {
    io::write_npy(dir / "samples.npy", grid, {c.grid, 1, 28, 28});
    summary["samples"] = {{"file", "samples.npy"}, {"n", c.grid}, {"seed", seed}, {"shape", {c.grid, 1, 28, 28}}};
  }
  steps.write_summary(summary);
  return summary;
}

}  // namespace

namespace {

// Each side an ensemble directory, as `train --seeds` writes it, so that
// `mpverify gate --metric fid` reproduces the verdict from the runs (seeds
// 1..c.seeds; --report-only rewrites it for the seeds it reports on).
void write_ensembles(const GanParityConfig& c, const std::vector<GanSide>& sides) {
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= c.seeds; ++s) seeds.push_back(s);
  for (const GanSide& side : sides) training::write_ensemble_manifest(c.runs / side.name, seeds);
}

// What a finished run's directory must hold for these settings: nullopt when its summary.json matches them
// (configuration, seed, evaluation settings, the extractor's sha256, checkpoints, grid), else why not.
struct ExpectedRun {
  json config;                    // the side's configuration without seed and data_dir
  std::string extractor_sha;
  std::vector<std::size_t> checkpoints;
};

ExpectedRun expected_run(const GanParityConfig& c, const GanSide& side, const std::string& extractor_sha) {
  ExpectedRun e{training::Trainer(gan_train_config(c, side, 1)).summary()["config"], extractor_sha,
                checkpoint_steps(c)};
  e.config.erase("seed");
  e.config.erase("data_dir");
  if (e.checkpoints.empty() || e.checkpoints.back() != c.steps) e.checkpoints.push_back(c.steps);
  return e;
}

std::optional<std::string> run_mismatch(const GanParityConfig& c, const ExpectedRun& expected, const fs::path& dir,
                                        std::uint64_t seed, json& summary) {
  try {
    summary = metrics::read_json_document(dir / "summary.json");
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  json config = summary.value("config", json::object());
  const bool seed_ok = config.value("seed", json()) == json(seed);
  config.erase("seed");
  config.erase("data_dir");
  if (!seed_ok || config != expected.config) return dir.string() + " was trained with other settings";
  const json& e = summary.value("evaluation", json::object());
  if (e.value("n", json()) != json(c.fid_samples) || e.value("fid_bootstrap_replicates", json()) != json(c.bootstrap) ||
      e.value("kid_subsets", json()) != json(c.kid_subsets))
    return dir.string() + " was evaluated with other --fid-samples, --bootstrap or --kid-subsets";
  if (!e.contains("extractor") || e["extractor"].value("sha256", "") != expected.extractor_sha)
    return dir.string() + " was evaluated through another feature extractor (sha256)";
  std::vector<std::size_t> steps;
  for (const json& p : summary.value("checkpoints", json::array())) steps.push_back(p.value("step", std::size_t{0}));
  if (steps != expected.checkpoints && !summary.value("aborted", false)) return dir.string() + " has other --checkpoints";
  if (summary.contains("samples") && summary["samples"].value("n", std::size_t{0}) != c.grid)
    return dir.string() + " saved another --grid";
  return std::nullopt;
}

// --report-only: the runs a previous run left, refused (std::invalid_argument)
// unless they were trained and evaluated with these settings and extractor.
std::vector<GanRunResult> existing_runs(const GanParityConfig& c, const std::vector<GanSide>& sides,
                                        const fs::path& extractor) {
  const auto refuse = [&](const std::string& why) {
    throw std::invalid_argument("--report-only: " + why + "; run without --report-only to train them");
  };
  if (!fs::is_regular_file(extractor)) refuse("no feature extractor at " + extractor.string());
  const std::string sha = metrics::load_extractor(extractor).record.sha256;
  std::vector<GanRunResult> runs;
  for (const GanSide& side : sides) {
    const ExpectedRun expected = expected_run(c, side, sha);
    for (std::uint64_t s = 1; s <= c.seeds; ++s) {
      json summary;
      if (const auto why = run_mismatch(c, expected, training::seed_directory(c.runs / side.name, s), s, summary))
        refuse(*why);
      runs.push_back({side.name, s, summary, 0.0});
    }
  }
  return runs;
}

// Resuming: while it trains, the experiment keeps RUNS/queue.json, the settings its runs depend on (not the
// report's margins, level or --jobs); it is removed once the report is written. Started again over the same
// journal (the previous attempt was killed), the extractor and every run whose summary.json (written last,
// atomically) matches these settings are kept, and the rest trained again from their start: the runs are
// seeded and share nothing, so the files are byte-identical to an uninterrupted run's.
json journal_settings(const GanParityConfig& c) {
  return {{"experiment", "gan_parity"},
          {"extractor", c.extractor.empty() ? json{{"seed", c.extractor_seed}, {"steps", c.extractor_steps}}
                                            : json(fs::absolute(c.extractor).string())},
          {"data_dir", c.data_dir.string()},
          {"seeds", c.seeds},
          {"steps", c.steps},
          {"checkpoints", c.checkpoints},
          {"train_size", c.train_size},
          {"fid_samples", c.fid_samples},
          {"bootstrap", c.bootstrap},
          {"kid_subsets", c.kid_subsets},
          {"grid", c.grid},
          {"with_o1", c.with_o1}};
}

bool journal_matches(const fs::path& journal, const json& settings) {
  if (!fs::is_regular_file(journal)) return false;
  try {
    return metrics::read_json_document(journal) == settings;
  } catch (const std::exception&) {
    return false;  // unreadable: start over
  }
}

// The summaries of the runs a killed attempt finished that match these settings, by side and seed (each
// side's expected configuration and the extractor's sha256 worked out once).
std::map<std::pair<std::string, std::uint64_t>, json> kept_runs(const GanParityConfig& c,
                                                                  const std::vector<GanSide>& sides,
                                                                  const fs::path& extractor) {
  const std::string sha = metrics::load_extractor(extractor).record.sha256;
  std::map<std::pair<std::string, std::uint64_t>, json> kept;
  for (const GanSide& side : sides) {
    const ExpectedRun expected = expected_run(c, side, sha);
    for (std::uint64_t s = 1; s <= c.seeds; ++s) {
      json summary;
      if (!run_mismatch(c, expected, training::seed_directory(c.runs / side.name, s), s, summary))
        kept[{side.name, s}] = std::move(summary);
    }
  }
  return kept;
}

}  // namespace

double gan_margin(double k, const std::vector<double>& baseline_values) {
  const std::size_t n = baseline_values.size();
  if (n < 2) return std::nan("");
  double sum = 0;
  for (const double v : baseline_values) sum += v;  // a NaN (diverged) propagates
  const double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (const double v : baseline_values) squares += (v - mean) * (v - mean);
  const double sd = std::sqrt(squares / static_cast<double>(n - 1));
  return sd > 0 ? k * sd : std::nan("");
}

double real_reference_fid(const GanParityConfig& c, const fs::path& extractor) {
  const training::Trainer t(gan_train_config(c, gan_sides(c)[0], 1));  // the runs' data split
  const data::Split& d = t.data();
  const metrics::LoadedExtractor x = metrics::load_extractor(extractor);
  const std::size_t n = std::min(c.fid_samples, d.train.size());
  const std::span<const float> train(d.train.images.data(), n * d.train.image_size());
  const std::vector<double> a = metrics::image_features(*x.extractor, train);
  const std::vector<double> b = metrics::image_features(*x.extractor, d.test.images);
  return metrics::fid({a, n, training::kFeatureDim, "real training images"},
                      {b, d.test.size(), training::kFeatureDim, "real test images"})
      .fid;
}

bool gan_unconverged(double fp32_mean_fid, double real_fid, double ratio) {
  return std::isfinite(fp32_mean_fid) && std::isfinite(real_fid) && fp32_mean_fid > ratio * real_fid;
}

std::vector<GanSide> gan_sides(const GanParityConfig& c) {
  std::vector<GanSide> sides{{"fp32-ref", "fp32 (ref)", "fp32", "none", false},
                             {"o2-emu", "o2 (emu)", "o2", "torch", true}};
  if (c.with_o1) sides.push_back({"o1-emu", "o1 (emu)", "o1", "torch", true});
  return sides;
}

void validate_gan_parity(const GanParityConfig& c) {
  const auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (c.report.extension() != ".md" || c.report.stem().empty())
    bad("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.runs.empty()) bad("--runs: give the directory for the runs");
  if (c.seeds < 2) bad("--seeds " + std::to_string(c.seeds) + ": the paired gate needs at least 2 seeds per side");
  if (c.seeds > training::kMaxSeeds) bad("--seeds: at most " + std::to_string(training::kMaxSeeds));
  if (c.steps < 1) bad("--steps must be at least 1");
  if (c.checkpoints < 1 || c.checkpoints > c.steps)
    bad("--checkpoints " + std::to_string(c.checkpoints) + ": between 1 and --steps (" + std::to_string(c.steps) + ")");
  if (c.train_size < kBatch || c.train_size > 8000)
    bad("--train-size " + std::to_string(c.train_size) + ": between one batch (64) and the 8000 MNIST training images");
  if (c.fid_samples < 2 || c.fid_samples > 100000)
    bad("--fid-samples " + std::to_string(c.fid_samples) + ": between 2 and 100000 generated images");
  if (c.grid < 1 || c.grid > c.fid_samples || c.grid > 1024)
    bad("--grid " + std::to_string(c.grid) + ": between 1 and min(--fid-samples, 1024) images");
  if (c.bootstrap < 2) bad("--bootstrap " + std::to_string(c.bootstrap) + ": at least 2 replicates for an interval");
  if (c.kid_subsets < 1) bad("--kid-subsets must be at least 1");
  if (!(c.margin_sd > 0 && c.margin_sd <= 100))
    bad("--margin-sd must be in (0, 100] (the margins are k times the fp32 runs' standard deviation over the seeds)");
  if (!(c.unconverged_ratio >= 1 && c.unconverged_ratio <= 1e6))
    bad("--unconverged-ratio must be in [1, 1e6] (unconverged: fp32 mean FID above R times the real-vs-real FID)");
  if (!(c.alpha > 0 && c.alpha < 0.5)) bad("--alpha must be in (0, 0.5)");
  if (c.jobs < 1) bad("--jobs must be at least 1");
  if (c.extractor_steps < 1) bad("--extractor-steps must be at least 1");
  if (!c.extractor.empty()) {
    try {
      (void)metrics::load_extractor(c.extractor);
    } catch (const io::FileError& e) {
      bad(std::string("--extractor: ") + e.what() + " (make one with `mpverify feature-extractor --out FILE`, or leave "
          "--extractor out to train one)");
    }
  }
  for (const GanSide& side : gan_sides(c)) {
    const training::Trainer check(gan_train_config(c, side, 1));  // DataFileError when MNIST is missing
    metrics::GanEvaluationOptions options;
    options.samples = c.fid_samples;
    options.bootstrap_replicates = c.bootstrap;
    options.level = kIntervalLevel;
    options.kid_subsets = c.kid_subsets;
    metrics::check_gan_evaluation(check, options);
  }
}

GanParityResult run_gan_parity(const GanParityConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_gan_parity(c);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::vector<GanSide> sides = gan_sides(c);
  GanParityResult result;
  if (c.report_only) {
    const fs::path extractor = c.extractor.empty() ? c.runs / "extractor" / kExtractorFile : c.extractor;
    result.runs = existing_runs(c, sides, extractor);
    write_ensembles(c, sides);
    say("report from the runs in " + c.runs.string() + " (nothing trained)");
    return write_gan_parity_report(c, sides, extractor, std::move(result), say);
  }

  // Resuming a killed attempt (journal_settings) or starting over.
  const fs::path journal = c.runs / "queue.json";
  const json settings = journal_settings(c);
  const fs::path trained_extractor = c.runs / "extractor" / kExtractorFile;
  const bool resuming = journal_matches(journal, settings);
  const bool keep_extractor = resuming && (!c.extractor.empty() || fs::is_regular_file(trained_extractor));
  if (!keep_extractor) {
    for (const GanSide& side : sides) fs::remove_all(c.runs / side.name);
    if (c.extractor.empty()) fs::remove_all(c.runs / "extractor");
  }
  fs::create_directories(c.runs);
  record::write_file_atomically(journal, settings.dump(2) + "\n");

  // The feature extractor: trained first (the runs need it at their first
  // checkpoint), or the given file, or the one a killed attempt trained.
  std::promise<fs::path> extractor_promise;
  const std::shared_future<fs::path> extractor_file = extractor_promise.get_future().share();
  std::vector<std::function<void()>> jobs;
  if (c.extractor.empty() && !keep_extractor) {
    jobs.push_back([&] {
      try {
        training::FeatureExtractorOptions o;
        o.seed = c.extractor_seed;
        o.steps = c.extractor_steps;
        o.batch_size = kBatch;
        o.data_dir = c.data_dir;
        fs::create_directories(trained_extractor.parent_path());
        training::FeatureExtractor::train(o).save(trained_extractor);
        say("feature extractor trained (" + std::to_string(c.extractor_steps) + " steps)");
        extractor_promise.set_value(trained_extractor);
      } catch (...) {
        extractor_promise.set_exception(std::current_exception());
        throw;
      }
    });
  } else {
    extractor_promise.set_value(c.extractor.empty() ? trained_extractor : c.extractor);
    if (keep_extractor && c.extractor.empty()) say("feature extractor kept from the attempt that was stopped");
  }
  std::map<std::pair<std::string, std::uint64_t>, json> kept_summaries;
  if (keep_extractor) kept_summaries = kept_runs(c, sides, extractor_file.get());

  // The emulated runs first (the slowest), then the reference ones.
  struct Run {
    const GanSide* side;
    std::uint64_t seed;
  };
  std::vector<Run> order;
  for (const GanSide& side : sides)
    if (side.emulated)
      for (std::uint64_t s = 1; s <= c.seeds; ++s) order.push_back({&side, s});
  for (const GanSide& side : sides)
    if (!side.emulated)
      for (std::uint64_t s = 1; s <= c.seeds; ++s) order.push_back({&side, s});
  result.runs.resize(order.size());
  std::mutex mutex;
  std::size_t finished = 0;
  for (std::size_t i = 0; i < order.size(); ++i)
    jobs.push_back([&, i] {
      const Run& r = order[i];
      const auto start = std::chrono::steady_clock::now();
      const auto found = kept_summaries.find({r.side->name, r.seed});
      const bool kept = found != kept_summaries.end();
      json summary = kept ? found->second
                          : train_gan_run(c, *r.side, r.seed, training::seed_directory(c.runs / r.side->name, r.seed),
                                          extractor_file);
      const std::lock_guard lock(mutex);
      GanRunResult& out = result.runs[i];
      out.side = r.side->name;
      out.seed = r.seed;
      out.summary = std::move(summary);
      out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto fid = number_at(out.summary["evaluation"], "fid");
      // Appended piecewise: "[" + std::to_string(...) trips GCC 12's -Wrestrict (bug 105651).
      std::string line = "[";
      line += std::to_string(++finished) + "/" + std::to_string(order.size()) + "] " + r.side->name;
      line += " seed " + std::to_string(r.seed) + ": FID " + (fid ? general(*fid) : std::string("diverged"));
      line += kept ? std::string(", kept from the attempt that was stopped") : ", " + fixed(out.wall_seconds, 1) + " s";
      if (kept) out.wall_seconds = 0;
      say(line);
    });
  say("training " + std::to_string(order.size()) + " DCGAN runs (" + std::to_string(sides.size()) + " sides x " +
      std::to_string(c.seeds) + " seeds, " + std::to_string(c.steps) + " steps)" +
      (c.extractor.empty() ? std::string(" and the feature extractor") : std::string()) + ", " +
      std::to_string(std::min(c.jobs, jobs.size())) + " at a time, into " + c.runs.string());
  run_jobs(jobs, c.jobs);

  write_ensembles(c, sides);
  say("parity gates");
  GanParityResult written = write_gan_parity_report(c, sides, extractor_file.get(), std::move(result), say);
  fs::remove(journal);
  return written;
}

}  // namespace mpverify::experiments
