// The scalers experiment (experiments/scalers/): its computations on
// hand-made step logs, the trainer's input_scale, a tiny end-to-end run
// (the designed overflows do what they are designed to do, every replay
// agrees with its training), determinism across --jobs, and bad input.
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "record/run_log.h"
#include "scalers/scalers_analysis.h"
#include "scalers/scalers_experiment.h"
#include "nn/sequential.h"
#include "training/trainer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace mpverify;
using namespace mpverify::experiments;

namespace {

json step_line(std::size_t step, double scale, bool found_inf, bool skipped, bool aborted = false,
               json nonfinite = nullptr) {
  return {{"step", step}, {"scale", scale},      {"found_inf", found_inf},
          {"skipped", skipped}, {"aborted", aborted}, {"nonfinite", nonfinite}};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("mpverify-scalers-test-" + name);
  fs::remove_all(d);
  return d;
}

// A configuration of seconds: few images, few steps, interval 3.
ScalersConfig tiny(const fs::path& dir) {
  ScalersConfig c;
  c.report = dir / "reports" / "scalers.md";
  c.runs = dir / "runs";
  c.train_size = 256;
  c.test_size = 128;
  c.seeds = 1;
  c.overflow_seeds = 1;
  c.steps = 12;
  // DeepSpeed reaches its minimum 1 from 2^16 after 1 (hysteresis) + 16
  // halvings and aborts at the step run there: step 17, so 20 steps show it.
  c.forward_steps = 20;
  c.growth_interval = 3;
  c.eval_every = 6;
  return c;
}

}  // namespace

// --- computations on hand-made logs --------------------------------------------------------------

TEST(ScalersAnalysis, TrajectoryStatsCountsByHand) {
  // torch-like: 2^16, inf at step 1 (skipped), then 2^15 for three steps, then an abort flag.
  const std::vector<json> steps{step_line(0, 65536, false, false), step_line(1, 65536, true, true),
                                step_line(2, 32768, false, false), step_line(3, 32768, false, false),
                                step_line(4, 32768, true, true, true)};
  const TrajectoryStats t = trajectory_stats(steps, 16384, 32768);
  EXPECT_EQ(t.steps, 5u);
  EXPECT_EQ(t.skipped, 2u);
  EXPECT_EQ(t.found_inf, 2u);
  EXPECT_EQ(t.first_scale, 65536);
  EXPECT_EQ(t.lowest_scale, 32768);
  EXPECT_EQ(t.steps_at_lowest, 3u);
  EXPECT_EQ(t.steps_at_floor, 3u);
  EXPECT_EQ(t.final_scale, 16384);
  ASSERT_TRUE(t.aborted_at.has_value());
  EXPECT_EQ(*t.aborted_at, 4u);
  ASSERT_TRUE(t.first_clean.has_value());
  EXPECT_EQ(*t.first_clean, 0u);
  EXPECT_EQ(*trajectory_stats({steps[1], steps[4], steps[2]}, 1, 0).first_clean, 2u);
  EXPECT_FALSE(trajectory_stats({steps[1], steps[4]}, 1, 0).first_clean.has_value());
  // No floor: nothing counted at it.
  EXPECT_EQ(trajectory_stats(steps, 16384, 0).steps_at_floor, 0u);
  // A line without its keys is refused.
  EXPECT_THROW(trajectory_stats({json{{"step", 0}}}, 1, 0), std::invalid_argument);
}

TEST(ScalersAnalysis, ReplayCheckAgreesWithTheRuleAndNamesTheFirstDifference) {
  // torch with interval 2, by its rule (loss-scalers.md): clean steps grow the
  // scale after 2 in a row, an inf halves it and resets the count.
  const training::ScalerOptions options{{"interval", "2"}};
  std::vector<json> steps{step_line(0, 65536, false, false), step_line(1, 65536, false, false),
                          step_line(2, 131072, true, true), step_line(3, 65536, false, false),
                          step_line(4, 65536, false, false)};
  const ReplayCheck ok = check_replay("torch", options, steps, 131072);
  EXPECT_TRUE(ok.agrees) << ok.first_difference;
  EXPECT_EQ(ok.steps_compared, 5u);
  // A wrong final scale, a wrong step scale and a wrong skip flag are each caught.
  EXPECT_FALSE(check_replay("torch", options, steps, 65536).agrees);
  steps[3]["scale"] = 32768;
  const ReplayCheck bad = check_replay("torch", options, steps, 131072);
  EXPECT_FALSE(bad.agrees);
  EXPECT_NE(bad.first_difference.find("step 3"), std::string::npos) << bad.first_difference;
  steps[3]["scale"] = 65536;
  steps[1]["skipped"] = true;
  EXPECT_FALSE(check_replay("torch", options, steps, 131072).agrees);
}

