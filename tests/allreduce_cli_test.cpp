// `mpverify allreduce` as a user runs it: a hand-worked fp16 case (values,
// counters and errors worked out below), the JSON fields, per-rank files
// against the one-matrix form, synthetic and --from-model inputs (provenance, reproducibility), the bad
// inputs (exit 2, one line naming the problem, no output left), and the MPI
// ring and tree under `mpirun -n P` (P = 2, 3, 4) against the simulation,
// byte for byte. OUT.npy is read back here with a parser of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpverify_allreduce_cli_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " allreduce " + args; }

std::string bytes_of(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A float32 .npy's values: the header length at bytes 8-9, the data after it.
std::vector<float> read_floats(const std::string& file) {
  const std::string b = bytes_of(file);
  EXPECT_GT(b.size(), 10u) << file;
  const std::size_t header = static_cast<unsigned char>(b[8]) | static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8;
  EXPECT_NE(b.find("'descr': '<f4'"), std::string::npos) << file;
  std::vector<float> v((b.size() - 10 - header) / 4);
  std::memcpy(v.data(), b.data() + 10 + header, v.size() * 4);
  return v;
}

void write_rows(const std::string& file, const std::vector<float>& v, std::size_t ranks) {
  mpverify::io::write_npy(file, std::span<const float>(v), {ranks, v.size() / ranks});
}

// fp16, 3 ranks x 3 elements, one element per chunk. Ring: chunk 0 = 2048 + 1 -> 2048 (a tie, to even), + 1 -> 2048;
// chunk 1 = 2048 (rank 1) + 1 -> 2048, + 1 -> 2048; chunk 2 = 0.25 + 0.5 + 0.25 = 1 exactly. Four lost updates.
const std::vector<float> kRows = {2048, 1, 0.5f, 1, 2048, 0.25f, 1, 1, 0.25f};

TEST(AllreduceCli, HandWorkedFp16RingAndTree) {
  TempDir dir;
  write_rows(dir / "in.npy", kRows, 3);
  const auto ring = run_command(cli(dir / "in.npy" + " --format fp16 --algorithm ring --json --out " + dir / "ring.npy"), "");
  ASSERT_EQ(ring.exit_code, 0) << ring.out;
  EXPECT_EQ(read_floats(dir / "ring.npy"), (std::vector<float>{2048, 2048, 1}));
  const nlohmann::json j = nlohmann::json::parse(ring.out);
  EXPECT_EQ(j["ranks"], 3);
  EXPECT_EQ(j["elements"], 3);
  EXPECT_EQ(j["counters"]["additions"]["elements"], 6);
  EXPECT_EQ(j["counters"]["additions"]["swamped"], 4);
  EXPECT_EQ(j["counters"]["additions"]["inexact"], 4);
  EXPECT_EQ(j["counters"]["inputs"]["elements"], 9);
  EXPECT_EQ(j["counters"]["inputs"]["inexact"], 0);
  // Exact sums 2050, 2050, 1: errors -2, -2, 0; fp16's ulp at 2050 is 2.
  EXPECT_EQ(j["error"]["max_abs_error"], 2.0);
  EXPECT_EQ(j["error"]["max_ulp_error"], 1.0);
  EXPECT_EQ(j["error"]["inexact"], 2);
  EXPECT_EQ(j["error"]["compared"], 3);
  for (const char* key : {"format", "algorithm", "divide", "scaling", "rounding", "mpi", "processes", "scale", "out"})
    EXPECT_TRUE(j.contains(key)) << key;
  // Tree: (x0 + x1) + x2. Element 1: 1 + 2048 -> 2048 is no lost update (w = 1), + 1 -> 2048 is: three in all.
  const auto tree = run_command(cli(dir / "in.npy" + " --format fp16 --algorithm tree --json --out " + dir / "tree.npy"), "");
  ASSERT_EQ(tree.exit_code, 0) << tree.out;
  EXPECT_EQ(read_floats(dir / "tree.npy"), (std::vector<float>{2048, 2048, 1}));
  EXPECT_EQ(nlohmann::json::parse(tree.out)["counters"]["additions"]["swamped"], 3);
}

TEST(AllreduceCli, OneFilePerRankEqualsTheMatrix) {
  TempDir dir;
  write_rows(dir / "in.npy", kRows, 3);
  std::string files;
  for (int r = 0; r < 3; ++r) {
    const std::vector<float> row(kRows.begin() + 3 * r, kRows.begin() + 3 * r + 3);
    mpverify::io::write_npy(dir / ("rank" + std::to_string(r) + ".npy"), std::span<const float>(row), {3});
    files += " ";  // piecewise: GCC 12's false -Wrestrict on "literal" + string
    files += dir / ("rank" + std::to_string(r) + ".npy");
  }
  ASSERT_EQ(run_command(cli(dir / "in.npy" + " --format bf16 --out " + dir / "a.npy"), "").exit_code, 0);
  ASSERT_EQ(run_command(cli(files + " --format bf16 --out " + dir / "b.npy"), "").exit_code, 0);
  EXPECT_EQ(bytes_of(dir / "a.npy"), bytes_of(dir / "b.npy"));
}

TEST(AllreduceCli, SyntheticInputsAreReproducible) {
  TempDir dir;
  const std::string common = " --ranks 16 --elements 1000 --format bf16 --errors " + dir / "err.npy" + " --out ";
  ASSERT_EQ(run_command(cli("--synthetic 5" + common + dir / "a.npy"), "").exit_code, 0);
  ASSERT_EQ(run_command(cli("--synthetic 5" + common + dir / "b.npy"), "").exit_code, 0);
  ASSERT_EQ(run_command(cli("--synthetic 6" + common + dir / "c.npy"), "").exit_code, 0);
  EXPECT_EQ(bytes_of(dir / "a.npy"), bytes_of(dir / "b.npy"));
  EXPECT_NE(bytes_of(dir / "a.npy"), bytes_of(dir / "c.npy"));
  EXPECT_NE(bytes_of(dir / "err.npy").find("'descr': '<f8'"), std::string::npos);
}

// --from-model: the rows are the CNN's shard gradients (training/shard_gradients.h; held against FP64 in
// shard_gradients_test); here the CLI's provenance and reproducibility. The CNN's parameters: conv1 8 x 1 x 3 x 3
// + 8, bn1 8 + 8, conv2 16 x 8 x 3 x 3 + 16, bn2 16 + 16, fc 10 x 784 + 10 = 9146 (nn/models.h).
TEST(AllreduceCli, FromModelNamesItsSourceAndIsReproducible) {
  TempDir dir;
  const std::string common = " --ranks 4 --shard-batch 2 --step 1 --format bf16 --json --out ";
  const auto a = run_command(cli("--from-model cnn --model-seed 7" + common + dir / "a.npy"), "");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(run_command(cli("--from-model cnn --model-seed 7" + common + dir / "b.npy"), "").exit_code, 0);
  ASSERT_EQ(run_command(cli("--from-model cnn --model-seed 8" + common + dir / "c.npy"), "").exit_code, 0);
  EXPECT_EQ(bytes_of(dir / "a.npy"), bytes_of(dir / "b.npy"));
  EXPECT_NE(bytes_of(dir / "a.npy"), bytes_of(dir / "c.npy"));
  const nlohmann::json j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["ranks"], 4);
  EXPECT_EQ(j["elements"], 8 * 9 + 8 + 16 + 16 * 8 * 9 + 16 + 32 + 10 * 784 + 10);
  EXPECT_EQ(j["from_model"]["model"], "cnn");
  EXPECT_EQ(j["from_model"]["data"], "synthetic");
  EXPECT_EQ(j["from_model"]["seed"], 7);
  EXPECT_EQ(j["from_model"]["step"], 1);
  EXPECT_EQ(j["from_model"]["shard_batch"], 2);
  EXPECT_EQ(j["from_model"]["parameters"][0]["name"], "conv1.w");
  EXPECT_EQ(j["from_model"]["parameters"][0]["elements"], 72);
  const auto synthetic = run_command(cli("--synthetic 1 --ranks 2 --elements 4 --format bf16 --json --out " + dir / "s.npy"), "");
  EXPECT_TRUE(nlohmann::json::parse(synthetic.out)["from_model"].is_null());
}

