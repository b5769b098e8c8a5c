// The swamping experiment (experiments/swamping/): the update census against
// hand-worked fp16 cases (expected values from the rounding rule, not from the
// code), against record::lost_update_counts (a second implementation) on
// seeded random tensors, the observer's step bookkeeping; the recorder fix
// for fp16-pure's step 0; a tiny end-to-end run (report and figures written,
// the same bytes with 1 and 2 threads, the census confirmed by the weights);
// bad input (exit 2 / std::invalid_argument, nothing written).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "formats/format.h"
#include "record/lost_updates.h"
#include "support/run_command.h"
#include "swamping/swamping_experiment.h"
#include "swamping/update_census.h"
#include "training/trainer.h"

namespace {

namespace fs = std::filesystem;
using mpverify::experiments::CensusStep;
using mpverify::experiments::RatioRegion;
using mpverify::experiments::UpdateCensus;
using mpverify::experiments::WeightClass;
using mpverify::formats::parse_format;
namespace nn = mpverify::nn;

const mpverify::experiments::CensusCount& region(const UpdateCensus& c, WeightClass w, RatioRegion r) {
  return c.regions()[static_cast<std::size_t>(w)][static_cast<std::size_t>(r)];
}

// fp16, p = 11: for 2^e <= |w| < 2^(e+1) half an ulp is 2^(e-11); below 2^-14
// the ulp is 2^-24 (half: 2^-25). Each case's verdict follows from that alone.
TEST(UpdateCensus, Fp16CasesWorkedByHand) {
  UpdateCensus census(parse_format("fp16"));
  const float t11 = std::ldexp(1.0f, -11);
  const std::vector<float> w = {
      1.0f,                 // u = 2^-11: a tie, 1 is even -> lost; r = 2048 exactly
      1.0f,                 // u just above 2^-11 -> rounds up, kept; r just below 2048
      1.5f,                 // u = 2^-11: a tie, 1.5 = 1.1000000000b (last bit 0, even) -> lost; r = 3072
      1.5f,                 // u = 1.25 * 2^-11 > half ulp -> kept; r = 2457.6 (between the rules)
      1.75f,                // u = 2^-13: r = 14336 > 4096 -> lost
      std::ldexp(1.0f, -20),  // subnormal w, u = 2^-26 < 2^-25 -> lost although r = 64
      std::ldexp(1.0f, -15),  // subnormal w, u = 2^-24 = one ulp -> kept; r = 512
      0.0f,                 // u = 2^-26: fl(0 + u) = 0: underflow, not a lost update; r = 0
      0.0f,                 // u = 2^-24: the smallest subnormal -> kept
      1.0f,                 // u = 0: not an update
      1.0f,                 // u = NaN: not counted
      -1.0f,                // u = +2^-12: -1 + 2^-12 is the midpoint of [-1, -(1 - 2^-11)] (the ulp
                            // below |w| = 1 is 2^-11); tie to even -> -1 (lost); r = 4096
  };
  const std::vector<float> u = {
      t11,
      std::nextafter(t11, 1.0f),
      t11,
      1.25f * t11,
      std::ldexp(1.0f, -13),
      std::ldexp(1.0f, -26),
      std::ldexp(1.0f, -24),
      std::ldexp(1.0f, -26),
      std::ldexp(1.0f, -24),
      0.0f,
      std::nanf(""),
      std::ldexp(1.0f, -12),
  };
  census.add_updates(0, "p", w, u);
  ASSERT_EQ(census.steps().size(), 1u);
  const CensusStep& s = census.steps()[0];
  EXPECT_EQ(s.all.updates, 10u);
  EXPECT_EQ(s.all.lost, 5u);  // cases 0, 2, 4, 5, 11
  // r >= 2048: cases 0 (2048), 2 (3072), 3 (2457.6), 4 (7168), 11 (4096) -> 5.
  EXPECT_EQ(s.ratio_at_least, 5u);
  EXPECT_EQ(s.ratio_above, 4u);         // the same less case 0 (r == 2048 exactly)
  EXPECT_EQ(s.ratio_above_twice, 1u);   // case 4 only (case 11 is r == 4096, not above)
  EXPECT_EQ(region(census, WeightClass::normal, RatioRegion::below).updates, 1u);  // case 1
  EXPECT_EQ(region(census, WeightClass::normal, RatioRegion::below).lost, 0u);
  EXPECT_EQ(region(census, WeightClass::normal, RatioRegion::between).updates, 4u);  // 0, 2, 3, 11
  EXPECT_EQ(region(census, WeightClass::normal, RatioRegion::between).lost, 3u);     // 0, 2, 11
  EXPECT_EQ(region(census, WeightClass::normal, RatioRegion::above).updates, 1u);
  EXPECT_EQ(region(census, WeightClass::normal, RatioRegion::above).lost, 1u);
  EXPECT_EQ(region(census, WeightClass::subnormal, RatioRegion::below).updates, 2u);
  EXPECT_EQ(region(census, WeightClass::subnormal, RatioRegion::below).lost, 1u);
  EXPECT_EQ(region(census, WeightClass::zero, RatioRegion::below).updates, 2u);
  EXPECT_EQ(region(census, WeightClass::zero, RatioRegion::below).lost, 0u);  // case 7 underflowed
  // The profile: case 0 has log2 r = 11, bin (11 - 10) * 16 = 16, m = 1 (first quarter);
  // case 2 has log2 r = log2 3072 = 11.585 -> bin 25, m = 1.5 (third quarter).
  EXPECT_EQ(census.profile().first_log2, 10);
  EXPECT_EQ(census.profile().bins[0][16].updates, 1u);
  EXPECT_EQ(census.profile().bins[0][16].lost, 1u);
  EXPECT_EQ(census.profile().bins[2][25].updates, 1u);
  EXPECT_EQ(census.profile().bins[2][25].lost, 1u);
  EXPECT_EQ(census.parameters().at("p").count.lost, 5u);
}

// A weight not yet in the format is rounded first, as the optimizer does.
TEST(UpdateCensus, RoundsTheWeightsToTheFormatFirst) {
  UpdateCensus census(parse_format("fp16"));
  const std::vector<float> w = {1.0f + std::ldexp(1.0f, -20)};  // rounds to 1 in fp16
  const std::vector<float> u = {std::ldexp(1.0f, -13)};         // lost from 1
  census.add_updates(0, "p", w, u);
  EXPECT_EQ(census.steps()[0].all.lost, 1u);
}

// Two implementations of the same definition: the census (double sum,
// round_value) and record::lost_update_counts (emu::add_arrays), on seeded
// random weights and updates spread over many binades, in three formats.
TEST(UpdateCensus, AgreesWithTheRecorderOnRandomTensors) {
  std::mt19937_64 rng(20260811);
  std::uniform_real_distribution<double> mant(1.0, 2.0), ex(-30, 4);
  std::bernoulli_distribution sign(0.5), zero(0.02);
  for (const char* name : {"fp16", "bf16", "fp32"}) {
    const auto f = parse_format(name);
    std::vector<float> w(20000), u(20000);
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = zero(rng) ? 0.0f : static_cast<float>((sign(rng) ? -1 : 1) * mant(rng) * std::exp2(std::floor(ex(rng))));
      // u within about 2^-30..2^-4 of w's size, so that all three verdicts occur.
      const double scale = std::exp2(-std::floor(std::uniform_real_distribution<double>(4, 30)(rng)));
      u[i] = zero(rng) ? 0.0f : static_cast<float>((sign(rng) ? -1 : 1) * mant(rng) * scale * (w[i] == 0 ? 1e-6 : std::fabs(w[i])));
    }
    UpdateCensus census(f);
    census.add_updates(0, "p", w, u);
    // lost_updates' without_master side rounds w to the format first, as the census does.
    const auto rec = mpverify::record::lost_updates(w, u, f).without_master;
    EXPECT_EQ(census.steps()[0].all.updates, rec.updates) << name;
    EXPECT_EQ(census.steps()[0].all.lost, rec.lost) << name;
    EXPECT_EQ(census.steps()[0].ratio_at_least, rec.ratio_needed) << name;
    EXPECT_EQ(census.steps()[0].ratio_above_twice, rec.ratio_sufficient) << name;
    EXPECT_GT(rec.lost, 1000u) << name;                 // the draw exercises both verdicts
    EXPECT_LT(rec.lost, rec.updates - 1000u) << name;
  }
}

