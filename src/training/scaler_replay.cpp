#include "training/scaler_replay.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>

#include "training/scaled_range.h"

namespace mpverify::training {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw TraceError("line " + std::to_string(line) + ": " + what);
}

}  // namespace

std::vector<TraceStep> parse_trace(std::istream& in) {
  std::ostringstream whole;
  if (in.peek() != std::char_traits<char>::eof()) whole << in.rdbuf();
  return parse_trace_text(std::move(whole).str());
}

std::vector<TraceStep> parse_trace_text(std::string_view text) {
  std::vector<TraceStep> trace;
  // At most a step a line: reserved once, so the steps are never held twice by a reallocation.
  trace.reserve(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  std::size_t begin = 0;
  for (int n = 1; begin < text.size(); ++n) {
    const std::size_t newline = text.find('\n', begin);
    std::string_view line = text.substr(begin, newline == std::string_view::npos ? std::string_view::npos : newline - begin);
    begin = newline == std::string_view::npos ? text.size() : newline + 1;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    const std::size_t last = line.find_last_not_of(" \t\r");
    const std::string token(line.substr(first, last - first + 1));
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

struct StepOutcome {
  StepResult result;
  bool overflow = false;
  std::optional<bool> flushed, underflow;
};

[[noreturn]] void missing(const TraceStep& t, const std::string& name, const std::string& what) {
  fail(t.line, "strategy '" + name + "' " + what);
}

// The recorded found_inf flag a found_inf-driven strategy reads.
bool recorded_flag(const TraceStep& t, const std::string& name) {
  if (!t.bare && !t.found_inf)
    missing(t, name, "reads found_inf, and this step has none (give a found_inf column)");
  const double v = t.bare ? t.value : *t.found_inf;
  if (v != 0 && v != 1) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    fail(t.line, "strategy '" + name + "' reads found_inf flags (0 or 1), not " + text);
  }
  return v == 1;
}

// The smallest nonzero element flushes at this multiplier (absent without an amin).
std::optional<bool> amin_flushes(const TraceStep& t, const formats::Format& format, double multiplier,
                                 ScaledProduct product) {
  if (!t.amin) return std::nullopt;
  return scaled_fit(format, *t.amin, multiplier, product).zero;
}

StepOutcome loss_step(LossScaler& scaler, const TraceStep& t, const std::string& name, const ReplayMode& mode) {
  StepOutcome o;
  if (mode.overflow_from == OverflowSource::found_inf) {
    o.overflow = recorded_flag(t, name);
  } else {
    if (!t.bare && !t.amax)
      missing(t, name,
              "decides overflow from the gradient amax (the trace has an amax column), and this step has none: give "
              "every step an amax, or --overflow-from found_inf");
    const double amax = t.bare ? t.value : *t.amax;
    const formats::Format& format = grad_format(mode.grad_format);
    // The scale this step runs with: every loss scaler reports scale() before its update.
    const ScaledFit fit = scaled_fit(format, amax, scaler.scale(), ScaledProduct::exact);
    o.overflow = fit.overflow;
    o.flushed = fit.zero;
    o.underflow = amin_flushes(t, format, scaler.scale(), ScaledProduct::exact);
  }
  o.result = scaler.step(o.overflow);
  return o;
}

StepOutcome amax_step(AmaxScaler& scaler, const TraceStep& t, const std::string& name) {
  if (!t.bare && !t.amax) missing(t, name, "reads an amax, and this step has none (give an amax column)");
  const float amax = static_cast<float>(t.bare ? t.value : *t.amax);
  StepOutcome o;
  o.result = scaler.step(amax);
  // An encoding scale: TE's cast computes fl32(x * s), then converts. A
  // decoding (E8M0) scale X = 2^k: x / X is exact.
  const double s = o.result.scale_used;
  const double multiplier = scaler.decodes() ? 1.0 / s : s;
  const ScaledProduct product = scaler.decodes() ? ScaledProduct::exact : ScaledProduct::fp32;
  const formats::Format& format = fp8_format(scaler);
  const ScaledFit fit = scaled_fit(format, amax, multiplier, product);
  o.overflow = fit.overflow;
  o.flushed = fit.zero;
  o.underflow = amin_flushes(t, format, multiplier, product);
  return o;
}

// One step of the strategy on what its drive reads from the trace.
StepOutcome step_on(Scaler& scaler, const TraceStep& t, const std::string& name, const ReplayMode& mode) {
  if (scaler.drive() == Drive::found_inf) return loss_step(static_cast<LossScaler&>(scaler), t, name, mode);
  return amax_step(static_cast<AmaxScaler&>(scaler), t, name);
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

CheckResult check_trace(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name,
                        const ReplayMode& mode) {
  const bool any_scale = std::any_of(trace.begin(), trace.end(), [](const TraceStep& t) { return t.scale.has_value(); });
  if (!any_scale)
    throw TraceError("no step records a scale: a check needs the scale each step ran with (a scale column, "
                     "Megatron's 'loss scale:' or DeepSpeed's 'Attempted loss scale:')");
  CheckResult c;
  for (std::size_t k = 0; k < trace.size(); ++k) {
    const StepResult s = step_on(scaler, trace[k], name, mode).result;
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

Replay replay(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name, const ReplayMode& mode) {
  Replay r;
  const double lowest = scaler.floor();
  if (scaler.drive() == Drive::amax)
    r.range_format = fp8_format(static_cast<const AmaxScaler&>(scaler)).name;
  else if (mode.overflow_from == OverflowSource::amax)
    r.range_format = grad_format_name(mode.grad_format);
  r.steps.reserve(trace.size());
  for (std::size_t k = 0; k < trace.size(); ++k) {
    const StepOutcome o = step_on(scaler, trace[k], name, mode);
    const StepResult& s = o.result;
    r.steps.push_back({k, s.scale_used, s.skipped, s.aborted, trace[k].step, o.overflow, o.flushed, o.underflow});
    r.skipped_steps += s.skipped ? 1 : 0;
    r.steps_at_min += lowest > 0 && s.scale_used == lowest ? 1 : 0;
    r.overflow_steps += o.overflow ? 1 : 0;
    if (o.flushed) r.flush_steps = r.flush_steps.value_or(0) + (*o.flushed ? 1 : 0);
    if (o.underflow) r.underflow_steps = r.underflow_steps.value_or(0) + (*o.underflow ? 1 : 0);
    if (s.aborted) {
      r.aborted_at = k;
      break;
    }
  }
  r.final_scale = scaler.scale();
  return r;
}

std::optional<GradFormat> parse_grad_format(std::string_view name) {
  if (name == "fp16") return GradFormat::fp16;
  if (name == "bf16") return GradFormat::bf16;
  return std::nullopt;
}

std::string grad_format_name(GradFormat format) { return format == GradFormat::bf16 ? "bf16" : "fp16"; }

const formats::Format& grad_format(GradFormat format) {
  static const formats::Format fp16 = formats::parse_format("fp16"), bf16 = formats::parse_format("bf16");
  return format == GradFormat::bf16 ? bf16 : fp16;
}

const formats::Format& fp8_format(const AmaxScaler& scaler) {
  static const formats::Format e4m3 = formats::parse_format("fp8-e4m3"), e5m2 = formats::parse_format("fp8-e5m2");
  return scaler.fp8_max() == kE5M2Max ? e5m2 : e4m3;
}

OverflowSource default_overflow_source(std::span<const TraceStep> trace) {
  const bool amax = std::any_of(trace.begin(), trace.end(), [](const TraceStep& t) { return !t.bare && t.amax; });
  return amax ? OverflowSource::amax : OverflowSource::found_inf;
}

std::vector<std::pair<std::string, std::vector<TraceStep>>> split_by_optimizer(std::vector<TraceStep>&& trace) {
  const bool named = std::any_of(trace.begin(), trace.end(), [](const TraceStep& t) { return t.optimizer.has_value(); });
  // The steps move, never copied (an initializer list would copy them): a trace may hold millions.
  std::vector<std::pair<std::string, std::vector<TraceStep>>> groups;
  if (!named) {
    groups.emplace_back("", std::move(trace));
    return groups;
  }
  std::unordered_map<std::string, std::size_t> index;  // a lookup per row, whatever the number of names
  for (TraceStep& t : trace) {
    if (!t.optimizer)
      fail(t.line, "no optimizer name, while other rows name theirs: every row of a trace with an optimizer column "
                   "needs one");
    const auto [it, added] = index.try_emplace(*t.optimizer, groups.size());
    if (added) groups.push_back({*t.optimizer, {}});
    groups[it->second].second.push_back(std::move(t));
  }
  return groups;
}

std::vector<std::pair<std::string, std::vector<TraceStep>>> split_by_optimizer(std::span<const TraceStep> trace) {
  return split_by_optimizer(std::vector<TraceStep>(trace.begin(), trace.end()));
}

}  // namespace mpverify::training
