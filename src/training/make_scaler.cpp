// Strategies by name, with their keys parsed from text (`name.key=value`).
#include <charconv>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "training/loss_scaler.h"

namespace mpverify::training {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

[[noreturn]] void bad_value(const std::string& where, const std::string& value, const std::string& expected) {
  std::string message = where;
  message += ": '";
  message += value;
  message += "' is not ";
  message += expected;
  throw std::invalid_argument(message);
}

// A decimal number, or 2^k for a power of two (scales are mostly those).
double parse_number(const std::string& where, const std::string& text) {
  double v = 0;
  if (text.starts_with("2^")) {
    int k = 0;
    const auto [end, ec] = std::from_chars(text.data() + 2, text.data() + text.size(), k);
    if (ec != std::errc() || end != text.data() + text.size() || text.size() == 2)
      bad_value(where, text, "a number (decimal or 2^k)");
    return std::ldexp(1.0, k);
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad_value(where, text, "a number (decimal or 2^k)");
  return v;
}

int parse_count(const std::string& where, const std::string& text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < 1)
    bad_value(where, text, "a positive integer");
  return v;
}

bool parse_bool(const std::string& where, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  bad_value(where, text, "a boolean (true, false)");
}

float parse_fp8(const std::string& where, const std::string& text) {
  if (text == "e4m3") return kE4M3Max;
  if (text == "e5m2") return kE5M2Max;
  bad_value(where, text, "an FP8 format (e4m3, e5m2)");
}

// One strategy's keys: each parses its text into the strategy's config.
struct Key {
  std::string name;
  std::function<void(const std::string& where, const std::string& value)> set;
};

void apply(const std::string& strategy, const std::vector<Key>& keys, const ScalerOptions& options) {
  for (const auto& [key, value] : options) {
    const Key* found = nullptr;
    for (const Key& k : keys)
      if (k.name == key) found = &k;
    if (found == nullptr) {
      std::vector<std::string> names;
      for (const Key& k : keys) names.push_back(k.name);
      throw std::invalid_argument(strategy + ": unknown key '" + key + "' (keys: " +
                                  (names.empty() ? std::string("none") : join(names)) + ")");
    }
    found->set(strategy + "." + key, value);
  }
}

template <class T>
Key number(const std::string& name, T& field) {
  return {name, [&field](const std::string& w, const std::string& v) { field = static_cast<T>(parse_number(w, v)); }};
}
Key count(const std::string& name, int& field) {
  return {name, [&field](const std::string& w, const std::string& v) { field = parse_count(w, v); }};
}
Key boolean(const std::string& name, bool& field) {
  return {name, [&field](const std::string& w, const std::string& v) { field = parse_bool(w, v); }};
}
Key fp8(float& field) {
  return {"fp8", [&field](const std::string& w, const std::string& v) { field = parse_fp8(w, v); }};
}

std::unique_ptr<Scaler> make(const std::string& name, const ScalerOptions& options) {
  if (name == "none" || name == "static") {
    double scale = name == "none" ? 1.0 : 0.0;
    bool skip = true;
    std::vector<Key> keys{boolean("skip", skip)};
    if (name == "static") keys.push_back(number("scale", scale));
    apply(name, keys, options);
    if (name == "static" && !options.contains("scale"))
      throw std::invalid_argument("static: give its scale, e.g. static.scale=2^7 (MXNet suggests 64..512)");
    return std::make_unique<StaticScaler>(scale, skip);
  }
  if (name == "torch") {
    TorchConfig c;
    apply(name,
          {number("init", c.init_scale), number("growth", c.growth_factor), number("backoff", c.backoff_factor),
           count("interval", c.growth_interval)},
          options);
    return std::make_unique<TorchScaler>(c);
  }
  if (name == "apex") {
    ApexConfig c;
    apply(name,
          {number("init", c.init_scale), count("interval", c.scale_window), number("min", c.min_scale),
           number("max", c.max_scale)},
          options);
    return std::make_unique<ApexScaler>(c);
  }
  if (name == "keras") {
    KerasConfig c;
    const Key variant{"variant", [&c](const std::string& w, const std::string& v) {
                        if (v == "keras3") c.variant = KerasVariant::keras3;
                        else if (v == "tf-keras") c.variant = KerasVariant::tf_keras;
                        else bad_value(w, v, "a variant (keras3, tf-keras)");
                      }};
    apply(name, {variant, number("init", c.init_scale), count("interval", c.growth_steps)}, options);
    return std::make_unique<KerasScaler>(c);
  }
  if (name == "deepspeed") {
    DeepSpeedConfig c;
    // The preset first, whatever the order of the keys: the others refine it.
    if (const auto it = options.find("preset"); it != options.end()) {
      if (it->second == "no-keys") c = DeepSpeedConfig::config_without_keys();
      else if (it->second != "config") bad_value("deepspeed.preset", it->second, "a preset (config, no-keys)");
    }
    const Key preset{"preset", [](const std::string&, const std::string&) {}};
    apply(name,
          {preset, number("init", c.init_scale), count("interval", c.scale_window), count("hysteresis", c.hysteresis),
           number("min", c.min_scale), boolean("consecutive_hysteresis", c.consecutive_hysteresis),
           boolean("raise_error_at_min_scale", c.raise_error_at_min_scale)},
          options);
    return std::make_unique<DeepSpeedScaler>(c);
  }
  if (name == "megatron") {
    MegatronConfig c;
    apply(name,
          {number("init", c.init_scale), number("min", c.min_scale), count("interval", c.growth_interval),
           count("hysteresis", c.hysteresis), number("growth", c.growth_factor), number("backoff", c.backoff_factor)},
          options);
    return std::make_unique<MegatronScaler>(c);
  }
  if (name == "delayed") {
    DelayedConfig c;
    const Key algo{"algo", [&c](const std::string& w, const std::string& v) {
                     if (v == "max") c.algo = AmaxAlgo::max;
                     else if (v == "most_recent") c.algo = AmaxAlgo::most_recent;
                     else bad_value(w, v, "an amax algorithm (max, most_recent)");
                   }};
    apply(name, {fp8(c.fp8_max), number("margin", c.margin), count("history", c.history), algo}, options);
    return std::make_unique<DelayedScaler>(c);
  }
  if (name == "current") {
    CurrentConfig c;
    apply(name, {fp8(c.fp8_max), boolean("pow2", c.pow2), number("epsilon", c.epsilon)}, options);
    if (!(c.epsilon >= 0)) throw std::invalid_argument("current.epsilon must be >= 0");
    return std::make_unique<CurrentScaler>(c);
  }
  if (name == "mxfp8") {
    float fp8_max = kE4M3Max;
    apply(name, {fp8(fp8_max)}, options);
    return std::make_unique<Mxfp8Scaler>(fp8_max);
  }
  throw std::invalid_argument("unknown strategy '" + name + "' (strategies: " + join(scaler_names()) + ")");
}

}  // namespace

std::vector<std::string> scaler_names() {
  return {"none", "static", "torch", "apex", "keras", "deepspeed", "megatron", "delayed", "current", "mxfp8"};
}

std::unique_ptr<Scaler> make_scaler(std::string_view name, const ScalerOptions& options) {
  return make(std::string(name), options);
}

ScalerOption parse_scaler_option(std::string_view text) {
  const std::size_t dot = text.find('.'), eq = text.find('=');
  if (dot == std::string_view::npos || eq == std::string_view::npos || dot == 0 || eq < dot + 2) {
    std::string message = "'";
    message += text;
    message += "' is not STRATEGY.KEY=VALUE (e.g. deepspeed.hysteresis=2)";
    throw std::invalid_argument(message);
  }
  return {std::string(text.substr(0, dot)), std::string(text.substr(dot + 1, eq - dot - 1)),
          std::string(text.substr(eq + 1))};
}

}  // namespace mpverify::training
