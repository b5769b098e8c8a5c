// `mpverify train` and `mpverify compare-runs` end to end: a run directory
// with the documented files and fields, refusals with exit code 2 and no output,
// and the comparison of an fp32 run with an o2 run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "data/kjv_text.h"
#include "record/run_log.h"
#include "formats/format.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-train-cli-" + name);
  fs::remove_all(dir);
  return dir;
}

std::string train(const std::string& args) {
  return std::string(MPVERIFY_BIN) + " train --model mlp --train-size 256 --batch-size 32 --steps 6 --quiet " + args;
}

TEST(TrainCli, WritesARunDirectoryWithTheIssuesFields) {
  const fs::path dir = fresh_dir("o2");
  const auto r = run_command(train("--recipe o2 --scaler torch --backend emu --seed 3 --out " + dir.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* file : {"steps.jsonl", "tensors.jsonl", "histograms.jsonl", "summary.json"})
    EXPECT_TRUE(fs::exists(dir / file)) << file;
  for (const char* tmp : {"steps.jsonl.tmp", "summary.json.tmp"}) EXPECT_FALSE(fs::exists(dir / tmp)) << tmp;
  EXPECT_FALSE(fs::exists(dir / "blocks.jsonl")) << "only the block-scaled recipes write it";
  const auto steps = mpverify::record::read_steps(dir);
  ASSERT_EQ(steps.size(), 6u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["step"].get<std::size_t>(), i);
    for (const char* key : {"loss", "scale", "underflow_rate", "lost_update_rate"})
      EXPECT_TRUE(steps[i][key].is_number()) << key;
    EXPECT_TRUE(steps[i]["skipped"].is_boolean());
  }
  EXPECT_EQ(steps[0]["scale"].get<double>(), 65536.0);  // torch's initial scale
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  EXPECT_EQ(summary["config"]["recipe"], "o2");
  EXPECT_EQ(summary["steps"].get<int>(), 6);
  EXPECT_TRUE(summary["thresholds"].contains("fp16"));
  // A tensor line per stored tensor, weight and update, with its format.
  const auto tensors = mpverify::record::read_json_lines(dir / "tensors.jsonl");
  bool saw_dw = false;
  for (const auto& t : tensors) saw_dw = saw_dw || (t["layer"] == "fc1" && t["tensor"] == "dw" && t["format"] == "fp16");
  EXPECT_TRUE(saw_dw);
}

