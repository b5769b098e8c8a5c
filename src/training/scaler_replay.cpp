#include "training/scaler_replay.h"

#include <charconv>
#include <cmath>
#include <cstdio>
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
    trace.push_back({n, v});
  }
  return trace;
}

Replay replay(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name) {
  Replay r;
  const double lowest = scaler.floor();
  for (std::size_t k = 0; k < trace.size(); ++k) {
    StepResult s;
    if (scaler.drive() == Drive::found_inf) {
      const double v = trace[k].value;
      if (v != 0 && v != 1) {
        char text[32];
        std::snprintf(text, sizeof text, "%.17g", v);
        fail(trace[k].line, "strategy '" + name + "' reads found_inf flags (0 or 1), not " + text);
      }
      s = static_cast<LossScaler&>(scaler).step(v == 1);
    } else {
      s = static_cast<AmaxScaler&>(scaler).step(static_cast<float>(trace[k].value));
    }
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
