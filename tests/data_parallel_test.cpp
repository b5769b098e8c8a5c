// `train --data-parallel N`: the step's gradients are the shards' gradients all-reduced. Held against an
// independent computation: the shards' gradients from training::shard_gradients (each shard's own forward
// and backward, the MLP's rows held against FP64 in shard_gradients_test), each divided by N and summed here
// in the ring's or the tree's order with this file's own rounding (float arithmetic for fp32; a
// round-to-nearest-even to 8 significant bits for bf16), compared bit for bit with what the Trainer leaves in
// its parameters' gradients after one step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "training/shard_gradients.h"
#include "training/trainer.h"

namespace mpverify::training {
namespace {

constexpr std::size_t kRanks = 4, kShard = 2;

TrainConfig data_parallel_mlp(const std::string& format, const std::string& algorithm, std::uint64_t seed) {
  TrainConfig c;
  c.model = "mlp";
  c.recipe = "fp32";
  c.backend = nn::BackendKind::ref;
  c.batch_size = kRanks * kShard;
  c.steps = 1;
  c.seed = seed;
  c.recorders = false;
  c.data_parallel = {kRanks, format, algorithm};
  return c;
}

// Rank r's row of one step's shard gradients (the Trainer's step-0 batch and initial weights).
std::vector<std::vector<float>> shard_rows(std::uint64_t seed) {
  ShardGradientOptions o;
  o.model = "mlp";
  o.ranks = kRanks;
  o.shard_batch = kShard;
  o.seed = seed;
  const ShardGradients g = shard_gradients(o);
  std::vector<std::vector<float>> rows(kRanks);
  for (std::size_t r = 0; r < kRanks; ++r)
    rows[r].assign(g.rows.begin() + static_cast<std::ptrdiff_t>(r * g.n),
                   g.rows.begin() + static_cast<std::ptrdiff_t>((r + 1) * g.n));
  return rows;
}

std::vector<float> trainer_gradients(const TrainConfig& c) {
  Trainer t(c);
  (void)t.step();
  std::vector<float> g;
  for (const nn::Parameter* p : t.parameters()) g.insert(g.end(), p->grad.begin(), p->grad.end());
  return g;
}

// bf16: v (exact in double) rounded to nearest-even at 8 significant bits (gradients here are far from bf16's
// range limits, so no subnormal or overflow case is needed).
double to_bf16(double v) {
  if (v == 0) return v;
  int e = 0;
  const double m = std::frexp(v, &e);                  // v = m 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);  // nearbyint: round half to even
}

// A bf16 addition: the double sum is exact when the operands' exponents are within 45 of each other (8 + 45 <
// 53); the test asserts it rather than assume it.
double add_bf16(double a, double b) {
  const double s = a + b;
  EXPECT_EQ(s - a, b) << "the double sum of " << a << " and " << b << " is not exact: this test's bf16 add is not";
  return to_bf16(s);
}

TEST(DataParallel, Fp32RingGradientIsTheShardsGradientsDividedAndSummedInRingOrder) {
  const std::uint64_t seed = 5;
  const auto rows = shard_rows(seed);
  const std::size_t n = rows[0].size();
  std::vector<float> expected(n);
  // Ring: chunk c of n (numpy.array_split: the first n mod N chunks one longer) starts at rank c.
  std::size_t begin = 0;
  for (std::size_t c = 0; c < kRanks; ++c) {
    const std::size_t end = begin + n / kRanks + (c < n % kRanks ? 1 : 0);
    for (std::size_t i = begin; i < end; ++i) {
      float acc = rows[c][i] / static_cast<float>(kRanks);  // dividing by 4 is exact above fp32's subnormals
      for (std::size_t j = 1; j < kRanks; ++j) acc = acc + rows[(c + j) % kRanks][i] / static_cast<float>(kRanks);
      expected[i] = acc;
    }
    begin = end;
  }
  const std::vector<float> got = trainer_gradients(data_parallel_mlp("fp32", "ring", seed));
  ASSERT_EQ(got.size(), n);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) differ += std::memcmp(&got[i], &expected[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << "of " << n;
}

TEST(DataParallel, Bf16TreeGradientIsTheShardsGradientsRoundedAndSummedPairwise) {
  const std::uint64_t seed = 9;
  const auto rows = shard_rows(seed);
  const std::size_t n = rows[0].size();
  const std::vector<float> got = trainer_gradients(data_parallel_mlp("bf16", "tree", seed));
  ASSERT_EQ(got.size(), n);
  std::size_t differ = 0, changed_by_bf16 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double x[kRanks];
    for (std::size_t r = 0; r < kRanks; ++r) x[r] = to_bf16(to_bf16(rows[r][i]) / kRanks);  // round, divide, round
    const double expected = add_bf16(add_bf16(x[0], x[1]), add_bf16(x[2], x[3]));  // (0+1) + (2+3)
    differ += static_cast<double>(got[i]) != expected;
    double exact = 0;
    for (std::size_t r = 0; r < kRanks; ++r) exact += static_cast<double>(rows[r][i]) / kRanks;
    changed_by_bf16 += expected != exact;
  }
  EXPECT_EQ(differ, 0u) << "of " << n;
  EXPECT_GT(changed_by_bf16, n / 2) << "bf16 changed too few sums: the test would not see a missing rounding";
}

TEST(DataParallel, TheSummaryNamesTheReductionAndCountsItsAdditions) {
  Trainer t(data_parallel_mlp("bf16", "ring", 3));
  (void)t.step();
  const nlohmann::json s = t.summary();
  EXPECT_EQ(s["config"]["data_parallel"],
            nlohmann::json({{"ranks", 4}, {"format", "bf16"}, {"algorithm", "ring"}, {"divide", "before"}}));
  std::size_t n = 0;
  for (const nn::Parameter* p : t.parameters()) n += p->size();
  EXPECT_EQ(s["all_reduce"]["additions"]["elements"], n * (kRanks - 1));  // one step: N - 1 additions per element
  EXPECT_EQ(s["all_reduce"]["inputs"]["elements"], n * kRanks);
  // Off: the summary is what it was without the option.
  TrainConfig off = data_parallel_mlp("bf16", "ring", 3);
  off.data_parallel = {};
  EXPECT_FALSE(Trainer(off).summary().contains("all_reduce"));
  EXPECT_FALSE(Trainer(off).summary()["config"].contains("data_parallel"));
}

TEST(DataParallel, SettingsItCannotRunAreRefused) {
  const auto refused = [](TrainConfig c, const std::string& fragment) {
    try {
      Trainer t(std::move(c));
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted; expected an error with: " << fragment;
  };
  TrainConfig c = data_parallel_mlp("bf16", "ring", 1);
  c.recorders = true;
  refused(c, "add --no-recorders");
  c = data_parallel_mlp("bf16", "ring", 1);
  c.batch_size = 10;
  refused(c, "must cut into 4 equal shards");
  c = data_parallel_mlp("bf17", "ring", 1);
  refused(c, "--reduce-format bf17");
  c = data_parallel_mlp("bf16", "spiral", 1);
  refused(c, "--reduce-algorithm spiral");
  c = data_parallel_mlp("bf16", "ring", 1);
  c.model = "cnn";
  c.batch_size = 4;  // shards of one example: the CNN's batch norm needs two
  refused(c, "at least 2 examples");
  c = data_parallel_mlp("bf16", "ring", 1);
  c.against_reference = true;
  refused(c, "--against ref");
}

}  // namespace
}  // namespace mpverify::training