TEST(AllreduceCli, HelpNamesTheOrders) {
  const auto r = run_command(cli("--help"), "");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--algorithm", "reduce-scatter", "--divide", "--scaling", "--mpi", "--synthetic", "swamped"})
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
}

TEST(AllreduceCli, BadInputsExitTwoAndWriteNothing) {
  TempDir dir;
  write_rows(dir / "in.npy", kRows, 3);
  mpverify::io::write_npy(dir / "flat.npy", std::span<const float>(kRows), {kRows.size()});
  const std::vector<float> two = {1, 2};
  mpverify::io::write_npy(dir / "two.npy", std::span<const float>(two), {2});
  // A finite float64 beyond float32's range once read as inf and was counted a "non-finite input"; a 0-d
  // input's message spoke of quantize.
  const std::vector<double> huge = {1.0, 1e300, 2.0, 3.0};
  mpverify::io::write_npy(dir / "huge.npy", std::span<const double>(huge), {2, 2});
  const std::vector<float> scalar = {1};
  mpverify::io::write_npy(dir / "scalar.npy", std::span<const float>(scalar), {});
  const std::string out = dir / "out.npy";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir / "huge.npy" + " --format bf16 --out " + out, "holds 1.0000000000000001e+300 at element 1"},
      {dir / "scalar.npy" + " --format bf16 --out " + out, "0-d (a scalar); allreduce needs"},
      // Counts read by their text: -1 was echoed as 18446744073709551615, 1e12 and 2^20 ranks ran out of memory
      // with exit 1 and no option named.
      {"--synthetic 1 --ranks -1 --elements 5 --format bf16 --out " + out, "'-1' is not a whole number from 1 to 1048576"},
      {"--synthetic 1 --ranks 2 --elements 1e12 --format bf16 --out " + out, "'1e12' is not a whole number"},
      {"--synthetic 1 --ranks 1048576 --elements 1000 --format bf16 --out " + out, "is more than 268435456 values"},
      {dir / "missing.npy" + " --format bf16 --out " + out, "missing.npy"},
      {dir / "flat.npy" + " --format bf16 --out " + out, "2-D"},
      {dir / "in.npy" + " --format bf17 --out " + out, "bf17"},
      {dir / "in.npy" + " --format bf16 --out " + dir / "out.txt", ".npy"},
      {dir / "in.npy" + " --format bf16 --algorithm butterfly --out " + out, "butterfly"},
      {dir / "in.npy" + " --format bf16 --divide sometimes --out " + out, "sometimes"},
      {dir / "in.npy" + " --format bf16 --ranks 3 --out " + out, "--synthetic"},
      {"--synthetic 1 --ranks 3 --format bf16 --out " + out, "--elements"},
      {dir / "flat.npy " + dir / "two.npy" + " --format bf16 --out " + out, "same number"},
      {dir / "in.npy" + " --format bf16 --mpi --out " + out, "mpirun"},
      {"--from-model resnet --ranks 2 --format bf16 --out " + out, "resnet"},
      {"--from-model cnn --ranks 0 --format bf16 --out " + out, "'0' is below 1"},
      {"--from-model cnn --format bf16 --out " + out, "--ranks"},
      {"--from-model cnn --ranks 2 --shard-batch 0 --format bf16 --out " + out, "shard batch"},
      {"--from-model cnn --ranks 2 --data kjv --format bf16 --out " + out, "kjv"},
      {"--from-model cnn --ranks 2 --elements 5 --format bf16 --out " + out, "--elements"},
      {"--synthetic 1 --ranks 2 --elements 5 --step 3 --format bf16 --out " + out, "--from-model"},
      {dir / "in.npy" + " --from-model mlp --ranks 2 --format bf16 --out " + out, "leave out"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = run_command("env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE " + cli(args), "", true);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

// --- MPI ------------------------------------------------------------------------

std::string mpirun() { return MPVERIFY_MPIEXEC; }

// `mpirun` for P processes under a time limit. The ranks run without LeakSanitizer's exit check (in a
// sanitizer build; elsewhere the variable is ignored): Open MPI 4.1 leaves blocks from MPI_Init and from the
// components it unloads at MPI_Finalize, reports of Open MPI's memory, not of ours.
std::string mpi_launch(std::size_t processes) {
  return "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout 120 " + mpirun() +
         " --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -n " + std::to_string(processes) + " ";
}

std::string mpi_skip_reason() {
  if (!MPVERIFY_HAS_MPI) return "this build has no MPI (MPVERIFY_MPI off or MPI not found)";
  if (mpirun().empty() || !fs::exists(mpirun())) return "no mpirun found at configure time";
  return "";
}

std::vector<float> mpi_inputs(std::size_t ranks, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0, 1);
  std::vector<float> v(ranks * n);
  for (auto& x : v) x = static_cast<float>(g(rng) * ((rng() % 8 == 0) ? 64.0 : 0.01));  // some large: swamping
  return v;
}

