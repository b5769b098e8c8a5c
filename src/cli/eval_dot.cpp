// `mpverify eval --op dot` (eval_dot.h): choose the model, read every line first (a malformed one stops the
// run before any output), compute d on the model or on the GPU's instruction, print or check.
#include "cli/eval_dot.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "emu/mma_presets.h"
#include "gpu/device.h"
#include "gpu/mma_probe.h"
#include "io/testfloat_cases.h"

namespace mpverify::cli {

namespace {

struct DotLine {
  int number = 0;
  std::vector<std::uint32_t> a, b;
  std::uint32_t c = 0;
  std::optional<std::uint32_t> expected;
  std::uint32_t d = 0;
};

formats::Format format_option(const std::string& text, const char* fallback) {
  return formats::parse_format(text.empty() ? fallback : text);
}

emu::MmaOutput output_option(const std::string& text) {
  if (text == "fp32-rz") return emu::MmaOutput::fp32_toward_zero;
  if (text == "e8m13-rz") return emu::MmaOutput::e8m13_toward_zero;
  if (text == "fp16-rne") return emu::MmaOutput::fp16_nearest_even;
  throw UsageError("--output-rounding must be fp32-rz, e8m13-rz or fp16-rne (got '" + text + "')");
}

emu::MmaModel model_of(const DotOptions& o) {
  if (o.arch == "custom") {
    if (o.custom_k <= 0 || o.custom_fraction_bits <= 0 || o.custom_output.empty())
      throw UsageError("--arch custom needs --k, --fraction-bits and --output-rounding");
    const emu::MmaOutput out = output_option(o.custom_output);
    const char* c = out == emu::MmaOutput::fp16_nearest_even ? "fp16" : "fp32";
    return emu::mma_custom(format_option(o.a_format, "fp16"), format_option(o.b_format, "fp16"),
                           format_option(o.c_format, c), o.custom_k, o.custom_fraction_bits,
                           o.custom_split, out);
  }
  if (o.arch.find('.') != std::string::npos) {  // a preset: its formats, unless they were given and differ
    const emu::MmaModel& m = emu::mma_preset(o.arch);
    for (const auto& [given, own, option] : {std::tuple{o.a_format, m.a, "--a-format"}, std::tuple{o.b_format, m.b, "--b-format"},
                                             std::tuple{o.c_format, m.c, "--c-format"}})
      if (!given.empty() && !(formats::parse_format(given) == own))
        throw UsageError(std::string(option) + " " + given + " contradicts " + m.name + ", whose operand is " + own.name);
    return m;
  }
  if (o.a_format.empty() || o.b_format.empty())
    throw UsageError("--arch " + o.arch + " needs --a-format and --b-format (or give a preset's name)");
  return emu::mma_for_architecture(o.arch, formats::parse_format(o.a_format), formats::parse_format(o.b_format),
                                   formats::parse_format(o.c_format.empty() ? "fp32" : o.c_format));
}

// A hex field as std::stoull(field, nullptr, 16) reads it (an optional '+' and 0x), without its stream
// and exception: the tensor-core test files hold millions of fields.
std::uint32_t hex_operand(std::string_view field, const formats::Format& f, int line, std::size_t index) {
  std::string_view digits = field;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits.remove_prefix(2);
  std::uint64_t v = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size() ||
      (f.width() < 64 && v >> f.width()) != 0)
    throw UsageError("line " + std::to_string(line) + ": field " + std::to_string(index + 1) + " ('" +
                     std::string(field) + "') is not a " + std::to_string(f.width()) + "-bit hex " + f.name + " value");
  return static_cast<std::uint32_t>(v);
}

// The whitespace-separated fields of a line (what `stream >> field` gives).
std::vector<std::string_view> split_fields(std::string_view text) {
  std::vector<std::string_view> fields;
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  for (std::size_t i = 0; i < text.size();) {
    while (i < text.size() && space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !space(text[i])) ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

DotLine parse_line(std::string_view text, int number, const emu::MmaModel& m, bool check) {
  const std::vector<std::string_view> fields = split_fields(text);
  const bool has_expected = fields.size() % 2 == 0;
  const std::size_t K = (fields.size() - (has_expected ? 2 : 1)) / 2;
  if (fields.size() < 3 || K % static_cast<std::size_t>(m.k) != 0)
    throw UsageError("line " + std::to_string(number) + ": " + std::to_string(fields.size()) +
                     " fields; a line holds K A operands, K B operands and c (then the expected d), K a positive "
                     "multiple of " + m.name + "'s k = " + std::to_string(m.k));
  if (check && !has_expected)
    throw UsageError("line " + std::to_string(number) + ": --check needs the expected d after c");
  DotLine l;
  l.number = number;
  for (std::size_t i = 0; i < K; ++i) l.a.push_back(hex_operand(fields[i], m.a, number, i));
  for (std::size_t i = 0; i < K; ++i) l.b.push_back(hex_operand(fields[K + i], m.b, number, K + i));
  l.c = hex_operand(fields[2 * K], m.c, number, 2 * K);
  if (has_expected) l.expected = hex_operand(fields[2 * K + 1], m.c, number, 2 * K + 1);
  return l;
}

// All of std::cin, read in blocks through its buffer (std::getline on std::cin synchronised with stdio read
// a character at a time: half of a 10^5-line check). Through the buffer, a caller's redirection still holds.
std::string standard_input() {
  std::string all;
  char block[1 << 16];
  for (std::streamsize got; (got = std::cin.rdbuf()->sgetn(block, sizeof block)) > 0;)
    all.append(block, static_cast<std::size_t>(got));
  return all;
}

// The GPU's instruction on every line, one probe launch per length K.
void run_on_gpu(const emu::MmaModel& m, std::vector<DotLine>& lines) {
  std::map<std::size_t, std::vector<DotLine*>> by_length;
  for (DotLine& l : lines) by_length[l.a.size()].push_back(&l);
  for (auto& [K, group] : by_length) {
    std::vector<std::uint32_t> a, b, c;
    for (const DotLine* l : group) {
      a.insert(a.end(), l->a.begin(), l->a.end());
      b.insert(b.end(), l->b.begin(), l->b.end());
      c.push_back(l->c);
    }
    const std::vector<std::uint32_t> d = gpu::mma_probe(m, a, b, c, static_cast<int>(K));
    for (std::size_t i = 0; i < group.size(); ++i) group[i]->d = d[i];
  }
}

std::string fields_of(const DotLine& l, const emu::MmaModel& m) {
  std::string s;
  for (auto v : l.a) s += io::hex_field(v, m.a.width()) + " ";
  for (auto v : l.b) s += io::hex_field(v, m.b.width()) + " ";
  return s + io::hex_field(l.c, m.c.width());
}

nlohmann::json model_json(const emu::MmaModel& m) {
  return {{"name", m.name}, {"a", m.a.name}, {"b", m.b.name}, {"c", m.c.name}, {"k", m.k},
          {"fraction_bits", m.fraction_bits}, {"split_halves", m.split_halves}, {"fp8_through_fp16", m.fp8_through_fp16},
          {"output", std::string(emu::to_string(m.output))}};
}

nlohmann::json counts_json(const emu::MmaCounts& n) {
  return {{"terms", n.terms}, {"terms_truncated", n.terms_truncated}, {"terms_shifted_out", n.terms_shifted_out},
          {"roundings", n.roundings}, {"roundings_inexact", n.roundings_inexact}, {"overflows", n.overflows},
          {"nans", n.nans}};
}

int list_presets(bool json) {
  nlohmann::json all = nlohmann::json::array();
  for (const emu::MmaModel& m : emu::mma_presets()) {
    if (json) all.push_back(model_json(m));
    else
      std::printf("%-32s a=%-8s b=%-8s c=%-4s k=%-2d F=%-2d %s%s\n", m.name.c_str(), m.a.name.c_str(), m.b.name.c_str(),
                  m.c.name.c_str(), m.k, m.fraction_bits,
                  m.split_halves ? "two halves, " : m.fp8_through_fp16 ? "as fp16: two HMMAs from 0, then FADD c, " : "",
                  std::string(emu::to_string(m.output)).c_str());
  }
  if (json) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace

int run_eval_dot(const DotOptions& o) {
  if (o.list) return list_presets(o.json);
  if (o.arch.empty()) throw UsageError("--op dot needs --arch (an architecture, a preset or custom; --list)");
  if (o.device != "cpu" && o.device != "gpu") throw UsageError("--device must be cpu or gpu (got '" + o.device + "')");
  emu::MmaModel m;
  with_usage_errors([&] { m = model_of(o); });
  if (o.device == "gpu" && o.promotion_interval != 0)
    throw UsageError("--promotion-interval is the model's only: the probe kernel chains instructions without one");
  if (o.device == "gpu") {
    if (const std::string why = gpu::gpu_unavailable_reason(); !why.empty()) throw UsageError("--device gpu: " + why);
    if (const std::string why = gpu::mma_probe_unsupported_reason(m); !why.empty()) throw UsageError(why);
  }

  std::vector<DotLine> lines;
  const std::string input = standard_input();
  int n = 0;
  for (std::size_t start = 0; start < input.size();) {  // the lines std::getline would give, numbered from 1
    const std::size_t end = std::min(input.find('\n', start), input.size());
    const std::string_view text(input.data() + start, end - start);
    ++n;
    if (text.find_first_not_of(" \t\r") != std::string_view::npos) lines.push_back(parse_line(text, n, m, o.check));
    start = end + 1;
  }

  emu::MmaCounts counts;
  if (o.device == "gpu") {
    run_on_gpu(m, lines);
  } else {
    with_usage_errors([&] {
      for (DotLine& l : lines) l.d = emu::mma_dot(m, l.a, l.b, l.c, o.promotion_interval, &counts);
    });
  }

  std::size_t passed = 0, failed = 0;
  nlohmann::json cases = nlohmann::json::array();
  std::string out;
  for (const DotLine& l : lines) {
    const std::string d = io::hex_field(l.d, m.c.width());
    const bool ok = !o.check || l.d == *l.expected;
    if (o.check) (ok ? passed : failed) += 1;
    if (o.json) {
      nlohmann::json j = {{"line", l.number}, {"d", d}};
      if (l.expected) j["expected"] = io::hex_field(*l.expected, m.c.width());
      if (o.check) j["pass"] = ok;
      cases.push_back(std::move(j));
    } else if (!o.check) {
      out += fields_of(l, m) + " " + d + "\n";
    } else if (!ok) {
      out += "line " + std::to_string(l.number) + ": " + fields_of(l, m) + " -> ours " + d + ", expected " +
             io::hex_field(*l.expected, m.c.width()) + "\n";
    }
  }
  if (o.json) {
    nlohmann::json j = {{"op", "dot"}, {"model", model_json(m)}, {"device", o.device},
                        {"promotion_interval", o.promotion_interval}, {"cases", std::move(cases)}};
    if (o.device == "cpu") j["counts"] = counts_json(counts);
    if (o.check) {
      j["passed"] = passed;
      j["failed"] = failed;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << out;
    if (o.check) std::cout << passed << " passed, " << failed << " failed\n";
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace mpverify::cli
