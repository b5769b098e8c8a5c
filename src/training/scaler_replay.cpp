#include "training/scaler_replay.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace mpverify::training {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw TraceError("line " + std::to_string(line) + ": " + what);
}

}  // namespace

std::vector<TraceStep> parse_trace(std::istream& in) {
  std::vector<TraceStep> trace;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const std::size_t last = line.find_last_not_of(" \t\r");
    const std::string token = line.substr(first, last - first + 1);
    double v = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec != std::errc() || end != token.data() + token.size())
      fail(n, "'" + token + "' is not 0, 1 or an amax (a number >= 0, inf or nan)");
    if (v < 0 || std::signbit(v)) fail(n, "'" + token + "' is negative; an amax is a max |x| (>= 0, inf or nan)");
    TraceStep t;
    t.line = n;
    t.value = v;
    trace.push_back(t);
  }
  return trace;
}

namespace {

// One step of the strategy on what its drive reads from the trace.
StepResult step_on(Scaler& scaler, const TraceStep& t, const std::string& name) {
  if (scaler.drive() == Drive::found_inf) {
    if (!t.bare && !t.found_inf)
      fail(t.line, "strategy '" + name + "' reads found_inf, and this step has none (give a found_inf column)");
    const double v = t.bare ? t.value : *t.found_inf;
    if (v != 0 && v != 1) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", v);
      fail(t.line, "strategy '" + name + "' reads found_inf flags (0 or 1), not " + text);
    }
    return static_cast<LossScaler&>(scaler).step(v == 1);
  }
  if (!t.bare && !t.amax)
    fail(t.line, "strategy '" + name + "' reads an amax, and this step has none (give an amax column)");
  return static_cast<AmaxScaler&>(scaler).step(static_cast<float>(t.bare ? t.value : *t.amax));
}

// Does the rule's scale print as the recorded one?
bool same_scale(double expected, const TraceStep& t) {
  switch (t.scale_precision) {
    case ScalePrecision::one_decimal: {
      char text[400];
      std::snprintf(text, sizeof text, "%.1f", expected);
      return std::strtod(text, nullptr) == *t.scale;
    }
    case ScalePrecision::integer_part:
      return std::trunc(expected) == *t.scale;
    case ScalePrecision::exact:
      break;
  }
  return expected == *t.scale || (std::isnan(expected) && std::isnan(*t.scale));
}

}  // namespace

CheckResult check_trace(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name) {
  const bool any_scale = std::any_of(trace.begin(), trace.end(), [](const TraceStep& t) { return t.scale.has_value(); });
  if (!any_scale)
    throw TraceError("no step records a scale: a check needs the scale each step ran with (a scale column, "
                     "Megatron's 'loss scale:' or DeepSpeed's 'Attempted loss scale:')");
  CheckResult c;
  for (std::size_t k = 0; k < trace.size(); ++k) {
    const StepResult s = step_on(scaler, trace[k], name);
    c.steps += 1;
    if (trace[k].scale) {
      c.steps_compared += 1;
      if (!same_scale(s.scale_used, trace[k])) {
        c.first_difference = CheckResult::Difference{k, trace[k], s.scale_used, false};
        return c;
      }
    }
    if (s.aborted && k + 1 < trace.size()) {
      c.first_difference = CheckResult::Difference{k, trace[k], s.scale_used, true};
      return c;
    }
  }
  return c;
}

Replay replay(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name) {
  Replay r;
  const double lowest = scaler.floor();
  for (std::size_t k = 0; k < trace.size(); ++k) {
    const StepResult s = step_on(scaler, trace[k], name);
    r.steps.push_back({k, s.scale_used, s.skipped, s.aborted});
    r.skipped_steps += s.skipped ? 1 : 0;
    r.steps_at_min += lowest > 0 && s.scale_used == lowest ? 1 : 0;
    if (s.aborted) {
      r.aborted_at = k;
      break;
    }
  }
  r.final_scale = scaler.scale();
  return r;
}

}  // namespace mpverify::training