TEST(UpdateCensus, ObserverFollowsStepsGradientsAndTheWeightsThatFollow) {
  UpdateCensus census(parse_format("fp16"));
  const auto fp16 = parse_format("fp16");
  const auto show = [&](const char* layer, const char* tensor, nn::Role role, std::vector<float> exact,
                        std::vector<float> stored) {
    census.on_store(layer, tensor, role, nn::Pass::forward, exact, stored, fp16);
  };
  const float lost_u = std::ldexp(1.0f, -13), kept_u = 0.25f;
  // Step 0: weights {1, 1, 1}; gradient exactly 0, underflowed, non-zero; updates lost, lost, kept.
  show("fc.w", "value", nn::Role::weight, {1, 1, 1}, {1, 1, 1});
  show("fc", "dw", nn::Role::weight_grad, {0, 1e-9f, 0.5f}, {0, 0, 0.5f});
  show("fc.w", "update", nn::Role::update, {lost_u, lost_u, kept_u}, {lost_u, lost_u, kept_u});
  // Step 1 (skipped: no update): the weights the optimizer left: 1, 1, 1.25.
  show("fc.w", "value", nn::Role::weight, {1, 1, 1.25f}, {1, 1, 1.25f});
  show("fc", "dw", nn::Role::weight_grad, {1, 1, 1}, {1, 1, 1});
  // Step 2: an update, then the run ends.
  show("fc.w", "value", nn::Role::weight, {1, 1, 1.25f}, {1, 1, 1.25f});
  show("fc.w", "update", nn::Role::update, {kept_u, 0, 0}, {kept_u, 0, 0});
  ASSERT_EQ(census.steps().size(), 2u);
  const CensusStep& s0 = census.steps()[0];
  EXPECT_EQ(s0.step, 0u);
  EXPECT_EQ(s0.all.updates, 3u);
  EXPECT_EQ(s0.all.lost, 2u);
  EXPECT_EQ(s0.lost_grad_zero, 1u);
  EXPECT_EQ(s0.lost_grad_underflowed, 1u);
  EXPECT_EQ(s0.lost_grad_nonzero, 0u);
  ASSERT_TRUE(s0.unchanged.has_value());
  EXPECT_EQ(*s0.unchanged, 2u);
  EXPECT_EQ(*s0.unchanged_but_counted_kept, 0u);
  EXPECT_EQ(*s0.changed_but_counted_lost, 0u);
  const CensusStep& s2 = census.steps()[1];
  EXPECT_EQ(s2.step, 2u);  // the skipped step 1 still counts as a step
  EXPECT_EQ(s2.all.updates, 1u);
  EXPECT_FALSE(s2.unchanged.has_value());  // nothing follows the last update
  EXPECT_EQ(mpverify::experiments::parameter_of_gradient("bn1", "dgamma"), "bn1.gamma");
  EXPECT_EQ(mpverify::experiments::parameter_of_gradient("fc", "dx"), "");
}

