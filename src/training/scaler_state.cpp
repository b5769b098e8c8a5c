#include "training/scaler_state.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

namespace mpverify::training {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

// A number (a scale or a factor): Megatron's scale is a one-element tensor, written [x].
double number_field(const std::string& where, const json& v) {
  const json& x = v.is_array() && v.size() == 1 ? v[0] : v;
  if (!x.is_number()) bad(where, "expected a number, got " + v.dump());
  const double d = x.get<double>();
  if (!std::isfinite(d) || d <= 0) bad(where, "expected a finite number > 0, got " + v.dump());
  return d;
}

// The most an iteration counter (DeepSpeed's cur_iter) may hold: far beyond any run, and small enough that
// counting on from it cannot overflow.
constexpr std::int64_t kMostIterations = std::int64_t{1} << 40;
// The bounds of a hysteresis counter, held in an int that counts down once per overflow.
constexpr std::int64_t kHysteresisBound = std::int64_t{1} << 30;

// An integer in [least, most]. JSON integers beyond int64 (2^64 - 1 is stored unsigned) are refused by
// their text, never wrapped.
std::int64_t integer_field(const std::string& where, const json& v, std::int64_t least, std::int64_t most) {
  const auto range = [&] { return "expected an integer from " + std::to_string(least) + " to " +
                                  std::to_string(most) + ", got " + v.dump(); };
  if (!v.is_number_integer()) bad(where, "expected an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(most)) bad(where, range());
  const std::int64_t n = v.get<std::int64_t>();
  if (n < least || n > most) bad(where, range());
  return n;
}

std::string number_text(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// The state's fields: those that set an option (by the strategy's key), the rest read after construction.
struct Fields {
  std::string strategy;
  const json& state;
  std::map<std::string, std::string> option_of;  // field -> option key
  std::vector<std::string> counters;               // read with counter()

  void check_names() const {
    if (!state.is_object()) bad(strategy, "the saved state must be an object of fields, got " + state.dump());
    for (const auto& [key, value] : state.items()) {
      if (option_of.contains(key) || std::find(counters.begin(), counters.end(), key) != counters.end()) continue;
      std::string known;
      for (const auto& [f, o] : option_of) known += (known.empty() ? "" : ", ") + f;
      for (const auto& f : counters) known += ", " + f;
      bad(strategy, "unknown state field '" + key + "' (fields: " + known + ")");
    }
  }
  ScalerOptions options(ScalerOptions base) const {
    for (const auto& [field, key] : option_of) {
      if (!state.contains(field)) continue;
      const std::string where = strategy + " state " + field;
      const json& v = state[field];
      base[key] = key == "interval" ? std::to_string(integer_field(where, v, 1, std::numeric_limits<int>::max()))
                                    : number_text(number_field(where, v));
    }
    return base;
  }
  std::optional<std::int64_t> counter(const std::string& field, std::int64_t least, std::int64_t most) const {
    if (!state.contains(field)) return std::nullopt;
    return integer_field(strategy + " state " + field, state[field], least, most);
  }
  // A growth tracker restarts at 0 on reaching the interval, so a saved one lies below it; above, the
  // framework's `tracker + 1 == interval` would never hold again (and tracker + 1 could overflow).
  std::optional<std::int64_t> growth_tracker(const std::string& field, int interval) const {
    return counter(field, 0, interval - 1);
  }
};

std::unique_ptr<Scaler> torch_like(const std::string& name, const ScalerOptions& options, const json& state) {
  Fields f{name, state, {{"scale", "init"}, {"growth_factor", "growth"}, {"backoff_factor", "backoff"},
                         {"growth_interval", "interval"}}, {"_growth_tracker"}};
  if (name == "nemo") f.counters.push_back("_hysteresis_tracker");
  f.check_names();
  auto scaler = make_scaler(name, f.options(options));
  if (name == "torch") {
    auto& t = static_cast<TorchScaler&>(*scaler);
    const auto tracker = f.growth_tracker("_growth_tracker", t.growth_interval());
    t.restore(static_cast<int>(tracker.value_or(t.growth_tracker())));
  } else {
    auto& n = static_cast<NemoScaler&>(*scaler);
    const auto tracker = f.growth_tracker("_growth_tracker", n.growth_interval());
    // The hysteresis counter can be <= 0 after overflows (it backs off while <= 0).
    const auto h = f.counter("_hysteresis_tracker", -kHysteresisBound, kHysteresisBound);
    n.restore(static_cast<int>(tracker.value_or(n.growth_tracker())), static_cast<int>(h.value_or(n.hysteresis())));
  }
  return scaler;
}

std::unique_ptr<Scaler> megatron(const std::string& name, const ScalerOptions& options, const json& state) {
  Fields f{name, state, {{"scale", "init"}}, {"growth_tracker", "hysteresis_tracker"}};
  f.check_names();
  auto scaler = make_scaler(name, f.options(options));
  auto& m = static_cast<MegatronScaler&>(*scaler);
  const auto tracker = f.growth_tracker("growth_tracker", m.growth_interval());
  const auto h = f.counter("hysteresis_tracker", -kHysteresisBound, kHysteresisBound);
  m.restore(static_cast<int>(tracker.value_or(m.growth_tracker())), static_cast<int>(h.value_or(m.hysteresis())));
  return scaler;
}

std::unique_ptr<Scaler> deepspeed(const std::string& name, const ScalerOptions& options, const json& state) {
  Fields f{name, state, {{"cur_scale", "init"}}, {"cur_iter", "last_overflow_iter", "cur_hysteresis"}};
  f.check_names();
  auto scaler = make_scaler(name, f.options(options));
  auto& d = static_cast<DeepSpeedScaler&>(*scaler);
  if (d.config().optimizer == DeepSpeedOptimizer::fp16 && state.contains("cur_hysteresis"))
    bad(name, "state field 'cur_hysteresis': FP16_Optimizer (deepspeed.optimizer=fp16) has no hysteresis");
  const auto iteration = f.counter("cur_iter", 0, kMostIterations);
  const auto last = f.counter("last_overflow_iter", -1, kMostIterations);
  const auto h = f.counter("cur_hysteresis", 1, kHysteresisBound);
  const std::int64_t it = iteration.value_or(d.iteration()), lo = last.value_or(d.last_overflow_iteration());
  if (lo >= it) bad(name, "state: last_overflow_iter (" + std::to_string(lo) + ") must be below cur_iter (" +
                              std::to_string(it) + "): cur_iter counts the updates done");
  d.restore(it, lo, static_cast<int>(h.value_or(d.hysteresis())));
  return scaler;
}

}  // namespace

std::vector<std::string> strategies_with_state() { return {"torch", "nemo", "megatron", "deepspeed"}; }

std::unique_ptr<Scaler> make_scaler_from_state(std::string_view name, const ScalerOptions& options,
                                               const nlohmann::json& state) {
  const std::string n(name);
  if (n == "torch" || n == "nemo") return torch_like(n, options, state);
  if (n == "megatron") return megatron(n, options, state);
  if (n == "deepspeed") return deepspeed(n, options, state);
  std::string known;
  for (const auto& s : strategies_with_state()) known += (known.empty() ? "" : ", ") + s;
  throw std::invalid_argument(n + ": no saved state is known for it (strategies with a state: " + known + ")");
}

}  // namespace mpverify::training
