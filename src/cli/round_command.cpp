// mpverify round --format F --rounding R [--seed S] [--json] VALUE...
// Rounds each value once to the format and shows the bits, value and flags.
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "cli/rounding_options.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/format.h"
#include "formats/philox.h"

namespace mpverify::cli {

namespace {

struct Input {
  std::string text;
  bool is_float_bits = false;  // 0x3f800000: a float32 given by its bits
  double value = 0;            // decimal inputs: the nearest double
  float float_value = 0;
};

// "0x" followed by 1..8 hex digits and nothing else: float32 bits. Anything
// else must parse completely as a number (strtod: decimal, inf, nan, or a
// hex float such as 0x1.8p3).
Input parse_input(const std::string& text, const std::string& where) {
  Input in{text};
  const bool hex_prefix = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (hex_prefix && text.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos) {
    if (text.size() > 10)
      throw UsageError(where + " '" + text + "': float32 bits take at most 8 hex digits");
    in.is_float_bits = true;
    in.float_value = std::bit_cast<float>(static_cast<std::uint32_t>(std::stoul(text.substr(2), nullptr, 16)));
    in.value = static_cast<double>(in.float_value);
    return in;
  }
  char* end = nullptr;
  in.value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])))
    throw UsageError(where + " '" + text +
                     "' is neither a number (e.g. 1.5e-5, -inf, nan) nor float32 bits (e.g. 0x3f800000)");
  return in;
}

std::string hex_bits(std::uint32_t bits, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", (width + 3) / 4, bits);
  return buf;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ",") + n;
  return s.empty() ? "-" : s;
}

}  // namespace

void add_round_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string format;
    RoundingOptions rounding;
    bool json = false;
    std::vector<std::string> values;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "round",
      "Round values to a format once and show the bits, value and IEEE flags.\n"
      "Values are decimal (read as the nearest double), or float32 bits such as 0x3f800000;\n"
      "with no VALUE they are read from standard input, one per line.");
  app->add_option("--format", o->format,
                  "fp16, bf16, tf32, fp8-e4m3, fp8-e5m2, ..., the OCP MX formats fp4-e2m1, fp6-e2m3, fp6-e3m2, "
                  "e8m0, NVFP4's ue4m3, or eXmY (IEEE-like: e2m1 is not fp4-e2m1; see 'mpverify formats')")
      ->required();
  o->rounding.add_to(app, "Seed for stochastic rounding: value k uses draw (seed, 0, k)");
  app->add_flag("--json", o->json, "Print a JSON array");
  app->add_option("VALUE", o->values, "Values to round");

  commands.push_back({app, [o] {
    const formats::Format f = formats::parse_format(o->format);
    formats::RoundingContext rc = o->rounding.context();

    // Read and check every input before printing anything.
    std::vector<Input> inputs;
    if (o->values.empty()) {
      std::string line;
      for (int n = 1; std::getline(std::cin, line); ++n) {
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos) continue;
        const auto last = line.find_last_not_of(" \t\r");
        inputs.push_back(parse_input(line.substr(first, last - first + 1), "line " + std::to_string(n)));
      }
    } else {
      for (std::size_t k = 0; k < o->values.size(); ++k)
        inputs.push_back(parse_input(o->values[k], "VALUE " + std::to_string(k + 1)));
    }

    nlohmann::json out = nlohmann::json::array();
    if (!o->json)
      std::printf("%-24s %-12s %-24s %s\n", "input", "bits", "value", "flags");
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      rc.random = formats::stochastic_draw(o->rounding.seed, 0, k);
      formats::Flags flags;
      const std::uint32_t bits = inputs[k].is_float_bits ? formats::from_float(f, inputs[k].float_value, rc, flags)
                                                         : formats::from_double(f, inputs[k].value, rc, flags);
      const double value = formats::to_double(f, bits);
      if (o->json) {
        out.push_back({{"input", json_number(inputs[k].value)},
                       {"input_text", inputs[k].text},
                       {"bits", hex_bits(bits, f.width())},
                       {"value", json_number(value)},
                       {"flags", formats::flag_names(flags)}});
      } else {
        std::printf("%-24s %-12s %-24.17g %s\n", inputs[k].text.c_str(), hex_bits(bits, f.width()).c_str(), value,
                    join(formats::flag_names(flags)).c_str());
      }
    }
    if (o->json) std::cout << out.dump(2) << "\n";
    return 0;
  }});
}

}  // namespace mpverify::cli
