#include "cli/ops/op_common.h"

#include <cmath>
#include <sstream>

#include "cli/commands.h"
#include "emu/quantize.h"
#include "gpu/device.h"

namespace mpverify::cli::ops {

KeyValues parse_key_values(const std::string& text, const std::string& option) {
  KeyValues out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError(option + " '" + text + "': expected KEY=VALUE pairs separated by commas, got '" + item + "'");
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

void check_keys(const KeyValues& kv, std::initializer_list<const char*> known, const std::string& option) {
  for (const auto& [k, v] : kv) {
    bool ok = false;
    std::string list;
    for (const char* n : known) {
      ok |= k == n;
      if (!list.empty()) list += ", ";
      list += n;
    }
    if (!ok) throw UsageError(option + ": unknown key '" + k + "' (known: " + list + ")");
  }
}

int whole_number(const KeyValues& kv, const std::string& key, const std::string& option, int fallback) {
  const auto it = kv.find(key);
  if (it == kv.end()) {
    if (fallback >= 0) return fallback;
    throw UsageError(option + ": missing " + key + "=N");
  }
  try {
    std::size_t used = 0;
    const long v = std::stol(it->second, &used);
    if (used != it->second.size() || v < 0 || v > (1 << 24)) throw std::out_of_range("");
    return static_cast<int>(v);
  } catch (const std::exception&) {
    throw UsageError(option + ": " + key + "=" + it->second + " is not a whole number in 0..16777216");
  }
}

double real_number(const KeyValues& kv, const std::string& key, const std::string& option, double fallback) {
  const auto it = kv.find(key);
  if (it == kv.end()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v))
    throw UsageError(option + ": " + key + "=" + it->second + " is not a finite number");
  return v;
}

formats::Format format_option(const KeyValues& kv, const std::string& key, const std::string& option,
                              const formats::Format& fallback) {
  const auto it = kv.find(key);
  if (it == kv.end()) return fallback;
  try {
    return formats::parse_format(it->second);
  } catch (const std::exception& e) {
    throw UsageError(option + ": " + key + "=" + it->second + ": " + e.what());
  }
}

void size_outputs(std::vector<Side>& sides, std::initializer_list<std::size_t> sizes) {
  for (Side& s : sides) {
    s.out.clear();
    for (std::size_t n : sizes) s.out.emplace_back(n, 0.0f);
  }
}

void run_gpu_side(Side& side, const std::string& unsupported, const std::function<void()>& run) {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) {
    side.reason = reason;
  } else if (!unsupported.empty()) {
    side.reason = unsupported;
  } else {
    run();
    side.ran = true;
  }
}

std::vector<float> normal_inputs(std::size_t n, std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(normal(rng));
  return v;
}

std::vector<float> in_format(std::vector<float> v, const formats::Format& f) {
  emu::quantize(v, v, emu::QuantizeSpec{f});
  return v;
}

std::vector<float> normal_inputs_in(const formats::Format& f, std::size_t n, std::mt19937_64& rng, double scale) {
  return in_format(normal_inputs(n, rng, scale), f);
}

}  // namespace mpverify::cli::ops
