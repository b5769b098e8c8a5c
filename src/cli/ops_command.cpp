// mpverify ops --op OP --shape KEY=N,... --policy KEY=V,... --backends ref,emu,gpu [--seed S] [--json]
// One op computed by the reference, the emulator and the GPU on the same
// inputs; every pair of sides compared on every output tensor, and the
// emulator's counters. The ops themselves live in cli/ops/, one family per
// file; this file parses the common options and prints any OpResult.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "cli/ops/ops_registry.h"

namespace mpverify::cli {

namespace {

using ops::OpResult;
using ops::Side;

std::vector<Side> parse_backends(const std::string& text) {
  std::vector<Side> sides;
  std::stringstream ss(text);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name != "ref" && name != "emu" && name != "gpu")
      throw UsageError("--backends: unknown side '" + name + "' (ref, emu, gpu)");
    sides.push_back(Side{name, false, {}, {}});
  }
  if (sides.empty()) throw UsageError("--backends: name at least one of ref, emu, gpu");
  return sides;
}

nlohmann::json counters_json(const emu::Counters& c) {
  return {{"elements", c.elements},         {"zeros_in", c.zeros_in},
          {"nonfinite_in", c.nonfinite_in}, {"inexact", c.inexact},
          {"underflow", c.underflow},       {"underflow_to_zero", c.underflow_to_zero},
          {"subnormal", c.subnormal},       {"overflow", c.overflow},
          {"nan_created", c.nan_created},   {"addends_nonzero", c.addends_nonzero},
          {"swamped", c.swamped},           {"truncated", c.truncated}};
}

int report(const std::string& op, const OpResult& r, std::uint64_t seed, bool json) {
  nlohmann::json json_sides = nlohmann::json::array(), json_pairs = nlohmann::json::array();
  std::string text = r.title + "  seed " + std::to_string(seed) + "\n";
  for (const Side& s : r.sides) {
    json_sides.push_back({{"name", s.name}, {"ran", s.ran}});
    if (!s.ran) json_sides.back()["reason"] = s.reason;
    text += s.name + (s.ran ? ": ran\n" : ": skipped, " + s.reason + "\n");
  }
  std::size_t sides_ran = 0;
  for (const Side& s : r.sides) sides_ran += s.ran;
  if (sides_ran < 2)  // nothing to compare: say so rather than print an empty table
    text += "\nno pair compared: fewer than two sides ran\n";
  else
    text += "\npair      tensor    max_abs_error  relative_error  bit_identical  max_ulp(output)  tolerance            used\n";
  bool all_passed = true;
  char line[512];
  for (std::size_t i = 0; i < r.sides.size(); ++i)
    for (std::size_t j = i + 1; j < r.sides.size(); ++j) {
      const Side &a = r.sides[i], &b = r.sides[j];
      if (!a.ran || !b.ran) continue;
      for (std::size_t t = 0; t < r.tensors.size(); ++t) {
        const compare::Tolerance tol = r.tolerance(t, a.name, b.name);
        const auto cmp = compare::compare(a.out[t], b.out[t], r.tensors[t].format, tol);
        all_passed &= cmp.passed;
        const bool bounded = std::isfinite(tol.bound) || tol.tier == compare::Tier::bit_exact;
        json_pairs.push_back(
            {{"a", a.name},
             {"b", b.name},
             {"tensor", r.tensors[t].name},
             {"max_abs_error", json_number(cmp.max_abs_error)},
             {"relative_error", json_number(cmp.relative_error)},
             {"bit_identical_fraction", cmp.bit_identical_fraction},
             {"max_ulp", json_number(cmp.max_ulp)},
             {"ulp_histogram", cmp.ulp_histogram},
             {"tolerance",
              {{"tier", std::string(compare::to_string(tol.tier))},
               {"bound", json_number(tol.bound)},
               {"derivation", tol.derivation},
               {"used", bounded ? json_number(cmp.tolerance_used) : nlohmann::json(nullptr)}}},
             {"passed", cmp.passed}});
        if (tol.ulp_scale) json_pairs.back()["tolerance"]["max_ulp_at_scale"] = json_number(cmp.max_scaled_ulp);
        if (!cmp.failure.empty()) json_pairs.back()["failure"] = cmp.failure;
        char bound[32] = "";
        if (tol.tier != compare::Tier::bit_exact) std::snprintf(bound, sizeof bound, " %.4g", tol.bound);
        std::string tolerance(compare::to_string(tol.tier));
        tolerance += bound;
        const std::string used =
            bounded ? std::to_string(cmp.tolerance_used).substr(0, 5) : "n/a (no a priori bound)";
        std::snprintf(line, sizeof line, "%-9s %-9s %13.4g  %14.4g  %13.4f  %15.4g  %-20.20s %s%s\n",
                      (a.name + "-" + b.name).c_str(), r.tensors[t].name.c_str(), cmp.max_abs_error,
                      cmp.relative_error, cmp.bit_identical_fraction, cmp.max_ulp, tolerance.c_str(), used.c_str(),
                      cmp.passed ? "" : ("  FAILED: " + cmp.failure).c_str());
        text += line;
      }
    }
  nlohmann::json json_counters = nlohmann::json::object();
  int name_width = 25;
  for (const auto& [name, c] : r.counters.sites()) name_width = std::max(name_width, static_cast<int>(name.size()));
  if (!r.counters.sites().empty()) {
    std::snprintf(line, sizeof line, "\n%-*s %9s %8s %18s %10s %9s %8s\n", name_width, "counters (emu)", "elements",
                  "inexact", "underflow_to_zero", "subnormal", "overflow", "swamped");
    text += line;
  }
  for (const auto& [name, c] : r.counters.sites()) {
    json_counters[name] = counters_json(c);
    std::snprintf(line, sizeof line, "%-*s %9llu %8llu %18llu %10llu %9llu %8llu\n", name_width, name.c_str(),
                  static_cast<unsigned long long>(c.elements), static_cast<unsigned long long>(c.inexact),
                  static_cast<unsigned long long>(c.underflow_to_zero), static_cast<unsigned long long>(c.subnormal),
                  static_cast<unsigned long long>(c.overflow), static_cast<unsigned long long>(c.swamped));
    text += line;
  }
  if (!r.info.is_null()) text += "\ninfo " + r.info.dump() + "\n";
  if (json) {
    nlohmann::json out{{"op", op},         {"shape", r.shape}, {"policy", r.policy}, {"seed", seed},
                       {"sides", json_sides}, {"pairs", json_pairs}, {"counters", json_counters}};
    if (!r.info.is_null()) out["info"] = r.info;
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << text;
  }
  return all_passed ? 0 : 1;
}

