// Exit codes mean one thing across the commands: 0 done, 1 a verdict against what was checked, 2 bad input
// or usage with nothing on standard output, 3 inconclusive or a replayed run its rule stops. docs/cli.md's
// "Exit codes" table says which codes each command gives; this test reads that table, checks that it names
// every command the program has, and runs every command into every code the table lists for it (and no
// case into a code the table does not list). A command that gains a code, or a doc that promises one no
// input reaches, fails here.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/npy.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " " + args; }

// command -> the codes docs/cli.md lists for it (a cell other than "—").
std::map<std::string, std::set<int>> documented_codes() {
  std::ifstream in(std::string(MPVERIFY_SOURCE_DIR) + "/docs/cli.md");
  std::map<std::string, std::set<int>> codes;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) in_section = line == "## Exit codes";
    if (!in_section || !line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    if (cells.size() < 5) continue;
    const std::string name = cells[0].substr(cells[0].find('`') + 1, cells[0].rfind('`') - cells[0].find('`') - 1);
    for (int code = 0; code <= 3; ++code)
      if (cells[1 + code].find("—") == std::string::npos) codes[name].insert(code);
  }
  return codes;
}

// The commands the program names when given an unknown one: "(commands: a, b, ...)".
std::set<std::string> program_commands() {
  const auto r = run_command(cli("no-such-command"), "", true);
  const std::size_t from = r.out.find("(commands: ");
  std::set<std::string> names;
  if (from == std::string::npos) return names;
  std::stringstream list(r.out.substr(from + 11, r.out.find(')', from) - from - 11));
  for (std::string name; std::getline(list, name, ',');) names.insert(name.substr(name.find_first_not_of(' ')));
  return names;
}

// A code the table lists that no input can give: ops' 1 is a pair of sides that differs beyond its bound,
// which is a defect of mpverify or of the GPU library (the ops suites hold every op to its bound).
const std::set<std::pair<std::string, int>> kNotReachableByInput = {{"ops", 1}};

struct Case {
  std::string command;
  int code;
  std::string args;  // after the command
  std::string input = "";
};

