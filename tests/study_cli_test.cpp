// `mpverify study` end to end on a tiny configuration: it writes what it says
// (the report, its figures, index.html, the run directories), the same seeds
// give byte-identical report files in two directories, the verdict in the
// report is the one `mpverify gate` computes from the run directories, bad
// input exits 2 with nothing written; and the claim the report makes about
// the seeds run without recorders (the recorders change nothing the training
// computes) holds bit for bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/directory_files.h"
#include "support/kill_points.h"
#include "support/run_command.h"
#include "support/xml_checker.h"
#include "training/trainer.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;

const char* const kFigures[] = {"study-loss.svg", "study-scale.svg", "study-underflow.svg", "study-lost-updates.svg",
                                "study-gradients.svg"};

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-study-cli-" + name);
  fs::remove_all(dir);
  return dir;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The tiny study: 2 seeds, 4 steps, small sets, the emulator side only.
std::string study(const fs::path& dir, const std::string& extra = "") {
  return std::string(MPVERIFY_BIN) + " study --seeds 2 --steps 4 --train-size 512 --test-size 100 --backend emu" +
         " --out " + (dir / "runs").string() + " --report " + (dir / "reports" / "study.md").string() + " " + extra;
}

// The verdict line the report shows in its "## Verdict" code block.
std::string report_verdict(const std::string& md) {
  const std::size_t section = md.find("## Verdict\n\n```\n");
  if (section == std::string::npos) return "";
  const std::size_t start = section + std::string("## Verdict\n\n```\n").size();
  return md.substr(start, md.find('\n', start) - start);
}

TEST(StudyCli, TwoRunsWriteIdenticalReportsWhoseVerdictIsTheGatesOwn) {
  const fs::path a = fresh_dir("a"), b = fresh_dir("b");
  const auto ra = run_command(study(a, "--json"), "");
  ASSERT_EQ(ra.exit_code, 0) << ra.out;
  const auto rb = run_command(study(b), "");
  ASSERT_EQ(rb.exit_code, 0) << rb.out;

  // What it says it writes, and nothing half-written.
  const auto j = nlohmann::json::parse(ra.out);
  ASSERT_EQ(j["files"].size(), 7u);
  for (const auto& f : j["files"]) EXPECT_TRUE(fs::is_regular_file(f.get<std::string>())) << f;
  std::map<std::string, std::string> files_a, files_b;
  for (const auto& e : fs::directory_iterator(a / "reports")) files_a[e.path().filename()] = read(e.path());
  for (const auto& e : fs::directory_iterator(b / "reports")) files_b[e.path().filename()] = read(e.path());
  ASSERT_EQ(files_a.size(), 7u);  // study.md, 5 figures, index.html; no .tmp left
  for (const char* f : kFigures) EXPECT_TRUE(files_a.count(f)) << f;
  EXPECT_TRUE(files_a.count("study.md"));
  EXPECT_TRUE(files_a.count("index.html"));
  // Byte-identical in the two directories (no time, no path outside the report's directory).
  for (const auto& [name, content] : files_a) {
    ASSERT_TRUE(files_b.count(name)) << name;
    EXPECT_TRUE(content == files_b[name]) << name << " differs between the two runs";
  }
  // Each figure is well-formed SVG and referenced by the report; the page inlines all of them.
  const std::string md = files_a["study.md"];
  for (const char* f : kFigures) {
    EXPECT_EQ(mpverify::test::XmlReader(files_a[f]).parse().name, "svg") << f;
    EXPECT_NE(md.find(std::string("](") + f + ")"), std::string::npos) << f;
  }
  std::size_t inlined = 0;
  for (std::size_t p = files_a["index.html"].find("<svg"); p != std::string::npos;
       p = files_a["index.html"].find("<svg", p + 1))
    ++inlined;
  EXPECT_EQ(inlined, std::size(kFigures));
  // The run directories: an ensemble per side, what the gate reads.
  for (const char* side : {"fp32-ref", "o2-emu"}) {
    EXPECT_TRUE(fs::exists(a / "runs" / side / "ensemble.json")) << side;
    for (const char* seed : {"seed-1", "seed-2"})
      EXPECT_TRUE(fs::exists(a / "runs" / side / seed / "summary.json")) << side << seed;
  }
  EXPECT_TRUE(fs::exists(a / "runs" / "o2-emu" / "seed-1" / "histograms.jsonl"));  // recorders on for seed 1
  EXPECT_FALSE(fs::exists(a / "runs" / "o2-emu" / "seed-2" / "histograms.jsonl") &&
               fs::file_size(a / "runs" / "o2-emu" / "seed-2" / "histograms.jsonl") > 0);

  // The verdict: recomputed by `mpverify gate` from the run directories.
  const auto gate = run_command(std::string(MPVERIFY_BIN) + " gate --baseline " + (a / "runs" / "fp32-ref").string() +
                                    " --candidate " + (a / "runs" / "o2-emu").string() +
                                    " --metric accuracy --margin 1 --json",
                                "");
  ASSERT_NE(gate.exit_code, 2) << gate.out;
  const auto g = nlohmann::json::parse(gate.out);
  EXPECT_EQ(report_verdict(md), g["line"].get<std::string>());
  EXPECT_EQ(j["verdict"], g["verdict"]);
  EXPECT_EQ(g["exit_code"].get<int>(), gate.exit_code);
  EXPECT_EQ(g["method"], "paired");

  // The runs table: seed 1's accuracies as the summaries hold them (in %, 2 decimals).
  const auto acc = [&](const char* side) {
    const auto s = nlohmann::json::parse(read(a / "runs" / side / "seed-1" / "summary.json"));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", 100.0 * s["evaluation"]["test_accuracy"].get<double>());
    return std::string(buf);
  };
  EXPECT_NE(md.find("| 1 | " + acc("fp32-ref") + " | " + acc("o2-emu") + " |"), std::string::npos) << md;
  // The GPU side is reported as not run when there is none.
  if (!mpverify::gpu::gpu_unavailable_reason().empty()) {
    EXPECT_NE(md.find("No GPU was present"), std::string::npos);
  }
}

