// The GAN FID parity experiment (experiments/gan_parity/) on a tiny
// configuration: what it computes against independent recomputations
// (retraining a run, the gate and the KID test on the run directories),
// determinism (other thread count, other runs directory: the same report
// bytes), and bad input (exit 2 / std::invalid_argument, nothing written).
// Needs the MNIST files (MPVERIFY_MNIST_DIR or the source tree's .data/).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "gan_parity/gan_parity_experiment.h"
#include "io/npy.h"
#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "metrics/fid.h"
#include "metrics/gan_evaluation.h"
#include "metrics/image_features.h"
#include "metrics/parity_gate.h"
#include "record/run_log.h"
#include "report/text_format.h"
#include "support/directory_files.h"
#include "support/kill_points.h"
#include "training/ensemble.h"

namespace {

using namespace mpverify;
namespace fs = std::filesystem;
using experiments::GanParityConfig;

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("mpverify-gan-parity-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

GanParityConfig tiny(const fs::path& dir) {
  GanParityConfig c;
  c.report = dir / "reports" / "gan_parity.md";
  c.runs = dir / "runs";
  c.seeds = 2;
  c.steps = 4;
  c.checkpoints = 2;
  c.train_size = 256;
  c.fid_samples = 40;
  c.bootstrap = 2;
  c.kid_subsets = 2;
  c.grid = 12;
  c.extractor_steps = 4;
  c.jobs = 2;
  return c;
}

// One tiny experiment, shared by the tests that read it (the runs are the
// expensive part).
struct Shared {
  fs::path dir;
  GanParityConfig config;
  experiments::GanParityResult result;
};
const Shared& shared_run() {
  static const Shared s = [] {
    Shared r;
    r.dir = scratch("a");
    r.config = tiny(r.dir);
    r.result = experiments::run_gan_parity(r.config, {});
    return r;
  }();
  return s;
}

nlohmann::json summary_of(const fs::path& runs, const std::string& side, std::uint64_t seed) {
  return metrics::read_json_document(training::seed_directory(runs / side, seed) / "summary.json");
}

TEST(GanParity, RetrainedRunGivesTheCheckpointFidsSamplesAndFinalFid) {
  const Shared& s = shared_run();
  const GanParityConfig& c = s.config;
  const nlohmann::json summary = summary_of(c.runs, "fp32-ref", 2);
  const metrics::LoadedExtractor x = metrics::load_extractor(c.runs / "extractor" / "fid-cnn.safetensors");
  // Retrain fp32 seed 2 here, step by step, and recompute every FID through
  // metrics::fid on the feature matrices (the experiment uses precomputed
  // Gaussian statistics of the real images instead).
  const std::vector<experiments::GanSide> sides = experiments::gan_sides(c);
  training::Trainer t(experiments::gan_train_config(c, sides[0], 2));
  const std::vector<double> real = metrics::image_features(*x.extractor, t.data().test.images);
  const metrics::FeatureMatrix real_m{real, t.data().test.size(), training::kFeatureDim, "real"};
  const nlohmann::json& checkpoints = summary["checkpoints"];
  ASSERT_EQ(checkpoints.size(), 2u);
  std::size_t compared = 0;
  for (std::size_t step = 1; step <= c.steps; ++step) {
    t.step();
    for (const nlohmann::json& p : checkpoints) {
      if (p["step"].get<std::size_t>() != step) continue;
      const std::vector<float> images = t.generate(c.fid_samples, 2);
      const std::vector<double> f = metrics::image_features(*x.extractor, images);
      const double fid = metrics::fid({f, c.fid_samples, training::kFeatureDim, "generated"}, real_m).fid;
      // The same features, statistics and route; the two paths differ only in
      // where the real statistics are computed, so they agree to rounding
      // (relative 1e-9 is far above FP64's ~1e-15 per operation over 784^2
      // terms, and far below any difference the report prints).
      EXPECT_NEAR(p["fid"].get<double>(), fid, 1e-9 * fid) << "step " << step;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2u);
  EXPECT_EQ(checkpoints.back()["step"], c.steps);
  EXPECT_EQ(checkpoints.back()["fid"], summary["evaluation"]["fid"]) << "the last checkpoint is the final evaluation";
  // The grid's images: the first `grid` latent codes of the evaluation's.
  const io::DoubleArray samples = io::read_npy_f64(training::seed_directory(c.runs / "fp32-ref", 2) / "samples.npy");
  const std::vector<float> again = t.generate(c.grid, 2);
  ASSERT_EQ(samples.values.size(), again.size());
  for (std::size_t i = 0; i < again.size(); ++i) ASSERT_EQ(static_cast<float>(samples.values[i]), again[i]) << i;
}

TEST(GanParity, ReportStatesTheGateOnTheRunDirectoriesAndEachRunsFid) {
  const Shared& s = shared_run();
  const GanParityConfig& c = s.config;
  const std::string md = slurp(c.report);
  // The gate recomputed here on the run directories.
  // The margin: k = 2 (the default) times the fp32 runs' standard deviation
  // over the seeds. With two values x1, x2 the sample standard deviation (N - 1
  // denominator) is |x1 - x2| / sqrt(2), so the margin is sqrt(2) |x1 - x2|:
  // a closed form, not the experiment's sum of squares. DOUBLE_EQ's 4 ulps
  // cover the two routes' different roundings (a handful of operations each).
  const auto fp32_value = [&](std::uint64_t seed, const char* key) {
    return summary_of(c.runs, "fp32-ref", seed)["evaluation"][key].get<double>();
  };
  const double fid_margin = std::sqrt(2.0) * std::fabs(fp32_value(1, "fid") - fp32_value(2, "fid"));
  const double kid_margin = std::sqrt(2.0) * std::fabs(fp32_value(1, "kid") - fp32_value(2, "kid"));
  EXPECT_DOUBLE_EQ(c.margin_sd, 2.0) << "the default k";
  EXPECT_DOUBLE_EQ(s.result.json["fid_margin"].get<double>(), fid_margin);
  EXPECT_DOUBLE_EQ(s.result.json["margin_sd"].get<double>(), 2.0);
  metrics::GateOptions o;
  o.metric = metrics::GateMetric::fid;
  o.margin = s.result.json["fid_margin"].get<double>();
  o.alpha = c.alpha;
  metrics::Ensemble b = metrics::read_ensemble(c.runs / "fp32-ref", true);
  metrics::Ensemble a = metrics::read_ensemble(c.runs / "o2-emu", true);
  b.name = "fp32-ref";
  a.name = "o2-emu";
  const metrics::GateResult g = metrics::evaluate_gate(b, a, o);
  ASSERT_TRUE(g.test.has_value());
  EXPECT_EQ(g.test->method, metrics::EquivalenceMethod::paired);
  EXPECT_NE(md.find(metrics::gate_verdict_line(g)), std::string::npos) << "the verdict line";
  EXPECT_EQ(s.result.json["verdict"], metrics::to_string(g.verdict));
  // Each run's FID as the table prints it (two decimals), in its seed's row.
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    const double fb = summary_of(c.runs, "fp32-ref", seed)["evaluation"]["fid"].get<double>();
    const double fa = summary_of(c.runs, "o2-emu", seed)["evaluation"]["fid"].get<double>();
    const std::string row = "| " + std::to_string(seed) + " | " + report::fixed(fb, 2) + " [";
    EXPECT_NE(md.find(row), std::string::npos) << row;
    EXPECT_NE(md.find(" | " + report::fixed(fa, 2) + " ["), std::string::npos);
    EXPECT_NE(md.find(" | " + report::fixed(fa - fb, 2) + " |"), std::string::npos);
  }
  // KID: the paired test on the runs' KIDs.
  std::vector<double> kb, ka;
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    kb.push_back(summary_of(c.runs, "fp32-ref", seed)["evaluation"]["kid"].get<double>());
    ka.push_back(summary_of(c.runs, "o2-emu", seed)["evaluation"]["kid"].get<double>());
  }
  const double kid_used = s.result.json["kid_tests"][0]["margin"].get<double>();
  EXPECT_DOUBLE_EQ(kid_used, kid_margin);
  const metrics::EquivalenceResult k = metrics::paired_tost(kb, ka, {kid_used, c.alpha});
  EXPECT_EQ(s.result.json["kid_tests"][0]["verdict"], metrics::to_string(k.verdict));
  EXPECT_DOUBLE_EQ(s.result.json["kid_tests"][0]["difference"].get<double>(), k.difference);
  // The extractor named by its sha256, the figures linked and written.
  EXPECT_NE(md.find(metrics::load_extractor(c.runs / "extractor" / "fid-cnn.safetensors").record.sha256),
            std::string::npos);
  for (const char* what : {"fid", "samples", "loss", "scale"}) {
    const std::string file = std::string("gan_parity-") + what + ".svg";
    EXPECT_NE(md.find("](" + file + ")"), std::string::npos) << file;
    EXPECT_TRUE(fs::is_regular_file(c.report.parent_path() / file)) << file;
  }
  // Three panels of samples (fp32, o2, their difference), each a PNG.
  const std::string svg = slurp(c.report.parent_path() / "gan_parity-samples.svg");
  std::size_t images = 0;
  for (std::size_t at = svg.find("data:image/png;base64,"); at != std::string::npos;
       at = svg.find("data:image/png;base64,", at + 1))
    ++images;
  EXPECT_EQ(images, 3u);
  // No path of this machine in the report.
  EXPECT_EQ(md.find(s.dir.string()), std::string::npos);
  EXPECT_EQ(md.find(fs::temp_directory_path().string()), std::string::npos);
}

// The headline: the verdict, the margin as k x sd, and the convergence
// criterion (fp32 mean FID > R x the real-vs-real FID) with its outcome,
// recomputed here from the data split and the extractor, for the default R
// and, through --report-only, for R = 1 and R = 1e6.
TEST(GanParity, HeadlineStatesTheMarginAndWhetherTheGeneratorsConverged) {
  const Shared& s = shared_run();
  const GanParityConfig& c = s.config;
  const metrics::LoadedExtractor x = metrics::load_extractor(c.runs / "extractor" / "fid-cnn.safetensors");
  const training::Trainer t(experiments::gan_train_config(c, experiments::gan_sides(c)[0], 1));
  const data::Dataset& train = t.data().train;
  const data::Dataset& test = t.data().test;
  const std::size_t n = std::min(c.fid_samples, train.size());
  ASSERT_EQ(n, 40u);
  const std::vector<double> a = metrics::image_features(
      *x.extractor, std::span<const float>(train.images.data(), n * train.image_size()));
  const std::vector<double> b = metrics::image_features(*x.extractor, test.images);
  const double real_fid = metrics::fid({a, n, training::kFeatureDim, "train"},
                                       {b, test.size(), training::kFeatureDim, "test"}).fid;
  // The same computation by the same library calls: equal to rounding.
  EXPECT_NEAR(s.result.json["real_fid"].get<double>(), real_fid, 1e-12 * real_fid);
  double fp32_mean = 0;
  for (std::uint64_t seed = 1; seed <= 2; ++seed)
    fp32_mean += summary_of(c.runs, "fp32-ref", seed)["evaluation"]["fid"].get<double>() / 2;
  EXPECT_DOUBLE_EQ(s.result.json["fp32_mean_fid"].get<double>(), fp32_mean);
  const std::string unconverged = "**Headline: the generators are unconverged, so this verdict is about unconverged "
                                  "models.**";
  const std::string converged = "The generators count as converged by this report's criterion";
  const double margin = s.result.json["fid_margin"].get<double>();
  for (const double ratio : {10.0, 1.0, 1e6}) {
    GanParityConfig r = c;
    r.unconverged_ratio = ratio;
    std::string md;
    bool flag = false;
    if (ratio == 10.0) {
      md = slurp(c.report);
      flag = s.result.json["unconverged"].get<bool>();
    } else {
      r.report_only = true;
      r.report = scratch("headline-" + report::general(ratio)) / "gan_parity.md";
      flag = experiments::run_gan_parity(r, {}).json["unconverged"].get<bool>();
      md = slurp(r.report);
    }
    const bool expected = fp32_mean > ratio * real_fid;
    EXPECT_EQ(flag, expected) << "ratio " << ratio;
    const std::size_t verdict_at = md.find("## Verdict");
    const std::size_t head = md.find(expected ? unconverged : converged);
    EXPECT_NE(head, std::string::npos) << "ratio " << ratio;
    EXPECT_EQ(md.find(expected ? converged : unconverged), std::string::npos) << "ratio " << ratio;
    EXPECT_LT(verdict_at, head);
    EXPECT_LT(head, md.find("```")) << "the headline comes before the gate's line";
    EXPECT_NE(md.find("at a margin of ±" + report::general(margin) + " FID (2 × the fp32 seeds' standard deviation, " +
                      report::general(margin / 2) + ")"),
              std::string::npos)
        << "ratio " << ratio;
  }
}

TEST(GanParity, SameSeedsSameBytesWhateverTheThreadsAndDirectory) {
  const Shared& s = shared_run();
  const fs::path dir = scratch("b");
  GanParityConfig c = tiny(dir);
  c.jobs = 1;
  const experiments::GanParityResult r = experiments::run_gan_parity(c, {});
  std::size_t compared = 0;
  for (const fs::path& f : s.result.files) {
    const fs::path other = c.report.parent_path() / f.filename();
    EXPECT_EQ(slurp(f), slurp(other)) << f.filename();
    ++compared;
  }
  EXPECT_EQ(compared, 5u);  // the report and four figures
  EXPECT_EQ(r.files.size(), 5u);
}

TEST(GanParity, ReportOnlyRewritesTheSameReportFromTheRunsAndRefusesOtherSettings) {
  const Shared& s = shared_run();
  GanParityConfig c = s.config;
  c.report_only = true;
  c.report = scratch("report-only") / "gan_parity.md";
  const experiments::GanParityResult r = experiments::run_gan_parity(c, {});
  ASSERT_EQ(r.files.size(), s.result.files.size());
  for (std::size_t i = 0; i < r.files.size(); ++i)
    EXPECT_EQ(slurp(r.files[i]), slurp(s.result.files[i])) << r.files[i].filename();
  // Runs trained with other settings are refused, and nothing is written.
  const fs::path other = scratch("report-only-refused");
  for (int variant = 0; variant < 3; ++variant) {
    GanParityConfig bad = c;
    bad.report = other / "gan_parity.md";
    if (variant == 0) bad.steps = 5;
    if (variant == 1) bad.bootstrap = 3;
    if (variant == 2) bad.seeds = 3;
    try {
      experiments::run_gan_parity(bad, {});
      ADD_FAILURE() << "variant " << variant << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--report-only"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(other)) << "variant " << variant;
  }
}

TEST(GanParity, BadSettingsAreRefusedBeforeAnythingIsWritten) {
  const fs::path dir = scratch("bad");
  const auto refused = [&](GanParityConfig c, const std::string& words) {
    try {
      experiments::run_gan_parity(c, {});
      ADD_FAILURE() << "accepted: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir)) << words << ": something was written";
  };
  GanParityConfig c = tiny(dir);
  c.seeds = 1;
  refused(c, "--seeds 1");
  c = tiny(dir);
  c.checkpoints = 5;
  refused(c, "--checkpoints 5");
  c = tiny(dir);
  c.report = dir / "report.txt";
  refused(c, "Markdown");
  c = tiny(dir);
  c.grid = 41;
  refused(c, "--grid 41");
  c = tiny(dir);
  c.bootstrap = 1;
  refused(c, "--bootstrap 1");
  c = tiny(dir);
  c.margin_sd = 0;
  refused(c, "--margin-sd");
  c = tiny(dir);
  c.unconverged_ratio = 0.5;
  refused(c, "--unconverged-ratio");
  c = tiny(dir);
  c.alpha = 0.5;
  refused(c, "--alpha");
  c = tiny(dir);
  c.train_size = 10;
  refused(c, "--train-size 10");
  c = tiny(dir);
  c.extractor = dir.parent_path() / "no-such-extractor.safetensors";
  refused(c, "--extractor");
}

#ifdef GAN_PARITY_BIN
int run(const std::string& args) {
  const int status = std::system((std::string(GAN_PARITY_BIN) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(GanParityCli, BadInputExitsTwoAndWritesNothing) {
  const fs::path dir = scratch("cli");
  const std::string out = "--report " + (dir / "r.md").string() + " --runs " + (dir / "runs").string();
  EXPECT_EQ(run(out + " --seeds 1"), 2);
  EXPECT_EQ(run(out + " --steps 0"), 2);
  EXPECT_EQ(run(out + " --steps 3 --checkpoints 4"), 2);
  EXPECT_EQ(run(out + " --jobs 0"), 2);
  EXPECT_EQ(run(out + " --no-such-option"), 2);
  EXPECT_EQ(run(out + " --data-dir " + (dir / "nowhere").string()), 2);
  EXPECT_EQ(run(out + " --extractor " + (dir / "missing.safetensors").string()), 2);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(run("--help"), 0);
}

// Killed at its writes (the journal, a run's summary, the ensembles, the report) and started again, the
// experiment keeps the extractor and the runs that had finished and ends with the same files, byte for
// byte, as an uninterrupted run.
TEST(GanParityCli, KilledAtItsWritesAndStartedAgainWritesTheSameBytes) {
  const auto args = [](const fs::path& dir) {
    return std::vector<std::string>{GAN_PARITY_BIN, "--seeds", "2", "--steps", "2", "--checkpoints", "1",
                                    "--train-size", "128", "--fid-samples", "16", "--bootstrap", "2",
                                    "--kid-subsets", "2", "--grid", "4", "--extractor-steps", "2", "--jobs", "2",
                                    "--runs", (dir / "runs").string(), "--report", (dir / "r" / "gan_parity.md").string()};
  };
  const fs::path reference_dir = scratch("resume-reference");
  ASSERT_EQ(mpverify::test::run_program(args(reference_dir), "").exit_code, 0);
  const std::map<std::string, std::string> reference = mpverify::test::files_under(reference_dir);
  ASSERT_TRUE(reference.count("r/gan_parity.md"));
  EXPECT_FALSE(reference.count("runs/queue.json"));  // the journal goes once the report is written

  const fs::path dir = scratch("resume-killed");
  std::size_t kept = 0;
  for (const std::string point : {"queue.json:1", "summary.json:1", "summary.json:3", "ensemble.json:1",
                                  "gan_parity.md:1"}) {
    fs::remove_all(dir);
    ASSERT_TRUE(mpverify::test::run_program(args(dir), point).killed) << point << " is not one of its writes";
    const auto finished = mpverify::test::finished_runs(dir / "runs");
    const bool journal = fs::exists(dir / "runs" / "queue.json");
    ASSERT_EQ(mpverify::test::run_program(args(dir), "").exit_code, 0) << "started again after a kill at " << point;
    if (journal) {  // the runs that had finished were kept, not trained again
      for (const auto& [summary, written] : finished)
        EXPECT_EQ(fs::last_write_time(summary), written) << point << ": " << summary << " was rewritten";
      kept += finished.size();
    }
    EXPECT_EQ(mpverify::test::tree_difference(reference, dir), "") << "killed at " << point;
  }
  EXPECT_GT(kept, 0u) << "no kill point fell after a run had finished: the test proves no run is kept";
  fs::remove_all(dir);
  fs::remove_all(reference_dir);
}
#endif

}  // namespace
