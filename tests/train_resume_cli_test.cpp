// `mpverify train --seeds` survives being killed: the process is stopped with SIGKILL at every atomic
// write it makes (halfway through writing the file, through the MPVERIFY_KILL_AT_WRITE fault injection
// of record::write_file_atomically), then started again with the same command; every file of the
// finished ensemble must be the same bytes as an uninterrupted run's, and nothing half-written or
// temporary may remain. Also: a finished run of another configuration is refused, and --force replaces it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/json_text.h"
#include "support/directory_files.h"
#include "support/kill_points.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::Ended;
using mpverify::test::run_program;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-train-resume-" + name);
  fs::remove_all(dir);
  return dir;
}

std::vector<std::string> ensemble_args(const fs::path& out, const std::string& steps = "2") {
  return {MPVERIFY_BIN, "train",  "--model", "mlp",   "--data", "synthetic", "--train-size", "128", "--test-size",
          "64",         "--batch-size", "16", "--steps", steps,   "--seeds", "1,2,3", "--quiet", "--out", out.string()};
}

using mpverify::test::files_under;
std::string read(const fs::path& p) { return mpverify::test::file_bytes(p); }

TEST(TrainResume, KilledAtEveryWriteAndStartedAgainGivesTheSameBytes) {
  const fs::path reference_dir = fresh_dir("reference");
  ASSERT_EQ(run_program(ensemble_args(reference_dir), "").exit_code, 0);
  const std::map<std::string, std::string> reference = files_under(reference_dir);
  ASSERT_TRUE(reference.count("ensemble.json"));
  ASSERT_TRUE(reference.count("seed-3/summary.json"));

  long kill_points = 0, kept = 0;
  for (long n = 1;; ++n) {
    const fs::path dir = fresh_dir("killed");
    const Ended first = run_program(ensemble_args(dir), std::to_string(n));
    if (!first.killed) {
      // Past the last write: the run finished untouched.
      ASSERT_EQ(first.exit_code, 0) << "write " << n;
      break;
    }
    ++kill_points;
    const auto finished = mpverify::test::finished_runs(dir);
    const Ended again = run_program(ensemble_args(dir), "");
    for (const auto& [summary, written] : finished)
      if (summary.find("seed-") != std::string::npos) {  // kept, not trained again
        EXPECT_EQ(fs::last_write_time(summary), written) << "killed at write " << n << ": " << summary << " was rewritten";
        ++kept;
      }
    ASSERT_EQ(again.exit_code, 0) << "started again after a kill at write " << n;
    EXPECT_EQ(mpverify::test::tree_difference(reference, dir), "") << "killed at write " << n;
    ASSERT_LT(n, 1000) << "the kill points never end";
  }
  // Three seeds of two steps publish their logs every step, then their summaries, then ensemble.json.
  EXPECT_GE(kill_points, 20);
  EXPECT_GT(kept, 0);  // some kills came after a run had finished, and those runs were kept
  fs::remove_all(reference_dir);
  fs::remove_all(fresh_dir("killed"));
}

TEST(TrainResume, AFinishedRunOfAnotherConfigurationIsRefusedAndForceReplacesIt) {
  const fs::path dir = fresh_dir("other");
  // Seed 2 finished with 3 steps, then the ensemble asks for 2 steps in the same --out.
  std::vector<std::string> two_steps = {MPVERIFY_BIN, "train", "--model", "mlp", "--data", "synthetic", "--train-size",
                                        "128", "--test-size", "64", "--batch-size", "16", "--steps", "3", "--seed", "2",
                                        "--quiet", "--out", (dir / "seed-2").string()};
  ASSERT_EQ(run_program(two_steps, "").exit_code, 0);
  const std::string before = read(dir / "seed-2" / "summary.json");
  const auto refused = mpverify::test::run_command(
      std::string(MPVERIFY_BIN) + " train --model mlp --data synthetic --train-size 128 --test-size 64 "
                                  "--batch-size 16 --steps 2 --seeds 1,2,3 --quiet --out " + dir.string(),
      "", true);
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("seed-2 holds a finished run of another configuration"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--force"), std::string::npos) << refused.out;
  EXPECT_EQ(read(dir / "seed-2" / "summary.json"), before);
  EXPECT_FALSE(fs::exists(dir / "ensemble.json"));
  EXPECT_FALSE(fs::exists(dir / "seed-1"));

  std::vector<std::string> forced = ensemble_args(dir);
  forced.push_back("--force");
  ASSERT_EQ(run_program(forced, "").exit_code, 0);
  const fs::path reference_dir = fresh_dir("other-reference");
  ASSERT_EQ(run_program(ensemble_args(reference_dir), "").exit_code, 0);
  EXPECT_TRUE(files_under(dir) == files_under(reference_dir));
  fs::remove_all(dir);
  fs::remove_all(reference_dir);
}

TEST(TrainResume, AnUnwritableOrFullOutputExitsTwoNamingThePathAndLeavesNoHalfWrittenFile) {
  const fs::path errors = fresh_dir("errors.txt");
  // A place no one can create a directory in, not even root.
  const std::string unwritable = "/proc/mpverify-train-resume-unwritable";
  std::vector<std::string> args = ensemble_args(unwritable);
  EXPECT_EQ(run_program(args, "", errors).exit_code, 2);
  std::string quoted = "'";  // piecewise: GCC 12's false -Wrestrict on "literal" + string
  quoted += unwritable;
  EXPECT_NE(read(errors).find(quoted), std::string::npos) << read(errors);

  // A disk that fills up mid-run: the recorders' files grow past 4 KiB at the first steps.
  const fs::path dir = fresh_dir("full");
  EXPECT_EQ(run_program(ensemble_args(dir, "20"), "", errors, 4096).exit_code, 2);
  const std::string message = read(errors);
  std::string first_run = "'";
  first_run += (dir / "seed-1").string();
  first_run += '/';
  EXPECT_NE(message.find(first_run), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  // What is there is whole: no temporary file, and every published log is complete JSON lines.
  ASSERT_TRUE(fs::exists(dir / "seed-1"));
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
    const std::string text = read(e.path());
    EXPECT_TRUE(text.empty() || text.back() == '\n') << e.path();
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(mpverify::io::try_parse_json_text(line).has_value()) << e.path() << ": " << line;
  }
  EXPECT_FALSE(fs::exists(dir / "ensemble.json"));
  fs::remove_all(dir);
  fs::remove(errors);
}

}  // namespace
