#include "compare/run_comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace mpverify::compare {

namespace {

using nlohmann::json;

// Where a record came from, for messages: "<run>/steps.jsonl line 12".
struct Source {
  std::string file;
  std::size_t index = 0;

  [[noreturn]] void fail(const std::string& what) const {
    std::string message = file;
    message += " line ";
    message += std::to_string(index + 1);
    message += ": ";
    message += what;
    throw std::invalid_argument(message);
  }
};

const json& member(const json& record, const char* key, const Source& at) {
  if (!record.is_object()) at.fail(std::string("expected a JSON object, got ") + record.type_name());
  const auto it = record.find(key);
  if (it == record.end()) {
    std::string what = "missing key \"";
    what += key;
    what += "\"";
    at.fail(what);
  }
  return *it;
}

// A number of the logs: nullopt for null (how the run log writes a
// non-finite value); the strings "nan", "inf", "-inf" as those values.
std::optional<double> number(const json& record, const char* key, const Source& at) {
  const json& v = member(record, key, at);
  if (v.is_null()) return std::nullopt;
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& text = v.get_ref<const std::string&>();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
  }
  std::string what = "\"";
  what += key;
  what += "\" must be a number or null, got ";
  what += v.dump();
  at.fail(what);
}

// A number that a record may leave out: nullopt when the key is absent.
std::optional<double> optional_number(const json& record, const char* key, const Source& at) {
  if (record.is_object() && !record.contains(key)) return std::nullopt;
  return number(record, key, at);
}

// nullopt for every non-finite value: what StepComparison and
// TensorComparison mean by an absent number.
std::optional<double> finite(std::optional<double> v) {
  if (v && std::isfinite(*v)) return v;
  return std::nullopt;
}

std::int64_t step_number(const json& record, const Source& at) {
  const json& v = member(record, "step", at);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t{INT64_MAX}) ||
      v.get<std::int64_t>() < 0)
    at.fail("\"step\" must be an integer >= 0, got " + v.dump());
  return v.get<std::int64_t>();
}

std::string text(const json& record, const char* key, const Source& at, bool required) {
  if (!required && (!record.is_object() || !record.contains(key))) return "";
  const json& v = member(record, key, at);
  if (!v.is_string()) {
    std::string what = "\"";
    what += key;
    what += "\" must be a string, got ";
    what += v.dump();
    at.fail(what);
  }
  return v.get<std::string>();
}

struct Step {
  std::int64_t step = 0;
  std::optional<double> loss;  // nullopt: non-finite
  std::optional<double> scale, underflow_rate, lost_update_rate;
  bool skipped = false;
};

// Every record of a run, checked, keyed by step.
std::map<std::int64_t, Step> read_steps(const RunRecords& run, const std::string& loss_key) {
  std::map<std::int64_t, Step> steps;
  std::map<std::int64_t, std::size_t> line_of;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const Source at{run.name + "/steps.jsonl", i};
    const json& r = run.steps[i];
    Step s;
    s.step = step_number(r, at);
    if (!r.contains(loss_key)) {
      std::string what = "missing key \"";
      what += loss_key;
      what += "\" (the loss compared; for a GAN run name loss_d or loss_g with --loss-key)";
      at.fail(what);
    }
    s.loss = finite(number(r, loss_key.c_str(), at));
    s.scale = finite(number(r, "scale", at));
    s.underflow_rate = finite(optional_number(r, "underflow_rate", at));  // absent on a step not recorded
    s.lost_update_rate = finite(optional_number(r, "lost_update_rate", at));
    const json& skipped = member(r, "skipped", at);
    if (!skipped.is_boolean()) at.fail("\"skipped\" must be true or false, got " + skipped.dump());
    s.skipped = skipped.get<bool>();
    if (const auto [it, added] = line_of.emplace(s.step, i); !added)
      at.fail("step " + std::to_string(s.step) + " appears twice (also on line " + std::to_string(it->second + 1) +
              "); a run directory holds one run");
    steps.emplace(s.step, s);
  }
  return steps;
}

