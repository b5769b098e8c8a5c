#include "report/junit.h"

#include "report/xml_escape.h"

#include <cstdio>

#include "record/run_log.h"

namespace mpverify::report {

namespace {

const char* element_of(JUnitOutcome outcome) {
  switch (outcome) {
    case JUnitOutcome::failure: return "failure";
    case JUnitOutcome::error: return "error";
    case JUnitOutcome::skipped: return "skipped";
    case JUnitOutcome::passed: break;
  }
  return nullptr;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds >= 0 ? seconds : 0.0);
  return text;
}

std::string attribute(const char* name, std::string_view value) {
  std::string a = " ";
  a += name;
  a += "=\"";
  a += xml_escape(value, true);
  a += "\"";
  return a;
}

}  // namespace

std::string junit_xml(const JUnitTestSuite& suite) {
  std::size_t failures = 0, errors = 0, skipped = 0;
  double time = 0;
  for (const JUnitTestCase& c : suite.cases) {
    failures += c.outcome == JUnitOutcome::failure;
    errors += c.outcome == JUnitOutcome::error;
    skipped += c.outcome == JUnitOutcome::skipped;
    time += c.time_seconds;
  }
  std::string counts = attribute("tests", std::to_string(suite.cases.size()));
  counts += attribute("failures", std::to_string(failures));
  counts += attribute("errors", std::to_string(errors));
  counts += attribute("skipped", std::to_string(skipped));
  counts += attribute("time", seconds_text(time));

  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites" + attribute("name", suite.name) + counts + ">\n";
  x += "  <testsuite" + attribute("name", suite.name) + counts + ">\n";
  if (!suite.properties.empty()) {
    x += "    <properties>\n";
    for (const JUnitProperty& p : suite.properties)
      x += "      <property" + attribute("name", p.name) + attribute("value", p.value) + "/>\n";
    x += "    </properties>\n";
  }
  for (const JUnitTestCase& c : suite.cases) {
    x += "    <testcase" + attribute("name", c.name) + attribute("classname", c.classname) +
         attribute("time", seconds_text(c.time_seconds));
    const char* element = element_of(c.outcome);
    if (!element && c.system_out.empty()) {
      x += "/>\n";
      continue;
    }
    x += ">\n";
    if (element) {
      x += "      <";
      x += element;
      x += attribute("message", c.message) + attribute("type", c.type) + ">" + xml_escape(c.details) + "</";
      x += element;
      x += ">\n";
    }
    if (!c.system_out.empty()) x += "      <system-out>" + xml_escape(c.system_out) + "</system-out>\n";
    x += "    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

void write_junit(const std::filesystem::path& file, const JUnitTestSuite& suite) {
  record::write_file_atomically(file, junit_xml(suite));
}

}  // namespace mpverify::report
