// `mpverify quantize` as a user runs it: a hand-worked MXFP8 (E4M3) tensor
// under the rceil and floor scale rules (codes, values, scales and counters
// worked out below from the E4M3 table), NVFP4's scale grids and dequantized
// values, stochastic rounding's replay, the JSON fields, every input form
// (.npy, .safetensors:NAME, .npz:NAME, float64), and the bad inputs (exit 2,
// one line naming the problem, no OUT written). OUT.npz is read back here with
// a parser of its own (zip members and the .npy header), not the library's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/atomic_write.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/safetensors.h"
#include "io/zip_archive.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;
using namespace mpverify;
namespace fs = std::filesystem;

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " quantize " + args; }

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpverify_quantize_cli_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// One array of OUT.npz, from its .npy header: descr, shape and the raw data.
struct Array {
  std::string descr;
  std::vector<std::size_t> shape;
  std::vector<std::byte> data;

  std::vector<float> floats() const {
    EXPECT_EQ(descr, "<f4");
    std::vector<float> v(data.size() / 4);
    std::memcpy(v.data(), data.data(), v.size() * 4);
    return v;
  }
  std::vector<std::uint8_t> bytes() const {
    EXPECT_EQ(descr, "|u1");
    std::vector<std::uint8_t> v(data.size());
    std::memcpy(v.data(), data.data(), v.size());
    return v;
  }
};

std::string between(const std::string& s, const std::string& open, char close) {
  const std::size_t at = s.find(open);
  if (at == std::string::npos) return "";
  const std::size_t from = at + open.size();
  return s.substr(from, s.find(close, from) - from);
}

Array parse_member(std::span<const std::byte> b) {
  const std::size_t header_len = static_cast<std::size_t>(b[8]) | static_cast<std::size_t>(b[9]) << 8;
  const std::string header(reinterpret_cast<const char*>(b.data()) + 10, header_len);
  Array a;
  a.descr = between(header, "'descr': '", '\'');
  const std::string dims = between(header, "'shape': (", ')');
  for (std::size_t i = 0; i < dims.size();) {
    if (dims[i] < '0' || dims[i] > '9') { ++i; continue; }
    std::size_t used = 0;
    a.shape.push_back(std::stoul(dims.substr(i), &used));
    i += used;
  }
  a.data.assign(b.begin() + 10 + static_cast<std::ptrdiff_t>(header_len), b.end());
  return a;
}

std::map<std::string, Array> read_out(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(s.data()), s.size());
  std::map<std::string, Array> out;
  for (const io::ZipMember& m : io::zip_members(bytes, file)) {
    std::vector<std::byte> storage;
    out[m.name] = parse_member(io::zip_member_data(bytes, m, file, storage));
  }
  return out;
}

// Two rows of 32 (two MX blocks along the last axis), E4M3: bias 7, max 448 = 0x7E, emax_elem 8.
// Row 0, amax 1: rceil 2^ceil(log2(1/448)) = 2^-8, floor 2^(floor(log2 1) - 8) = 2^-8 too. x / 2^-8:
//   1    -> 256 = 2^8             0 1111 000 = 0x78
//   -0.5 -> -128 = -2^7           1 1110 000 = 0xF0
//   0.3  -> 76.8, in [64, 128) the step is 8: 80 = 1.25 * 2^6   0 1101 010 = 0x6A  (value 0.3125)
//   2^-16 -> 2^-8 = 2 * 2^-9, subnormal                          0 0000 010 = 0x02  (subnormal)
//   2^-18 -> 2^-10, half of the smallest subnormal 2^-9: ties to even, 0        0x00  (underflow to zero)
// Row 1, amax 480: rceil 2^ceil(log2(480/448)) = 2, floor 2^(8 - 8) = 1.
//   rceil: 480 -> 240 = 1.875 * 2^7  0 1110 111 = 0x77;  1 -> 0.5 = 2^-1  0 0110 000 = 0x30
//   floor: 480 > 448 saturates to    0 1111 110 = 0x7E;  1 -> 2^0        0 0111 000 = 0x38
std::vector<float> hand_worked_input() {
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f, x[1] = -0.5f, x[2] = 0.3f, x[3] = 0x1p-16f, x[4] = 0x1p-18f;
  x[32] = 480.0f, x[33] = 1.0f;
  return x;
}

