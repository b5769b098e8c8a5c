// Experiment 1 (experiments/underflow/): the gradient census
// against an independent recount (the compiler's _Float16 as the fp16
// oracle, std::ilogb for the binades, the grouping rules written again here),
// the premise that FP32 gradients scale exactly with a power-of-two loss
// scale, the binade figure's documented geometry, a tiny experiment end to
// end (deterministic across thread counts, every step skipped where fp16 must
// overflow, gate rows equal to the gate on the run directories), and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "report/gate_table.h"
#include "support/run_command.h"
#include "training/trainer.h"
#include "underflow/binade_figure.h"
#include "underflow/gradient_census.h"
#include "underflow/underflow_experiment.h"

namespace {

namespace fs = std::filesystem;
using namespace mpverify;
using experiments::CensusKey;
using experiments::GradientRole;

// Every gradient store of a run, kept with the step it belongs to (the loss
// gradient "loss"/"loss_d" opens a step) and the player ("loss_g" opens the
// generator's part), forwarded to a census too.
struct Store {
  std::size_t step;
  std::string phase, layer, tensor;
  nn::Role role;
  std::vector<float> values;
};
class Keeper final : public nn::StoreObserver {
 public:
  explicit Keeper(nn::StoreObserver* next) : next_(next) {}
  void on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                std::span<const float> exact, std::span<const float> stored, const formats::Format& f) override {
    if (next_) next_->on_store(layer, tensor, role, pass, exact, stored, f);
    if (role != nn::Role::activation_grad && role != nn::Role::weight_grad) return;
    if (layer == "loss" || layer == "loss_d") {
      ++step_;
      phase_ = layer == "loss" ? "classifier" : "discriminator";
    }
    if (layer == "loss_g") phase_ = "generator";
    stores.push_back({static_cast<std::size_t>(step_), phase_, std::string(layer), std::string(tensor), role,
                      std::vector<float>(exact.begin(), exact.end())});
  }
  std::vector<Store> stores;

 private:
  nn::StoreObserver* next_;
  long step_ = -1;
  std::string phase_;
};

training::TrainConfig tiny(const std::string& model, std::size_t steps) {
  training::TrainConfig t;
  t.model = model;
  t.data = "synthetic";
  t.train_size = 256;
  t.test_size = 64;
  t.steps = steps;
  t.batch_size = 16;
  t.seed = 3;
  t.recorders = false;
  if (model == "dcgan") {
    t.optimizer = training::OptimizerKind::adam;
    t.adam.lr = 2e-4;
  }
  return t;
}

void train(training::TrainConfig t, nn::StoreObserver* observer) {
  t.extra_observer = observer;
  training::Trainer trainer(t);
  for (std::size_t i = 0; i < t.steps; ++i) trainer.step();
}

struct Recount {
  std::uint64_t count = 0, zeros = 0, zero = 0, subnormal = 0, overflow = 0;
  std::map<int, std::uint64_t> binades;
};

// The rules of gradient_census.h, written again from its comment.
bool counted(const Store& s) {
  if (s.tensor == "dgamma" || s.tensor == "dbeta") return false;
  if (s.phase == "generator" && s.role == nn::Role::weight_grad && s.layer.rfind("g.", 0) != 0) return false;
  return true;
}

Recount recount(const std::vector<Store>& stores, const CensusKey& key, float scale) {
  Recount r;
  const nn::Role role = key.role == GradientRole::activation_grad ? nn::Role::activation_grad : nn::Role::weight_grad;
  for (const Store& s : stores) {
    if (s.step != key.step || s.phase != key.group || s.role != role || !counted(s)) continue;
    for (float x : s.values) {
      ++r.count;
      if (x == 0) {
        ++r.zeros;
        continue;
      }
      ++r.binades[std::ilogb(x)];
      // PyTorch's x.mul(S).half(): the product in float, then one rounding to fp16.
      const float product = x * scale;
      const _Float16 h = static_cast<_Float16>(product);
      if (std::isinf(static_cast<float>(h))) ++r.overflow;
      else if (h == 0) ++r.zero;
      else if (std::fabs(static_cast<float>(h)) < std::ldexp(1.0f, -14)) ++r.subnormal;
    }
  }
  return r;
}