TEST(ScalersAnalysis, NonfiniteOriginsCountEachPlace) {
  const json fwd = {{"layer", "fc1"}, {"tensor", "output"}, {"pass", "forward"}, {"count", 3}};
  const json bwd = {{"layer", "fc1"}, {"tensor", "dw"}, {"pass", "backward"}, {"count", 1}};
  const auto o = nonfinite_origins({step_line(0, 1, true, true, false, fwd), step_line(1, 1, false, false),
                                    step_line(2, 1, true, true, false, fwd), step_line(3, 1, true, true, false, bwd)});
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o.at("forward fc1 output"), 2u);
  EXPECT_EQ(o.at("backward fc1 dw"), 1u);
}

TEST(ScalersAnalysis, PairedGapByHand) {
  // Differences 1 and -2 points: mean -0.5, sd sqrt(4.5) = 2.1213, se 1.5;
  // t(0.95, 1) = 6.313752 (tables) -> half-width 9.470628.
  const auto g = paired_gap({0.90, 0.92}, {0.91, 0.90});
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->n, 2u);
  // The inputs are not exact in binary: the differences carry ~1e-14 of
  // rounding; the table's t has 7 digits (5e-7 relative), times 1.5.
  EXPECT_NEAR(g->mean, -0.5, 1e-12);
  ASSERT_TRUE(g->lower && g->upper);
  EXPECT_NEAR(*g->lower, -0.5 - 9.470628, 2e-6);
  EXPECT_NEAR(*g->upper, -0.5 + 9.470628, 2e-6);
  // One pair: a mean, no interval; a diverged run: no gap.
  EXPECT_FALSE(paired_gap({0.5}, {0.75})->lower.has_value());
  EXPECT_NEAR(paired_gap({0.5}, {0.75})->mean, 25.0, 1e-12);
  EXPECT_FALSE(paired_gap({0.5, 0.6}, {0.5, std::nullopt}).has_value());
}

// --- the trainer's input_scale ---------------------------------------------------------------------

// Keeps the first forward value of one stored tensor.
class FirstStore final : public nn::StoreObserver {
 public:
  FirstStore(std::string layer, std::string tensor) : layer_(std::move(layer)), tensor_(std::move(tensor)) {}
  void on_store(std::string_view layer, std::string_view tensor, nn::Role, nn::Pass pass, std::span<const float> exact,
                std::span<const float>, const formats::Format&) override {
    if (values.empty() && layer == layer_ && tensor == tensor_ && pass == nn::Pass::forward)
      values.assign(exact.begin(), exact.end());
  }
  std::vector<float> values;

 private:
  std::string layer_, tensor_;
};

training::TrainConfig small_mlp() {
  training::TrainConfig c;
  c.model = "mlp";
  c.data = "synthetic";
  c.train_size = 64;
  c.test_size = 32;
  c.steps = 1;
  c.seed = 3;
  c.recorders = false;
  return c;
}

TEST(ScalersInputScale, MultipliesTheImagesEnteringTheModel) {
  // With fc1's bias at zero, fc1's output is W1 (k x): for k = 4 (a power of
  // two, values far from fp32's limits) every product and partial sum is
  // exactly 4 times the unscaled one, so y must be 4 y bit for bit.
  FirstStore plain_y("fc1", "y"), scaled_y("fc1", "y");
  training::TrainConfig c = small_mlp();
  c.extra_observer = &plain_y;
  training::Trainer plain(c);
  c.input_scale = 4;
  c.extra_observer = &scaled_y;
  training::Trainer scaled(c);
  for (training::Trainer* t : {&plain, &scaled})
    for (nn::Parameter* p : t->parameters())
      if (p->name == "fc1.b") std::fill(p->master.begin(), p->master.end(), 0.0f);
  plain.step();
  scaled.step();
  ASSERT_FALSE(plain_y.values.empty());
  ASSERT_EQ(plain_y.values.size(), scaled_y.values.size());
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < plain_y.values.size(); ++i) {
    ASSERT_EQ(scaled_y.values[i], 4.0f * plain_y.values[i]) << i;
    nonzero += plain_y.values[i] != 0.0f;
  }
  EXPECT_GT(nonzero, 0u);
  // The data sets themselves stay in [0, 1].
  EXPECT_EQ(plain.data().train.images, scaled.data().train.images);
  EXPECT_EQ(scaled.summary()["config"]["input_scale"], 4.0);
  EXPECT_FALSE(plain.summary()["config"].contains("input_scale"));  // unchanged summaries for everyone else
}