std::string pick_loss_key(const RunRecords& a, const RunRecords& b, const std::string& asked) {
  if (!asked.empty()) return asked;
  auto first_has = [](const RunRecords& r, const char* key) {
    return !r.steps.empty() && r.steps.front().is_object() && r.steps.front().contains(key);
  };
  if (first_has(a, "loss") && first_has(b, "loss")) return "loss";
  if (first_has(a, "loss_g") && first_has(b, "loss_g")) return "loss_g";
  return "loss";
}

struct TensorRecord {
  std::string role;
  std::optional<double> underflow_to_zero_rate, overflow_rate;
  double headroom_log2 = 0;  // +inf for null
  std::optional<double> norm;
};
using TensorKey = std::tuple<std::string, std::string, std::string>;  // layer, tensor, pass
using TensorRecords = std::map<TensorKey, std::map<std::int64_t, TensorRecord>>;

TensorRecords read_tensors(const RunRecords& run) {
  TensorRecords tensors;
  std::map<std::pair<TensorKey, std::int64_t>, std::size_t> line_of;
  for (std::size_t i = 0; i < run.tensors->size(); ++i) {
    const Source at{run.name + "/tensors.jsonl", i};
    const json& r = (*run.tensors)[i];
    const std::int64_t step = step_number(r, at);
    TensorKey key{text(r, "layer", at, true), text(r, "tensor", at, true), text(r, "pass", at, true)};
    TensorRecord t;
    t.role = text(r, "role", at, false);
    t.underflow_to_zero_rate = finite(number(r, "underflow_to_zero_rate", at));
    t.overflow_rate = finite(number(r, "overflow_rate", at));
    t.headroom_log2 = number(r, "headroom_log2", at).value_or(std::numeric_limits<double>::infinity());
    t.norm = finite(number(r, "norm", at));
    if (const auto [it, added] = line_of.emplace(std::pair{key, step}, i); !added)
      at.fail("layer \"" + std::get<0>(key) + "\" tensor \"" + std::get<1>(key) + "\" pass \"" + std::get<2>(key) +
              "\" at step " + std::to_string(step) + " appears twice (also on line " + std::to_string(it->second + 1) +
              ")");
    tensors[key].emplace(step, std::move(t));
  }
  return tensors;
}

// Accumulates a mean, a max or a min over the finite values offered.
struct Mean {
  double sum = 0;
  std::size_t n = 0;
  void add(std::optional<double> v) {
    if (v) sum += *v, ++n;
  }
  std::optional<double> value() const { return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt; }
};
struct Max {
  std::optional<double> v;
  void add(std::optional<double> x) {
    if (x && (!v || *x > *v)) v = x;
  }
};
struct Min {
  std::optional<double> v;
  void add(double x) {  // +inf (null headroom) is never a minimum
    if (std::isfinite(x) && (!v || x < *v))
      v = x;
    else if (x == -std::numeric_limits<double>::infinity())
      v = x;
  }
};

std::vector<TensorComparison> compare_tensors(const TensorRecords& a, const TensorRecords& b, std::size_t& only_a,
                                              std::size_t& only_b) {
  std::vector<TensorComparison> out;
  std::size_t compared = 0;
  for (const auto& [key, steps_a] : a) {
    const auto other = b.find(key);
    if (other == b.end()) continue;
    const auto& steps_b = other->second;
    TensorComparison t;
    std::tie(t.layer, t.tensor, t.pass) = key;
    Mean underflow_a, underflow_b;
    Max overflow_a, overflow_b;
    Min headroom_a, headroom_b;
    const TensorRecord *last_a = nullptr, *last_b = nullptr;
    for (const auto& [step, ra] : steps_a) {
      const auto rb = steps_b.find(step);
      if (rb == steps_b.end()) continue;
      ++t.common_steps;
      t.last_common_step = step;
      last_a = &ra;
      last_b = &rb->second;
      underflow_a.add(ra.underflow_to_zero_rate);
      underflow_b.add(rb->second.underflow_to_zero_rate);
      overflow_a.add(ra.overflow_rate);
      overflow_b.add(rb->second.overflow_rate);
      headroom_a.add(ra.headroom_log2);
      headroom_b.add(rb->second.headroom_log2);
    }
    if (t.common_steps == 0) continue;
    ++compared;
    t.role_a = last_a->role;
    t.role_b = last_b->role;
    t.mean_underflow_to_zero_rate_a = underflow_a.value();
    t.mean_underflow_to_zero_rate_b = underflow_b.value();
    t.max_overflow_rate_a = overflow_a.v;
    t.max_overflow_rate_b = overflow_b.v;
    t.min_headroom_log2_a = headroom_a.v;
    t.min_headroom_log2_b = headroom_b.v;
    t.norm_a = last_a->norm;
    t.norm_b = last_b->norm;
    if (t.norm_a && t.norm_b && *t.norm_a != 0) t.norm_ratio = *t.norm_b / *t.norm_a;
    out.push_back(std::move(t));
  }
  only_a = a.size() - compared;
  only_b = b.size() - compared;
  return out;
}

