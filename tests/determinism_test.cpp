// Run logs are bitwise the same on a rerun and whatever the number of threads the runs are trained on
// (1, 2 or 4 at a time through training::run_queue, as `study`, `train --seeds` and the experiments
// train them): every file of every run directory is compared byte for byte. The runs mix the reference
// and the emulator, recorders with histograms, a loss scaler and stochastic rounding, so that a shared
// random stream, a global counter or a thread-dependent sum anywhere would show.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/directory_files.h"
#include "training/run_queue.h"

namespace fs = std::filesystem;
namespace training = mpverify::training;

namespace {

std::vector<training::TrainConfig> mixed_runs() {
  std::vector<training::TrainConfig> runs;
  auto tiny = [](const char* model, const char* recipe, mpverify::nn::BackendKind backend, std::uint64_t seed) {
    training::TrainConfig c;
    c.model = model;
    c.data = "synthetic";
    c.train_size = 128;
    c.test_size = 64;
    c.batch_size = 16;
    c.steps = 4;
    c.eval_every = 2;
    c.seed = seed;
    c.recipe = recipe;
    c.backend = backend;
    return c;
  };
  runs.push_back(tiny("mlp", "fp32", mpverify::nn::BackendKind::ref, 1));
  runs.push_back(tiny("mlp", "fp32", mpverify::nn::BackendKind::ref, 2));
  training::TrainConfig o2 = tiny("cnn", "o2", mpverify::nn::BackendKind::emu, 3);
  o2.scaler = "torch";
  runs.push_back(o2);
  training::TrainConfig fp8 = tiny("mlp", "fp8", mpverify::nn::BackendKind::emu, 4);
  runs.push_back(fp8);
  training::TrainConfig mx = tiny("mlp", "mxfp8", mpverify::nn::BackendKind::emu, 5);
  runs.push_back(mx);
  return runs;
}

std::map<std::string, std::string> train_all(const fs::path& root, std::size_t jobs) {
  fs::remove_all(root);
  std::vector<training::QueuedRun> queue;
  const std::vector<training::TrainConfig> configs = mixed_runs();
  for (std::size_t i = 0; i < configs.size(); ++i)
    queue.push_back({configs[i], root / ("run-" + std::to_string(i)), "run " + std::to_string(i)});
  training::run_queue(queue, jobs);
  return mpverify::test::files_under(root);
}

TEST(Determinism, RunLogsAreTheSameBytesOnARerunAndOnOneTwoOrFourThreads) {
  const fs::path base = fs::temp_directory_path() / "mpverify-determinism-test";
  const std::map<std::string, std::string> one = train_all(base / "jobs1", 1);
  // What is compared: each run's step log, summary and recorder files, all of them non-empty.
  ASSERT_EQ(mixed_runs().size(), 5u);
  for (int i = 0; i < 5; ++i)
    for (const char* f : {"steps.jsonl", "summary.json", "tensors.jsonl", "histograms.jsonl"}) {
      const std::string name = "run-" + std::to_string(i) + "/" + f;
      ASSERT_TRUE(one.count(name)) << name;
      EXPECT_FALSE(one.at(name).empty()) << name;
    }
  for (const auto& [label, jobs] : std::vector<std::pair<std::string, std::size_t>>{
           {"jobs2", 2}, {"jobs4", 4}, {"jobs4-again", 4}}) {
    const std::map<std::string, std::string> other = train_all(base / label, jobs);
    ASSERT_EQ(other.size(), one.size()) << label;
    for (const auto& [name, bytes] : one) {
      ASSERT_TRUE(other.count(name)) << label << ": " << name << " is missing";
      EXPECT_TRUE(other.at(name) == bytes) << label << ": " << name << " differs from the one-thread run";
    }
  }
  fs::remove_all(base);
}

}  // namespace