TEST(ScalersInputScale, TheEvaluationSeesTheScaledImagesToo) {
  // o2 with the images x 2^17: pixels of 0.5 and more are beyond fp16's
  // 65504, so the test logits cannot be finite; at x 1 they are.
  training::TrainConfig c = small_mlp();
  c.recipe = "o2";
  c.backend = nn::BackendKind::emu;
  EXPECT_FALSE(training::Trainer(c).evaluate().diverged);
  c.input_scale = 131072;
  const training::Evaluation e = training::Trainer(c).evaluate();
  EXPECT_TRUE(e.diverged);
  EXPECT_EQ(e.reason, "a test logit is not finite");
}

TEST(ScalersInputScale, BadFactorsAreRefused) {
  training::TrainConfig c = small_mlp();
  for (double bad : {0.0, -1.0, std::nan(""), 1e39}) {
    c.input_scale = bad;
    EXPECT_THROW(training::Trainer{c}, std::invalid_argument) << bad;
  }
  c.input_scale = 2;
  c.model = "dcgan";
  EXPECT_THROW(training::Trainer{c}, std::invalid_argument);
}

// --- the experiment, end to end on a tiny configuration -----------------------------------------

// (One tiny run per test: ctest runs every test in a process of its own.)
const ScalersRun& run_of(const ScalersResult& result, const std::string& scenario, const std::string& side) {
  for (const ScalersRun& r : result.runs)
    if (r.scenario == scenario && r.side == side && r.seed == 1) return r;
  throw std::logic_error("no run " + scenario + "/" + side);
}

TEST(ScalersExperiment, TheDesignedOverflowsHappenAndEveryReplayAgrees) {
  const fs::path dir = fresh_dir("tiny");
  const ScalersResult result = run_scalers(tiny(dir));
  const auto run = [&](const std::string& scenario, const std::string& side) -> const ScalersRun& {
    return run_of(result, scenario, side);
  };

  // Every run's own trace replays to its training trajectory.
  EXPECT_TRUE(result.json["replays_agree"].get<bool>());
  std::size_t checked = 0;
  for (const auto& c : result.json["replay_checks"]) {
    EXPECT_TRUE(c["agrees"].get<bool>()) << c.dump();
    ++checked;
  }
  EXPECT_EQ(checked, result.runs.size());
  {  // independently of the report's loop: torch (interval 3) on its own flags
    const ScalersRun& t = run("backward", "torch");
    const ReplayCheck check = check_replay("torch", {{"interval", "3"}}, t.steps, t.summary["final_scale"].get<double>());
    EXPECT_TRUE(check.agrees) << check.first_difference;
    EXPECT_EQ(check.steps_compared, 12u);
  }

  // Forward overflow: every step of every fp16 strategy overflows, the first
  // non-finite value in the forward pass at fc1. The dynamic strategies skip
  // each; none and static apply them (as PyTorch without a GradScaler does).
  for (const char* side : {"none", "static", "torch", "apex", "keras", "deepspeed", "megatron"}) {
    const ScalersRun& r = run("forward", side);
    ASSERT_FALSE(r.steps.empty()) << side;
    const bool applies = std::string(side) == "none" || std::string(side) == "static";
    for (const json& s : r.steps) {
      EXPECT_TRUE(s["found_inf"].get<bool>()) << side << " step " << s["step"];
      EXPECT_EQ(s["skipped"].get<bool>(), !applies) << side << " step " << s["step"];
      ASSERT_TRUE(s["nonfinite"].is_object()) << side;
      EXPECT_EQ(s["nonfinite"]["pass"], "forward") << side;
      EXPECT_EQ(s["nonfinite"]["layer"], "fc1") << side;
    }
  }
  // torch: 20 halvings from 2^16 (no floor); DeepSpeed aborts at step 17 at scale 1 (see tiny()).
  EXPECT_EQ(run("forward", "torch").summary["final_scale"].get<double>(), std::ldexp(1.0, 16 - 20));
  const ScalersRun& ds = run("forward", "deepspeed");
  EXPECT_TRUE(ds.summary["aborted"].get<bool>());
  EXPECT_EQ(ds.steps.size(), 18u);
  EXPECT_EQ(ds.steps.back()["scale"].get<double>(), 1.0);
  // fp32 has the range: nothing overflows on the same images.
  for (const json& s : run("forward", "fp32").steps) EXPECT_FALSE(s["found_inf"].get<bool>());

  // Backward overflow: static overflows at once (in the backward pass) and
  // applies the step, so every later step is non-finite too; the dynamic
  // strategies back off and get clean steps; scale 1 overflows nothing.
  const ScalersRun& fixed = run("backward", "static");
  ASSERT_FALSE(fixed.steps.empty());
  EXPECT_EQ(fixed.steps[0]["nonfinite"]["pass"], "backward");
  for (const json& s : fixed.steps) {
    EXPECT_TRUE(s["found_inf"].get<bool>()) << "static step " << s["step"];
    EXPECT_FALSE(s["skipped"].get<bool>()) << "static step " << s["step"];
  }
  for (const char* side : {"torch", "apex", "keras", "deepspeed"}) {
    std::size_t clean = 0;
    for (const json& s : run("backward", side).steps) clean += s["skipped"].get<bool>() ? 0 : 1;
    EXPECT_GT(clean, 0u) << side;
  }
  for (const json& s : run("backward", "none").steps) EXPECT_FALSE(s["skipped"].get<bool>());

  // The report and its figures, linked, with no absolute path.
  const std::string md = slurp(dir / "reports" / "scalers.md");
  EXPECT_NE(md.find("## The normal model"), std::string::npos);
  EXPECT_NE(md.find("They do, for every run"), std::string::npos);
  for (const char* what : {"normal-scale", "normal-accuracy", "backward-scale", "backward-skipped", "forward-scale",
                           "replay", "fp8-scales"}) {
    const fs::path f = dir / "reports" / (std::string("scalers-") + what + ".svg");
    EXPECT_TRUE(fs::exists(f)) << f;
    EXPECT_NE(md.find("(" + f.filename().string() + ")"), std::string::npos) << what;
  }
  EXPECT_EQ(md.find(dir.string()), std::string::npos) << "an absolute path in the report";
  fs::remove_all(dir);
}