// summary.config flattened: {"optimizer": {"lr": 0.1}} -> {"optimizer.lr": 0.1}.
void flatten(const json& value, const std::string& prefix, std::map<std::string, json>& out) {
  if (value.is_object() && !value.empty() && !prefix.empty()) {
    for (const auto& [k, v] : value.items()) flatten(v, prefix + "." + k, out);
    return;
  }
  out[prefix] = value;
}

std::map<std::string, json> config_of(const RunRecords& run) {
  const json& summary = *run.summary;
  const std::string file = run.name + "/summary.json";
  if (!summary.is_object()) throw std::invalid_argument(file + ": expected a JSON object, got " + summary.type_name());
  std::map<std::string, json> flat;
  const auto it = summary.find("config");
  if (it == summary.end()) return flat;
  if (!it->is_object())
    throw std::invalid_argument(file + ": \"config\" must be an object of settings, got " + it->dump());
  for (const auto& [k, v] : it->items()) flatten(v, k, flat);
  return flat;
}

std::vector<ConfigDifference> compare_configs(const RunRecords& a, const RunRecords& b) {
  const auto ca = config_of(a), cb = config_of(b);
  std::vector<ConfigDifference> out;
  for (const auto& [k, v] : ca) {
    const auto it = cb.find(k);
    if (it == cb.end())
      out.push_back({k, v, nullptr});
    else if (it->second != v)
      out.push_back({k, v, it->second});
  }
  for (const auto& [k, v] : cb)
    if (!ca.contains(k)) out.push_back({k, nullptr, v});
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.key < y.key; });
  return out;
}

}  // namespace