TEST(AllreduceCli, MpiGivesTheSimulationsBits) {
  if (const std::string why = mpi_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  struct Case {
    std::string options;
  };
  const std::vector<std::string> options = {"--format bf16 --algorithm ring", "--format fp16 --algorithm tree",
                                            "--format bf16 --algorithm reduce-scatter --divide after",
                                            "--format fp8-e4m3 --algorithm ring --scaling per-rank",
                                            "--format bf16 --algorithm ring --rounding stochastic --seed 9"};
  for (const std::size_t P : {2, 3, 4}) {
    const std::string in = dir / ("in" + std::to_string(P) + ".npy");
    write_rows(in, mpi_inputs(P, 37, P), P);  // 37 elements: chunks of unequal sizes
    for (const std::string& opt : options) {
      const auto sim = run_command(cli(in + " " + opt + " --json --out " + dir / "sim.npy"), "", true);
      ASSERT_EQ(sim.exit_code, 0) << sim.out;
      const std::string launch = mpi_launch(P) + cli(in + " " + opt + " --mpi --json --out " + dir / "mpi.npy");
      const auto mpi = run_command(launch, "");
      ASSERT_EQ(mpi.exit_code, 0) << launch << "\n" << mpi.out;
      EXPECT_EQ(bytes_of(dir / "mpi.npy"), bytes_of(dir / "sim.npy")) << "P=" << P << " " << opt;
      const nlohmann::json a = nlohmann::json::parse(sim.out), b = nlohmann::json::parse(mpi.out);
      EXPECT_EQ(a["counters"], b["counters"]) << "P=" << P << " " << opt;
      EXPECT_EQ(b["processes"], P);
      EXPECT_TRUE(b["mpi"].get<bool>());
      fs::remove(dir / "mpi.npy");
    }
  }
}

TEST(AllreduceCli, MpiNeedsOneProcessPerRow) {
  if (const std::string why = mpi_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_rows(dir / "in.npy", kRows, 3);
  const auto r = run_command(mpi_launch(2) + cli(dir / "in.npy --format bf16 --mpi --out " + dir / "out.npy"), "", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("mpirun -n 3"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out.npy"));
}

}  // namespace
