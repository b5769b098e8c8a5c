// `mpverify analyze` and `mpverify swamp` as a user runs them, on files
// written with our writers and hand-assembled bad files: exact counts on
// crafted tensors (worked out by hand from fp16/bf16's definitions), a
// directory with a bad file (the rest analysed, the failure named, exit 1),
// usage errors (exit 2, nothing written), the SVG plot.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "io/npz.h"
#include "io/safetensors.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;
using namespace mpverify;
namespace fs = std::filesystem;

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " " + args; }

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpverify_analyze_cli_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// fp16 at scale 1: 2^-25 ties to 0 (underflow to zero); 2^-24 and 2^-20 are
// subnormal; 2^-14 and 1 normal; 65520 (the midpoint above 65504) and 1e10
// overflow; one exact zero. At scale 8 (2^3): 2^-25 -> 2^-22 (subnormal),
// 2^-24 -> 2^-21, 2^-20 -> 2^-17 (subnormal), 2^-14 -> 2^-11 (normal),
// 1 -> 8, 65520 and 1e10 overflow: no underflow to zero, 3 subnormal, 2 overflow.
const std::vector<float> crafted = {0.0f, 0x1p-25f, 0x1p-24f, 0x1p-20f, 0x1p-14f, 1.0f, 65520.0f, 1e10f};

const nlohmann::json* find_result(const nlohmann::json& j, const std::string& tensor, double scale) {
  for (const nlohmann::json& r : j["results"])
    if (r["tensor"] == tensor && r["scale"].get<double>() == scale) return &r;
  return nullptr;
}

