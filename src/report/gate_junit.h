// The parity gate's verdict as a JUnit report (report/junit.h): one
// <testsuite> "mpverify gate" with one <testcase> per gate call, named
// "<metric> parity: <candidate> vs <baseline>", class "mpverify.gate.<metric>".
//  - equivalent: a passing case;
//  - not equivalent: <failure type="not-equivalent">;
//  - inconclusive: <error type="inconclusive">. Not <skipped>: every common
//    reader (Jenkins, GitLab, Azure DevOps, the GitHub Actions JUnit
//    reporters) shows a skipped case as neutral, which would contradict the
//    gate's exit code 3 (the build stops) and hide that the gate could not
//    decide; an error is shown as red like a failure, and the readers that
//    tell the two apart (GitLab, Surefire's) keep it apart from a regression
//    found. The message is the verdict line, the text says how many seeds
//    would likely settle it.
// The suite's <properties> carry the numbers (verdict, method, n per side,
// means, difference, interval, p-values, margin, alpha, and each run's value
// as "baseline_run:<dir>" / "candidate_run:<dir>"), the case's <system-out>
// the same as readable lines. Bad input writes no report at all (exit 2).
#pragma once

#include "metrics/parity_gate.h"
#include "report/junit.h"

namespace mpverify::report {

JUnitTestSuite gate_junit_suite(const metrics::GateResult& result, double time_seconds);

}  // namespace mpverify::report