void expect_census_equals_recount(const std::string& model, std::size_t steps, const std::set<std::size_t>& at,
                                  const std::vector<std::string>& groups) {
  const std::vector<double> scales{1.0, 8.0, 4096.0, 16777216.0};
  experiments::GradientCensus census(at, formats::parse_format("fp16"), scales);
  Keeper keeper(&census);
  train(tiny(model, steps), &keeper);
  const auto cells = census.cells();
  std::size_t checked = 0;
  std::uint64_t zero = 0, subnormal = 0, overflow = 0;
  for (const std::string& g : groups)
    for (GradientRole role : {GradientRole::activation_grad, GradientRole::weight_grad})
      for (std::size_t step : at) {
        const CensusKey key{g, role, step};
        ASSERT_TRUE(cells.contains(key)) << g << " " << to_string(role) << " step " << step;
        const experiments::CensusCell& cell = cells.at(key);
        ASSERT_EQ(cell.at.size(), scales.size());
        for (std::size_t k = 0; k < scales.size(); ++k) {
          const Recount r = recount(keeper.stores, key, static_cast<float>(scales[k]));
          ASSERT_GT(r.count, 0u);
          EXPECT_EQ(cell.at[k].count, r.count) << g << " step " << step;
          EXPECT_EQ(cell.at[k].zeros_in, r.zeros);
          EXPECT_EQ(cell.at[k].underflow_to_zero, r.zero) << g << " " << to_string(role) << " S " << scales[k];
          EXPECT_EQ(cell.at[k].subnormal, r.subnormal) << g << " " << to_string(role) << " S " << scales[k];
          EXPECT_EQ(cell.at[k].overflow, r.overflow) << g << " " << to_string(role) << " S " << scales[k];
          zero += r.zero;
          subnormal += r.subnormal;
          overflow += r.overflow;
          if (k == 0) {
            EXPECT_EQ(cell.fp32.zeros, r.zeros);
            for (const auto& [e, n] : r.binades) EXPECT_EQ(cell.fp32.at(e), n) << "binade " << e;
            std::uint64_t binned = 0;
            for (const auto& [e, n] : r.binades) binned += n;
            EXPECT_EQ(cell.fp32.total(), binned + r.zeros);
          }
          ++checked;
        }
      }
  // Steps outside `at` and groups of other models are not in the census.
  for (const auto& [key, cell] : cells) {
    EXPECT_TRUE(at.contains(key.step)) << key.step;
    EXPECT_NE(std::find(groups.begin(), groups.end(), key.group), groups.end()) << key.group;
  }
  EXPECT_EQ(checked, groups.size() * 2 * at.size() * scales.size());
  // Every category was exercised (the counts compared were not all zero).
  EXPECT_GT(zero, 0u);
  EXPECT_GT(subnormal, 0u);
  EXPECT_GT(overflow, 0u);
}

TEST(GradientCensus, ClassifierCountsEqualARecountWithFloat16) {
  expect_census_equals_recount("cnn", 3, {0, 2}, {"classifier"});
}

TEST(GradientCensus, DcganPlayersAreCountedApartAndEqualARecount) {
  expect_census_equals_recount("dcgan", 2, {1}, {"discriminator", "generator"});
}

// The report's premise: in an FP32 run a power-of-two loss scale multiplies
// every gradient exactly (the backward pass is linear in the loss gradient),
// so the scaled run's gradients are the plain run's moved by k binades.
TEST(GradientCensus, Fp32GradientsMoveByWholeBinadesWithAPowerOfTwoScale) {
  const std::set<std::size_t> at{0, 2};
  experiments::GradientCensus plain(at, formats::parse_format("fp16"), {1.0});
  experiments::GradientCensus scaled(at, formats::parse_format("fp16"), {1.0});
  train(tiny("cnn", 3), &plain);
  training::TrainConfig t = tiny("cnn", 3);
  t.scaler = "static";
  t.scaler_options = {{"scale", "8"}};
  train(t, &scaled);
  const auto a = plain.cells(), b = scaled.cells();
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (const auto& [key, cell] : a) {
    const emu::ExponentHistogram& h = b.at(key).fp32;
    EXPECT_EQ(h.zeros, cell.fp32.zeros);
    EXPECT_EQ(h.total(), cell.fp32.total());
    for (int e = emu::ExponentHistogram::min_exponent; e + 3 <= emu::ExponentHistogram::max_exponent; ++e)
      ASSERT_EQ(h.at(e + 3), cell.fp32.at(e)) << to_string(key.role) << " step " << key.step << " binade " << e;
    // What fp16 loses at scale 8 in the plain run is what it loses at scale 1 in the scaled one.
    EXPECT_GT(cell.at[0].nonzero_finite(), 0u);
  }
}

// --- the figure ---

