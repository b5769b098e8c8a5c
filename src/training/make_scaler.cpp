// Strategies by name, with their keys parsed from text (`name.key=value`).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <tuple>
#include <string>
#include <utility>
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
// A count that sizes memory or a scan per step (delayed.history): bounded, so that a number in a config
// file cannot ask for gigabytes.
Key count_at_most(const std::string& name, int& field, int most) {
  return {name, [&field, most](const std::string& w, const std::string& v) {
            const int n = parse_count(w, v);
            if (n > most) bad_value(w, v, "a positive integer up to " + std::to_string(most));
            field = n;
          }};
}
Key boolean(const std::string& name, bool& field) {
  return {name, [&field](const std::string& w, const std::string& v) { field = parse_bool(w, v); }};
}
Key fp8(float& field) {
  return {"fp8", [&field](const std::string& w, const std::string& v) { field = parse_fp8(w, v); }};
}

using Options = ScalerOptions;

std::unique_ptr<Scaler> make_static(const std::string& name, const Options& options) {
  double scale = name == "none" ? 1.0 : 0.0;
  bool skip = false;
  std::vector<Key> keys{boolean("skip", skip)};
  if (name == "static") keys.push_back(number("scale", scale));
  apply(name, keys, options);
  if (name == "static" && !options.contains("scale"))
    throw std::invalid_argument("static: give its scale, e.g. static.scale=2^7 (MXNet suggests 64..512)");
  return std::make_unique<StaticScaler>(scale, skip);
}

std::unique_ptr<Scaler> make_torch(const std::string& name, const Options& options) {
  TorchConfig c;
  apply(name,
        {number("init", c.init_scale), number("growth", c.growth_factor), number("backoff", c.backoff_factor),
         count("interval", c.growth_interval)},
        options);
  return std::make_unique<TorchScaler>(c);
}

std::unique_ptr<Scaler> make_apex(const std::string& name, const Options& options) {
  ApexConfig c;
  apply(name,
        {number("init", c.init_scale), count("interval", c.scale_window), number("min", c.min_scale),
         number("max", c.max_scale)},
        options);
  return std::make_unique<ApexScaler>(c);
}

std::unique_ptr<Scaler> make_keras(const std::string& name, const Options& options) {
  KerasConfig c;
  const Key variant{"variant", [&c](const std::string& w, const std::string& v) {
                      if (v == "keras3") c.variant = KerasVariant::keras3;
                      else if (v == "tf-keras") c.variant = KerasVariant::tf_keras;
                      else bad_value(w, v, "a variant (keras3, tf-keras)");
                    }};
  apply(name, {variant, number("init", c.init_scale), count("interval", c.growth_steps)}, options);
  return std::make_unique<KerasScaler>(c);
}

// deepspeed.version=X.Y[.Z] (a DeepSpeed release): whether it is older than 0.17.1, whose ZeRO scaler
// changed its growth rule. "latest" is the newest.
bool deepspeed_version_before_0_17_1(const std::string& key, const std::string& text) {
  if (text == "latest") return false;
  int part[3] = {0, 0, 0};
  std::size_t pos = 0;
  for (int i = 0; i < 3 && pos <= text.size(); ++i) {
    const std::size_t dot = std::min(text.find('.', pos), text.size());
    const std::string item = text.substr(pos, dot - pos);
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
      bad_value(key, text, "a DeepSpeed release (e.g. 0.16.9, 0.17.1) or latest");
    part[i] = std::stoi(item);
    pos = dot + 1;
    if (dot == text.size()) break;
  }
  if (pos < text.size()) bad_value(key, text, "a DeepSpeed release (e.g. 0.16.9, 0.17.1) or latest");
  return std::make_tuple(part[0], part[1], part[2]) < std::make_tuple(0, 17, 1);
}

std::unique_ptr<Scaler> make_deepspeed(const std::string& name, const Options& options) {
  DeepSpeedConfig c;
  // The optimizer, then the preset, whatever the order of the keys: the
  // others refine them.
  if (const auto it = options.find("optimizer"); it != options.end()) {
    if (it->second == "fp16") c.optimizer = DeepSpeedOptimizer::fp16;
    else if (it->second != "zero") bad_value("deepspeed.optimizer", it->second, "an optimizer (zero, fp16)");
  }
  if (const auto it = options.find("preset"); it != options.end()) {
    // FP16_Optimizer takes 2^initial_scale_power (16 by default) with or
    // without the keys: only ZeRO's DynamicLossScaler falls back to 2^32.
    if (it->second == "no-keys" && c.optimizer == DeepSpeedOptimizer::zero) {
      c = DeepSpeedConfig::config_without_keys();
    } else if (it->second != "config" && it->second != "no-keys") {
      bad_value("deepspeed.preset", it->second, "a preset (config, no-keys)");
    }
  }
  const auto read_above = [](const std::string&, const std::string&) {};
  const Key optimizer{"optimizer", read_above}, preset{"preset", read_above};
  std::vector<Key> keys{optimizer, preset, number("init", c.init_scale), count("interval", c.scale_window),
                        number("min", c.min_scale)};
  if (c.optimizer == DeepSpeedOptimizer::zero) {
    keys.push_back({"version", [&c](const std::string& key, const std::string& v) {
                      c.growth_before_0_17_1 = deepspeed_version_before_0_17_1(key, v);
                    }});
    keys.push_back(count("hysteresis", c.hysteresis));
    keys.push_back(boolean("consecutive_hysteresis", c.consecutive_hysteresis));
    keys.push_back(boolean("raise_error_at_min_scale", c.raise_error_at_min_scale));
  }
  try {
    apply(name, keys, options);
  } catch (const std::invalid_argument& e) {
    if (c.optimizer == DeepSpeedOptimizer::fp16 && std::string(e.what()).find("unknown key") != std::string::npos)
      throw std::invalid_argument(std::string(e.what()) +
                                  "; FP16_Optimizer (deepspeed.optimizer=fp16) has no hysteresis and never raises");
    throw;
  }
  return std::make_unique<DeepSpeedScaler>(c);
}

