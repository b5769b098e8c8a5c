// `mpverify eval --op dot` driven as a user drives it: lines in, d out, --check, --json, --list, and the
// refusals (exit 2, nothing on stdout). The expected results are worked out by hand in mma_model_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string eval(const std::string& args) { return std::string(MPVERIFY_BIN) + " eval --op dot " + args; }

std::string repeat(const std::string& field, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += field + " ";
  return s;
}

// 1 + 7 products 2^-25 (fp16 2^-12 * 2^-13), c = 0: Ampere's F = 24 gives 1, Hopper's mma F = 25 1 + 2^-23.
const std::string kSmallTerms = "3C00 " + repeat("0C00", 7) + "3C00 " + repeat("0800", 7) + "00000000";

TEST(EvalDotCli, PrintsTheFieldsAndD) {
  const auto r = run_command(eval("--arch sm80.mma.m16n8k8.f32.f16"), kSmallTerms + "\n");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, kSmallTerms + " 3F800000\n");
}

TEST(EvalDotCli, CheckCountsAndNamesTheMismatches) {
  const std::string cases = kSmallTerms + " 3F800001\n" + kSmallTerms + " 3F800000\n";
  const auto r = run_command(eval("--arch sm90.mma.m16n8k8.f32.f16 --check"), cases, true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("line 2: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> ours 3F800001, expected 3F800000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 passed, 1 failed"), std::string::npos) << r.out;
}

TEST(EvalDotCli, AnArchitectureAndFormatsChooseItsInstruction) {
  // e4m3: 1.5 * 1 + 2^-6 * 2^-7 + c = 1.5: Hopper's wgmma keeps 13 fraction bits: 3 (see mma_model_test).
  const std::string line = "3C 08 " + repeat("00", 30) + "38 04 " + repeat("00", 30) + "3FC00000 40400000\n";
  const auto r = run_command(eval("--arch hopper --a-format fp8-e4m3 --b-format fp8-e4m3 --check"), line);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "1 passed, 0 failed\n");
  // A chain of two instructions (64 products) is one line too; a promotion interval applies to it.
  const auto j = run_command(eval("--arch sm90.wgmma.k32.f32.e4m3 --promotion-interval 32 --json"),
                             repeat("38", 64) + repeat("38", 64) + "00000000\n");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json["model"]["name"], "sm90.wgmma.k32.f32.e4m3");
  EXPECT_EQ(json["cases"][0]["d"], "42800000");  // 64
  EXPECT_EQ(json["counts"]["terms"], 64);
  EXPECT_EQ(json["promotion_interval"], 32);
}

TEST(EvalDotCli, CustomModelsTakeTheirParameters) {
  const auto r = run_command(eval("--arch custom --k 8 --fraction-bits 25 --output-rounding fp32-rz"), kSmallTerms + "\n");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, kSmallTerms + " 3F800001\n");
}

TEST(EvalDotCli, ListNamesEveryPreset) {
  const auto r = run_command(eval("--list --json"), "");
  ASSERT_EQ(r.exit_code, 0);
  const auto list = nlohmann::json::parse(r.out);
  EXPECT_GT(list.size(), 50u);
  bool found = false;
  for (const auto& m : list) found = found || m["name"] == "sm89.mma.m16n8k32.f32.e4m3.e5m2";
  EXPECT_TRUE(found);
}

TEST(EvalDotCli, BadInputExits2WithNothingOnStdout) {
  for (const auto& [args, input] : std::vector<std::pair<std::string, std::string>>{
           {"--arch sm80.mma.m16n8k8.f32.f16", kSmallTerms + "\n3C00 3C00 00000000\n"},  // K = 1: not a multiple of 8
           {"--arch sm80.mma.m16n8k8.f32.f16", "3C000 " + kSmallTerms.substr(5) + "\n"},   // 20 bits for an fp16
           {"--arch sm80.mma.m16n8k8.f32.f16", "zz00 " + kSmallTerms.substr(5) + "\n"},
           {"--arch sm80.mma.m16n8k8.f32.f16 --check", kSmallTerms + "\n"},               // no expected d
           {"--arch pascal --a-format fp16 --b-format fp16", kSmallTerms + "\n"},
           {"--arch ampere --a-format fp8-e4m3 --b-format fp8-e4m3", kSmallTerms + "\n"},  // no such instruction
           {"--arch sm80.mma.m16n8k8.f32.f16 --a-format bf16", kSmallTerms + "\n"},        // contradicts the preset
           {"--arch hopper", kSmallTerms + "\n"},                                            // formats missing
           {"--arch custom --k 8", kSmallTerms + "\n"},
           {"", kSmallTerms + "\n"}}) {
    const auto r = run_command(eval(args), input);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

// The field syntax the command has always read (std::stoull in base 16: an optional '+' and 0x), kept
// when the reading was rewritten for speed; blank lines count in the numbering; CRLF line ends.
TEST(EvalDotCli, FieldsReadAsHexWithTheirOptionalPrefixes) {
  const std::string prefixed = "+3C00 0x0C00 0X0C00 " + kSmallTerms.substr(15);
  const auto same = run_command(eval("--arch sm80.mma.m16n8k8.f32.f16"), prefixed + "\r\n");
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_EQ(same.out, kSmallTerms + " 3F800000\n");
  const auto numbered = run_command(eval("--arch sm80.mma.m16n8k8.f32.f16 --check"),
                                    kSmallTerms + " 3F800000\n\n \t\n" + kSmallTerms + " 3F800001", true);
  EXPECT_EQ(numbered.exit_code, 1);
  EXPECT_NE(numbered.out.find("line 4: "), std::string::npos) << numbered.out;  // the last line, unterminated
  EXPECT_NE(numbered.out.find("1 passed, 1 failed"), std::string::npos) << numbered.out;
  for (const std::string bad : {"-3C00", "0x", "++3C00", "3C00x", "0x+3C00", "10000000000000000"}) {
    const auto r = run_command(eval("--arch sm80.mma.m16n8k8.f32.f16"), bad + " " + kSmallTerms.substr(5) + "\n", true);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.out.find("field 1 ('" + bad + "') is not a 16-bit hex fp16 value"), std::string::npos) << bad << ": " << r.out;
  }
}

TEST(EvalDotCliGpu, TheDeviceRunsTheSameLines) {
  const std::string why = mpverify::gpu::gpu_unavailable_reason();
  const auto r = run_command(eval("--arch sm90.mma.m16n8k8.f32.f16 --device gpu --check"), kSmallTerms + " 3F800001\n", true);
  if (!why.empty()) {  // no device: refused with the reason, nothing computed
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
    GTEST_SKIP() << why;
  }
  // The hand-worked case of the Hopper model: on a Hopper GPU the instruction gives the same bits.
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // wgmma is not probed: refused whatever the device.
  EXPECT_EQ(run_command(eval("--arch sm90.wgmma.k16.f32.f16 --device gpu"), kSmallTerms + "\n").exit_code, 2);
}

}  // namespace