TEST(BinadeFigure, TickLabelsNeverOverlapAndTheStepIsTheSmallestThatFits) {
  const std::vector<int> steps{1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50};
  for (int bins = 3; bins <= 280; ++bins) {
    const int step = experiments::binade_tick_step(bins);
    const double w = experiments::kBinadePlotWidth / bins;
    EXPECT_GE(step * w, experiments::kMinTickPixels) << bins;
    for (int smaller : steps)
      if (smaller < step) {
        EXPECT_LT(smaller * w, experiments::kMinTickPixels) << bins;
      }
  }
}

TEST(BinadeFigure, AxisTopIsTheNextOneTwoOrFive) {
  EXPECT_EQ(experiments::binade_axis_top(12), 20);
  EXPECT_EQ(experiments::binade_axis_top(7.3), 10);
  EXPECT_EQ(experiments::binade_axis_top(10), 10);
  EXPECT_DOUBLE_EQ(experiments::binade_axis_top(0.4), 0.5);
  EXPECT_EQ(experiments::binade_axis_top(1.5), 2);
  EXPECT_EQ(experiments::binade_axis_top(60), 100);
  EXPECT_EQ(experiments::binade_axis_top(0), 1);
}

double attribute(const std::string& element, const std::string& name) {
  const std::regex re(" " + name + "=\"([-0-9.]+)\"");
  std::smatch m;
  if (!std::regex_search(element, m, re)) throw std::runtime_error("no " + name + " in " + element);
  return std::stod(m[1]);
}

TEST(BinadeFigure, BarsFollowTheDocumentedGeometry) {
  experiments::BinadeFigure f;
  f.title = "t";
  f.thresholds = emu::format_thresholds(formats::parse_format("fp16"));
  emu::ExponentHistogram h;
  for (double v : {0x1p-20, 0x1.8p-20, -0x1p-20, 0x1p-10, 0.0, 0.0, -0.0, 0.0}) h.add(v);
  f.panels.push_back({"step 0", h});
  const std::string svg = experiments::svg_binade_figure(f);
  // [lo, hi]: fp16's zero edge (binade -25) and overflow edge (16) enclose the data; one binade more each side.
  const int lo = -26, hi = 17;
  const double w = experiments::kBinadePlotWidth / (hi - lo + 1);
  // 3 of 8 values (37.5%) in binade -20; the axis top is 50%.
  const std::regex bar("<rect[^>]*><title>\\[2\\^-20, 2\\^-19\\): 3 values, 37.5%</title>");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, bar)) << svg;
  const std::string element = m[0];
  EXPECT_NEAR(attribute(element, "x"), experiments::kBinadeLeft + (-20 - lo) * w + 0.5, 0.006);
  EXPECT_NEAR(attribute(element, "height"), experiments::kBinadePanelHeight * 37.5 / 50, 0.006);
  EXPECT_NE(svg.find("[2^-10, 2^-9): 1 values, 12.5%"), std::string::npos);
  EXPECT_NE(svg.find("8 values; zeros 50% (not drawn)"), std::string::npos);
  EXPECT_NE(svg.find(">50%</text>"), std::string::npos);
  for (const char* mark : {">2^-24<", ">2^-14<", ">65504<"}) EXPECT_NE(svg.find(mark), std::string::npos) << mark;
  // Tick labels: every binade divisible by the step, none other.
  const int step = experiments::binade_tick_step(hi - lo + 1);
  for (int e = lo; e <= hi; ++e) {
    const std::string label = "text-anchor=\"middle\" fill=\"black\">" + std::to_string(e) + "</text>";
    EXPECT_EQ(svg.find(label) != std::string::npos, e % step == 0) << e;
  }
}

// --- the experiment end to end ---

experiments::UnderflowConfig tiny_experiment(const fs::path& dir, std::size_t jobs) {
  experiments::UnderflowConfig c;
  c.data = "synthetic";
  c.train_size = 256;
  c.test_size = 64;
  c.cnn_steps = 2;
  c.gan_steps = 2;
  c.seeds = 2;
  c.scales = {1.0, 16777216.0};
  c.report = dir / "reports" / "underflow.md";
  c.runs = dir / "runs";
  c.jobs = jobs;
  return c;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("mpverify-underflow-" + name);
  fs::remove_all(p);
  return p;
}

