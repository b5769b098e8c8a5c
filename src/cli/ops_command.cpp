// mpverify ops --op OP --shape KEY=N,... --policy KEY=V,... --backends ref,emu,gpu [--seed S] [--json]
// One op computed by the reference, the emulator and the GPU on the same
// inputs; every pair of sides compared, and the emulator's counters.
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "compare/compare.h"
#include "emu/gemm_emu.h"
#include "gpu/device.h"
#include "gpu/gemm_gpu.h"
#include "refs/gemm_ref.h"

namespace mpverify::cli {

namespace {

std::map<std::string, std::string> parse_key_values(const std::string& text, const std::string& option) {
  std::map<std::string, std::string> out;
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

int positive(const std::map<std::string, std::string>& kv, const std::string& key, const std::string& option,
             int fallback = -1) {
  const auto it = kv.find(key);
  if (it == kv.end()) {
    if (fallback >= 0) return fallback;
    throw UsageError(option + ": missing " + key + "=N");
  }
  try {
    std::size_t used = 0;
    const long v = std::stol(it->second, &used);
    if (used != it->second.size() || v < 0 || v > (1 << 20)) throw std::out_of_range("");
    return static_cast<int>(v);
  } catch (const std::exception&) {
    throw UsageError(option + ": " + key + "=" + it->second + " is not a whole number in 0..1048576");
  }
}

struct Side {
  std::string name;
  bool ran = false;
  std::string reason;
  std::vector<float> out;
};

void check_keys(const std::map<std::string, std::string>& kv, std::initializer_list<const char*> known,
                const std::string& option) {
  for (const auto& [k, v] : kv) {
    bool ok = false;
    std::string list;
    for (const char* n : known) {
      ok |= k == n;
      list += std::string(list.empty() ? "" : ", ") + n;
    }
    if (!ok) throw UsageError(option + ": unknown key '" + k + "' (known: " + list + ")");
  }
}

struct GemmRun {
  refs::GemmShape shape;
  emu::GemmPolicy policy;
  std::vector<float> a, b;
  double abs_ab_norm = 0, c_norm = 0;  // || |A||B| ||_F and ||C||_F in FP64, for the bound
};

std::optional<gpu::GemmCompute> gpu_compute_for(const emu::GemmPolicy& p) {
  const std::string in = p.input.name;
  const bool fp32_acc = p.accumulation != emu::Accumulation::fp16;
  if (in == "fp16") return fp32_acc ? gpu::GemmCompute::fp16_fp32_accumulate : gpu::GemmCompute::fp16_fp16_accumulate;
  if (in == "bf16" && fp32_acc) return gpu::GemmCompute::bf16_fp32_accumulate;
  if (in == "tf32" && fp32_acc) return gpu::GemmCompute::tf32;
  if (in == "fp32" && p.accumulation == emu::Accumulation::fp32) return gpu::GemmCompute::fp32_pedantic;
  return std::nullopt;
}

}  // namespace

void add_ops_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string op, shape, policy = "input=fp16,accumulate=fp32,output=fp32", backends = "ref,emu,gpu";
    std::uint64_t seed = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "ops",
      "Run one op on the reference (Eigen), the emulator and the GPU with the same inputs, and compare.\n"
      "Ops: gemm (shape m=,n=,k=[,ta=0|1,tb=0|1]). Policy keys: input=FORMAT, accumulate=fp32|fp16|tensor-core,\n"
      "output=FORMAT, block=N and extra=N (tensor-core model), tc-rounding=rtz|rne. Inputs are normal(0,1)\n"
      "from --seed. Example: mpverify ops --op gemm --shape m=64,n=48,k=32 --policy input=fp16,accumulate=fp16");
  app->add_option("--op", o->op, "gemm")->required();
  app->add_option("--shape", o->shape, "KEY=N,... e.g. m=64,n=48,k=32")->required();
  app->add_option("--policy", o->policy, "KEY=VALUE,... (see above)")->capture_default_str();
  app->add_option("--backends", o->backends, "Sides to run: ref, emu, gpu")->capture_default_str();
  app->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  app->add_flag("--json", o->json, "Print JSON");