std::unique_ptr<Scaler> make_megatron(const std::string& name, const Options& options) {
  MegatronConfig c;
  apply(name,
        {number("init", c.init_scale), number("min", c.min_scale), count("interval", c.growth_interval),
         count("hysteresis", c.hysteresis), number("growth", c.growth_factor), number("backoff", c.backoff_factor)},
        options);
  return std::make_unique<MegatronScaler>(c);
}

std::unique_ptr<Scaler> make_fairseq(const std::string& name, const Options& options) {
  FairseqConfig c;
  apply(name,
        {number("init", c.init_scale), count("interval", c.scale_window), number("tolerance", c.tolerance),
         number("threshold", c.threshold), number("min", c.min_scale)},
        options);
  return std::make_unique<FairseqScaler>(c);
}

std::unique_ptr<Scaler> make_nemo(const std::string& name, const Options& options) {
  NemoConfig c;
  apply(name,
        {number("init", c.init_scale), number("growth", c.growth_factor), number("backoff", c.backoff_factor),
         count("interval", c.growth_interval), count("hysteresis", c.hysteresis)},
        options);
  return std::make_unique<NemoScaler>(c);
}

std::unique_ptr<Scaler> make_delayed(const std::string& name, const Options& options) {
  DelayedConfig c;
  const Key algo{"algo", [&c](const std::string& w, const std::string& v) {
                   if (v == "max") c.algo = AmaxAlgo::max;
                   else if (v == "most_recent") c.algo = AmaxAlgo::most_recent;
                   else bad_value(w, v, "an amax algorithm (max, most_recent)");
                 }};
  const Key kernel{"kernel", [&c](const std::string& w, const std::string& v) {
                     if (v == "bulk") c.kernel = DelayedKernel::bulk;
                     else if (v == "per-tensor") c.kernel = DelayedKernel::per_tensor;
                     else bad_value(w, v, "a kernel (bulk, per-tensor)");
                   }};
  apply(name, {fp8(c.fp8_max), number("margin", c.margin), count_at_most("history", c.history, kMaxDelayedHistory), algo, kernel}, options);
  return std::make_unique<DelayedScaler>(c);
}

std::unique_ptr<Scaler> make_current(const std::string& name, const Options& options) {
  CurrentConfig c;
  apply(name, {fp8(c.fp8_max), boolean("pow2", c.pow2), number("epsilon", c.epsilon)}, options);
  if (!(c.epsilon >= 0)) throw std::invalid_argument("current.epsilon must be >= 0");
  return std::make_unique<CurrentScaler>(c);
}

std::unique_ptr<Scaler> make_mxfp8(const std::string& name, const Options& options) {
  float fp8_max = kE4M3Max;
  apply(name, {fp8(fp8_max)}, options);
  return std::make_unique<Mxfp8Scaler>(fp8_max);
}

using Maker = std::unique_ptr<Scaler> (*)(const std::string&, const Options&);

// In the order scaler_names() lists them.
const std::vector<std::pair<std::string, Maker>>& makers() {
  static const std::vector<std::pair<std::string, Maker>> table{
      {"none", make_static},         {"static", make_static},     {"torch", make_torch},
      {"apex", make_apex},           {"keras", make_keras},       {"deepspeed", make_deepspeed},
      {"megatron", make_megatron},   {"fairseq", make_fairseq},   {"nemo", make_nemo},
      {"delayed", make_delayed},     {"current", make_current},   {"mxfp8", make_mxfp8}};
  return table;
}

}  // namespace

std::vector<std::string> scaler_names() {
  std::vector<std::string> names;
  for (const auto& [name, maker] : makers()) names.push_back(name);
  return names;
}

std::unique_ptr<Scaler> make_scaler(std::string_view name, const ScalerOptions& options) {
  for (const auto& [known, maker] : makers())
    if (known == name) return maker(known, options);
  throw std::invalid_argument("unknown strategy '" + std::string(name) + "' (strategies: " + join(scaler_names()) +
                              ")");
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