RunComparison compare_runs(const RunRecords& a, const RunRecords& b, const RunComparisonOptions& options) {
  if (options.loss_tolerance && !(std::isfinite(*options.loss_tolerance) && *options.loss_tolerance >= 0))
    throw std::invalid_argument("loss tolerance must be a finite number >= 0, got " +
                                std::to_string(*options.loss_tolerance));
  RunComparison c;
  c.name_a = a.name;
  c.name_b = b.name;
  RunComparisonSummary& s = c.summary;
  s.loss_key = pick_loss_key(a, b, options.loss_key);
  s.loss_tolerance = options.loss_tolerance;
  const auto steps_a = read_steps(a, s.loss_key);
  const auto steps_b = read_steps(b, s.loss_key);
  s.steps_a = steps_a.size();
  s.steps_b = steps_b.size();

  for (const auto& [step, r] : steps_a) {
    s.skipped_steps_a += r.skipped;
    if (!steps_b.contains(step)) {
      ++s.steps_only_in_a;
      if (!s.first_step_only_in_a) s.first_step_only_in_a = step;
    }
  }
  for (const auto& [step, r] : steps_b) {
    s.skipped_steps_b += r.skipped;
    if (!steps_a.contains(step)) {
      ++s.steps_only_in_b;
      if (!s.first_step_only_in_b) s.first_step_only_in_b = step;
    }
  }

  for (const auto& [step, ra] : steps_a) {
    const auto it = steps_b.find(step);
    if (it == steps_b.end()) continue;
    const Step& rb = it->second;
    StepComparison d;
    d.step = step;
    d.loss_a = ra.loss;
    d.loss_b = rb.loss;
    if (ra.loss && rb.loss) {
      d.loss_difference = *rb.loss - *ra.loss;
      if (*ra.loss != 0)
        d.relative_difference = *d.loss_difference / std::fabs(*ra.loss);
      else if (*rb.loss == 0)
        d.relative_difference = 0.0;
    }
    d.scale_a = ra.scale;
    d.scale_b = rb.scale;
    d.skipped_a = ra.skipped;
    d.skipped_b = rb.skipped;
    d.underflow_rate_a = ra.underflow_rate;
    d.underflow_rate_b = rb.underflow_rate;
    d.lost_update_rate_a = ra.lost_update_rate;
    d.lost_update_rate_b = rb.lost_update_rate;
    if (options.loss_tolerance)
      d.exceeds_tolerance = d.loss_difference ? std::fabs(*d.loss_difference) > *options.loss_tolerance
                                              : ra.loss.has_value() != rb.loss.has_value();
    c.steps.push_back(d);
  }
  s.common_steps = c.steps.size();
  if (c.steps.empty()) {
    std::string message = "no step in common: " + a.name + " has " + std::to_string(steps_a.size()) + " steps";
    if (!steps_a.empty())
      message += " (" + std::to_string(steps_a.begin()->first) + ".." + std::to_string(steps_a.rbegin()->first) + ")";
    message += ", " + b.name + " has " + std::to_string(steps_b.size());
    if (!steps_b.empty())
      message += " (" + std::to_string(steps_b.begin()->first) + ".." + std::to_string(steps_b.rbegin()->first) + ")";
    message += "; compare two runs of the same length (steps are matched by their \"step\" value)";
    throw std::invalid_argument(message);
  }

  s.tail_steps = (c.steps.size() + 9) / 10;
  const std::size_t tail_begin = c.steps.size() - s.tail_steps;
  s.tail_first_step = c.steps[tail_begin].step;
  Mean tail;
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    const StepComparison& d = c.steps[i];
    s.nonfinite_loss_steps_a += !d.loss_a;
    s.nonfinite_loss_steps_b += !d.loss_b;
    if (d.exceeds_tolerance) {
      ++s.steps_exceeding_tolerance;
      if (!s.first_step_exceeding_tolerance) s.first_step_exceeding_tolerance = d.step;
    }
    if (!d.loss_difference) continue;
    ++s.steps_with_loss_difference;
    const double magnitude = std::fabs(*d.loss_difference);
    if (!s.max_abs_loss_difference || magnitude > *s.max_abs_loss_difference) {
      s.max_abs_loss_difference = magnitude;
      s.max_abs_loss_difference_step = d.step;
    }
    if (i >= tail_begin) tail.add(magnitude);
  }
  s.mean_abs_loss_difference_tail = tail.value();

  c.tensors_present_a = a.tensors.has_value();
  c.tensors_present_b = b.tensors.has_value();
  if (a.tensors && b.tensors) {
    const auto ta = read_tensors(a), tb = read_tensors(b);
    c.tensors = compare_tensors(ta, tb, s.tensors_only_in_a, s.tensors_only_in_b);
  }
  c.summary_present_a = a.summary.has_value();
  c.summary_present_b = b.summary.has_value();
  if (a.summary && b.summary) c.config_differences = compare_configs(a, b);
  return c;
}