TEST(TrainCli, TheFp8RecipeRecordsOcpE4m3AndE5m2) {
  // The run directory says which FP8 the GEMMs used: OCP E4M3 (448 finite) forward and E5M2 gradients,
  // saturating; and which accumulation.
  const fs::path dir = fresh_dir("fp8");
  const auto r = run_command(train("--recipe fp8 --backend emu --seed 3 --out " + dir.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  EXPECT_EQ(summary["config"]["precision"]["matmul_forward"], "fp8-e4m3:saturate");
  EXPECT_EQ(summary["config"]["precision"]["matmul_backward"], "fp8-e5m2:saturate");
  EXPECT_EQ(summary["config"]["precision"]["accumulation"], "fp32");
  EXPECT_EQ(mpverify::formats::parse_format(summary["config"]["precision"]["matmul_forward"].get<std::string>())
                .max_finite(),
            448.0);
  const fs::path hopper = fresh_dir("fp8-hopper");
  const auto h = run_command(train("--recipe fp8:accumulation=hopper,promotion=128 --backend emu --test-size 200 --out " +
                                   hopper.string()),
                             "");
  ASSERT_EQ(h.exit_code, 0) << h.out;
  const auto hs = nlohmann::json::parse(std::ifstream(hopper / "summary.json"));
  EXPECT_EQ(hs["config"]["precision"]["accumulation"], "hopper");
  EXPECT_EQ(hs["config"]["precision"]["promotion"], 128);
}

TEST(TrainCli, TheBlockScaledRecipesTrainOnTheEmulatorAndRecordTheirSchemes) {
  const fs::path dir = fresh_dir("mxfp8");
  const auto r = run_command(train("--recipe mxfp8:scale_rule=floor --backend emu --test-size 64 --out " +
                                   dir.string()),
                             "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  const auto& b = summary["config"]["precision"]["block_scaling"];
  EXPECT_EQ(b["accumulation"], "sm100.mxf8f6f4");
  EXPECT_EQ(b["input"], "mxfp8-e4m3");
  EXPECT_EQ(b["scale_rule"], "floor");
  EXPECT_EQ(b["high_precision_layers"], nlohmann::json::array({"fc2"}));
  EXPECT_GT(summary["tensor_counters"]["fc1.dw"]["block-gemm.accumulate"]["elements"].get<std::uint64_t>(), 0u);
}

// blocks.jsonl: one line per block-scaled operand per recorded step, consistent with itself and with the
// step line; and on these real activations, weights and gradients Transformer Engine's rceil scales never
// clip an element while OCP's floor scales clip some (E4M3 blocks whose amax significand exceeds 1.75).
TEST(TrainCli, BlocksJsonlRecordsEveryOperandAndFloorScalesClipWhereRceilDoesNot) {
  std::map<std::string, std::uint64_t> saturated;
  for (const std::string rule : {"rceil", "floor"}) {
    const fs::path dir = fresh_dir("blocks-" + rule);
    const auto r = run_command(train("--recipe mxfp8:scale_rule=" + rule + " --backend emu --test-size 64 --out " +
                                     dir.string()),
                               "");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto lines = mpverify::record::read_json_lines(dir / "blocks.jsonl");
    const auto steps = mpverify::record::read_steps(dir);
    ASSERT_EQ(lines.size(), 4 * steps.size()) << "fc1: fprop.x, fprop.w, wgrad.dy, wgrad.x (no dgrad: first layer)";
    std::map<std::size_t, std::pair<std::uint64_t, std::uint64_t>> per_step;  // saturated, elements
    for (const auto& line : lines) {
      EXPECT_EQ(line["layer"], "fc1");
      EXPECT_EQ(line["scheme"], "mxfp8-e4m3");
      const auto n = line["elements"].get<std::uint64_t>(), s = line["saturated"].get<std::uint64_t>();
      EXPECT_DOUBLE_EQ(line["saturation_rate"].get<double>(), static_cast<double>(s) / static_cast<double>(n));
      EXPECT_GT(line["sqnr_db"].get<double>(), 0.0);
      EXPECT_FALSE(line["scale_exponents"].empty());
      per_step[line["step"].get<std::size_t>()].first += s;
      per_step[line["step"].get<std::size_t>()].second += n;
      saturated[rule] += s;
    }
    for (const auto& step : steps) {
      const auto& [s, n] = per_step.at(step["step"].get<std::size_t>());
      EXPECT_DOUBLE_EQ(step["block_saturation_rate"].get<double>(), static_cast<double>(s) / static_cast<double>(n));
    }
  }
  EXPECT_EQ(saturated["rceil"], 0u);
  EXPECT_GT(saturated["floor"], 0u);
}

// The transformer on the real text (Debian's bible-kjv-text), when it is installed.
TEST(TrainCli, TheTransformerTrainsOnTheKingJamesText) {
  if (!fs::exists(mpverify::data::kjv_default_file()))
    GTEST_SKIP() << mpverify::data::kjv_default_file() << " is missing: " << mpverify::data::kjv_install_command();
  const fs::path dir = fresh_dir("transformer");
  const auto r = run_command(std::string(MPVERIFY_BIN) +
                                 " train --model transformer --data kjv --recipe mxfp8 --backend emu --steps 2 "
                                 "--batch-size 2 --context-length 32 --test-size 3 --quiet --out " + dir.string(),
                             "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  EXPECT_EQ(summary["config"]["model"], "transformer");
  EXPECT_EQ(summary["config"]["train_size"], 3724065) << "the verses' train part, in tokens (data/char_text.h)";
  EXPECT_EQ(summary["evaluation"]["test_size"], 3 * 32);
  EXPECT_TRUE(fs::exists(dir / "blocks.jsonl"));
  const auto wrong = run_command(std::string(MPVERIFY_BIN) + " train --model transformer --quiet --out " +
                                     fresh_dir("transformer-bad").string(),
                                 "", true);
  EXPECT_EQ(wrong.exit_code, 2) << wrong.out;
  EXPECT_NE(wrong.out.find("--data kjv"), std::string::npos) << wrong.out;
}

TEST(TrainCli, TheSameSeedWritesTheSameStepLog) {
  const fs::path a = fresh_dir("seed-a"), b = fresh_dir("seed-b");
  ASSERT_EQ(run_command(train("--recipe o2 --scaler torch --backend emu --out " + a.string()), "").exit_code, 0);
  ASSERT_EQ(run_command(train("--recipe o2 --scaler torch --backend emu --out " + b.string()), "").exit_code, 0);
  std::ifstream fa(a / "steps.jsonl"), fb(b / "steps.jsonl");
  const std::string sa((std::istreambuf_iterator<char>(fa)), {}), sb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_FALSE(sa.empty());
  EXPECT_EQ(sa, sb);
}

TEST(TrainCli, BadInputExitsWith2AndWritesNothing) {
  const fs::path dir = fresh_dir("bad");
  for (const std::string& args : {std::string("--recipe o7"), std::string("--recipe o2 --backend ref"),
                                  std::string("--scaler sometimes"), std::string("--model resnet"),
                                  std::string("--inject-inf x:fc1.w"), std::string("--backend tpu"),
                                  std::string("--samples 5"), std::string("--beta1 0.5"),
                                  std::string("--optimizer adam --beta1 1"),
                                  std::string("--optimizer adam --beta2 -0.1"),
                                  std::string("--recipe mxfp8 --backend ref"),
                                  std::string("--recipe nvfp4:hadamard=maybe --backend emu"),
                                  std::string("--recipe fp8-blockwise --model dcgan --backend emu")}) {
    const auto r = run_command(train(args + " --out " + dir.string()), "", true);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args;
    EXPECT_FALSE(fs::exists(dir)) << args << " left a directory";
  }
}

// The betas reach the optimizer: summary.json's config echoes what the
// Trainer was built with, and the defaults stay PyTorch's (0.9, 0.999).
TEST(TrainCli, AdamBetasAreSetFromTheCommandLine) {
  const fs::path dir = fresh_dir("betas");
  const auto r = run_command(train("--optimizer adam --beta1 0.5 --beta2 0.99 --out " + dir.string()), "", true);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(dir / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["config"]["adam"]["beta1"].get<double>(), 0.5);
  EXPECT_EQ(summary["config"]["adam"]["beta2"].get<double>(), 0.99);
  const fs::path plain = fresh_dir("betas-default");
  ASSERT_EQ(run_command(train("--optimizer adam --out " + plain.string()), "", true).exit_code, 0);
  std::ifstream in2(plain / "summary.json");
  const nlohmann::json d = nlohmann::json::parse(in2);
  EXPECT_EQ(d["config"]["adam"]["beta1"].get<double>(), 0.9);
  EXPECT_EQ(d["config"]["adam"]["beta2"].get<double>(), 0.999);
  fs::remove_all(dir);
  fs::remove_all(plain);
}

TEST(TrainCli, AnExistingRunIsNotReplacedWithoutForce) {
  const fs::path dir = fresh_dir("force");
  ASSERT_EQ(run_command(train("--out " + dir.string()), "").exit_code, 0);
  const auto again = run_command(train("--out " + dir.string()), "", true);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.out.find("--force"), std::string::npos) << again.out;
  EXPECT_EQ(run_command(train("--force --out " + dir.string()), "").exit_code, 0);
}

TEST(TrainCli, CompareRunsReadsTwoRunDirectories) {
  const fs::path a = fresh_dir("cmp-fp32"), b = fresh_dir("cmp-o2");
  ASSERT_EQ(run_command(train("--recipe fp32 --backend ref --out " + a.string()), "").exit_code, 0);
  ASSERT_EQ(run_command(train("--recipe o2 --scaler torch --backend emu --out " + b.string()), "").exit_code, 0);
  const auto r = run_command(std::string(MPVERIFY_BIN) + " compare-runs " + a.string() + " " + b.string() + " --json", "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j.dump().find("recipe"), std::string::npos);  // the differing configuration is named
}

// --- data sets, evaluation and ensembles -------------------------------------------------

std::string train_on(const std::string& args) {
  return std::string(MPVERIFY_BIN) + " train --batch-size 16 --quiet " + args;
}

nlohmann::json summary_of(const fs::path& dir) { return nlohmann::json::parse(std::ifstream(dir / "summary.json")); }

TEST(TrainCli, RealDataSetsTrainAndAreEvaluatedOnTheirTestSplit) {
  const fs::path cnn = fresh_dir("sklearn-cnn");
  auto r = run_command(train_on("--model cnn --data sklearn-digits --steps 10 --eval-every 5 --out " + cnn.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto summary = summary_of(cnn);
  EXPECT_EQ(summary["config"]["data"], "sklearn-digits");
  EXPECT_EQ(summary["config"]["train_size"].get<int>(), 1437);
  const auto& e = summary["evaluation"];
  EXPECT_EQ(e["test_size"].get<int>(), 360);
  ASSERT_TRUE(e["test_accuracy"].is_number());
  EXPECT_DOUBLE_EQ(e["test_accuracy"].get<double>(), e["correct"].get<double>() / 360.0);
  EXPECT_TRUE(e["test_loss"].is_number());
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  const auto steps = mpverify::record::read_steps(cnn);
  ASSERT_EQ(steps.size(), 10u);
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(steps[i].contains("evaluation"), i == 4 || i == 9) << i;
  EXPECT_EQ(steps[9]["evaluation"], e);  // the last step's evaluation is the summary's

  // The MLP on MNIST (28 x 28), a cap on the sizes; the DCGAN at 28 x 28 and at 8 x 8 (no accuracy).
  const fs::path mlp = fresh_dir("mnist-mlp");
  r = run_command(train_on("--model mlp --data mnist --steps 3 --train-size 256 --test-size 100 --out " + mlp.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(summary_of(mlp)["evaluation"]["test_size"].get<int>(), 100);
  EXPECT_EQ(summary_of(mlp)["config"]["train_size"].get<int>(), 256);
  for (const char* data : {"mnist", "sklearn-digits"}) {
    const fs::path gan = fresh_dir(std::string("gan-") + data);
    r = run_command(train_on(std::string("--model dcgan --data ") + data + " --steps 2 --train-size 64 --out " +
                             gan.string()),
                    "");
    ASSERT_EQ(r.exit_code, 0) << data << ": " << r.out;
    EXPECT_FALSE(summary_of(gan).contains("evaluation")) << data;  // FID comes from the lead's metrics
  }
}

TEST(TrainCli, AMissingDataSetExitsWith2NamingThePathAndTheInstallCommand) {
  const fs::path dir = fresh_dir("missing");
  auto r = run_command(train_on("--data mnist --data-dir /nonexistent/digits --out " + dir.string()), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("/nonexistent/digits/0.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("npm install --no-save --prefix"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir));
  r = run_command(train_on("--data sklearn-digits --data-dir /nonexistent/x.csv.gz --out " + dir.string()), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("apt-get install -y python3-sklearn"), std::string::npos) << r.out;
  r = run_command(train_on("--data imagenet --out " + dir.string()), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("synthetic, mnist, sklearn-digits and kjv"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(TrainCli, SeedsWriteAnEnsembleDirectory) {
  const fs::path dir = fresh_dir("ensemble"), single = fresh_dir("ensemble-single");
  const std::string args = "--model mlp --train-size 256 --test-size 64 --steps 4 --recipe o2 --scaler torch --backend emu ";
  auto r = run_command(train_on(args + "--seeds 2-3,7 --out " + dir.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto ensemble = nlohmann::json::parse(std::ifstream(dir / "ensemble.json"));
  EXPECT_EQ(ensemble["seeds"], nlohmann::json({2, 3, 7}));
  EXPECT_FALSE(ensemble["config"].contains("seed"));
  EXPECT_EQ(ensemble["config"]["recipe"], "o2");
  for (int seed : {2, 3, 7}) {
    const fs::path run = dir / ("seed-" + std::to_string(seed));
    ASSERT_TRUE(fs::exists(run / "steps.jsonl")) << seed;
    const auto summary = summary_of(run);
    EXPECT_EQ(summary["config"]["seed"].get<int>(), seed);
    EXPECT_TRUE(summary["evaluation"]["test_accuracy"].is_number()) << seed;
    auto config = summary["config"];
    config.erase("seed");
    EXPECT_EQ(config, ensemble["config"]) << seed;
  }
  // A member is exactly the run `train --seed 3` writes.
  ASSERT_EQ(run_command(train_on(args + "--seed 3 --out " + single.string()), "").exit_code, 0);
  std::ifstream a(dir / "seed-3" / "steps.jsonl"), b(single / "steps.jsonl");
  const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_FALSE(sa.empty());
  EXPECT_EQ(sa, sb);
  // The same command again (a retried CI job) reports the finished ensemble, retraining nothing: it once
  // exited 2 asking for --force.
  const std::string first_output = r.out;
  const auto modified = fs::last_write_time(dir / "seed-3" / "steps.jsonl");
  const auto again = run_command(train_on(args + "--seeds 2-3,7 --out " + dir.string()), "");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(again.out, first_output);
  EXPECT_EQ(fs::last_write_time(dir / "seed-3" / "steps.jsonl"), modified) << "a finished run was trained again";
  // More seeds after the held ones add a round (the gate in rounds' next look): only seed 8 trains.
  const auto round = run_command(train_on(args + "--seeds 2-3,7,8 --out " + dir.string()), "");
  EXPECT_EQ(round.exit_code, 0) << round.out;
  EXPECT_EQ(fs::last_write_time(dir / "seed-3" / "steps.jsonl"), modified) << "a finished run was trained again";
  EXPECT_TRUE(fs::exists(dir / "seed-8" / "summary.json"));
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir / "ensemble.json"))["seeds"], nlohmann::json::parse("[2, 3, 7, 8]"));
  // Other seeds (fewer, or the held ones not first), or another configuration, are not replaced without --force.
  r = run_command(train_on(args + "--seeds 8,2-3,7,9 --out " + dir.string()), "", true);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = run_command(train_on(args + "--seeds 2-3 --out " + dir.string()), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("an ensemble of other seeds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--force"), std::string::npos) << r.out;
  r = run_command(train_on(args + "--seeds 2-3,7,8 --lr 0.01 --out " + dir.string()), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("another configuration"), std::string::npos) << r.out;
  // Bad input: exit 2, a message naming the problem, nothing written.
  const fs::path bad = fresh_dir("ensemble-bad");
  for (const auto& [seeds, fragment] : {std::pair<std::string, std::string>{"1,1", "repeated"}, {"3-1", "goes down"},
                                        {"1,x", "'x' is not a whole number"}, {"", "not a whole number"},
                                        {"1-2 --seed 4", "excludes"}, {"1-2 --data imagenet", "imagenet"}}) {
    r = run_command(train_on(args + "--seeds " + (seeds.empty() ? "''" : seeds) + " --out " + bad.string()), "", true);
    EXPECT_EQ(r.exit_code, 2) << seeds << ": " << r.out;
    EXPECT_NE(r.out.find(fragment), std::string::npos) << seeds << ": " << r.out;
    EXPECT_FALSE(fs::exists(bad)) << seeds;
  }
}

TEST(FeatureExtractorCli, WritesALoadableExtractorAndRefusesToOverwrite) {
  const fs::path dir = fresh_dir("fx");
  fs::create_directories(dir);
  const std::string file = (dir / "fx.safetensors").string();
  const std::string cmd = std::string(MPVERIFY_BIN) + " feature-extractor --steps 3 --quiet --json --out " + file;
  auto r = run_command(cmd, "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["metadata"]["format"], "mpverify-mnist-cnn-features/1");
  EXPECT_EQ(j["metadata"]["steps"], "3");
  EXPECT_TRUE(fs::exists(file));
  r = run_command(cmd, "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--force"), std::string::npos) << r.out;
  r = run_command(std::string(MPVERIFY_BIN) + " feature-extractor --steps 0 --out " + (dir / "zero").string(), "", true);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_FALSE(fs::exists(dir / "zero"));
}

}  // namespace