TEST(AnalyzeCli, ExactCountsOnACraftedTensor) {
  TempDir d;
  io::write_safetensors(d.path / "t.safetensors", {{"crafted", {8}, crafted}});
  const auto r = run_command(cli("analyze " + (d.path / "t.safetensors").string() + " --format fp16 --scales 1,8 --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json* s1 = find_result(j, "crafted", 1);
  const nlohmann::json* s8 = find_result(j, "crafted", 8);
  ASSERT_TRUE(s1 && s8);
  EXPECT_EQ((*s1)["count"], 8);
  EXPECT_EQ((*s1)["zeros_in"], 1);
  EXPECT_EQ((*s1)["nan_or_inf_in"], 0);
  EXPECT_EQ((*s1)["underflow_to_zero"], 1);
  EXPECT_EQ((*s1)["subnormal"], 2);
  EXPECT_EQ((*s1)["overflow"], 2);
  EXPECT_EQ((*s8)["underflow_to_zero"], 0);
  EXPECT_EQ((*s8)["subnormal"], 3);
  EXPECT_EQ((*s8)["overflow"], 2);
  // 1e10 overflows fp16 at every scale >= 2^-18 (1e10 * 2^-18 = 38147 < 65504; at 2^-17, 76294 > 65520).
  EXPECT_EQ(j["recommendation"]["largest_safe_scale_log2"], -18);
  EXPECT_TRUE(j["recommendation"]["best_scale"].is_null());  // both scales overflow
  EXPECT_EQ(j["total"][0]["underflow_to_zero"], 1);
}

// An unreadable file is bad input (exit 2, nothing written): 1 is kept for verdicts. --skip-unreadable
// analyses the rest and lists the failure.
TEST(AnalyzeCli, DirectoryWithABadFileExitsTwoOrAnalysesTheRestWhenAsked) {
  TempDir d;
  fs::create_directories(d.path / "step-1");
  io::write_npy(d.path / "step-1" / "a.npy", std::vector<float>{0x1p-30f, 1.0f}, {2});
  io::write_npz(d.path / "step-1" / "b.npz", {{"g", {2}, {0x1p-26f, 0.0f}}}, true);
  // A safetensors file whose only tensor claims 64 bytes but has 8.
  const std::string header = R"({"w":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})";
  std::string bad;
  for (int k = 0; k < 8; ++k) bad += static_cast<char>((header.size() >> (8 * k)) & 0xff);
  bad += header + std::string(8, '\0');
  std::ofstream(d.path / "step-1" / "c.safetensors", std::ios::binary) << bad;
  const fs::path json_out = d.path / "out.json";
  const auto refused = run_command(cli("analyze " + d.path.string() + " --format fp16 --json-out " + json_out.string()), "", true);
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("step-1/c.safetensors: tensor 'w', byte offset 9"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--skip-unreadable"), std::string::npos) << refused.out;
  EXPECT_EQ(refused.out.find("underflow"), std::string::npos) << "no table on a refusal:\n" << refused.out;
  EXPECT_FALSE(fs::exists(json_out));
  const auto r = run_command(
      cli("analyze " + d.path.string() + " --format fp16 --skip-unreadable --json-out " + json_out.string()), "");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  ASSERT_TRUE(fs::exists(json_out));
  EXPECT_FALSE(fs::exists(d.path / "out.json.tmp"));
  std::ifstream in(json_out);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["file"], "step-1/c.safetensors");
  EXPECT_EQ(j["failures"][0]["tensor"], "w");
  EXPECT_EQ(j["failures"][0]["offset"], 9);  // the entry's key, just after the 8-byte length and '{'
  ASSERT_EQ(j["tensors"].size(), 2u);
  EXPECT_EQ(j["tensors"][0]["tensor"], "step-1/a.npy:a");
  EXPECT_EQ(j["tensors"][1]["tensor"], "step-1/b.npz:g");
  // 2^-30 and 2^-26 underflow to zero in fp16 at scale 1 (below the 2^-25 midpoint); 1.0 does not.
  EXPECT_EQ(j["total"][0]["underflow_to_zero"], 2);
  EXPECT_EQ(j["total"][0]["zeros_in"], 1);
  EXPECT_EQ(j["total"][0]["count"], 4);
  // The table names the failure too.
  const auto t = run_command(cli("analyze " + d.path.string() + " --format fp16 --skip-unreadable"), "");
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("step-1/c.safetensors: tensor 'w', byte offset 9"), std::string::npos) << t.out;
}

TEST(AnalyzeCli, UsageErrorsExitTwoAndWriteNothing) {
  TempDir d;
  io::write_npy(d.path / "a.npy", std::vector<float>{1.0f}, {1});
  const std::string a = (d.path / "a.npy").string();
  const fs::path out = d.path / "o.json";
  for (const std::string& args :
       {"analyze " + a + " --format fp17 --json-out " + out.string(),
        "analyze " + a + " --format fp16 --scales 1,0.1 --json-out " + out.string(),
        "analyze " + a + " --format fp16 --scales 1,x --json-out " + out.string(),
        "analyze " + a + " --format fp16 --scale -2 --json-out " + out.string(),
        "analyze " + (d.path / "missing").string() + " --format fp16 --json-out " + out.string(),
        "analyze " + a + " --json-out " + out.string(),
        "swamp --weights " + a + " --json-out " + out.string(),
        "swamp --weights " + a + " --grads " + a + " --json-out " + out.string(),
        "swamp --weights " + a + " --updates " + a + " --lr 0.1 --json-out " + out.string()}) {
    const auto r = run_command(cli(args + " 2>/dev/null"), "");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

TEST(AnalyzeCli, PlotAndCsv) {
  TempDir d;
  io::write_npy(d.path / "a.npy", crafted, {8});
  const fs::path svg = d.path / "h.svg";
  const auto r = run_command(cli("analyze " + (d.path / "a.npy").string() + " --format bf16 --scales 1,2^10 --csv --plot " +
                                 svg.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "tensor,scale,count,zeros_in,nan_or_inf_in,underflow_to_zero,subnormal,overflow,max_abs,headroom_log2");
  // bf16 keeps float's range: nothing here underflows or overflows at either scale.
  EXPECT_NE(r.out.find("\na,1,8,1,0,0,0,0,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\na,1024,8,1,0,0,0,0,"), std::string::npos) << r.out;
  std::ifstream in(svg);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_NE(s.find("scale 1024"), std::string::npos);
  EXPECT_NE(s.find("<title>2^-25: 1</title>"), std::string::npos);  // 2^-25 at scale 1
  EXPECT_NE(s.find("</svg>"), std::string::npos);
}

TEST(SwampCli, HandWorkedLostUpdates) {
  TempDir d;
  // w = 1 with u = 2^-12: fp16 (p = 11) 1 + 2^-12 rounds back to 1 (lost); bf16 too; in
  //   fp32 it is kept. |w|/|u| = 2^12 > 2^11 and > 2^8.
  // w = 1 with u = 2^-11: the fp16 midpoint between 1 and 1 + 2^-10, ties to even 1:
  //   lost in fp16 and bf16 at |w|/|u| = 2^11, the ratio fp16 needs for a loss (and not above 2^12).
  // w = 1 with u = 2^-4: kept in fp16 (1.0625); bf16 (p = 8) keeps it too (1.0625 = 1 + 2^-4).
  // w = 3 with u = 0: not an update.
  io::write_safetensors(d.path / "w.safetensors", {{"p", {4}, {1.0f, 1.0f, 1.0f, 3.0f}}});
  io::write_safetensors(d.path / "u.safetensors", {{"p", {4}, {0x1p-12f, 0x1p-11f, 0x1p-4f, 0.0f}}});
  const auto r = run_command(cli("swamp --weights " + (d.path / "w.safetensors").string() + " --updates " +
                                 (d.path / "u.safetensors").string() + " --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tensors"].size(), 1u);
  const nlohmann::json& t = j["tensors"][0];
  EXPECT_EQ(t["fp16"]["without_master"]["updates"], 3);
  EXPECT_EQ(t["fp16"]["without_master"]["lost"], 2);
  EXPECT_EQ(t["fp16"]["with_master"]["lost"], 0);
  EXPECT_EQ(t["fp16"]["without_master"]["ratio_needed"], 2);      // 2^12 and 2^11 are >= 2^11
  EXPECT_EQ(t["fp16"]["without_master"]["ratio_sufficient"], 0);  // neither is above 2^12
  EXPECT_EQ(t["fp16"]["with_master"]["ratio_needed"], 0);  // the master's p is fp32's 24
  EXPECT_EQ(t["bf16"]["without_master"]["lost"], 2);
  EXPECT_EQ(t["bf16"]["without_master"]["ratio_needed"], 2);      // >= 2^8
  EXPECT_EQ(t["bf16"]["without_master"]["ratio_sufficient"], 2);  // > 2^9
  // The same through --grads: g = -2^-3 * (u / 2^-9)... u = -lr * g with lr = 2^-9 and g = -u * 2^9.
  io::write_safetensors(d.path / "g.safetensors", {{"p", {4}, {-0x1p-3f, -0x1p-2f, -0x1p5f, 0.0f}}});
  const auto g = run_command(cli("swamp --weights " + (d.path / "w.safetensors").string() + " --grads " +
                                 (d.path / "g.safetensors").string() + " --lr 0.001953125 --json"), "");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const nlohmann::json k = nlohmann::json::parse(g.out);
  EXPECT_EQ(k["tensors"][0]["fp16"], t["fp16"]);
  EXPECT_EQ(k["tensors"][0]["bf16"], t["bf16"]);
}

}  // namespace