TEST(QuantizeCli, HandWorkedMxfp8E4m3UnderRceilAndFloor) {
  TempDir d;
  io::write_npy(d / "x.npy", hand_worked_input(), {2, 32});
  for (const std::string rule : {"rceil", "floor"}) {
    const std::string out = d / (rule + ".npz");
    const auto r = run_command(cli(d / "x.npy" + " --scheme mxfp8-e4m3 --scale-rule " + rule + " --out " + out + " --json"), "");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::map<std::string, Array> a = read_out(out);
    ASSERT_EQ(a.size(), 3u);  // no tensor_scale outside nvfp4
    EXPECT_EQ(a["values.npy"].shape, (std::vector<std::size_t>{2, 32}));
    EXPECT_EQ(a["codes.npy"].shape, (std::vector<std::size_t>{2, 32}));
    EXPECT_EQ(a["scales.npy"].shape, (std::vector<std::size_t>{2, 1}));
    const std::vector<float> v = a["values.npy"].floats();
    const std::vector<std::uint8_t> c = a["codes.npy"].bytes();
    const bool floor = rule == "floor";
    EXPECT_EQ(a["scales.npy"].floats(), (std::vector<float>{0x1p-8f, floor ? 1.0f : 2.0f}));
    const std::vector<std::uint8_t> row0 = {0x78, 0xF0, 0x6A, 0x02, 0x00, 0x00};
    EXPECT_EQ(std::vector<std::uint8_t>(c.begin(), c.begin() + 6), row0);
    EXPECT_EQ(c[32], floor ? 0x7E : 0x77);
    EXPECT_EQ(c[33], floor ? 0x38 : 0x30);
    EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 5), (std::vector<float>{1.0f, -0.5f, 0.3125f, 0x1p-16f, 0.0f}));
    EXPECT_EQ(v[32], floor ? 448.0f : 480.0f);
    EXPECT_EQ(v[33], 1.0f);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["elements"], 64);
    EXPECT_EQ(j["blocks"], 2);
    EXPECT_EQ(j["saturated"], floor ? 1 : 0);
    EXPECT_EQ(j["underflow_to_zero"], 1);
    EXPECT_EQ(j["subnormal"], 1);
    EXPECT_EQ(j["scales_clamped"], 0);
    EXPECT_EQ(j["nonfinite_in"], 0);
    // SQNR from the worked values: the errors are 0.3 - 0.3125, 2^-18 and (floor) 480 - 448.
    const std::vector<float> x = hand_worked_input();
    double signal = 0, noise = 0;
    for (const float xi : x) signal += double(xi) * xi;
    noise = std::pow(double(0.3f) - 0.3125, 2) + 0x1p-36 + (floor ? 32.0 * 32.0 : 0.0);
    EXPECT_NEAR(j["sqnr_db"].get<double>(), 10 * std::log10(signal / noise), 1e-9);
  }
}