  commands.push_back({app, [o] {
    if (o->op != "gemm") throw UsageError("--op '" + o->op + "': available ops: gemm (more arrive with issue 3)");
    const auto shape_kv = parse_key_values(o->shape, "--shape");
    check_keys(shape_kv, {"m", "n", "k", "ta", "tb"}, "--shape");
    GemmRun run;
    run.shape = {positive(shape_kv, "m", "--shape"), positive(shape_kv, "n", "--shape"),
                 positive(shape_kv, "k", "--shape"), positive(shape_kv, "ta", "--shape", 0) != 0,
                 positive(shape_kv, "tb", "--shape", 0) != 0};
    if (run.shape.m == 0 || run.shape.n == 0 || run.shape.k == 0) throw UsageError("--shape: m, n and k must be at least 1");
    const auto policy_kv = parse_key_values(o->policy, "--policy");
    check_keys(policy_kv, {"input", "accumulate", "output", "block", "extra", "tc-rounding"}, "--policy");
    if (auto it = policy_kv.find("input"); it != policy_kv.end()) run.policy.input = formats::parse_format(it->second);
    if (auto it = policy_kv.find("output"); it != policy_kv.end()) run.policy.output = formats::parse_format(it->second);
    if (auto it = policy_kv.find("accumulate"); it != policy_kv.end()) {
      if (it->second == "fp32") run.policy.accumulation = emu::Accumulation::fp32;
      else if (it->second == "fp16") run.policy.accumulation = emu::Accumulation::fp16;
      else if (it->second == "tensor-core") run.policy.accumulation = emu::Accumulation::tensor_core;
      else throw UsageError("--policy: accumulate=" + it->second + ": expected fp32, fp16 or tensor-core");
    }
    run.policy.tensor_core.block_size = positive(policy_kv, "block", "--policy", run.policy.tensor_core.block_size);
    run.policy.tensor_core.extra_bits = positive(policy_kv, "extra", "--policy", run.policy.tensor_core.extra_bits);
    if (auto it = policy_kv.find("tc-rounding"); it != policy_kv.end()) {
      if (it->second == "rtz") run.policy.tensor_core.rounding = formats::Rounding::toward_zero;
      else if (it->second == "rne") run.policy.tensor_core.rounding = formats::Rounding::nearest_even;
      else throw UsageError("--policy: tc-rounding=" + it->second + ": expected rtz or rne");
    }
    std::vector<Side> sides;
    {
      std::stringstream ss(o->backends);
      std::string name;
      while (std::getline(ss, name, ',')) {
        if (name != "ref" && name != "emu" && name != "gpu")
          throw UsageError("--backends: unknown side '" + name + "' (ref, emu, gpu)");
        sides.push_back(Side{name, false, {}, {}});
      }
    }
    if (sides.empty()) throw UsageError("--backends: name at least one of ref, emu, gpu");

    std::mt19937_64 rng(o->seed);
    std::normal_distribution<double> normal;
    run.a.resize(run.shape.a_size());
    run.b.resize(run.shape.b_size());
    for (auto& x : run.a) x = static_cast<float>(normal(rng));
    for (auto& x : run.b) x = static_cast<float>(normal(rng));

    emu::CounterSet counters;
    for (Side& side : sides) {
      side.out.assign(run.shape.c_size(), 0.0f);
      if (side.name == "ref") {
        refs::gemm_ref(run.shape, run.a, run.b, side.out);
        side.ran = true;
      } else if (side.name == "emu") {
        emu::gemm_emu(run.shape, run.a, run.b, side.out, run.policy, &counters);
        side.ran = true;
      } else {
        const auto compute = gpu_compute_for(run.policy);
        if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) {
          side.reason = reason;
        } else if (!compute) {
          side.reason = "no cuBLAS compute type matches this policy";
        } else {
          gpu::gemm_gpu(run.shape, run.a, run.b, side.out, *compute);
          side.ran = true;
        }
      }
    }

    // The tolerance of every pair: each side is within its own bound of the
    // exact product (input rounding 2 u_in, accumulation gamma_k(u_acc),
    // output rounding u_out, all relative to || |A||B| ||), so two sides are
    // within the sum of their bounds; the reference side's bound is gamma_k(2^-24).
    std::vector<double> c64(run.shape.c_size()), abs_ab(run.shape.c_size());
    refs::gemm_ref_fp64(run.shape, run.a, run.b, c64);
    std::vector<float> abs_a(run.a.size()), abs_b(run.b.size());
    for (std::size_t i = 0; i < abs_a.size(); ++i) abs_a[i] = std::fabs(run.a[i]);
    for (std::size_t i = 0; i < abs_b.size(); ++i) abs_b[i] = std::fabs(run.b[i]);
    refs::gemm_ref_fp64(run.shape, abs_a, abs_b, abs_ab);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < c64.size(); ++i) {
      num += abs_ab[i] * abs_ab[i];
      den += c64[i] * c64[i];
    }
    const double condition = den > 0 ? std::sqrt(num / den) : INFINITY;
    const double u_acc = run.policy.accumulation == emu::Accumulation::fp16          ? 0x1p-11
                         : run.policy.accumulation == emu::Accumulation::tensor_core ? 0x1p-21
                                                                                      : 0x1p-24;
    // gamma_k exists only while k u < 1; past that there is no a priori bound
    // (an fp16 accumulation of 2048 or more terms): report the metrics only.
    auto gamma_or_infinity = [&](double u) {
      return run.shape.k * u < 1 ? compare::gamma(run.shape.k, u) : INFINITY;
    };
    auto side_bound = [&](const std::string& name) {
      if (name == "ref") return gamma_or_infinity(0x1p-24);
      return 2 * run.policy.input.unit_roundoff() + gamma_or_infinity(u_acc) + run.policy.output.unit_roundoff();
    };

    nlohmann::json json_sides = nlohmann::json::array(), json_pairs = nlohmann::json::array();
    std::string text;
    char line[512];
    std::snprintf(line, sizeof line, "op gemm  m=%d n=%d k=%d%s%s  policy input=%s accumulate=%s output=%s  seed %llu\n",
                  run.shape.m, run.shape.n, run.shape.k, run.shape.transpose_a ? " ta" : "",
                  run.shape.transpose_b ? " tb" : "", run.policy.input.name.c_str(),
                  std::string(emu::to_string(run.policy.accumulation)).c_str(), run.policy.output.name.c_str(),
                  static_cast<unsigned long long>(o->seed));
    text += line;
    for (const Side& s : sides) {
      json_sides.push_back({{"name", s.name}, {"ran", s.ran}});
      if (!s.ran) json_sides.back()["reason"] = s.reason;
      text += s.name + (s.ran ? ": ran\n" : ": skipped, " + s.reason + "\n");
    }
    text += "\npair      max_abs_error  relative_error  bit_identical  max_ulp(output)  tolerance(normwise)  used\n";
    for (std::size_t i = 0; i < sides.size(); ++i)
      for (std::size_t j = i + 1; j < sides.size(); ++j) {
        if (!sides[i].ran || !sides[j].ran) continue;
        const double bound = (side_bound(sides[i].name) + side_bound(sides[j].name)) * condition;
        const auto cmp = compare::compare(
            sides[i].out, sides[j].out, run.policy.output,
            compare::Tolerance::normwise(bound, "sum of both sides' bounds (2u_in + gamma_k(u_acc) + u_out) "
                                                "times || |A||B| ||_F / ||C||_F"));
        json_pairs.push_back({{"a", sides[i].name},
                              {"b", sides[j].name},
                              {"max_abs_error", json_number(cmp.max_abs_error)},
                              {"relative_error", json_number(cmp.relative_error)},
                              {"bit_identical_fraction", cmp.bit_identical_fraction},
                              {"max_ulp", json_number(cmp.max_ulp)},
                              {"ulp_histogram", cmp.ulp_histogram},
                              {"tolerance", {{"tier", std::string(compare::to_string(cmp.tolerance.tier))},
                                             {"bound", json_number(bound)},
                                             {"derivation", cmp.tolerance.derivation},
                                             {"used", std::isinf(bound) ? nlohmann::json(nullptr)
                                                                        : json_number(cmp.tolerance_used)}}},
                              {"passed", cmp.passed}});
        if (!cmp.failure.empty()) json_pairs.back()["failure"] = cmp.failure;
        const std::string used = std::isinf(bound) ? "n/a (k u >= 1: no a priori bound)"
                                                   : std::to_string(cmp.tolerance_used).substr(0, 5);
        std::snprintf(line, sizeof line, "%-9s %13.4g  %14.4g  %13.4f  %15.4g  %19.3g  %s%s\n",
                      (sides[i].name + "-" + sides[j].name).c_str(), cmp.max_abs_error, cmp.relative_error,
                      cmp.bit_identical_fraction, cmp.max_ulp, bound, used.c_str(),
                      cmp.passed ? "" : ("  FAILED: " + cmp.failure).c_str());
        text += line;
      }
    nlohmann::json json_counters = nlohmann::json::object();
    if (!counters.sites().empty()) text += "\ncounters (emu)  elements  inexact  underflow_to_zero  subnormal  overflow  swamped\n";
    for (const auto& [name, c] : counters.sites()) {
      json_counters[name] = {{"elements", c.elements},           {"zeros_in", c.zeros_in},
                             {"nonfinite_in", c.nonfinite_in},   {"inexact", c.inexact},
                             {"underflow", c.underflow},         {"underflow_to_zero", c.underflow_to_zero},
                             {"subnormal", c.subnormal},         {"overflow", c.overflow},
                             {"nan_created", c.nan_created},     {"addends_nonzero", c.addends_nonzero},
                             {"swamped", c.swamped}};
      std::snprintf(line, sizeof line, "%-15s %9llu %8llu %18llu %10llu %9llu %8llu\n", name.c_str(),
                    static_cast<unsigned long long>(c.elements), static_cast<unsigned long long>(c.inexact),
                    static_cast<unsigned long long>(c.underflow_to_zero), static_cast<unsigned long long>(c.subnormal),
                    static_cast<unsigned long long>(c.overflow), static_cast<unsigned long long>(c.swamped));
      text += line;
    }
    bool all_passed = true;
    for (const auto& p : json_pairs) all_passed &= p["passed"].get<bool>();
    if (o->json) {
      std::cout << nlohmann::json{{"op", "gemm"},
                                  {"shape", {{"m", run.shape.m}, {"n", run.shape.n}, {"k", run.shape.k},
                                             {"ta", run.shape.transpose_a}, {"tb", run.shape.transpose_b}}},
                                  {"policy", {{"input", run.policy.input.name},
                                              {"accumulate", std::string(emu::to_string(run.policy.accumulation))},
                                              {"output", run.policy.output.name}}},
                                  {"seed", o->seed},
                                  {"sides", json_sides},
                                  {"pairs", json_pairs},
                                  {"counters", json_counters}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << text;
    }
    return all_passed ? 0 : 1;
  }});
}

}  // namespace mpverify::cli