TEST(UnderflowExperiment, SameSeedsGiveTheSameBytesOnOneOrTwoThreadsAndOverflowSkipsEveryStep) {
  const fs::path a = fresh("a"), b = fresh("b");
  const experiments::UnderflowResult ra = experiments::run_underflow(tiny_experiment(a, 1), {});
  const experiments::UnderflowResult rb = experiments::run_underflow(tiny_experiment(b, 2), {});
  ASSERT_EQ(ra.files.size(), rb.files.size());
  ASSERT_EQ(ra.files.size(), 1u + 6 + 4);  // report, 6 histograms, zero/overflow per scale, parity, rates
  for (std::size_t i = 0; i < ra.files.size(); ++i) {
    EXPECT_EQ(ra.files[i].filename(), rb.files[i].filename());
    EXPECT_EQ(read(ra.files[i]), read(rb.files[i])) << ra.files[i];
  }
  // Scale 2^24: the loss gradient of a fresh classifier is (p - y) / batch with
  // |p - y| near 0.9 for the true class (p about 0.1), 0.9 / 64 * 2^24 > 65504:
  // it overflows fp16 at every step, and a skipped step leaves the weights as
  // they were, so every step of every seed is skipped.
  ASSERT_EQ(ra.points.size(), 2u);
  EXPECT_EQ(ra.points[1].skipped_steps, 2u * 2u);
  EXPECT_GT(ra.points[1].overflow_rate, 0);
  // Scale 1 overflows nothing (a fresh CNN's gradients are far below 65504; the loss gradient is at most 1/64).
  EXPECT_EQ(ra.points[0].skipped_steps, 0u);
  EXPECT_EQ(ra.points[0].overflow_rate, 0);
  // The report's gate rows are the gate on the run directories.
  const std::string report = read(a / "reports" / "underflow.md");
  const auto side = [&](const std::string& name) {
    metrics::Ensemble e = metrics::read_ensemble(a / "runs" / name, true);
    e.name = name;
    for (metrics::RunDirectory& r : e.runs)
      if (r.seed) r.name = name + "/seed-" + std::to_string(*r.seed);
    return e;
  };
  metrics::GateOptions o;
  o.margin = 1;
  for (double s : {1.0, 16777216.0}) {
    const metrics::GateResult g =
        metrics::evaluate_gate(side("fp32-ref"), side(experiments::scale_side_name("o2", s)), o);
    EXPECT_NE(report.find(report::gate_table_row(g)), std::string::npos) << s;
  }
  EXPECT_EQ(report.find(a.string()), std::string::npos) << "the report names an absolute path";
  // The census: three groups, two roles, steps 0 and 1 of 2 (steps/2 == 1 == steps - 1).
  EXPECT_EQ(ra.census.size(), 3u * 2u * 2u);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(UnderflowExperiment, BadSettingsAreRefusedBeforeAnythingIsWritten) {
  const fs::path d = fresh("bad");
  const auto refused = [&](auto change, const std::string& says) {
    experiments::UnderflowConfig c = tiny_experiment(d, 1);
    change(c);
    try {
      experiments::run_underflow(c, {});
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(d)) << says;
  };
  refused([](auto& c) { c.seeds = 1; }, "--seeds 1");
  refused([](auto& c) { c.scales = {1, 3}; }, "not a power of two");
  refused([](auto& c) { c.scales = {8, 1}; }, "increasing order");
  refused([](auto& c) { c.scales = {0.5}; }, "not a power of two in [1, 2^64]");
  refused([](auto& c) { c.scales = {}; }, "at least one");
  refused([&](auto& c) { c.report = d / "report.txt"; }, "Markdown");
  refused([](auto& c) { c.recipe = "fp32"; }, "mixed-precision");
  refused([](auto& c) { c.recipe = "o9"; }, "o9");
  refused([](auto& c) { c.cnn_steps = 0; }, "--cnn-steps");
  refused([](auto& c) { c.margin = 0; }, "--margin");
  refused([](auto& c) { c.data = "cifar"; }, "cifar");
  EXPECT_EQ(experiments::parse_scale_list("1,2^3,64"), (std::vector<double>{1, 8, 64}));
  for (const char* bad : {"", "1,,8", "2^x", "8k", "1,2^3.5"})
    EXPECT_THROW(experiments::parse_scale_list(bad), std::invalid_argument) << bad;
}

TEST(UnderflowExperiment, TheCommandExitsTwoOnBadInputAndWritesNothing) {
  const fs::path d = fresh("cli");
  const std::string common = std::string(UNDERFLOW_BIN) + " --data synthetic --report " + (d / "r.md").string() +
                             " --runs " + (d / "runs").string();
  for (const std::string& args : {std::string(" --seeds 1"), std::string(" --scales 1,abc"),
                                  std::string(" --jobs 0"), std::string(" --no-such-option")}) {
    const test::CommandResult r = test::run_command(common + args, "", true);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("underflow: error:"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(d)) << args;
  }
  const test::CommandResult help = test::run_command(std::string(UNDERFLOW_BIN) + " --help", "");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Example"), std::string::npos);
  EXPECT_NE(help.out.find("--scales"), std::string::npos);
}

}  // namespace
