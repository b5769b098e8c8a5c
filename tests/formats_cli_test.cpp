// `mpverify formats`, `mpverify round` and `--help` as a user runs them.
// Expected values come from the formats table (shared/reference/formats.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " " + args; }

TEST(FormatsCli, JsonListsThePresetsWithTheirConstants) {
  const auto r = run_command(cli("formats --json"), "");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& f : j) by_name[f["name"]] = f;
  for (const char* name : {"fp16", "bf16", "tf32", "fp8-e4m3", "fp8-e5m2"}) ASSERT_TRUE(by_name.count(name)) << name;
  const auto& fp16 = by_name["fp16"];
  EXPECT_EQ(fp16["exponent_bits"], 5);
  EXPECT_EQ(fp16["significand_bits"], 11);
  EXPECT_EQ(fp16["max"], 65504.0);
  EXPECT_EQ(fp16["min_normal"], 0x1p-14);
  EXPECT_EQ(fp16["min_subnormal"], 0x1p-24);
  EXPECT_EQ(fp16["epsilon"], 0x1p-10);
  EXPECT_EQ(fp16["lost_update_ratio_needed"], 2048.0);
  EXPECT_EQ(fp16["lost_update_ratio_sufficient"], 4096.0);
  EXPECT_EQ(by_name["fp8-e4m3"]["max"], 448.0);
  EXPECT_EQ(by_name["fp8-e5m2"]["max"], 57344.0);
  EXPECT_EQ(by_name["bf16"]["lost_update_ratio_needed"], 256.0);
  EXPECT_EQ(by_name["bf16"]["lost_update_ratio_sufficient"], 512.0);
  const auto custom = nlohmann::json::parse(run_command(cli("formats --format e5m7 --json"), "").out);
  ASSERT_EQ(custom.size(), 1u);
  EXPECT_EQ(custom[0]["significand_bits"], 8);
}

TEST(RoundCli, JsonHasBitsValueAndFlags) {
  // 65520 is the midpoint above 65504: RNE overflows to inf. 1e-8 is below
  // half of 2^-24: zero, underflow and inexact. 0x3f800001 is 1 + 2^-23: 1.
  const auto r = run_command(cli("round --format fp16 --rounding rne --json 1 65520 1e-8 0x3f800001 nan"), "");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 5u);
  EXPECT_EQ(j[0]["bits"], "0x3c00");
  EXPECT_EQ(j[0]["value"], 1.0);
  EXPECT_EQ(j[0]["flags"], nlohmann::json::array());
  EXPECT_EQ(j[1]["bits"], "0x7c00");
  EXPECT_EQ(j[1]["value"], "inf");
  EXPECT_EQ(j[1]["flags"], (nlohmann::json{"inexact", "overflow"}));
  EXPECT_EQ(j[2]["bits"], "0x0000");
  EXPECT_EQ(j[2]["flags"], (nlohmann::json{"inexact", "underflow"}));
  EXPECT_EQ(j[3]["input"], 1.0 + 0x1p-23);
  EXPECT_EQ(j[3]["bits"], "0x3c00");
  EXPECT_EQ(j[4]["value"], "nan");
  EXPECT_EQ(j[4]["input"], "nan");
}

TEST(RoundCli, ReadsStdinAndEveryRoundingName) {
  const auto r = run_command(cli("round --format fp16 --rounding up --json"), "1.0001\n\n-1.0001\n");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["bits"], "0x3c01");  // up: the next value after 1
  EXPECT_EQ(j[1]["bits"], "0xbc00");  // up on a negative: toward zero
  for (const char* mode : {"rne", "rtz", "up", "down", "rna", "odd", "stochastic"})
    EXPECT_EQ(run_command(cli(std::string("round --format bf16 --rounding ") + mode + " 0.1"), "").exit_code, 0) << mode;
}

TEST(Cli, HelpEverywhere) {
  for (const char* args : {"--help", "formats --help", "round --help", "eval --help", "ops --help"}) {
    const auto r = run_command(cli(args), "");
    EXPECT_EQ(r.exit_code, 0) << args;
    EXPECT_NE(r.out.find("--"), std::string::npos) << args;
  }
}

TEST(Cli, BadArgumentsGiveOneLineNamingThemAndExit2) {
  struct Case { const char* args; const char* input; const char* named; };
  for (const Case& c : {Case{"round --format fp17 1", "", "fp17"}, Case{"round --format fp16 --rounding near 1", "", "--rounding"},
                        Case{"round --format fp16 1 abc", "", "abc"}, Case{"round --format fp16", "1\nxyz\n", "line 2"},
                        Case{"round --format fp16 --random-bits 40 1", "", "--random-bits"},
                        Case{"round --format fp16 --bogus 1", "", "--bogus"}, Case{"nosuchcommand", "", "nosuchcommand"},
                        Case{"eval --op add --format fp16", "3C00 3C00\n3C00\n", "line 2"}}) {
    const auto quiet = run_command(cli(c.args), c.input);
    EXPECT_EQ(quiet.exit_code, 2) << c.args;
    EXPECT_EQ(quiet.out, "") << c.args << ": no partial output";
    const auto loud = run_command(cli(c.args), c.input, /*with_stderr=*/true);
    EXPECT_NE(loud.out.find(c.named), std::string::npos) << c.args << " -> " << loud.out;
    EXPECT_EQ(std::count(loud.out.begin(), loud.out.end(), '\n'), 1) << c.args << " -> " << loud.out;
  }
}

// A parse error names the command, and points to that command's help (where
// the missing or wrong option is described), not to the top-level list.
TEST(Cli, ParseErrorsPointToTheCommandsHelp) {
  const auto r = run_command(cli("analyze /nonexistent.npy"), "", /*with_stderr=*/true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("mpverify analyze: error: --format is required"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(see 'mpverify analyze --help')"), std::string::npos) << r.out;
  const auto top = run_command(cli("--bogus"), "", /*with_stderr=*/true);
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_NE(top.out.find("mpverify: unknown option --bogus; see mpverify --help"), std::string::npos) << top.out;
}

}  // namespace
