// mpverify formats [--format F]... [--json]: the presets (or the named
// formats) with their derived constants.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "formats/format.h"

namespace mpverify::cli {

namespace {

nlohmann::json describe(const formats::Format& f) {
  return {{"name", f.name},
          {"exponent_bits", f.exponent_bits},
          {"significand_bits", f.precision()},
          {"mantissa_bits", f.mantissa_bits},
          {"bias", f.bias},
          {"encoding", std::string(formats::to_string(f.encoding))},
          {"overflow", std::string(formats::to_string(f.overflow))},
          {"subnormals", f.subnormals},
          {"infinities", f.has_infinity()},
          {"max", f.max_finite()},
          {"min_normal", f.min_normal()},
          {"min_subnormal", f.min_subnormal()},
          {"epsilon", f.epsilon()},
          {"unit_roundoff", f.unit_roundoff()},
          {"lost_update_ratio_needed", f.lost_update_ratio_needed()},
          {"lost_update_ratio_sufficient", f.lost_update_ratio_sufficient()}};
}

}  // namespace

void add_formats_command(CLI::App& root, std::vector<Command>& commands) {
  auto* app = root.add_subcommand("formats", "List number formats and their constants");
  auto names = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  app->add_option("--format", *names, "Show these formats (presets or eXmY, e.g. e5m7) instead of the presets");
  app->add_flag("--json", *json, "Print a JSON array instead of a table");
  commands.push_back({app, [names, json] {
    std::vector<formats::Format> list;
    if (names->empty()) list = formats::presets();
    for (const auto& n : *names) list.push_back(formats::parse_format(n));
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& f : list) out.push_back(describe(f));
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    std::printf("%-14s %3s %3s %5s %-5s %-8s %13s %13s %13s %13s %9s %9s\n", "name", "e", "p", "bias", "enc",
                "overflow", "max", "min_normal", "min_subnormal", "epsilon", "lost_need", "lost_all");
    for (const auto& f : list) {
      std::printf("%-14s %3d %3d %5d %-5s %-8s %13.6g %13.6g %13.6g %13.6g %9.0f %9.0f\n", f.name.c_str(),
                  f.exponent_bits, f.precision(), f.bias, std::string(formats::to_string(f.encoding)).c_str(),
                  std::string(formats::to_string(f.overflow)).c_str(), f.max_finite(), f.min_normal(),
                  f.min_subnormal(), f.epsilon(), f.lost_update_ratio_needed(), f.lost_update_ratio_sufficient());
    }
    std::printf("p = significand bits including the hidden bit. A lost update (fl(w + u) == w, u != 0) to a\n"
                "normal w needs |w|/|u| >= lost_need = 2^p; every update with |w|/|u| > lost_all = 2^(p+1) is\n"
                "lost; between the two it depends on where w sits in its binade.\n");
    return 0;
  }});
}

}  // namespace mpverify::cli