class ExitCodes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("mpverify-exit-codes-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "reports");
    auto file = [](const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; };
    mpverify::io::write_npy(dir_ / "w.npy", std::vector<float>{1.0f, 2.0f, 0.5f, 3.0f}, {4});
    mpverify::io::write_npy(dir_ / "u.npy", std::vector<float>{0x1p-12f, 0.5f, 0.0f, 1.0f}, {4});
    // Two feature sets of 8 x 2.
    std::vector<float> a, b;
    for (int i = 0; i < 16; ++i) {
      a.push_back(static_cast<float>((i * 7) % 5) * 0.25f);
      b.push_back(static_cast<float>((i * 3) % 7) * 0.25f);
    }
    mpverify::io::write_npy(dir_ / "a.npy", a, {8, 2});
    mpverify::io::write_npy(dir_ / "b.npy", b, {8, 2});
    // A safetensors file whose header length runs past its end.
    std::ofstream(dir_ / "bad.safetensors", std::ios::binary) << std::string("\xff\0\0\0\0\0\0\0{}", 10);
    file("reports/a.md", "# A report\n\nText.\n");
    // Gate values: six seeds alike (equivalent at a 1-point margin), ten points lower (not equivalent), two
    // seeds that spread (inconclusive).
    file("base.csv", "seed,value\n1,90.0\n2,90.2\n3,89.8\n4,90.1\n5,89.9\n6,90.0\n");
    file("same.csv", "seed,value\n1,90.1\n2,90.1\n3,89.9\n4,90.0\n5,90.0\n6,89.9\n");
    file("low.csv", "seed,value\n1,80.1\n2,79.9\n3,80.3\n4,79.8\n5,80.2\n6,80.0\n");
    file("two-base.csv", "seed,value\n1,90.0\n2,92.0\n");
    file("two-cand.csv", "seed,value\n1,91.0\n2,89.0\n");
    // torch's rule keeps 65536 after a clean step; the trace says 1.
    file("wrong-scale.csv", "step,found_inf,scale\n0,0,65536\n1,0,1\n");
    const std::string train_settings =
        R"("model": "mlp", "data": "synthetic", "backend": "emu", "steps": 8, "train-size": 256, "test-size": 128, )"
        R"("batch-size": 32)";
    // A learning rate of 0 does not train (not equivalent); 0.09 against 0.1 on two seeds cannot be told
    // apart at a 1-point margin (inconclusive), and can at 50 (equivalent).
    auto plan = [&](const std::string& name, const std::string& lrs, const std::string& seeds, int margin) {
      file(name, "{\"train\": {" + train_settings + "}, \"axes\": {\"lr\": [" + lrs + "], \"seed\": [" + seeds +
                     "]}, \"gate\": {\"baseline\": {\"lr\": 0.1}, \"metric\": \"accuracy\", \"margin\": " +
                     std::to_string(margin) + "}}");
    };
    plan("equivalent.json", "0.1, 0.09", "1, 2", 50);
    plan("not-equivalent.json", "0.1, 0", "1, 2, 3", 1);
    plan("inconclusive.json", "0.1, 0.09", "1, 2", 1);
    // Two short runs for compare-runs.
    for (const char* seed : {"1", "2"})
      run_command(cli("train --model mlp --data synthetic --train-size 128 --test-size 64 --batch-size 32 --steps 2 "
                      "--quiet --seed " + std::string(seed) + " --out " + (dir_ / ("run" + std::string(seed))).string()),
                  "");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string at(const std::string& name) { return (dir_ / name).string(); }
  // A fresh output path for one case: nothing a case writes is seen by another.
  static std::string out(const std::string& name) {
    static int n = 0;
    return (dir_ / ("out-" + std::to_string(++n) + "-" + name)).string();
  }

  static std::vector<Case> cases() {
    return {
        {"formats", 0, ""},
        {"formats", 2, "--no-such-option"},
        {"round", 0, "--format fp16 1.5"},
        {"round", 2, "--format fp17 1"},
        {"eval", 0, "--op add --format fp16 --check", "3C00 3C00 4000 00\n"},
        {"eval", 1, "--op add --format fp16 --check", "3C00 3C00 4400 00\n"},  // 1 + 1 is 4000, not 4400
        {"eval", 2, "--op add --format fp16", "3C00 zz\n"},
        {"ops", 0, "--op relu --shape n=16 --backends ref,emu"},
        {"ops", 2, "--op no-such-op --shape n=16"},
        {"replay-scalers", 0, "--trace - --strategies torch", "0\n1\n0\n"},
        {"replay-scalers", 1, "--trace " + at("wrong-scale.csv") + " --check torch"},
        {"replay-scalers", 2, "--trace - --strategies no-such-strategy", "0\n"},
        // init 2, hysteresis 1: an overflow takes it to its minimum 1, the next one stops the run.
        {"replay-scalers", 3, "--trace - --strategies deepspeed --strategy-opt deepspeed.init=2 "
                              "--strategy-opt deepspeed.hysteresis=1", "1\n1\n0\n"},
        {"train", 0, "--model mlp --data synthetic --train-size 128 --test-size 64 --batch-size 32 --steps 2 --quiet "
                     "--out " + out("train")},
        {"train", 2, "--model no-such-model --out " + out("train")},
        {"compare-runs", 0, at("run1") + " " + at("run1") + " --tolerance-loss 0"},
        {"compare-runs", 1, at("run1") + " " + at("run2") + " --tolerance-loss 0"},
        {"compare-runs", 2, at("run1") + " " + at("no-such-run")},
        {"summarize", 0, at("run1") + " --what-if 2^10"},
        {"summarize", 2, at("run1") + " --what-if 3"},
        {"gate", 0, "--baseline " + at("base.csv") + " --candidate " + at("same.csv") + " --metric top1 --margin 1"},
        {"gate", 1, "--baseline " + at("base.csv") + " --candidate " + at("low.csv") + " --metric top1 --margin 1"},
        {"gate", 2, "--baseline " + at("base.csv") + " --candidate " + at("no-such.csv") + " --metric top1 --margin 1"},
        {"gate", 3, "--baseline " + at("two-base.csv") + " --candidate " + at("two-cand.csv") +
                        " --metric top1 --margin 1"},
        {"fid", 0, at("a.npy") + " " + at("b.npy")},
        {"fid", 2, at("a.npy") + " " + at("no-such.npy")},
        {"analyze", 0, at("w.npy") + " --format fp16"},
        {"analyze", 2, at("bad.safetensors") + " --format fp16"},
        {"analyze", 2, at("w.npy") + " --format fp17"},
        {"swamp", 0, "--weights " + at("w.npy") + " --updates " + at("u.npy")},
        {"swamp", 2, "--weights " + at("w.npy") + " --updates " + at("bad.safetensors")},
        {"quantize", 0, at("w.npy") + " --scheme mxfp8-e4m3 --out " + out("q.npz")},
        {"quantize", 2, at("w.npy") + " --scheme no-such-scheme --out " + out("q.npz")},
        {"allreduce", 0, "--synthetic 1 --ranks 2 --elements 8 --format bf16 --out " + out("sum.npy")},
        {"allreduce", 2, "--synthetic 1 --ranks -1 --elements 8 --format bf16 --out " + out("sum.npy")},
        {"feature-extractor", 0, "--steps 2 --batch-size 8 --quiet --out " + out("fe.safetensors")},
        {"feature-extractor", 2, "--steps 2 --no-such-option --out " + out("fe.safetensors")},
        {"study", 0, "--seeds 2 --steps 4 --train-size 512 --test-size 100 --backend emu --quiet --out " +
                         out("study-runs") + " --report " + out("study.md")},
        {"study", 2, "--seeds 0 --out " + out("study-runs") + " --report " + out("study.md")},
        {"report-page", 0, at("reports") + " --out " + out("page.html")},
        {"report-page", 2, at("no-such-reports") + " --out " + out("page.html")},
        {"sweep", 0, at("equivalent.json") + " --quiet --out " + out("sweep")},
        {"sweep", 1, at("not-equivalent.json") + " --quiet --out " + out("sweep")},
        {"sweep", 2, at("no-such-plan.json") + " --quiet --out " + out("sweep")},
        {"sweep", 3, at("inconclusive.json") + " --quiet --out " + out("sweep")},
    };
  }

  static fs::path dir_;
};

