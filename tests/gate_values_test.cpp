// The parity gate on value files (metrics/value_file.h): the reader on
// hand-written CSV and JSON; `mpverify gate` on files giving the same verdict
// as on run directories built from the same numbers, held against paired
// intervals computed here from the t table; a non-finite value as a diverged
// run (exit 1); one run per side inconclusive (exit 3) unless
// --accept-single-run; any metric name with its direction; every bad file
// exiting 2 with the file and line named.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/ensemble.h"
#include "metrics/value_file.h"
#include "support/address_sanitizer.h"
#include "support/gate_runs.h"

namespace {

namespace fs = std::filesystem;
using mpverify::metrics::InputError;
using mpverify::metrics::read_value_file;
using mpverify::test::accuracies;
using mpverify::test::GateCli;
using mpverify::test::write_ensemble;
using nlohmann::json;

class ValueFileReader : public GateCli {
 protected:
  mpverify::metrics::ValueFile read(const std::string& name, const std::string& text) {
    write_file(name, text);
    return read_value_file(root_ / name);
  }
  // The InputError's message, "" when none was thrown.
  std::string error_of(const std::string& name, const std::string& text) {
    try {
      read(name, text);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(ValueFileReader, CsvColumnsInAnyOrderQuotesCommentsAndCrlf) {
  const auto f = read("a.csv", "# accuracies from our trainer\r\nvalue, \"seed\"\r\n95.25,1\r\n\r\n\"94.5\",2\r\n-inf,3\r\nNaN,4\r\n");
  ASSERT_EQ(f.records.size(), 4u);
  EXPECT_EQ(f.records[0].seed, 1);
  EXPECT_EQ(f.records[0].value, 95.25);
  EXPECT_EQ(f.records[0].line, 3u);
  EXPECT_EQ(f.records[1].value, 94.5);
  EXPECT_EQ(f.records[1].line, 5u);  // the blank line counts, as an editor shows it
  EXPECT_FALSE(f.records[2].value.has_value());
  EXPECT_EQ(f.records[2].non_finite, "-inf");
  EXPECT_FALSE(f.records[3].value.has_value());
  EXPECT_EQ(f.records[3].non_finite, "NaN");
  const auto se = read("se.csv", "seed,value,stderr,replicates\n7,20.5,0.25,50\n");
  EXPECT_EQ(se.records[0].stderr_value, 0.25);
  EXPECT_EQ(se.records[0].replicates, 50);
}

TEST_F(ValueFileReader, JsonWithPythonsNonFiniteTokens) {
  // What json.dump([{"seed": s, "value": v} ...]) writes for nan, inf and -inf.
  const auto f = read("a.json",
                      "[\n  {\"seed\": 1, \"value\": 95.2},\n  {\"seed\": 2, \"value\": NaN},\n"
                      "  {\"seed\": 3, \"value\": Infinity}, {\"seed\": 4, \"value\": -Infinity},\n"
                      "  {\"seed\": 5, \"value\": null, \"stderr\": 0.5, \"replicates\": 3}\n]\n");
  ASSERT_EQ(f.records.size(), 5u);
  EXPECT_EQ(f.records[0].value, 95.2);
  EXPECT_EQ(f.records[0].line, 2u);
  EXPECT_EQ(f.records[1].non_finite, "NaN");
  EXPECT_EQ(f.records[1].line, 3u);
  EXPECT_EQ(f.records[2].non_finite, "Infinity");
  EXPECT_EQ(f.records[3].non_finite, "-Infinity");
  EXPECT_EQ(f.records[3].line, 4u);
  EXPECT_EQ(f.records[4].non_finite, "null");
  EXPECT_EQ(f.records[4].replicates, 3);
  // A string holding the token is not the token.
  const auto s = read("s.json", R"([{"seed": 1, "value": 2.5}])");
  EXPECT_EQ(s.records[0].value, 2.5);
  EXPECT_NE(error_of("t.json", R"([{"seed": 1, "value": "NaN"}])").find("expected a number"), std::string::npos);
}

TEST_F(ValueFileReader, AByteOrderMarkIsNotPartOfTheHeaderANulIsNamed) {
  // Spreadsheet programs write a UTF-8 byte order mark first; it was read into the first column's name.
  const auto f = read("bom.csv", "\xEF\xBB\xBFseed,value\n1,95\n2,94\n");
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[1].value, 94);
  const std::string nul = error_of("nul.csv", std::string("seed,value\n1,9\0" "5\n", 15));
  EXPECT_NE(nul.find("nul.csv' line 2: holds the control character 0x00 at column 4"), std::string::npos) << nul;
}

TEST_F(ValueFileReader, BadFilesNameTheFileAndLine) {
  struct Case {
    const char* name;
    const char* text;
    std::vector<std::string> fragments;
  };
  const Case cases[] = {
      {"empty.csv", "", {"empty.csv", "is empty", "seed,value"}},
      // An open quote once swallowed the line: 3,"92.0 read as seed 3, value 92.0.
      {"quote.csv", "seed,value\n1,95\n3,\"92.0\n", {"quote.csv' line 3", "double quote is not closed"}},
      // Control characters were invisible in the message (a NUL ended it: see below).
      {"esc.csv", "seed,value\n1,\x1b[31m95\n", {"esc.csv' line 2", "0x1B at column 3"}},
      {"header.csv", "1,95\n2,94\n", {"header.csv' line 1", "unknown column '1'"}},
      {"typo.csv", "seed,value,std_err\n1,95,0.1\n", {"line 1", "unknown column 'std_err'"}},
      {"novalue.csv", "seed\n1\n", {"line 1", "needs the columns seed and value"}},
      // The first repeat in file order is named, with the first line of its seed (seed 1 repeats later).
      {"repeat.csv", "seed,value\n1,90\n2,91\n2,92\n1,93\n",
       {"repeat.csv' line 4", "seed 2 appears a second time (first on line 3)"}},
      {"twice.csv", "seed,value,seed\n", {"line 1", "appears twice"}},
      {"fields.csv", "seed,value\n1,95\n2,94,3\n", {"fields.csv' line 3", "3 fields", "2 columns"}},
      {"blank.csv", "seed,value\n1,95\n2,\n", {"line 3", "empty", "write nan"}},
      {"word.csv", "seed,value\n1,high\n", {"line 2", "'high'", "expected a number"}},
      {"seed.csv", "seed,value\n1.5,95\n", {"line 2", "seed is '1.5'", "integer"}},
      {"dup.csv", "seed,value\n1,95\n2,94\n1,93\n", {"line 4", "seed 1 appears a second time", "first on line 2"}},
      {"se.csv", "seed,value,stderr\n1,95,0.1\n", {"line 1", "stderr needs replicates"}},
      {"negse.csv", "seed,value,stderr,replicates\n1,95,-0.1,50\n", {"line 2", "stderr is negative"}},
      {"reps.csv", "seed,value,stderr,replicates\n1,95,0.1,1\n", {"line 2", "replicates is 1", "at least 2"}},
      {"nan-se.csv", "seed,value,stderr,replicates\n1,95,nan,50\n", {"line 2", "stderr", "finite"}},
      {"norows.csv", "seed,value\n", {"norows.csv", "holds no runs"}},
      {"object.json", R"({"seed": 1, "value": 95})", {"object.json", "not a JSON array"}},
      {"noval.json", "[\n{\"seed\": 1, \"value\": 95},\n{\"seed\": 2}\n]", {"noval.json' line 3", "needs \"value\""}},
      {"key.json", "[{\"seed\": 1, \"value\": 95, \"note\": 1}]", {"line 1", "unknown key \"note\""}},
      {"cut.json", "[\n{\"seed\": 1, \"value\": 95},\n{\"seed\": 2, \"val", {"cut.json' line 3", "truncated"}},
      {"bad.json", "[\n{\"seed\": 1, \"value\": 95},\n{\"seed\": 2 \"value\": 3}\n]", {"line 3", "not valid JSON"}},
      {"none.json", "[]", {"none.json", "holds no runs"}},
      {"seedstr.json", R"([{"seed": "a", "value": 1}])", {"line 1", "needs \"seed\": an integer"}},
      // A number beyond double's range (the parser's out_of_range, not a syntax error), and nesting 10,000 deep.
      {"huge.json", "[{\"seed\": 1, \"value\": 1e999}]", {"huge.json' line 1", "1e999"}},
      {"deep.json", "[{\"seed\": 1, \"value\": 1, \"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]",
       {"deep.json' line 1", "nested deeper than 64 levels"}},
  };
  for (const Case& c : cases) {
    const std::string message = error_of(c.name, c.text);
    EXPECT_FALSE(message.empty()) << c.name;
    for (const std::string& f : c.fragments) EXPECT_NE(message.find(f), std::string::npos) << f << "\n" << message;
  }
  EXPECT_NE(error_of("missing.csv", "").find("is empty"), std::string::npos);
  EXPECT_THROW(read_value_file(root_ / "nowhere.csv"), InputError);
}

// ------------------------------------------------- the gate on value files

// Ten seeds; candidate = baseline + drop + (+0.1, -0.1, ...) points. The
// per-seed differences have mean `drop` and sample variance 10 * 0.01 / 9, so
// se = sqrt(0.01 / 9) = 1/30 and the paired 90% interval is
// drop -+ t(0.95, 9) / 30 with the table's t(0.95, 9) = 1.833.
const std::vector<std::int64_t> kSeeds = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
const std::vector<double> kBaselinePoints = {92.1, 91.4, 92.8, 91.9, 92.3, 91.2, 92.6, 92.0, 91.7, 92.4};
constexpr double kT9 = 1.833;
constexpr double kSe = 1.0 / 30.0;

std::vector<double> shifted(double drop) {
  std::vector<double> v;
  for (std::size_t i = 0; i < kBaselinePoints.size(); ++i) v.push_back(kBaselinePoints[i] + drop + (i % 2 ? -0.1 : 0.1));
  return v;
}

std::string csv_of(const std::vector<double>& points) {
  std::ostringstream out;
  out.precision(17);
  out << "seed,value\n";
  for (std::size_t i = 0; i < points.size(); ++i) out << kSeeds[i] << "," << points[i] << "\n";
  return out.str();
}

std::string json_of(const std::vector<double>& points) {
  json a = json::array();
  for (std::size_t i = 0; i < points.size(); ++i) a.push_back({{"seed", kSeeds[i]}, {"value", points[i]}});
  return a.dump(2);
}

std::vector<double> fractions(const std::vector<double>& points) {
  std::vector<double> f;
  for (double p : points) f.push_back(p / 100);
  return f;
}

TEST_F(GateCli, ValueFilesGiveTheSameVerdictAsRunDirectories) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, fractions(kBaselinePoints), "fp32"));
  write_file("fp32.csv", csv_of(kBaselinePoints));
  write_file("fp32.json", json_of(kBaselinePoints));
  struct Case {
    double drop;
    int exit_code;
    const char* verdict;
  };
  // Intervals drop -+ 0.0611: inside ±1 at 0; entirely below -1 at -2; straddling -1 at -1.
  for (const Case& c : {Case{0.0, 0, "equivalent"}, Case{-2.0, 1, "not equivalent"}, Case{-1.0, 3, "inconclusive"}}) {
    SCOPED_TRACE(c.drop);
    const std::vector<double> candidate = shifted(c.drop);
    write_ensemble(root_ / "o2", accuracies(kSeeds, fractions(candidate), "o2"));
    write_file("o2.csv", csv_of(candidate));
    write_file("o2.json", json_of(candidate));
    const json dirs = gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1", c.exit_code);
    const json csv = gate_json("--baseline fp32.csv --candidate o2.csv --metric top1 --margin 1", c.exit_code);
    const json js = gate_json("--baseline fp32.json --candidate o2.json --metric top1 --margin 1", c.exit_code);
    for (const json* j : {&dirs, &csv, &js}) {
      EXPECT_EQ((*j)["verdict"], c.verdict);
      EXPECT_EQ((*j)["method"], "paired");
      EXPECT_EQ((*j)["n_baseline"], 10);
      EXPECT_EQ((*j)["df"], 9.0);
      // Points from fractions times 100 and points as written differ by rounding only (~1e-14).
      EXPECT_NEAR((*j)["difference"].get<double>(), c.drop, 1e-9);
      EXPECT_NEAR((*j)["standard_error"].get<double>(), kSe, 1e-9);
      // The table's 3 decimals: |error| <= 0.0005 * se.
      EXPECT_NEAR((*j)["ci_lower"].get<double>(), c.drop - kT9 * kSe, 0.0005 * kSe + 1e-9);
      EXPECT_NEAR((*j)["ci_upper"].get<double>(), c.drop + kT9 * kSe, 0.0005 * kSe + 1e-9);
    }
    EXPECT_EQ(csv["metric"], "top1");
    EXPECT_EQ(csv["unit"], "top1");
    EXPECT_EQ(csv["candidate_runs"][0]["run"], "o2.csv:2");
    const Outcome line = gate("--baseline fp32.csv --candidate o2.csv --metric top1 --margin 1");
    EXPECT_EQ(line.exit_code, c.exit_code);
    EXPECT_EQ(line.out.rfind(c.exit_code == 0 ? "EQUIVALENT (top1)" : c.exit_code == 1 ? "NOT EQUIVALENT (top1)"
                                                                                         : "INCONCLUSIVE (top1)",
                             0),
              0u)
        << line.out;
  }
}

