// mpverify formats [--format F]... [--json]: the presets (or the named
// formats) with their derived constants.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "formats/format.h"

namespace mpverify::cli {

namespace {

nlohmann::json describe(const formats::Format& f) {
  nlohmann::json j = {{"name", f.name},
          {"exponent_bits", f.exponent_bits},
          {"significand_bits", f.precision()},
          {"mantissa_bits", f.mantissa_bits},
          {"bias", f.bias},
          {"encoding", std::string(formats::to_string(f.encoding))},
          {"overflow", std::string(formats::to_string(f.overflow))},
          {"subnormals", f.subnormals},
          {"infinities", f.has_infinity()},
          {"nan", f.has_nan()},
          {"signed", f.is_signed},
          {"zero", f.has_zero},
          {"max", f.max_finite()},
          {"min_normal", f.min_normal()},
          {"min_subnormal", f.min_subnormal()},
          {"epsilon", f.epsilon()},
          {"unit_roundoff", f.unit_roundoff()},
          {"lost_update_ratio_needed", f.lost_update_ratio_needed()},
          {"lost_update_ratio_sufficient", f.lost_update_ratio_sufficient()}};
  // Beside every OCP-style preset and its IEEE-like eXmY namesake: which is which.
  if (const std::string note = formats::namesake_note(f); !note.empty()) j["note"] = note;
  return j;
}

}  // namespace

void add_formats_command(CLI::App& root, std::vector<Command>& commands) {
  auto* app = root.add_subcommand(
      "formats",
      "List number formats and their constants.\n"
      "eXmY names are IEEE-like (inf, NaN, bias 2^(X-1)-1): e2m1 (max 3) is not OCP FP4 (fp4-e2m1, max 6),\n"
      "e4m3 (max 240) is not OCP FP8 E4M3 (fp8-e4m3, max 448). OCP MX v1.0: fp4-e2m1, fp6-e2m3, fp6-e3m2\n"
      "(no inf, no NaN, saturating), e8m0 (block scale: 2^-127..2^127, 0xff NaN, no zero, no sign);\n"
      "NVFP4's block scale: ue4m3 (unsigned E4M3, max 448, 0x7f NaN).");
  auto names = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  app->add_option("--format", *names,
                  "Show these formats (presets or eXmY, e.g. e5m7; eXmY is IEEE-like) instead of the presets");
  app->add_flag("--json", *json, "Print a JSON array instead of a table");
  commands.push_back({app, [names, json] {
    std::vector<formats::Format> list;
    if (names->empty()) list = formats::all_presets();
    for (const auto& n : *names) list.push_back(formats::parse_format(n));
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& f : list) out.push_back(describe(f));
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    std::printf("%-14s %3s %3s %5s %-6s %-8s %13s %13s %13s %13s %9s %9s\n", "name", "e", "p", "bias", "enc",
                "overflow", "max", "min_normal", "min_subnormal", "epsilon", "lost_need", "lost_all");
    std::vector<std::string> notes;
    for (const auto& f : list) {
      // The sign-less formats are marked in the enc column: "fn,u".
      const std::string enc = std::string(formats::to_string(f.encoding)) + (f.is_signed ? "" : ",u");
      std::printf("%-14s %3d %3d %5d %-6s %-8s %13.6g %13.6g %13.6g %13.6g %9.0f %9.0f\n", f.name.c_str(),
                  f.exponent_bits, f.precision(), f.bias, enc.c_str(),
                  std::string(formats::to_string(f.overflow)).c_str(), f.max_finite(), f.min_normal(),
                  f.min_subnormal(), f.epsilon(), f.lost_update_ratio_needed(), f.lost_update_ratio_sufficient());
      const std::string note = formats::namesake_note(f);
      if (!note.empty() && std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
    }
    std::printf("p = significand bits including the hidden bit. A lost update (fl(w + u) == w, u != 0) to a\n"
                "normal w needs |w|/|u| >= lost_need = 2^p; every update with |w|/|u| > lost_all = 2^(p+1) is\n"
                "lost; between the two it depends on where w sits in its binade. enc: ieee (inf, NaN), fn (no inf,\n"
                "NaN at all-ones), fnuz (NaN in place of -0), finite (no inf, no NaN); \",u\": no sign bit.\n"
                "e8m0 has no zero: 0x00 is 2^-127.\n");
    for (const auto& note : notes) std::printf("note: %s\n", note.c_str());
    return 0;
  }});
}

}  // namespace mpverify::cli