std::string op_names(const std::vector<ops::OpFamily>& families) {
  std::string list;
  for (const auto& f : families)
    for (const auto& n : f.names) list += (list.empty() ? "" : ", ") + n;
  return list;
}

}  // namespace

void add_ops_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string op, shape, policy, backends = "ref,emu,gpu";
    std::uint64_t seed = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  const std::vector<ops::OpFamily> families = ops::all_op_families();
  std::string help =
      "Run one op on the reference (Eigen/FP64), the emulator and the GPU with the same seeded inputs, and "
      "compare every pair of sides on every output.\n";
  for (const auto& f : families) help += f.help + "\n";
  help += "Example: mpverify ops --op gemm --shape m=64,n=48,k=32 --policy input=fp16,accumulate=fp16";
  auto* app = root.add_subcommand("ops", help);
  app->add_option("--op", o->op, "One of: " + op_names(families))->required();
  app->add_option("--shape", o->shape, "KEY=N,... e.g. m=64,n=48,k=32 or n=4096")->required();
  app->add_option("--policy", o->policy, "KEY=VALUE,... (see above)");
  app->add_option("--backends", o->backends, "Sides to run: ref, emu, gpu")->capture_default_str();
  app->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  app->add_flag("--json", o->json, "Print JSON");

  commands.push_back({app, [o, families] {
    const ops::OpArgs args{o->op, ops::parse_key_values(o->shape, "--shape"),
                           o->policy.empty() ? ops::KeyValues{} : ops::parse_key_values(o->policy, "--policy"),
                           o->seed};
    std::vector<Side> sides = parse_backends(o->backends);
    for (const auto& f : families)
      for (const auto& n : f.names)
        if (n == o->op) return report(o->op, f.run(args, std::move(sides)), o->seed, o->json);
    throw UsageError("--op '" + o->op + "': available ops: " + op_names(families));
  }});
}

}  // namespace mpverify::cli
