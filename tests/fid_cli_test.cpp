// `mpverify fid` as a user runs it on .npy feature matrices: the JSON fields,
// agreement with the library calls it wraps (bit for bit: same code, same
// data), the text output, and unusable input (missing file, different D, a
// NaN, not N x D, image sets) giving exit code 2, a message naming the
// problem and nothing on standard output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/random.h"
#include "io/npy.h"
#include "metrics/fid.h"
#include "metrics/fid_bootstrap.h"
#include "metrics/kid.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;
using nlohmann::json;
using namespace mpverify::metrics;

std::vector<float> random_features(std::size_t rows, std::size_t cols, std::uint64_t seed, float shift) {
  mpverify::data::Draws draws(seed, 0);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = static_cast<float>(draws.noise()) + shift;
  return x;
}

class FidCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/mpverify-fid-cli-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    root_ = path;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string write(const std::string& name, const std::vector<float>& x, std::vector<std::size_t> shape) {
    const fs::path file = root_ / name;
    mpverify::io::write_npy(file, x, std::move(shape));
    return file.string();
  }
  std::string fid_command(const std::string& args) const { return std::string(MPVERIFY_BIN) + " fid " + args; }

  fs::path root_;
};

TEST_F(FidCli, JsonHasTheFieldsAndEqualsTheLibraryCalls) {
  const std::vector<float> a = random_features(120, 6, 1, 0.0f), b = random_features(90, 6, 2, 0.25f);
  const std::string fa = write("a.npy", a, {120, 6}), fb = write("b.npy", b, {90, 6});
  const auto r = run_command(fid_command(fa + " " + fb + " --json --seed 7 --kid-subsets 12 --kid-subset-size 50 --bootstrap 20"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json j = json::parse(r.out);
  for (const char* key : {"fid", "kid", "kid_stderr", "n_a", "n_b", "dims", "fid_raw", "route", "clamped_eigenvalues",
                          "kid_subsets", "kid_subset_size", "seed", "fid_bootstrap"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["n_a"], 120);
  EXPECT_EQ(j["n_b"], 90);
  EXPECT_EQ(j["dims"], 6);
  EXPECT_EQ(j["kid_subsets"], 12);
  EXPECT_EQ(j["kid_subset_size"], 50);
  EXPECT_EQ(j["route"], "nuclear-norm");

  // The same calls here, on the float32 values converted to double (exactly).
  const std::vector<double> da(a.begin(), a.end()), db(b.begin(), b.end());
  const FeatureMatrix ma{da, 120, 6, "A"}, mb{db, 90, 6, "B"};
  const FidResult f = fid(ma, mb);
  const KidResult k = kernel_inception_distance(ma, mb, {.subsets = 12, .subset_size = 50, .seed = 7});
  const FidBootstrap boot = fid_bootstrap(ma, mb, {.replicates = 20, .level = 0.95, .seed = 7});
  EXPECT_EQ(j["fid"].get<double>(), f.fid);
  EXPECT_EQ(j["kid"].get<double>(), k.kid);
  EXPECT_EQ(j["kid_stderr"].get<double>(), k.kid_stderr);
  EXPECT_EQ(j["clamped_eigenvalues"]["count"], f.clamping.count);
  EXPECT_EQ(j["fid_bootstrap"]["low"].get<double>(), boot.low);
  EXPECT_EQ(j["fid_bootstrap"]["high"].get<double>(), boot.high);
  EXPECT_EQ(j["fid_bootstrap"]["standard_error"].get<double>(), boot.standard_error);
  EXPECT_GT(f.fid, 0.0);

  // Without --bootstrap: null; the same seed gives the same output.
  const auto again = run_command(fid_command(fa + " " + fb + " --json --seed 7 --kid-subsets 12 --kid-subset-size 50"), "");
  ASSERT_EQ(again.exit_code, 0);
  const json j2 = json::parse(again.out);
  EXPECT_TRUE(j2["fid_bootstrap"].is_null());
  EXPECT_EQ(j2["kid"], j["kid"]);
  EXPECT_EQ(j2["fid"], j["fid"]);
}

TEST_F(FidCli, TextOutputAndRoutes) {
  const std::vector<float> a = random_features(40, 3, 3, 0.0f);
  const std::string fa = write("a.npy", a, {40, 3});
  const auto r = run_command(fid_command(fa + " " + fa + " --route symmetric-eigen"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("FID "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("symmetric-eigen route"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KID "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("biased by the sample size"), std::string::npos) << r.out;
  const auto help = run_command(fid_command("--help"), "");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--kid-subsets"), std::string::npos);
}

// Exit 2, nothing on stdout, and the message (on stderr) contains `expected`.
void expect_usage_error(const std::string& command, const std::string& expected) {
  const auto quiet = run_command(command, "");
  EXPECT_EQ(quiet.exit_code, 2) << command;
  EXPECT_EQ(quiet.out, "") << command;
  const auto loud = run_command(command, "", true);
  EXPECT_NE(loud.out.find(expected), std::string::npos) << command << "\n" << loud.out;
}

TEST_F(FidCli, UnusableInputExitsWithTwoAndSaysWhy) {
  std::vector<float> a = random_features(10, 4, 4, 0.0f);
  const std::vector<float> b = random_features(10, 3, 5, 0.0f);
  const std::string fa = write("a.npy", a, {10, 4}), fb = write("b.npy", b, {10, 3});
  expect_usage_error(fid_command(fa + " " + (root_ / "missing.npy").string()), "B ('" + (root_ / "missing.npy").string() + "'): no such file");
  expect_usage_error(fid_command(fa + " " + fb + " --json"), "A has 4 feature dimensions (columns) but B has 3");
  a[7 * 4 + 2] = std::nanf("");
  const std::string fnan = write("nan.npy", a, {10, 4});
  expect_usage_error(fid_command(fa + " " + fnan), "B: non-finite value nan at row 7, column 2");
  const std::string flat = write("flat.npy", b, {30});
  expect_usage_error(fid_command(flat + " " + fb), "shape (30,) is not N x D");
  const std::string one = write("one.npy", std::vector<float>(b.begin(), b.begin() + 3), {1, 3});
  expect_usage_error(fid_command(one + " " + fb), "A: 1 rows (samples); at least 2");
  fs::create_directories(root_ / "images");
  expect_usage_error(fid_command((root_ / "images").string() + " " + fb), "Image sets as inputs: not yet");
  expect_usage_error(fid_command(fb + " " + fb + " --kid-subset-size 11"), "subset size 11");
  expect_usage_error(fid_command(fb + " " + fb + " --route sqrtm"), "unknown FID trace route 'sqrtm'");
  expect_usage_error(fid_command(fb + " " + fb + " --bootstrap 1"), "at least 2 replicates");
  std::FILE* junk = std::fopen((root_ / "junk.npy").c_str(), "w");
  ASSERT_NE(junk, nullptr);
  std::fputs("not an npy file", junk);
  std::fclose(junk);
  expect_usage_error(fid_command((root_ / "junk.npy").string() + " " + fb), "junk.npy");
}

}  // namespace
