// `mpverify eval` driven as a user drives it: cases piped in TestFloat's line
// format, checked with --check. The expected results below were worked out
// by hand from IEEE 754 (fp16: bias 15, 10 fraction bits, max 0x7bff = 65504,
// min normal 0x0400 = 2^-14, min subnormal 0x0001 = 2^-24).
#include <gtest/gtest.h>

#include <string>

#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string eval(const std::string& args) { return std::string(MPVERIFY_BIN) + " eval " + args; }

// Runs --check on the cases and expects every one to pass.
void expect_all_pass(const std::string& args, const std::string& cases, int count) {
  const auto r = run_command(eval(args + " --check"), cases);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(std::to_string(count) + " passed, 0 failed"), std::string::npos) << args << "\n" << r.out;
}

TEST(EvalCli, OverflowInEachRoundingMode) {
  // 65504 * 2 = 131008 overflows; the modes that never round away from zero
  // give the largest finite value. Flags 05 = overflow | inexact.
  expect_all_pass("--op mul --format fp16 --rounding rne", "7BFF 4000 7C00 05\nFBFF 4000 FC00 05\n", 2);
  expect_all_pass("--op mul --format fp16 --rounding rna", "7BFF 4000 7C00 05\nFBFF 4000 FC00 05\n", 2);
  expect_all_pass("--op mul --format fp16 --rounding rtz", "7BFF 4000 7BFF 05\nFBFF 4000 FBFF 05\n", 2);
  expect_all_pass("--op mul --format fp16 --rounding up", "7BFF 4000 7C00 05\nFBFF 4000 FBFF 05\n", 2);
  expect_all_pass("--op mul --format fp16 --rounding down", "7BFF 4000 7BFF 05\nFBFF 4000 FC00 05\n", 2);
  expect_all_pass("--op mul --format fp16 --rounding odd", "7BFF 4000 7BFF 05\nFBFF 4000 FBFF 05\n", 2);
}

TEST(EvalCli, InvalidAndInfiniteCases) {
  expect_all_pass("--op mul --format fp16", "0000 7C00 FE00 10\n7C00 8000 FE00 10\n", 2);  // 0 * inf
  expect_all_pass("--op add --format fp16", "7C00 FC00 FE00 10\n", 1);                     // inf - inf
  expect_all_pass("--op sub --format fp16", "7C00 7C00 FE00 10\n", 1);
  expect_all_pass("--op div --format fp16", "3C00 0000 7C00 08\nBC00 0000 FC00 08\n0000 0000 FE00 10\n", 3);
  // sqrt(-0) = -0 exactly; sqrt of a negative, or of -inf, is invalid;
  // sqrt(2) = 1.41421... lies below the midpoint of 0x3da8 and 0x3da9.
  expect_all_pass("--op sqrt --format fp16", "8000 8000 00\nBC00 FE00 10\nFC00 FE00 10\n7C00 7C00 00\n4000 3DA8 01\n", 5);
}

TEST(EvalCli, TiesAtTheSubnormalBoundaryAndTininess) {
  // float 2^-25 (0x33000000) is half the smallest subnormal: ties to even 0.
  // 3*2^-26 (0x33400000) rounds to 2^-24. Flags 03 = underflow | inexact.
  expect_all_pass("--op from-f32 --format fp16", "33000000 0000 03\n33400000 0001 03\nB3000000 8000 03\n", 3);
  // (1 - 2^-6) * 2^-14 (1 + 2^-6) = 2^-14 - 2^-26: rounds up to the min
  // normal 0x0400. With 11 bits and an unbounded exponent it is a tie that
  // goes to 2^-14 (even), so after rounding it is not tiny (flags 01);
  // before rounding it is (03).
  expect_all_pass("--op mul --format fp16 --tininess after", "3BE0 0410 0400 01\n", 1);
  expect_all_pass("--op mul --format fp16 --tininess before", "3BE0 0410 0400 03\n", 1);
  // 2^-14 - 2^-25 (float 0x387fe000) has 11 significant bits: tiny under both
  // rules, yet the subnormal grid's tie still goes up to 0x0400.
  expect_all_pass("--op from-f32 --format fp16 --tininess after", "387FE000 0400 03\n387FF000 0400 01\n", 2);
  expect_all_pass("--op from-f32 --format fp16 --tininess before", "387FE000 0400 03\n387FF000 0400 03\n", 2);
}

