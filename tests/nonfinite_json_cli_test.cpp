// One convention for numbers JSON cannot hold: an infinite or NaN value is written as null, and the object
// says why with a flag beside it (steps.jsonl: "found_inf" and "nonfinite"; summary.json: "aborted" and
// evaluation "diverged"/"reason"). Every reader takes what every writer writes: a run that diverged on
// purpose (an inf injected into a weight gradient, no loss scaler) goes through compare-runs, the gate and
// replay-scalers, which treat its nulls as non-finite (the gate: diverged, exit 1), never as bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "io/json_text.h"
#include "record/run_log.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;

const fs::path& root() {
  static const fs::path dir = [] {
    // Per process: ctest runs each case as its own process, in parallel.
    const fs::path d = fs::temp_directory_path() / ("mpverify-nonfinite-json-" + std::to_string(::getpid()));
    fs::remove_all(d);
    return d;
  }();
  return dir;
}

std::string train(const std::string& extra, const fs::path& out) {
  return std::string(MPVERIFY_BIN) + " train --model mlp --data synthetic --train-size 128 --test-size 64 " +
         "--batch-size 16 --steps 4 --seeds 1,2 --quiet " + extra + " --out " + out.string();
}

// Two ensembles: one healthy, one whose fc1 weight gradient is +inf at step 1 (the update makes the
// weights non-finite, so every later loss is NaN).
void train_both() {
  static const bool done = [] {
    EXPECT_EQ(run_command(train("", root() / "ok"), "").exit_code, 0);
    EXPECT_EQ(run_command(train("--inject-inf 1:fc1.w", root() / "diverged"), "").exit_code, 0);
    return true;
  }();
  (void)done;
}

TEST(NonfiniteJson, TheRunFilesWriteNullWithTheFlagBesideIt) {
  train_both();
  const std::vector<nlohmann::json> steps = mpverify::record::read_steps(root() / "diverged" / "seed-1");
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_TRUE(steps[0]["loss"].is_number());
  for (std::size_t i = 2; i < steps.size(); ++i) {
    EXPECT_TRUE(steps[i]["loss"].is_null()) << i;
    EXPECT_TRUE(steps[i]["found_inf"].get<bool>()) << i;
    EXPECT_TRUE(steps[i]["nonfinite"].is_object()) << i;  // where the first non-finite value came from
  }
  const nlohmann::json summary = mpverify::io::read_json_file(root() / "diverged" / "seed-1" / "summary.json");
  EXPECT_TRUE(summary["final_loss"].is_null());
  EXPECT_TRUE(summary["evaluation"]["test_accuracy"].is_null());
  EXPECT_TRUE(summary["evaluation"]["diverged"].get<bool>());
  EXPECT_FALSE(summary["evaluation"]["reason"].get<std::string>().empty());
}

TEST(NonfiniteJson, CompareRunsReadsTheNulls) {
  train_both();
  const auto r = run_command(std::string(MPVERIFY_BIN) + " compare-runs --json " + (root() / "ok" / "seed-1").string() +
                                 " " + (root() / "diverged" / "seed-1").string(),
                             "", true);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(mpverify::io::try_parse_json_text(r.out).has_value()) << r.out;
}

TEST(NonfiniteJson, TheGateCallsTheNullsDivergedNeverBadInput) {
  train_both();
  for (const char* metric : {"accuracy", "loss"}) {
    const auto r = run_command(std::string(MPVERIFY_BIN) + " gate --json --metric " + metric + " --margin 1 --baseline " +
                                   (root() / "ok").string() + " --candidate " + (root() / "diverged").string(),
                               "", true);
    EXPECT_EQ(r.exit_code, 1) << metric << ": " << r.out;
    EXPECT_NE(r.out.find("diverged"), std::string::npos) << metric << ": " << r.out;
  }
}

TEST(NonfiniteJson, ReplayScalersReadsTheStepLogWithItsNulls) {
  train_both();
  const auto r = run_command(std::string(MPVERIFY_BIN) + " replay-scalers --json --strategies torch --trace " +
                                 (root() / "diverged" / "seed-1").string(),
                             "", true);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = mpverify::io::try_parse_json_text(r.out.substr(r.out.find('{')));
  ASSERT_TRUE(j.has_value()) << r.out;
}

}  // namespace