TEST_F(GateCli, ANonFiniteValueIsADivergedRun) {
  write_file("fp32.csv", csv_of(kBaselinePoints));
  write_file("fp32.json", json_of(kBaselinePoints));
  const std::vector<double> candidate = shifted(0);
  for (const char* token : {"NaN", "Infinity", "-Infinity", "null"}) {
    SCOPED_TRACE(token);
    std::string text = json_of(candidate);
    const std::string fourth = "\"value\": " + json(candidate[3]).dump();
    ASSERT_NE(text.find(fourth), std::string::npos);
    text.replace(text.find(fourth), fourth.size(), std::string("\"value\": ") + token);
    write_file("o2.json", text);
    const Outcome o = gate("--baseline fp32.json --candidate o2.json --metric top1 --margin 1");
    EXPECT_EQ(o.exit_code, 1) << o.out_err;
    EXPECT_EQ(o.out.rfind("NOT EQUIVALENT (top1)", 0), 0u) << o.out;
    // json::dump(2) puts entry k's '{' on line 2 + 4k: seed 4 on line 14.
    EXPECT_NE(o.out.find("o2.json:14"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find(token), std::string::npos) << o.out;
    const json j = gate_json("--baseline fp32.json --candidate o2.json --metric top1 --margin 1", 1);
    EXPECT_EQ(j["candidate_runs"][3]["diverged"], true);
    EXPECT_EQ(j["candidate_runs"][3]["value"], nullptr);
  }
  for (const char* token : {"nan", "inf", "-inf", "NAN", "+Inf"}) {
    SCOPED_TRACE(token);
    std::string text = csv_of(kBaselinePoints);
    text += "11," + std::string(token) + "\n";
    write_file("fp32-bad.csv", text);
    const Outcome o = gate("--baseline fp32-bad.csv --candidate fp32.csv --metric top1 --margin 1");
    EXPECT_EQ(o.exit_code, 1) << o.out_err;
    EXPECT_NE(o.out.find("baseline run 'fp32-bad.csv:12' diverged"), std::string::npos) << o.out;
  }
}

TEST_F(GateCli, OneRunPerSideIsInconclusive) {
  write_file("b1.csv", "seed,value\n1,92.1\n");
  write_file("c1.csv", "seed,value\n1,92.2\n");
  const Outcome o = gate("--baseline b1.csv --candidate c1.csv --metric top1 --margin 1");
  EXPECT_EQ(o.exit_code, 3) << o.out_err;
  EXPECT_EQ(o.out.rfind("INCONCLUSIVE (top1)", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("need more seeds"), std::string::npos) << o.out;
  // The same as run directories, and one run against ten.
  mpverify::test::write_run(root_ / "b1", accuracies({1}, {0.921}, "fp32")[0]);
  mpverify::test::write_run(root_ / "c1", accuracies({1}, {0.922}, "o2")[0]);
  EXPECT_EQ(gate("--baseline b1 --candidate c1 --metric accuracy --margin 1").exit_code, 3);
  write_file("b10.csv", csv_of(kBaselinePoints));
  EXPECT_EQ(gate_json("--baseline b10.csv --candidate c1.csv --metric top1 --margin 1", 3)["n_candidate"], 1);
  // A diverged single run still fails.
  write_file("c1-nan.csv", "seed,value\n1,nan\n");
  EXPECT_EQ(gate("--baseline b1.csv --candidate c1-nan.csv --metric top1 --margin 1").exit_code, 1);
  // --accept-single-run with standard errors: se = hypot(0.3, 0.4) = 0.5, df = min(31, 11) - 1 = 10, the
  // table's t(0.95, 10) = 1.812: 0.1 -+ 0.906 = [-0.806, 1.006].
  write_file("b1se.csv", "seed,value,stderr,replicates\n1,92.1,0.3,31\n");
  write_file("c1se.csv", "seed,value,stderr,replicates\n1,92.2,0.4,11\n");
  const json j = gate_json("--baseline b1se.csv --candidate c1se.csv --metric top1 --margin 1.1 --accept-single-run", 0);
  EXPECT_EQ(j["method"], "stderr-t");
  EXPECT_EQ(j["df"], 10.0);
  EXPECT_NEAR(j["ci_upper"].get<double>(), 0.1 + 1.812 * 0.5, 0.0005 * 0.5 + 1e-9);
  EXPECT_EQ(gate_json("--baseline b1se.csv --candidate c1se.csv --metric top1 --margin 1 --accept-single-run", 3)
                ["verdict"],
            "inconclusive");  // 1.006 > 1
  expect_bad_input("--baseline b1.csv --candidate c1.csv --metric top1 --margin 1 --accept-single-run",
                   {"b1.csv:2", "standard error"});
}

TEST_F(GateCli, AnyMetricNameWithItsDirection) {
  write_file("fp32.csv", csv_of(kBaselinePoints));
  write_file("low.csv", csv_of(shifted(-2)));
  write_file("high.csv", csv_of(shifted(2)));
  const std::string low = "--baseline fp32.csv --candidate low.csv --metric bleu --margin 1";
  const json none = gate_json(low, 1);
  EXPECT_EQ(none["direction"], nullptr);
  EXPECT_EQ(none["reason"].get<std::string>().find("worse"), std::string::npos);
  const json higher = gate_json(low + " --higher-is-better", 1);
  EXPECT_EQ(higher["direction"], "higher");
  EXPECT_NE(higher["reason"].get<std::string>().find("the candidate is worse"), std::string::npos);
  const json lower = gate_json(low + " --lower-is-better", 1);
  EXPECT_NE(lower["reason"].get<std::string>().find("the candidate is better"), std::string::npos);
  EXPECT_NE(gate_json("--baseline fp32.csv --candidate high.csv --metric perplexity --margin 1 --lower-is-better", 1)
                ["reason"]
                    .get<std::string>()
                    .find("the candidate is worse"),
            std::string::npos);
  // The named metrics know their direction.
  EXPECT_EQ(gate_json("--baseline fp32.csv --candidate low.csv --metric fid --margin 1", 1)["direction"], "lower");
  expect_bad_input(low + " --higher-is-better --lower-is-better", {"--lower-is-better"});
  expect_bad_input("--baseline fp32.csv --candidate low.csv --metric accuracy --margin 1 --lower-is-better",
                   {"higher-is-better"});
  // On run directories any other name is a figure of their evaluation: one they lack is bad input, naming
  // what they hold (gate_test.cpp's AnyEvaluationFigureOfRunDirectoriesIsAMetric gates one they have).
  write_ensemble(root_ / "fp32", accuracies(kSeeds, fractions(kBaselinePoints), "fp32"));
  write_ensemble(root_ / "o2", accuracies(kSeeds, fractions(shifted(0)), "o2"));
  expect_bad_input("--baseline fp32 --candidate o2 --metric bleu --margin 1",
                   {"--metric bleu", "evaluation has no \"bleu\"", "test_accuracy"});
}

TEST_F(GateCli, BadValueFileInputExitsTwo) {
  write_file("fp32.csv", csv_of(kBaselinePoints));
  write_file("o2.csv", csv_of(shifted(0)));
  write_ensemble(root_ / "o2", accuracies(kSeeds, fractions(shifted(0)), "o2"));
  expect_bad_input("--baseline fp32.csv --candidate o2 --metric top1 --margin 1", {"value file", "directory"});
  expect_bad_input("--baseline fp32.csv --candidate ./fp32.csv --metric top1 --margin 1", {"same file"});
  expect_bad_input("--baseline fp32.csv --candidate none.csv --metric top1 --margin 1", {"none.csv", "does not exist"});
  write_file("dup.csv", "seed,value\n1,90\n1,91\n");
  expect_bad_input("--baseline fp32.csv --candidate dup.csv --metric top1 --margin 1", {"dup.csv' line 3", "seed 1"});
  ASSERT_EQ(gate("--baseline fp32.csv --candidate o2.csv --metric top1 --margin 1").exit_code, 0);
}

// A value file too large for the memory at hand is named (it once ended with "error: std::bad_alloc"). Two
// million rows under a 256 MiB address-space limit: the records alone take 2e6 x 144 bytes = 275 MiB.
TEST_F(GateCli, AValueFileTooLargeForMemoryIsNamed) {
  if (mpverify::test::kAddressSanitizer)
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the memory limit this test sets";
  std::string big = "seed,value\n";
  for (int seed = 1; seed <= 2'000'000; ++seed) big += std::to_string(seed) + ",90\n";
  write_file("big.csv", big);
  write_file("small.csv", csv_of(kBaselinePoints));
  std::string command = "cd " + root_.string() + " && ulimit -v 262144; ";  // appended: GCC 12's -Warray-bounds
  command += std::string(MPVERIFY_BIN) + " gate --baseline big.csv --candidate small.csv --metric top1 --margin 1";
  const auto r = mpverify::test::run_command(command, "", true);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("'big.csv': is too large to hold in memory"), std::string::npos) << r.out;
}

TEST_F(GateCli, HelpDocumentsTheValueFileSchema) {
  const auto o = mpverify::test::run_command(std::string(MPVERIFY_BIN) + " gate --help", "");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* fragment : {"seed,value", "[{\"seed\": 1, \"value\": 95.2}", "NaN", "--accept-single-run",
                               "--higher-is-better", "--lower-is-better", "3 inconclusive"})
    EXPECT_NE(o.out.find(fragment), std::string::npos) << fragment << "\n" << o.out;
}

}  // namespace