TEST(ScalersExperiment, SameConfigurationSameBytesWhateverTheJobs) {
  const fs::path a = fresh_dir("jobs2"), b = fresh_dir("jobs1");
  ScalersConfig ca = tiny(a), cb = tiny(b);
  ca.data = cb.data = "synthetic";  // drawn in memory: no file to parse per run (the bytes are what is compared)
  ca.jobs = 2;
  cb.jobs = 1;
  run_scalers(ca);
  run_scalers(cb);
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(a / "reports")) {
    const fs::path twin = b / "reports" / entry.path().filename();
    ASSERT_TRUE(fs::exists(twin)) << twin;
    EXPECT_EQ(slurp(entry.path()), slurp(twin)) << entry.path().filename();
    ++files;
  }
  EXPECT_EQ(files, 8u);  // the report and its 7 figures
  fs::remove_all(a);
  fs::remove_all(b);
}

// --- bad input ---------------------------------------------------------------------------------------

TEST(ScalersBadInput, RefusedBeforeAnythingIsWritten) {
  const fs::path dir = fresh_dir("bad");
  const auto refused = [&](auto change) {
    ScalersConfig c = tiny(dir);
    change(c);
    EXPECT_THROW(run_scalers(c), std::invalid_argument);
    EXPECT_FALSE(fs::exists(dir));
  };
  refused([](ScalersConfig& c) { c.seeds = 0; });
  refused([](ScalersConfig& c) { c.overflow_seeds = 5; });
  refused([](ScalersConfig& c) { c.model = "cnn"; });
  refused([](ScalersConfig& c) { c.growth_interval = 0; });
  refused([](ScalersConfig& c) { c.static_scale = -1; });
  refused([](ScalersConfig& c) { c.forward_input_scale = 1e39; });
  refused([&dir](ScalersConfig& c) { c.report = dir / "reports" / "scalers.txt"; });
  refused([](ScalersConfig& c) { c.steps = 1; });
}

TEST(ScalersBadInput, TheCommandExitsTwoAndWritesNothing) {
  const fs::path dir = fresh_dir("cli");
  const std::string base = std::string(SCALERS_BIN) + " --quiet --report " + (dir / "r" / "scalers.md").string() +
                           " --runs " + (dir / "runs").string();
  for (const char* args : {" --seeds 0", " --growth-interval 0", " --no-such-option", " --steps abc"}) {
    const int status = std::system((base + args + " 2>/dev/null").c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 2) << args;
    EXPECT_FALSE(fs::exists(dir)) << args;
  }
  const int help = std::system((std::string(SCALERS_BIN) + " --help >/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(help), 0);
}