// Transformer Engine's handling, mxfp8-e4m3 under rceil:
// Row 0 [1, NaN, 0.5, 0...]: the amax ignores NaN, so it is 1 and X = 2^-8: 1 -> 0x78, 0.5 -> 128 = 2^7
//   0 1110 000 = 0x70, NaN -> E4M3's NaN 0 1111 111 = 0x7F.
// Row 1 [inf, 1, -inf, 0...]: the amax is inf, X = 2^127 (E8M0 0xFE); +-inf are stored as +-max (0x7E, 0xFE),
//   whose values 448 * 2^127 overflow float to +-inf; 1 / 2^127 underflows to zero.
// SQNR over the finite pairs: signal 1 + 0.25 + 1, noise 1 (the 1 of row 1).
TEST(QuantizeCli, NonFiniteInputsFollowTransformerEngine) {
  TempDir d;
  std::vector<float> x(64, 0.0f);
  const float inf = std::numeric_limits<float>::infinity();
  x[0] = 1.0f, x[1] = std::numeric_limits<float>::quiet_NaN(), x[2] = 0.5f;
  x[32] = inf, x[33] = 1.0f, x[34] = -inf;
  io::write_npy(d / "x.npy", x, {2, 32});
  const auto r = run_command(cli(d / "x.npy" + " --scheme mxfp8-e4m3 --out " + d / "o.npz" + " --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::map<std::string, Array> a = read_out(d / "o.npz");
  const std::vector<std::uint8_t> c = a["codes.npy"].bytes();
  const std::vector<float> v = a["values.npy"].floats();
  EXPECT_EQ(std::vector<std::uint8_t>(c.begin(), c.begin() + 3), (std::vector<std::uint8_t>{0x78, 0x7F, 0x70}));
  EXPECT_EQ(std::vector<std::uint8_t>(c.begin() + 32, c.begin() + 35), (std::vector<std::uint8_t>{0x7E, 0x00, 0xFE}));
  EXPECT_EQ(a["scales.npy"].floats(), (std::vector<float>{0x1p-8f, 0x1p127f}));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[32], inf);
  EXPECT_EQ(v[33], 0.0f);
  EXPECT_EQ(v[34], -inf);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nonfinite_in"], 3);
  EXPECT_EQ(j["underflow_to_zero"], 1);
  EXPECT_EQ(j["saturated"], 0);
  EXPECT_NEAR(j["sqnr_db"].get<double>(), 10 * std::log10(2.25), 1e-12);
}

TEST(QuantizeCli, JsonNamesTheRequestAndDefaults) {
  TempDir d;
  io::write_npy(d / "x.npy", hand_worked_input(), {2, 32});
  const auto r = run_command(cli(d / "x.npy" + " --scheme mxfp8-e4m3 --out " + d / "o.npz" + " --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["scheme"], "mxfp8-e4m3");
  EXPECT_EQ(j["scale_rule"], "rceil");  // the default, Transformer Engine's
  EXPECT_EQ(j["shape"], nlohmann::json::array({2, 32}));
  EXPECT_EQ(j["axis"], 1);  // -1, the last dimension
  EXPECT_EQ(j["scale_shape"], nlohmann::json::array({2, 1}));
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["rounding"], "rne");
  EXPECT_TRUE(j["tensor_scale"].is_null());
  for (const char* key : {"elements", "saturated", "underflow_to_zero", "subnormal", "blocks", "scales_clamped",
                          "nonfinite_in", "sqnr_db"})
    EXPECT_TRUE(j.contains(key)) << key;
  // Along axis 0 the blocks are columns of 2: 32 blocks, grid [1, 32].
  const auto c = run_command(cli(d / "x.npy" + " --scheme mxfp8-e4m3 --axis 0 --out " + d / "o.npz" + " --json"), "");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  const nlohmann::json k = nlohmann::json::parse(c.out);
  EXPECT_EQ(k["axis"], 0);
  EXPECT_EQ(k["blocks"], 32);
  EXPECT_EQ(k["scale_shape"], nlohmann::json::array({1, 32}));
  // fp8-tensor has no scale rule.
  const auto t = run_command(cli(d / "x.npy" + " --scheme fp8-tensor --out " + d / "o.npz" + " --json"), "");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_TRUE(nlohmann::json::parse(t.out)["scale_rule"].is_null());
}

TEST(QuantizeCli, HumanSummaryNamesSchemeRuleShapeAndCounters) {
  TempDir d;
  io::write_npy(d / "x.npy", hand_worked_input(), {2, 32});
  const auto r = run_command(cli(d / "x.npy" + " --scheme mxfp8-e4m3 --scale-rule floor --out " + d / "o.npz"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* part : {"mxfp8-e4m3", "(rule floor)", "shape [2, 32]", "blocks 2", "saturated 1",
                           "underflow to zero 1", "subnormal 1", "SQNR ", " dB"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
}

// E2M1 magnitudes by their three low bits; bit 3 is the sign.
float e2m1(std::uint8_t code) {
  static const float table[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  return (code & 8 ? -1.0f : 1.0f) * table[code & 7];
}

std::vector<float> ramp(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * std::exp2(float(i % 7) - 3);
  return x;
}

// values[i] = e2m1(code) * block scale * tensor scale, with the block of (i, j) given by the grid.
void expect_nvfp4_layout(const std::string& out, std::size_t tile_rows, std::size_t tile_cols) {
  std::map<std::string, Array> a = read_out(out);
  ASSERT_EQ(a.count("tensor_scale.npy"), 1u);
  const std::vector<float> ts = a["tensor_scale.npy"].floats();
  ASSERT_EQ(ts.size(), 1u);
  const std::vector<float> x = ramp(32 * 48);
  float amax = 0;
  for (const float xi : x) amax = std::max(amax, std::fabs(xi));
  EXPECT_NEAR(ts[0], amax / (448.0f * 6.0f), 1e-6 * ts[0]);  // tensor_amax / (448 * 6)
  const std::vector<float> v = a["values.npy"].floats(), s = a["scales.npy"].floats();
  const std::vector<std::uint8_t> c = a["codes.npy"].bytes();
  const std::vector<std::size_t> grid = a["scales.npy"].shape;
  ASSERT_EQ(grid, (std::vector<std::size_t>{32 / tile_rows, 48 / tile_cols}));
  for (std::size_t i = 0; i < 32; ++i)
    for (std::size_t j = 0; j < 48; ++j) {
      const float block = s[(i / tile_rows) * grid[1] + j / tile_cols];
      // e2m1 * block is exact (2 and 4 significant bits), so one float rounding, as the dequantization's.
      ASSERT_EQ(v[i * 48 + j], e2m1(c[i * 48 + j]) * block * ts[0]) << i << "," << j;
      EXPECT_LT(c[i * 48 + j], 16);
    }
}

TEST(QuantizeCli, Nvfp4ScaleGridsAndTensorScale) {
  TempDir d;
  io::write_npy(d / "w.npy", ramp(32 * 48), {32, 48});
  const auto rows = run_command(cli(d / "w.npy" + " --scheme nvfp4 --out " + d / "r.npz"), "");
  ASSERT_EQ(rows.exit_code, 0) << rows.out;
  expect_nvfp4_layout(d / "r.npz", 1, 16);
  const auto tiles = run_command(cli(d / "w.npy" + " --scheme nvfp4 --tile 16x16 --out " + d / "t.npz" + " --json"), "");
  ASSERT_EQ(tiles.exit_code, 0) << tiles.out;
  expect_nvfp4_layout(d / "t.npz", 16, 16);
  EXPECT_EQ(nlohmann::json::parse(tiles.out)["blocks"], 6);
  const auto cols = run_command(cli(d / "w.npy" + " --scheme nvfp4 --axis -2 --out " + d / "c.npz"), "");
  ASSERT_EQ(cols.exit_code, 0) << cols.out;
  expect_nvfp4_layout(d / "c.npz", 16, 1);
}

std::string file_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(QuantizeCli, StochasticRoundingReplaysBySeed) {
  TempDir d;
  io::write_npy(d / "g.npy", ramp(64 * 64), {64, 64});
  const auto run = [&](const std::string& extra, const std::string& out) {
    const auto r = run_command(cli(d / "g.npy" + " --scheme mxfp4 " + extra + " --out " + d / out), "");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return read_out(d / out)["codes.npy"].bytes();
  };
  const std::vector<std::uint8_t> a = run("--rounding stochastic --seed 1", "a.npz");
  const std::vector<std::uint8_t> b = run("--rounding stochastic --seed 1", "b.npz");
  const std::vector<std::uint8_t> c = run("--rounding stochastic --seed 2", "c.npz");
  const std::vector<std::uint8_t> n = run("", "n.npz");
  EXPECT_EQ(file_bytes(d / "a.npz"), file_bytes(d / "b.npz"));
  EXPECT_EQ(a, b);
  std::size_t differ = 0, from_rne = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i], from_rne += a[i] != n[i];
  // FP4 keeps one fraction bit: most elements lie between two codes, and two seeds pick differently.
  EXPECT_GT(differ, a.size() / 10);
  EXPECT_GT(from_rne, a.size() / 10);
}

TEST(QuantizeCli, ReadsSafetensorsNpzMembersAndFloat64) {
  TempDir d;
  const std::vector<float> x = hand_worked_input();
  io::write_npy(d / "x.npy", x, {2, 32});
  io::write_safetensors(d / "m.safetensors", {{"a", {4}, {1, 2, 3, 4}}, {"x", {2, 32}, x}});
  io::write_npz(d / "m.npz", {{"x", {2, 32}, x}, {"b", {2}, {5, 6}}}, true);
  const auto run = [&](const std::string& in) {
    const auto r = run_command(cli(in + " --scheme mxfp8-e4m3 --out " + d / "o.npz" + " --json"), "");
    EXPECT_EQ(r.exit_code, 0) << in << "\n" << r.out;
    return file_bytes(d / "o.npz");
  };
  const std::string expected = run(d / "x.npy");
  EXPECT_EQ(run(d / "m.safetensors:x"), expected);
  EXPECT_EQ(run(d / "m.npz:x"), expected);
  // float64 values are rounded to float32 first: 0.3 (double) becomes 0.3f.
  std::vector<double> wide(x.begin(), x.end());
  wide[2] = 0.3;
  io::write_npy(d / "w.npy", wide, {2, 32});
  EXPECT_EQ(run(d / "w.npy"), expected);
  const auto r = run_command(cli(d / "w.npy" + " --scheme mxfp8-e4m3 --out " + d / "o.npz" + " --json"), "");
  EXPECT_EQ(nlohmann::json::parse(r.out)["dtype"], "f64");
}

// A safetensors file with an F32 tensor "f" and an I64 tensor "n", assembled by hand.
void write_mixed_safetensors(const std::string& file) {
  const std::string header =
      R"({"f":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"n":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  std::string s;
  for (int k = 0; k < 8; ++k) s += static_cast<char>((header.size() >> (8 * k)) & 0xff);
  s += header + std::string(16, '\0');
  std::ofstream(file, std::ios::binary) << s;
}

struct BadCase {
  std::string args;
  std::string message;  // part of the one line on stderr
};

TEST(QuantizeCli, BadInputExitsTwoNamingTheProblemAndWritesNothing) {
  TempDir d;
  io::write_npy(d / "x.npy", hand_worked_input(), {2, 32});
  io::write_npy(d / "v.npy", ramp(32), {32});
  io::write_npy(d / "c.npy", ramp(64), {2, 2, 16});
  io::write_npy(d / "s.npy", std::vector<float>{1.0f}, {});
  const std::vector<std::uint8_t> ints = {1, 2, 3};
  io::write_bytes_atomically(d / "i.npy", io::npy_image(std::span<const std::uint8_t>(ints), {3}));
  write_mixed_safetensors(d / "m.safetensors");
  io::write_safetensors(d / "two.safetensors", {{"a", {2}, {1, 2}}, {"b", {2}, {3, 4}}});
  const std::string out = d / "out.npz", x = d / "x.npy";
  const std::vector<BadCase> cases = {
      {d / "missing.npy" + " --scheme mxfp8-e4m3", "missing.npy: no such file"},
      {d / "two.safetensors:c" + " --scheme mxfp8-e4m3", "no tensor 'c' (tensors: a, b)"},
      {d / "two.safetensors" + " --scheme mxfp8-e4m3", "holds 2 tensors; name one as"},
      {d / "m.safetensors:n" + " --scheme mxfp8-e4m3", "tensor n (I64) is not floating point"},
      {d / "i.npy" + " --scheme mxfp8-e4m3", "unsupported dtype '|u1'"},
      {d / "s.npy" + " --scheme mxfp8-e4m3", "is 0-d"},
      {x + " --scheme mxfp8-e4m3 --axis 2", "--axis 2 is out of range"},
      {x + " --scheme mxfp8-e4m3 --axis -3", "(give -2 to 1)"},
      {d / "v.npy" + " --scheme nvfp4 --tile 16x16", "--tile 16x16 needs a 2-D tensor"},
      {d / "c.npy" + " --scheme nvfp4 --tile 16x16", "has shape [2, 2, 16]"},
      {x + " --scheme mxfp8-e4m3 --tile 16x16", "--tile 16x16 is for --scheme nvfp4"},
      {x + " --scheme nvfp4 --tile 32x32", "the one tile is 16x16"},
      {d / "v.npy" + " --scheme fp8-block128x128", "fp8-block128x128's 128x128 blocks need a 2-D tensor"},
      {x + " --scheme mxfp9", "unknown scheme 'mxfp9' (schemes: mxfp8-e4m3, "},
      {x + " --scheme nvfp4 --scale-rule floor", "--scale-rule applies to the MX schemes"},
      {x + " --scheme mxfp4 --scale-rule round", "expected floor, ceil, even, rceil"},
      {x + " --scheme mxfp4 --rounding rtz", "expected rne or stochastic"},
      {x + " --scheme mxfp4 --seed 3", "without --rounding stochastic"},
  };
  for (const BadCase& c : cases) {
    const auto r = run_command(cli(c.args + " --out " + out), "", true);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("mpverify quantize: error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.args;
    EXPECT_FALSE(fs::exists(out + ".tmp")) << c.args;
  }
  const auto r = run_command(cli(x + " --scheme mxfp4 --out " + d / "out.npy"), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("give a name ending in .npz"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "out.npy"));
}

TEST(QuantizeCli, HelpListsEverySchemeAndTheDefaultRule) {
  const auto r = run_command(cli("--help"), "");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* part : {"mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp4", "nvfp4", "fp8-tile1x128",
                           "fp8-block128x128", "fp8-tensor", "(default rceil)", "floor", "ceil", "even"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part;
}

}  // namespace
