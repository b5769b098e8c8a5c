// The `mpverify` program's own command line, run as a user runs it:
// --version prints the CMake project's version and the GPU (or why none); a misspelt or unknown option
// is named as unknown (before any "--x is required" it caused), with the
// command's help to look at and exit code 2; analyze's and swamp's help
// define what they print; counts are read by their text; whatever a command throws exits 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "support/address_sanitizer.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string cli(const std::string& args) {
  std::string command = MPVERIFY_BIN;  // appended, not string + literal: GCC 12's false -Warray-bounds
  command += ' ';
  command += args;
  return command;
}

TEST(CliUsage, VersionPrintsTheProjectVersion) {
  const auto r = run_command(cli("--version"), "");
  EXPECT_EQ(r.exit_code, 0);
  const std::string first = std::string("mpverify ") + MPVERIFY_EXPECTED_VERSION + "\n";
  ASSERT_EQ(r.out.substr(0, first.size()), first);
  // The second line names the GPU, or says why there is none in the words the gpu side uses.
  const std::string reason = mpverify::gpu::gpu_unavailable_reason();
  if (reason.empty()) {
    EXPECT_EQ(r.out.substr(first.size(), 5), "gpu: ");
    EXPECT_EQ(r.out.find("gpu: none"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.out.substr(first.size()), "gpu: none (" + reason + ")\n");
  }
}

TEST(CliUsage, AnUnknownOptionIsNamedBeforeTheRequiredOptionItHid) {
  // "--formt" leaves --format unset: the unknown option is the error to report.
  const auto r = run_command(cli("analyze --formt fp16 x.npy"), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "mpverify analyze: unknown option --formt; see mpverify analyze --help\n");
}

TEST(CliUsage, EverySubcommandNamesUnknownOptions) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"swamp --weights w.npy --updatez u.npy", "mpverify swamp: unknown option --updatez; see mpverify swamp --help\n"},
      {"formats --bogus", "mpverify formats: unknown option --bogus; see mpverify formats --help\n"},
      {"report-page reports --frist x.md", "mpverify report-page: unknown option --frist; see mpverify report-page --help\n"},
      {"analyze x.npy --format fp16 --scale=2 --plott=h.svg",
       "mpverify analyze: unknown option --plott; see mpverify analyze --help\n"},
      {"--bogus", "mpverify: unknown option --bogus; see mpverify --help\n"},
  };
  for (const auto& c : cases) {
    const auto r = run_command(cli(c.args), "", true);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(r.out, c.message) << c.args;
  }
}

TEST(CliUsage, AnExtraArgumentIsNamedToo) {
  const auto r = run_command(cli("analyze x.npy y.npy --format fp16"), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "mpverify analyze: unexpected argument 'y.npy'; see mpverify analyze --help\n");
}

TEST(CliUsage, OtherUsageErrorsStillSayWhatIsWrong) {
  const auto r = run_command(cli("analyze --format fp16"), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("mpverify analyze: error: path is required"), std::string::npos) << r.out;
}

// `mpverify --help` fits one screen: a line per command (the list the unknown-command error gives, an
// independent source), none wider than 100 columns; the long descriptions stay in each command's --help.
// CLI11 reads "-1" into a count as 2^64 - 1 and "1e12" as 10^12; they once reached an allocation (exit 1,
// "std::bad_alloc" or "vector::reserve", no option named). Each is refused by its text, naming the option.
TEST(CountOption, CountsAreReadByTheirTextAndBounded) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fid a.npz b.npz --bootstrap -1", "--bootstrap: '-1' is not a whole number from 0 to 100000"},
      {"fid a.npz b.npz --bootstrap 1000000000000", "'1000000000000' is above 100000"},
      {"fid a.npz b.npz --kid-subsets 1e12", "--kid-subsets: '1e12' is not a whole number from 1 to 1000000"},
      {"train --model mlp --train-size 1e12 --out /nonexistent/run", "--train-size: '1e12' is not a whole number"},
      {"train --model mlp --test-size 16777217 --out /nonexistent/run", "'16777217' is above 16777216"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = run_command(cli(args), "", true);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
  }
}

// Exit 1 and 3 are verdicts, which commands return; whatever a command throws is input it cannot use: exit 2,
// an allocation failure included (it once exited 1, which `--check` and the gate read as a verdict).
TEST(CliUsage, ThrownErrorsExitTwo) {
  if (mpverify::test::kAddressSanitizer)
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the memory limit this test sets";
  // 2^28 floats (1 GiB) of synthetic gradients under a 512 MiB address-space limit: std::bad_alloc.
  std::string command = "ulimit -v 524288; ";  // appended, not "literal" + string: GCC 12's false -Warray-bounds
  command += cli("allreduce --synthetic 1 --ranks 16 --elements 16777216 --format bf16 --out /nonexistent/out.npy");
  const auto r = run_command(command, "", true);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("out of memory"), std::string::npos) << r.out;
}

TEST(CliUsage, RootHelpListsEachCommandOnOneLineOnOneScreen) {
  const auto unknown = run_command(cli("no-such-command"), "", true);
  const std::size_t from = unknown.out.find("(commands: ");
  ASSERT_NE(from, std::string::npos) << unknown.out;
  std::vector<std::string> commands;
  std::stringstream list(unknown.out.substr(from + 11, unknown.out.find(')', from) - from - 11));
  for (std::string name; std::getline(list, name, ',');) commands.push_back(name.substr(name.find_first_not_of(' ')));
  ASSERT_GE(commands.size(), 17u);
  const auto r = run_command(cli("--help"), "");
  ASSERT_EQ(r.exit_code, 0);
  std::vector<std::string> lines;
  std::stringstream text(r.out);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  EXPECT_LE(lines.size(), 40u) << r.out;
  for (const std::string& line : lines) EXPECT_LE(line.size(), 100u) << line;
  for (const std::string& name : commands) {
    const std::string prefix = std::string(2, ' ').append(name).append(1, ' ');
    const auto listed = std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.rfind(prefix, 0) == 0 && line.size() > name.size() + 12;
    });
    EXPECT_EQ(listed, 1) << name << " is not listed once with its summary:\n" << r.out;
  }
  // The long description is the command's own: ops --help still has the gemm policy's keys.
  EXPECT_EQ(r.out.find("promotion=N"), std::string::npos);
  EXPECT_NE(run_command(cli("ops --help"), "").out.find("promotion=N"), std::string::npos);
}

TEST(CliUsage, AnalyzeHelpDefinesHeadroomAndEveryRateItPrints) {
  const auto r = run_command(cli("analyze --help"), "");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* term : {"nonzero ", "to-zero (underflow) ", "subnormal ", "overflow ", "headroom ",
                           "log2(max finite / (S * max |x|))", "the denominator of every rate"})
    EXPECT_NE(r.out.find(term), std::string::npos) << term;
}

TEST(CliUsage, SwampHelpDefinesItsRatesAndSaysWhatTheRatioRuleIs) {
  const auto r = run_command(cli("swamp --help"), "");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* term : {"updates ", "lost ", "swamping rate", "+master", ">=2^p ", ">2^(p+1) ",
                           "update to a normal w needs this", "each of these is lost, whatever w",
                           "underflow, not counted here", "w = 2047, u = 0.8999"})
    EXPECT_NE(r.out.find(term), std::string::npos) << term;
  // The ratio alone does not decide a loss between 2^p and 2^(p+1).
  EXPECT_EQ(r.out.find("beyond 2^p an update is lost"), std::string::npos);
}

}  // namespace
