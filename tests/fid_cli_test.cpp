// `mpverify fid` as a user runs it on .npy feature matrices: the JSON fields,
// agreement with the library calls it wraps (bit for bit: same code, same
// data), the text output, and unusable input (missing file, different D, a
// NaN, not N x D) giving exit code 2, a message naming the problem and
// nothing on standard output. Image sets (an .npy of images, mnist-test)
// through --extractor: the same numbers as the library's features followed
// by the library's FID, and their bad inputs.
#include <gtest/gtest.h>

#include <unistd.h>

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
#include "data/mnist.h"
#include "support/run_command.h"
#include "training/feature_extractor.h"

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
  expect_usage_error(fid_command((root_ / "images").string() + " " + fb), "not an .npy or .npz file");
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

namespace {

// A small extractor (10 steps: its quality does not matter here, only that
// the CLI and the library use the same one), saved once for the suite.
class FidImageSets : public FidCli {
 protected:
  static void SetUpTestSuite() {
    extractor_file_ = new fs::path(fs::temp_directory_path() / ("mpverify-fid-cli-fx-" + std::to_string(::getpid()) + ".safetensors"));
    mpverify::training::FeatureExtractorOptions o;
    o.steps = 10;
    mpverify::training::FeatureExtractor::train(o).save(*extractor_file_);
  }
  static void TearDownTestSuite() {
    fs::remove(*extractor_file_);
    delete extractor_file_;
  }
  static fs::path* extractor_file_;
};
fs::path* FidImageSets::extractor_file_ = nullptr;

std::string sha256sum(const fs::path& file) {
  const auto r = run_command("sha256sum " + file.string(), "");
  return r.out.substr(0, 64);
}

}  // namespace

TEST_F(FidImageSets, ImagesGoThroughTheExtractorExactlyAsTheLibraryCallsDo) {
  // 40 "generated" images: MNIST training images darkened to 0.7 (any
  // values in [0, 1] do), written as N x 1 x 28 x 28 and as N x 28 x 28.
  const mpverify::data::Split split = mpverify::data::mnist_split();
  const std::size_t n = 40, side = 28, pixels = side * side;
  std::vector<float> images(split.train.images.begin(), split.train.images.begin() + n * pixels);
  for (float& v : images) v *= 0.7f;
  const std::string nchw = write("gen4.npy", images, {n, 1, side, side});
  const std::string nhw = write("gen3.npy", images, {n, side, side});
  const std::string x = extractor_file_->string();
  const std::string options = " --json --seed 5 --kid-subsets 3 --bootstrap 2 --extractor " + x;
  const auto r = run_command(fid_command(nchw + " mnist-test" + options), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["a_kind"], "images");
  EXPECT_EQ(j["b_kind"], "images");
  EXPECT_EQ(j["n_a"], n);
  EXPECT_EQ(j["n_b"], mpverify::data::kMnistTestSize);
  EXPECT_EQ(j["dims"], mpverify::training::kFeatureDim);
  EXPECT_EQ(j["extractor"]["sha256"], sha256sum(*extractor_file_));  // coreutils' figure, not ours
  EXPECT_EQ(j["extractor"]["file"], extractor_file_->filename().string());

  // The library: features of the same floats by the same extractor (loaded
  // from the same file), converted exactly to double, then fid/kid/bootstrap.
  auto extractor = mpverify::training::FeatureExtractor::load(*extractor_file_);
  const std::vector<float> fa = extractor.features(images), fb = extractor.features(split.test.images);
  const std::vector<double> da(fa.begin(), fa.end()), db(fb.begin(), fb.end());
  const std::size_t d = mpverify::training::kFeatureDim;
  const FeatureMatrix ma{da, n, d, "A"}, mb{db, split.test.size(), d, "B"};
  const FidResult f = fid(ma, mb);
  const KidResult k = kernel_inception_distance(ma, mb, {.subsets = 3, .seed = 5});
  const FidBootstrap boot = fid_bootstrap(ma, mb, {.replicates = 2, .level = 0.95, .seed = 5});
  EXPECT_EQ(j["fid"].get<double>(), f.fid);
  EXPECT_EQ(j["kid"].get<double>(), k.kid);
  EXPECT_EQ(j["fid_bootstrap"]["standard_error"].get<double>(), boot.standard_error);
  EXPECT_GT(f.fid, 0.0);  // darkened images are not the test set

  // N x H x W images, and the test set given as the library's feature matrix
  // (float32 .npy, exact), give bitwise the same FID and KID.
  const std::string features_b = write("test-features.npy", fb, {split.test.size(), d});
  const auto r2 = run_command(fid_command(nhw + " " + features_b + options), "");
  ASSERT_EQ(r2.exit_code, 0) << r2.out;
  const json j2 = json::parse(r2.out);
  EXPECT_EQ(j2["b_kind"], "features");
  EXPECT_EQ(j2["fid"].get<double>(), f.fid);
  EXPECT_EQ(j2["kid"].get<double>(), k.kid);
}

TEST_F(FidImageSets, UnusableImageSetsExitWithTwoAndSayWhy) {
  const std::string x = " --extractor " + extractor_file_->string();
  const std::vector<float> ok(3 * 784, 0.5f);
  const std::string good = write("good.npy", ok, {3, 1, 28, 28});
  expect_usage_error(fid_command(good + " mnist-test"), "A ('" + good + "') is an image set: give --extractor FILE");
  expect_usage_error(fid_command("mnist-train " + good), "A ('mnist-train') is an image set: give --extractor FILE");
  const std::string small = write("small.npy", std::vector<float>(3 * 64, 0.5f), {3, 1, 8, 8});
  expect_usage_error(fid_command(small + " " + good + x), "has 8 x 8 images but the feature extractor reads 28 x 28");
  const std::string rgb = write("rgb.npy", std::vector<float>(2 * 3 * 784, 0.5f), {2, 3, 28, 28});
  expect_usage_error(fid_command(good + " " + rgb + x), "images must have one channel");
  std::vector<float> bright = ok;
  bright[2 * 784 + 5 * 28 + 9] = 1.5f;
  const std::string out_of_range = write("bright.npy", bright, {3, 28, 28});
  expect_usage_error(fid_command(good + " " + out_of_range + x), "image 2, pixel (5, 9) is 1.5");
  const std::string five = write("five.npy", std::vector<float>(784, 0.5f), {1, 1, 1, 28, 28});
  expect_usage_error(fid_command(good + " " + five + x), "is not N x D (features) nor N x 1 x H x W");
  std::FILE* junk = std::fopen((root_ / "junk.safetensors").c_str(), "w");
  ASSERT_NE(junk, nullptr);
  std::fputs("not a safetensors file", junk);
  std::fclose(junk);
  expect_usage_error(fid_command(good + " " + good + " --extractor " + (root_ / "junk.safetensors").string()),
                     "--extractor " + (root_ / "junk.safetensors").string());
  fs::create_directories(root_ / "no-mnist");
  expect_usage_error(fid_command("mnist-test " + good + x + " --data-dir " + (root_ / "no-mnist").string()),
                     "A ('mnist-test'): ");
}
