// Guards against vacuous passes: every test counts the checks it made and
// declares the least number it must make, and after all tests of the process
// have run, each test that passed must have met its minimum.
//
// A property whose generator or filter leaves nothing to check would pass
// without testing anything; so would a loop over an empty list. The check
// runs after the tests (not in a TEST of its own) because ctest runs each
// discovered test in a process of its own.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <iostream>
#include <map>
#include <string>

namespace mpverify::properties {

// The checks of one test. Held by reference in the hot loops: looking the
// test up by name for every check would cost more than the checks.
struct CheckCount {
  std::uint64_t minimum = 0;
  std::uint64_t made = 0;
  bool declared = false;

  void count(std::uint64_t n = 1) { made += n; }
};

namespace detail {

inline std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr ? std::string("<outside a test>") : std::string(info->test_suite_name()) + "." + info->name();
}

inline std::map<std::string, CheckCount>& check_counts() {
  static std::map<std::string, CheckCount> counts;
  return counts;
}

class CheckCountEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    // The minimums assume RapidCheck's default of 100 cases per property (or
    // more); reproducing one case, or asking for fewer, is not a vacuous run.
    const auto& rc_config = ::rc::detail::configuration();
    if (!rc_config.reproduce.empty() || rc_config.testParams.maxSuccess < 100) {
      std::cout << "check counts not enforced: RC_PARAMS asks for fewer than 100 cases or a reproduction\n";
      return;
    }
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    for (int s = 0; s < unit.total_test_suite_count(); ++s) {
      const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
      for (int t = 0; t < suite.total_test_count(); ++t) {
        const ::testing::TestInfo& info = *suite.GetTestInfo(t);
        if (!info.should_run() || !info.result()->Passed() || info.result()->Skipped()) continue;
        const std::string name = std::string(info.test_suite_name()) + "." + info.name();
        const auto it = check_counts().find(name);
        if (it == check_counts().end() || !it->second.declared) {
          ADD_FAILURE() << name << " ran without declaring its minimum number of checks (expect_checks)";
          continue;
        }
        const CheckCount& c = it->second;
        std::cout << name << ": " << c.made << " checks (minimum " << c.minimum << ")\n";
        if (c.made < c.minimum)
          ADD_FAILURE() << name << " made " << c.made << " checks, fewer than its minimum " << c.minimum;
      }
    }
  }
};

// Registered once per executable, before main runs (gtest_main).
inline ::testing::Environment* const check_count_environment =
    ::testing::AddGlobalTestEnvironment(new CheckCountEnvironment);

}  // namespace detail

// Declares the least number of checks the running test must make (for a
// property: over all its cases at RapidCheck's default 100) and returns its
// counter. Called at the start of every case; the minimum is the same each time.
inline CheckCount& expect_checks(std::uint64_t minimum) {
  CheckCount& c = detail::check_counts()[detail::current_test_name()];
  c.minimum = minimum;
  c.declared = true;
  return c;
}

}  // namespace mpverify::properties