// The tiny study in rounds: looks at 2, 3 and 4 seeds.
std::string study_in_rounds(const fs::path& dir, const std::string& extra = "") {
  return std::string(MPVERIFY_BIN) + " study --looks 2,3,4 --steps 4 --train-size 512 --test-size 100 --backend emu" +
         " --out " + (dir / "runs").string() + " --report " + (dir / "reports" / "study.md").string() + " " + extra;
}

// The rounds stop at the look where the gate in rounds decides: the seeds run are exactly that look's, and
// `mpverify gate --sequential` on the run directories gives the report's verdict line at that look.
TEST(StudyCli, RoundsStopAtTheLookTheGateDecides) {
  const fs::path dir = fresh_dir("rounds");
  const auto r = run_command(study_in_rounds(dir, "--json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const std::size_t seeds_run = j["seeds_run"].get<std::size_t>();
  EXPECT_TRUE(seeds_run == 2 || seeds_run == 3 || seeds_run == 4) << seeds_run;
  EXPECT_EQ(j["looks"], nlohmann::json::parse("[2, 3, 4]"));
  for (const char* side : {"fp32-ref", "o2-emu"})
    for (std::size_t s = 1; s <= 5; ++s)
      EXPECT_EQ(fs::exists(dir / "runs" / side / ("seed-" + std::to_string(s)) / "summary.json"), s <= seeds_run)
          << side << " seed " << s;
  const auto gate = run_command(std::string(MPVERIFY_BIN) + " gate --baseline " + (dir / "runs" / "fp32-ref").string() +
                                    " --candidate " + (dir / "runs" / "o2-emu").string() +
                                    " --metric accuracy --margin 1 --sequential 2,3,4 --json",
                                "");
  ASSERT_NE(gate.exit_code, 2) << gate.out;
  ASSERT_NE(gate.exit_code, 3) << "the study stopped before the gate in rounds decided: " << gate.out;
  const auto g = nlohmann::json::parse(gate.out);
  EXPECT_EQ(g["sequential"]["looks"][g["sequential"]["decided_at_look"].get<std::size_t>() - 1], seeds_run);
  EXPECT_EQ(report_verdict(read(dir / "reports" / "study.md")), g["line"].get<std::string>());
  EXPECT_EQ(j["line"], g["line"]);
  // Every earlier look was undecided: the gate on those seeds alone asks for the next look.
  if (seeds_run > 2) {
    for (const char* side : {"fp32-ref", "o2-emu"}) {  // the ensembles as they stood at the look before
      const fs::path manifest = dir / "runs" / side / "ensemble.json";
      auto m = nlohmann::json::parse(read(manifest));
      m["seeds"].erase(m["seeds"].size() - 1);
      std::ofstream(manifest) << m.dump();
    }
    const auto earlier = run_command(std::string(MPVERIFY_BIN) + " gate --baseline " +
                                         (dir / "runs" / "fp32-ref").string() + " --candidate " +
                                         (dir / "runs" / "o2-emu").string() +
                                         " --metric accuracy --margin 1 --sequential 2,3,4",
                                     "");
    EXPECT_EQ(earlier.exit_code, 3) << earlier.out;
  }
}

TEST(StudyCli, BadInputExitsTwoAndWritesNothing) {
  const fs::path dir = fresh_dir("bad");
  for (const std::string extra : {"--seeds 1", "--steps 0", "--backend tpu", "--jobs 0", "--data nosuch"}) {
    const auto r = run_command(study(dir, extra), "", true);
    EXPECT_EQ(r.exit_code, 2) << extra << ": " << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << extra << ": " << r.out;
    EXPECT_FALSE(fs::exists(dir)) << extra;
  }
  for (const std::string extra : {"--looks 3,2", "--looks 1,4", "--looks 2,3 --seeds 2", "--spending linear"}) {
    const auto r = run_command(study_in_rounds(dir, extra), "", true);
    EXPECT_EQ(r.exit_code, 2) << extra << ": " << r.out;
    EXPECT_FALSE(fs::exists(dir)) << extra;
  }
  const auto txt = run_command(std::string(MPVERIFY_BIN) + " study --report " + (dir / "study.txt").string() +
                                   " --out " + (dir / "runs").string(),
                               "", true);
  EXPECT_EQ(txt.exit_code, 2) << txt.out;
  EXPECT_FALSE(fs::exists(dir));
  if (!mpverify::gpu::gpu_unavailable_reason().empty()) {
    const auto gpu = run_command(study(dir, "--backend gpu"), "", true);
    EXPECT_EQ(gpu.exit_code, 2) << gpu.out;
    EXPECT_FALSE(fs::exists(dir));
  }
}

// The study runs seeds 2..N without recorders; the report says that changes
// no number the training computes. Held here bit for bit on the study's
// candidate (o2, torch scaler, emulator, CNN).
TEST(StudyCli, RecordersChangeNothingTheTrainingComputes) {
  const auto run = [](bool recorders) {
    mpverify::training::TrainConfig c;
    c.model = "cnn";
    c.data = "synthetic";
    c.train_size = 256;
    c.test_size = 64;
    c.batch_size = 32;
    c.steps = 4;
    c.seed = 2;
    c.recipe = "o2";
    c.scaler = "torch";
    c.backend = mpverify::nn::BackendKind::emu;
    c.recorders = recorders;
    mpverify::training::Trainer t(c);
    std::vector<double> trace;
    for (int i = 0; i < 4; ++i) {
      const auto line = t.step();
      trace.push_back(line["loss"].get<double>());
      trace.push_back(line["scale"].get<double>());
    }
    for (const auto* p : t.parameters())
      for (const float w : p->master) trace.push_back(w);
    const auto e = t.evaluate();
    trace.push_back(static_cast<double>(e.correct));
    trace.push_back(e.test_loss);
    return trace;
  };
  const auto with = run(true), without = run(false);
  ASSERT_EQ(with.size(), without.size());
  ASSERT_GT(with.size(), 100u);
  for (std::size_t i = 0; i < with.size(); ++i) ASSERT_EQ(with[i], without[i]) << i;  // bit for bit (no NaN here)
}

// A study killed (SIGKILL, halfway through one of its writes) and started again with the same command
// resumes: its runs that finished are kept, and every file, the reports included, is the same bytes as
// an uninterrupted study's. Kill points, named by file (MPVERIFY_KILL_AT_WRITE=NAME:K): the queue's
// journal, the first and the third of the four runs' summaries, an ensemble manifest and the last write
// (the page); the every-write test is TrainResume's (train --seeds), which shares the mechanism.
TEST(StudyCli, KilledAtItsWritesAndStartedAgainWritesTheSameBytes) {
  const auto args = [](const fs::path& dir) {
    return std::vector<std::string>{MPVERIFY_BIN, "study", "--seeds", "2", "--steps", "2", "--train-size", "256",
                                    "--test-size", "64", "--backend", "emu", "--out", (dir / "runs").string(),
                                    "--report", (dir / "reports" / "study.md").string()};
  };
  const fs::path reference_dir = fresh_dir("resume-reference");
  ASSERT_EQ(mpverify::test::run_program(args(reference_dir), "").exit_code, 0);
  const std::map<std::string, std::string> reference = mpverify::test::files_under(reference_dir);
  ASSERT_TRUE(reference.count("reports/study.md"));
  EXPECT_FALSE(reference.count("runs/queue.json"));  // the journal goes once every run finished

  const fs::path dir = fresh_dir("resume-killed");
  const auto killed_at = [&](const std::string& point) {
    fs::remove_all(dir);
    return mpverify::test::run_program(args(dir), point).killed;
  };
  std::size_t kept = 0;
  const auto resumes_to_the_same_bytes = [&](const std::string& n) {
    const auto finished = mpverify::test::finished_runs(dir / "runs");
    const bool journal = fs::exists(dir / "runs" / "queue.json");
    ASSERT_EQ(mpverify::test::run_program(args(dir), "").exit_code, 0) << "started again after a kill at write " << n;
    if (journal) {  // killed while the queue ran: its finished runs were kept, not trained again
      EXPECT_TRUE(mpverify::test::finished_runs(dir / "runs").size() >= finished.size());
      for (const auto& [summary, written] : finished)
        EXPECT_EQ(fs::last_write_time(summary), written) << "killed at write " << n << ": " << summary << " was rewritten";
      kept += finished.size();
    }
    EXPECT_EQ(mpverify::test::tree_difference(reference, dir), "") << "killed at write " << n;
  };
  for (const std::string point : {"queue.json:1", "summary.json:1", "summary.json:3", "ensemble.json:1", "index.html:1"}) {
    ASSERT_TRUE(killed_at(point)) << point << " is not one of the study's writes";
    resumes_to_the_same_bytes(point);
  }
  EXPECT_GT(kept, 0u) << "no kill point fell after a run had finished: the test proves no run is kept";
  fs::remove_all(dir);
  fs::remove_all(reference_dir);
}

}  // namespace
