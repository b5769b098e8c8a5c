// JUnit XML, the test-report format CI systems display (Jenkins, GitLab,
// GitHub Actions reporters, Azure DevOps): <testsuites> holding one
// <testsuite> with its <properties> and <testcase> elements; a case that did
// not pass holds one <failure>, <error> or <skipped> element with a message
// attribute, a type attribute and the details as text, and may hold a
// <system-out>. Counts (tests, failures, errors, skipped) are written on
// both <testsuites> and <testsuite>, as Surefire does, since some readers
// look at one and some at the other.
//
// Text and attribute values are escaped (report/xml_escape.h: & < > " and, in attributes, ',
// newline/tab/CR as character references so that they survive attribute
// normalisation); characters XML 1.0 cannot hold at all (the C0 controls other
// than tab, LF, CR) become U+FFFD. The file is written atomically (a temp file
// renamed over it), so a reader never sees half a report.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::report {

enum class JUnitOutcome { passed, failure, error, skipped };

struct JUnitProperty {
  std::string name, value;
};

struct JUnitTestCase {
  std::string name, classname;
  double time_seconds = 0;
  JUnitOutcome outcome = JUnitOutcome::passed;
  std::string message;  // the outcome element's message attribute (not for passed)
  std::string type;     // its type attribute
  std::string details;  // its text
  std::string system_out;  // "" writes no <system-out>
};

struct JUnitTestSuite {
  std::string name;
  std::vector<JUnitProperty> properties;
  std::vector<JUnitTestCase> cases;
};

std::string junit_xml(const JUnitTestSuite& suite);
// std::runtime_error naming the file when it cannot be written.
void write_junit(const std::filesystem::path& file, const JUnitTestSuite& suite);

}  // namespace mpverify::report