TEST(EvalCli, FmaWhereTheProductAloneWouldOverflowOrUnderflow) {
  // 65504 * 2 - 65504 = 65504 exactly, although 65504 * 2 overflows.
  expect_all_pass("--op fma --format fp16", "7BFF 4000 FBFF 7BFF 00\n", 1);
  // 2^-24 * 2^-24 = 2^-48 underflows alone; added to 1 the sum is inexact but
  // not tiny (01); rounding up it gives the next value after 1.
  expect_all_pass("--op fma --format fp16", "0001 0001 3C00 3C00 01\n", 1);
  expect_all_pass("--op fma --format fp16 --rounding up", "0001 0001 3C00 3C01 01\n", 1);
  // 2^-24 * 0.5 + 0 = 2^-25: a tie at the bottom, to even zero.
  expect_all_pass("--op fma --format fp16", "0001 3800 0000 0000 03\n", 1);
  // 0 * inf + qNaN is invalid (SoftFloat's order) and returns a NaN.
  expect_all_pass("--op fma --format fp16", "0000 7C00 7E00 FE00 10\n", 1);
}

TEST(EvalCli, ConversionsBetweenFormats) {
  // bf16 1 + 2^-7 (0x3f81) to fp16 is exact (0x3c08); fp8-e4m3 448 (0x7e) to
  // fp16 is 0x5f00; fp16 65504 to fp8-e4m3 overflows to NaN (0x7f).
  expect_all_pass("--op from-bf16 --format fp16", "3F81 3C08 00\n", 1);
  expect_all_pass("--op from-fp8-e4m3 --format fp16", "7E 5F00 00\n", 1);
  expect_all_pass("--op from-fp16 --format fp8-e4m3", "7BFF 7F 05\n", 1);
  expect_all_pass("--op to-f32 --format fp16", "3C00 3F800000 00\n7D00 7FA00000 10\n", 2);
  expect_all_pass("--op from-f64 --format fp16", "3FF0000000000000 3C00 00\n", 1);
}

TEST(EvalCli, MismatchesAreReportedAndFailTheRun) {
  const auto r = run_command(eval("--op add --format fp16 --check"), "3C00 3C00 4000 00\n3C00 3C00 4001 00\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("line 2: 3C00 3C00 -> ours 4000 00, expected 4001 00"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 passed, 1 failed"), std::string::npos) << r.out;
}

TEST(EvalCli, NanMatchesAnyNanUnlessExact) {
  expect_all_pass("--op add --format fp16", "7C00 FC00 7E00 10\n", 1);
  const auto r = run_command(eval("--op add --format fp16 --check --exact-nan"), "7C00 FC00 7E00 10\n");
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

TEST(EvalCli, MalformedLinesNameTheLineAndExit2WithNoOutput) {
  for (const char* input : {"3C00 3C00 4000 00\n3C00\n", "3C00 3C00 4000 00\nzz 3C00\n", "3C00 10000\n",
                            "3C00 3C00 4000\n"}) {
    const auto r = run_command(eval("--op add --format fp16"), input);
    EXPECT_EQ(r.exit_code, 2) << input;
    EXPECT_EQ(r.out, "") << input;
  }
  const auto bad_op = run_command(eval("--op cbrt --format fp16"), "3C00\n");
  EXPECT_EQ(bad_op.exit_code, 2);
}

TEST(EvalCli, OutputLinesCanBeDiffedAgainstAGenerator) {
  const auto r = run_command(eval("--op add --format fp16"), "0x3c00 0x3c00\n87FF E850 E850 01\n");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "3C00 3C00 4000 00\n87FF E850 E850 01\n");
}

TEST(EvalCli, StochasticReplaysFromItsSeed) {
  std::string cases;
  for (int i = 0; i < 64; ++i) cases += "3C00 1000\n";  // 1 + 2^-11: exactly half an ulp, a fair coin each time
  const auto a = run_command(eval("--op add --format fp16 --rounding stochastic --seed 5"), cases);
  const auto b = run_command(eval("--op add --format fp16 --rounding stochastic --seed 5"), cases);
  const auto c = run_command(eval("--op add --format fp16 --rounding stochastic --seed 6"), cases);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_NE(a.out.find("3C01 01"), std::string::npos);
  EXPECT_NE(a.out.find("3C00 01"), std::string::npos);
}

}  // namespace