// A weight the census calls lost but the optimizer changed shows up.
TEST(UpdateCensus, ReportsAWeightThatChangedAlthoughCountedLost) {
  UpdateCensus census(parse_format("fp16"));
  const auto fp16 = parse_format("fp16");
  const std::vector<float> w = {1}, u = {std::ldexp(1.0f, -13)}, after = {2};
  census.on_store("a.w", "value", nn::Role::weight, nn::Pass::forward, w, w, fp16);
  census.on_store("a.w", "update", nn::Role::update, nn::Pass::optimizer, u, u, fp16);
  census.on_store("a.w", "value", nn::Role::weight, nn::Pass::forward, after, after, fp16);
  EXPECT_EQ(*census.steps()[0].changed_but_counted_lost, 1u);
  EXPECT_EQ(*census.steps()[0].unchanged, 0u);
}

// The trainer's fix: fp16-pure's first step measures the updates against the
// weights rounded to fp16 (what the optimizer adds them to), so its "as run"
// rate equals the rate as if the weights were fp16 (the same weights). Before
// the fix step 0 compared against unrounded fp32 weights and counted almost
// nothing lost.
TEST(SwampingRecorder, Fp16PureStepZeroMeasuresTheRoundedWeights) {
  mpverify::training::TrainConfig t;
  t.model = "mlp";
  t.data = "synthetic";
  t.train_size = 128;
  t.test_size = 32;
  t.recipe = "fp16-pure";
  t.scaler = "torch";
  t.backend = nn::BackendKind::emu;
  t.sgd = {0.001, 0.9};
  t.steps = 2;
  t.seed = 3;
  t.record_every = 0;
  mpverify::training::Trainer trainer(t);
  for (int i = 0; i < 2; ++i) {
    const auto line = trainer.step();
    if (line["skipped"].get<bool>()) continue;
    EXPECT_GT(line["lost_update_rate"].get<double>(), 0.01) << "step " << i;
    EXPECT_EQ(line["lost_update_rate"].get<double>(), line["lost_update_rate_without_master"].get<double>())
        << "step " << i;
  }
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

mpverify::experiments::SwampingConfig tiny(const fs::path& dir, std::size_t jobs) {
  mpverify::experiments::SwampingConfig c;
  c.report = dir / "reports" / "swamping.md";
  c.runs = dir / "runs";
  c.data = "synthetic";
  c.train_size = 256;
  c.test_size = 64;
  c.learning_rates = {0.001, 0.1};
  c.seeds = 2;
  c.steps = 4;
  c.diagnosis_steps = 2;
  c.jobs = jobs;
  return c;
}

const char* const kFigures[] = {"swamping-lost-per-step.svg", "swamping-accuracy-gap.svg", "swamping-lost-vs-lr.svg",
                                "swamping-ratio-rule.svg", "swamping-master-diagnosis.svg"};

TEST(SwampingExperiment, TinyRunIsDeterministicAndItsCountsAreConfirmedByTheWeights) {
  const fs::path a = fs::temp_directory_path() / "mpverify-swamping-a", b = fs::temp_directory_path() / "mpverify-swamping-b";
  fs::remove_all(a);
  fs::remove_all(b);
  const auto ra = mpverify::experiments::run_swamping(tiny(a, 1), {});
  const auto rb = mpverify::experiments::run_swamping(tiny(b, 2), {});
  const std::string md = read(a / "reports" / "swamping.md");
  ASSERT_FALSE(md.empty());
  EXPECT_EQ(md, read(b / "reports" / "swamping.md"));
  for (const char* f : kFigures) {
    const std::string svg = read(a / "reports" / f);
    EXPECT_NE(svg.find("<svg"), std::string::npos) << f;
    EXPECT_EQ(svg, read(b / "reports" / f)) << f;
  }
  EXPECT_EQ(md.find(a.string()), std::string::npos);  // no absolute path in the report
  for (const char* section : {"## Accuracy and lost updates by learning rate", "## The exact rate against the 2048-ratio rule",
                              "## Why o2's lost-update rate", "## Where we differ from the literature"})
    EXPECT_NE(md.find(section), std::string::npos) << section;
  // The census and the recorders agree at every step; the weights the next
  // step reads confirm every lost and every kept update.
  const auto& checks = ra.json["checks"];
  EXPECT_GT(checks["recorder_steps"].get<std::size_t>(), 0u);
  EXPECT_EQ(checks["recorder_equal"], checks["recorder_steps"]);
  EXPECT_GT(checks["checked_updates"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(checks["unchanged"], checks["counted_lost"]);
  EXPECT_EQ(checks["unchanged_but_counted_kept"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(checks["changed_but_counted_lost"].get<std::uint64_t>(), 0u);
  // The theorem's two sure cases, on real fp16-pure updates.
  EXPECT_EQ(ra.json["rule"]["lost_below_normal"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(ra.json["rule"]["kept_above_twice"].get<std::uint64_t>(), 0u);
  EXPECT_GT(ra.json["rule"]["lost"].get<std::uint64_t>(), 0u);
  // The run directories: each side an ensemble, each run its census.
  EXPECT_TRUE(fs::exists(a / "runs" / "lr-0.001" / "fp16-pure-emu" / "ensemble.json"));
  EXPECT_TRUE(fs::exists(a / "runs" / "lr-0.1" / "o2-emu" / "seed-2" / "census.json"));
  EXPECT_TRUE(fs::exists(a / "runs" / "diagnosis" / "o2-emu" / "seed-1" / "census.json"));
  (void)rb;
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(SwampingExperiment, BadInputIsRefusedBeforeAnythingIsWritten) {
  const fs::path dir = fs::temp_directory_path() / "mpverify-swamping-bad";
  fs::remove_all(dir);
  using mpverify::experiments::validate_swamping;
  auto c = tiny(dir, 1);
  c.seeds = 1;
  EXPECT_THROW(validate_swamping(c), std::invalid_argument);
  c = tiny(dir, 1);
  c.learning_rates = {0.01, -1};
  EXPECT_THROW(validate_swamping(c), std::invalid_argument);
  c = tiny(dir, 1);
  c.model = "dcgan";
  EXPECT_THROW(validate_swamping(c), std::invalid_argument);
  c = tiny(dir, 1);
  c.report = dir / "swamping.txt";
  EXPECT_THROW(validate_swamping(c), std::invalid_argument);
  c = tiny(dir, 1);
  c.momentum = 1;
  EXPECT_THROW(mpverify::experiments::run_swamping(c, {}), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_THROW(mpverify::experiments::parse_learning_rates("0.1,abc"), std::invalid_argument);
  EXPECT_THROW(mpverify::experiments::parse_learning_rates("0.1,0.1"), std::invalid_argument);
  EXPECT_THROW(mpverify::experiments::parse_learning_rates("0.1,"), std::invalid_argument);
  EXPECT_EQ(mpverify::experiments::parse_learning_rates("0.001,0.1"), (std::vector<double>{0.001, 0.1}));
}

TEST(SwampingExperiment, CommandExitsTwoOnBadInputAndWritesNothing) {
  const fs::path dir = fs::temp_directory_path() / "mpverify-swamping-cli";
  fs::remove_all(dir);
  const std::string base = std::string(SWAMPING_BIN) + " --data synthetic --report " + (dir / "r" / "swamping.md").string() +
                           " --runs " + (dir / "runs").string();
  for (const std::string& bad : {std::string(" --seeds 1"), std::string(" --lrs 0.1,x"), std::string(" --model gan"),
                                 std::string(" --no-such-option")}) {
    const auto r = mpverify::test::run_command(base + bad, "", true);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << bad;
    EXPECT_FALSE(fs::exists(dir)) << bad;
  }
  const auto help = mpverify::test::run_command(std::string(SWAMPING_BIN) + " --help", "", false);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("2048"), std::string::npos);
  EXPECT_NE(help.out.find("Example"), std::string::npos);
}

}  // namespace