namespace {

using ojson = nlohmann::ordered_json;

template <class T>
ojson or_null(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

// Only finite doubles reach here except a min headroom of -inf; JSON has no
// infinities, so that one is written as the string the logs also accept.
ojson number_or_null(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
  if (std::isnan(*v)) return "nan";
  return *v;
}

ojson presence(bool present) { return present ? "present" : "not present"; }

}  // namespace

nlohmann::ordered_json run_comparison_json(const RunComparison& c) {
  const RunComparisonSummary& s = c.summary;
  ojson out = ojson::object();
  out["run_a"] = c.name_a;
  out["run_b"] = c.name_b;
  out["files"] = {{"tensors.jsonl", {{"a", presence(c.tensors_present_a)}, {"b", presence(c.tensors_present_b)}}},
                  {"summary.json", {{"a", presence(c.summary_present_a)}, {"b", presence(c.summary_present_b)}}}};
  out["summary"] = {{"loss_key", s.loss_key},
                    {"steps_a", s.steps_a},
                    {"steps_b", s.steps_b},
                    {"common_steps", s.common_steps},
                    {"steps_only_in_a", s.steps_only_in_a},
                    {"steps_only_in_b", s.steps_only_in_b},
                    {"first_step_only_in_a", or_null(s.first_step_only_in_a)},
                    {"first_step_only_in_b", or_null(s.first_step_only_in_b)},
                    {"nonfinite_loss_steps_a", s.nonfinite_loss_steps_a},
                    {"nonfinite_loss_steps_b", s.nonfinite_loss_steps_b},
                    {"steps_with_loss_difference", s.steps_with_loss_difference},
                    {"max_abs_loss_difference", number_or_null(s.max_abs_loss_difference)},
                    {"max_abs_loss_difference_step", or_null(s.max_abs_loss_difference_step)},
                    {"tail_steps", s.tail_steps},
                    {"tail_first_step", or_null(s.tail_first_step)},
                    {"mean_abs_loss_difference_tail", number_or_null(s.mean_abs_loss_difference_tail)},
                    {"skipped_steps_a", s.skipped_steps_a},
                    {"skipped_steps_b", s.skipped_steps_b},
                    {"loss_tolerance", number_or_null(s.loss_tolerance)},
                    {"tolerance_exceeded", s.loss_tolerance ? ojson(s.tolerance_exceeded()) : ojson(nullptr)},
                    {"steps_exceeding_tolerance", s.steps_exceeding_tolerance},
                    {"first_step_exceeding_tolerance", or_null(s.first_step_exceeding_tolerance)},
                    {"tensors_only_in_a", s.tensors_only_in_a},
                    {"tensors_only_in_b", s.tensors_only_in_b}};
  if (c.summary_present_a && c.summary_present_b) {
    ojson diffs = ojson::array();
    for (const auto& d : c.config_differences)
      diffs.push_back({{"key", d.key}, {"a", ojson::parse(d.a.dump())}, {"b", ojson::parse(d.b.dump())}});
    out["config_differences"] = std::move(diffs);
  } else {
    out["config_differences"] = nullptr;
  }
  if (c.tensors_present_a && c.tensors_present_b) {
    ojson tensors = ojson::array();
    for (const auto& t : c.tensors)
      tensors.push_back({{"layer", t.layer},
                         {"tensor", t.tensor},
                         {"pass", t.pass},
                         {"role_a", t.role_a},
                         {"role_b", t.role_b},
                         {"common_steps", t.common_steps},
                         {"last_common_step", t.last_common_step},
                         {"mean_underflow_to_zero_rate_a", number_or_null(t.mean_underflow_to_zero_rate_a)},
                         {"mean_underflow_to_zero_rate_b", number_or_null(t.mean_underflow_to_zero_rate_b)},
                         {"max_overflow_rate_a", number_or_null(t.max_overflow_rate_a)},
                         {"max_overflow_rate_b", number_or_null(t.max_overflow_rate_b)},
                         {"min_headroom_log2_a", number_or_null(t.min_headroom_log2_a)},
                         {"min_headroom_log2_b", number_or_null(t.min_headroom_log2_b)},
                         {"norm_a", number_or_null(t.norm_a)},
                         {"norm_b", number_or_null(t.norm_b)},
                         {"norm_ratio", number_or_null(t.norm_ratio)}});
    out["tensors"] = std::move(tensors);
  } else {
    out["tensors"] = nullptr;
  }
  ojson steps = ojson::array();
  for (const auto& d : c.steps) {
    ojson j = {{"step", d.step},
               {"loss_a", number_or_null(d.loss_a)},
               {"loss_b", number_or_null(d.loss_b)},
               {"loss_difference", number_or_null(d.loss_difference)},
               {"relative_difference", number_or_null(d.relative_difference)},
               {"scale_a", number_or_null(d.scale_a)},
               {"scale_b", number_or_null(d.scale_b)},
               {"skipped_a", d.skipped_a},
               {"skipped_b", d.skipped_b},
               {"underflow_rate_a", number_or_null(d.underflow_rate_a)},
               {"underflow_rate_b", number_or_null(d.underflow_rate_b)},
               {"lost_update_rate_a", number_or_null(d.lost_update_rate_a)},
               {"lost_update_rate_b", number_or_null(d.lost_update_rate_b)}};
    if (s.loss_tolerance) j["exceeds_tolerance"] = d.exceeds_tolerance;
    steps.push_back(std::move(j));
  }
  out["steps"] = std::move(steps);
  return out;
}

}  // namespace mpverify::compare