fs::path ExitCodes::dir_;

TEST_F(ExitCodes, TheTableNamesEveryCommand) {
  const auto documented = documented_codes();
  const std::set<std::string> commands = program_commands();
  ASSERT_GE(commands.size(), 17u);
  for (const std::string& c : commands) EXPECT_TRUE(documented.contains(c)) << c << " has no row in docs/cli.md";
  for (const auto& [c, codes] : documented) {
    EXPECT_TRUE(commands.contains(c)) << "docs/cli.md lists " << c << ", which the program does not have";
    EXPECT_TRUE(codes.contains(0) && codes.contains(2)) << c << ": every command can succeed and refuse input";
  }
}

TEST_F(ExitCodes, EveryDocumentedCodeHasACaseAndEveryCaseADocumentedCode) {
  const auto documented = documented_codes();
  std::set<std::pair<std::string, int>> covered;
  for (const Case& c : cases()) {
    covered.insert({c.command, c.code});
    EXPECT_TRUE(documented.contains(c.command) && documented.at(c.command).contains(c.code))
        << c.command << " " << c.args << ": exit " << c.code << " is not in docs/cli.md's table";
  }
  for (const auto& [command, codes] : documented)
    for (const int code : codes)
      EXPECT_TRUE(covered.contains({command, code}) || kNotReachableByInput.contains({command, code}))
          << command << ": docs/cli.md lists exit " << code << " and no case here gives it";
}

TEST_F(ExitCodes, EveryCaseExitsWithItsCode) {
  for (const Case& c : cases()) {
    const auto r = run_command(cli(c.command + " " + c.args), c.input);  // standard output only
    EXPECT_EQ(r.exit_code, c.code) << c.command << " " << c.args << "\n" << r.out;
    if (c.code == 2) {
      EXPECT_EQ(r.out, "") << c.command << " " << c.args << ": bad input prints nothing on stdout";
    }
  }
}

}  // namespace
