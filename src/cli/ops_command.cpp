// mpverify ops --op OP --shape KEY=N,... --policy KEY=V,... --backends ref,emu,gpu [--seed S] [--json]
// One op computed by the reference, the emulator and the GPU on the same
// inputs; every pair of sides compared, and the emulator's counters.
// Each op fills an OpResult (its sides' outputs and each pair's tolerance);
// report() prints it the same way for all ops.
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
#include "emu/activation_emu.h"
#include "emu/gemm_emu.h"
#include "gpu/activation_gpu.h"
#include "gpu/device.h"
#include "gpu/gemm_gpu.h"
#include "refs/activation_ref.h"
#include "refs/gemm_ref.h"

namespace mpverify::cli {

namespace {

using KeyValues = std::map<std::string, std::string>;

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
      list += std::string(list.empty() ? "" : ", ") + n;
    }
    if (!ok) throw UsageError(option + ": unknown key '" + k + "' (known: " + list + ")");
  }
}

int whole_number(const KeyValues& kv, const std::string& key, const std::string& option, int fallback = -1) {
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

struct Side {
  std::string name;
  bool ran = false;
  std::string reason;
  std::vector<float> out;
};

struct OpResult {
  std::string title;
  nlohmann::json shape, policy;
  formats::Format output;  // ULP distances are measured in it
  std::vector<Side> sides;
  emu::CounterSet counters;
  // The tolerance for comparing side a with side b.
  std::function<compare::Tolerance(const std::string& a, const std::string& b)> tolerance;
};

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

// Runs the GPU side unless there is no device (or no GPU version of this
// configuration), in which case the side records why.
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

// ---- gemm ----------------------------------------------------------------------

std::optional<gpu::GemmCompute> gpu_compute_for(const emu::GemmPolicy& p) {
  const std::string in = p.input.name;
  const bool fp32_acc = p.accumulation != emu::Accumulation::fp16;
  if (in == "fp16") return fp32_acc ? gpu::GemmCompute::fp16_fp32_accumulate : gpu::GemmCompute::fp16_fp16_accumulate;
  if (in == "bf16" && fp32_acc) return gpu::GemmCompute::bf16_fp32_accumulate;
  if (in == "tf32" && fp32_acc) return gpu::GemmCompute::tf32;
  if (in == "fp32" && p.accumulation == emu::Accumulation::fp32) return gpu::GemmCompute::fp32_pedantic;
  return std::nullopt;
}

OpResult run_gemm(const KeyValues& shape_kv, const KeyValues& policy_kv, std::vector<Side> sides, std::uint64_t seed) {
  check_keys(shape_kv, {"m", "n", "k", "ta", "tb"}, "--shape");
  const refs::GemmShape shape{whole_number(shape_kv, "m", "--shape"), whole_number(shape_kv, "n", "--shape"),
                              whole_number(shape_kv, "k", "--shape"), whole_number(shape_kv, "ta", "--shape", 0) != 0,
                              whole_number(shape_kv, "tb", "--shape", 0) != 0};
  if (shape.m == 0 || shape.n == 0 || shape.k == 0) throw UsageError("--shape: m, n and k must be at least 1");
  check_keys(policy_kv, {"input", "accumulate", "output", "block", "extra", "tc-rounding"}, "--policy");
  emu::GemmPolicy policy;
  if (auto it = policy_kv.find("input"); it != policy_kv.end()) policy.input = formats::parse_format(it->second);
  if (auto it = policy_kv.find("output"); it != policy_kv.end()) policy.output = formats::parse_format(it->second);
  if (auto it = policy_kv.find("accumulate"); it != policy_kv.end()) {
    if (it->second == "fp32") policy.accumulation = emu::Accumulation::fp32;
    else if (it->second == "fp16") policy.accumulation = emu::Accumulation::fp16;
    else if (it->second == "tensor-core") policy.accumulation = emu::Accumulation::tensor_core;
    else throw UsageError("--policy: accumulate=" + it->second + ": expected fp32, fp16 or tensor-core");
  }
  policy.tensor_core.block_size = whole_number(policy_kv, "block", "--policy", policy.tensor_core.block_size);
  policy.tensor_core.extra_bits = whole_number(policy_kv, "extra", "--policy", policy.tensor_core.extra_bits);
  if (auto it = policy_kv.find("tc-rounding"); it != policy_kv.end()) {
    if (it->second == "rtz") policy.tensor_core.rounding = formats::Rounding::toward_zero;
    else if (it->second == "rne") policy.tensor_core.rounding = formats::Rounding::nearest_even;
    else throw UsageError("--policy: tc-rounding=" + it->second + ": expected rtz or rne");
  }

  std::mt19937_64 rng(seed);
  const auto a = normal_inputs(shape.a_size(), rng, 1.0), b = normal_inputs(shape.b_size(), rng, 1.0);
  OpResult r;
  r.output = policy.output;
  for (Side& side : sides) {
    side.out.assign(shape.c_size(), 0.0f);
    if (side.name == "ref") {
      refs::gemm_ref(shape, a, b, side.out);
      side.ran = true;
    } else if (side.name == "emu") {
      emu::gemm_emu(shape, a, b, side.out, policy, &r.counters);
      side.ran = true;
    } else {
      const auto compute = gpu_compute_for(policy);
      run_gpu_side(side, compute ? "" : "no cuBLAS compute type matches this policy",
                   [&] { gpu::gemm_gpu(shape, a, b, side.out, *compute); });
    }
  }
  r.sides = std::move(sides);

  // Each side is within its own bound of the exact product (input rounding
  // 2 u_in, accumulation gamma_k(u_acc), output rounding u_out, relative to
  // || |A||B| ||), so two sides are within the sum of their bounds; the
  // reference's bound is gamma_k(2^-24). gamma_k exists only while k u < 1;
  // past that (fp16 accumulation of 2048+ terms) there is no a priori bound.
  const double condition = refs::gemm_condition(shape, a, b);
  const double u_acc = policy.accumulation == emu::Accumulation::fp16          ? 0x1p-11
                       : policy.accumulation == emu::Accumulation::tensor_core ? 0x1p-21
                                                                                : 0x1p-24;
  auto gamma_or_infinity = [k = shape.k](double u) { return k * u < 1 ? compare::gamma(k, u) : INFINITY; };
  auto side_bound = [=, in = policy.input, out = policy.output](const std::string& name) {
    if (name == "ref") return gamma_or_infinity(0x1p-24);
    return 2 * in.unit_roundoff() + gamma_or_infinity(u_acc) + out.unit_roundoff();
  };
  r.tolerance = [=](const std::string& x, const std::string& y) {
    return compare::Tolerance::normwise((side_bound(x) + side_bound(y)) * condition,
                                        "sum of both sides' bounds (2u_in + gamma_k(u_acc) + u_out) "
                                        "times || |A||B| ||_F / ||C||_F");
  };
  char title[256];
  std::snprintf(title, sizeof title, "op gemm  m=%d n=%d k=%d%s%s  policy input=%s accumulate=%s output=%s", shape.m,
                shape.n, shape.k, shape.transpose_a ? " ta" : "", shape.transpose_b ? " tb" : "",
                policy.input.name.c_str(), std::string(emu::to_string(policy.accumulation)).c_str(),
                policy.output.name.c_str());
  r.title = title;
  r.shape = {{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"ta", shape.transpose_a}, {"tb", shape.transpose_b}};
  r.policy = {{"input", policy.input.name},
              {"accumulate", std::string(emu::to_string(policy.accumulation))},
              {"output", policy.output.name}};
  return r;
}

// ---- activations ----------------------------------------------------------------

OpResult run_activation(const std::string& op, const KeyValues& shape_kv, const KeyValues& policy_kv,
                        std::vector<Side> sides, std::uint64_t seed) {
  const bool backward = op.ends_with("-backward");
  const auto kind = refs::parse_activation(backward ? op.substr(0, op.size() - 9) : op);
  refs::ActivationParams p{*kind};
  check_keys(shape_kv, {"n"}, "--shape");
  const auto n = static_cast<std::size_t>(whole_number(shape_kv, "n", "--shape"));
  if (n == 0) throw UsageError("--shape: n must be at least 1");
  check_keys(policy_kv, {"input", "output", "slope"}, "--policy");
  emu::ElementwisePolicy policy;
  if (auto it = policy_kv.find("input"); it != policy_kv.end()) policy.input = formats::parse_format(it->second);
  if (auto it = policy_kv.find("output"); it != policy_kv.end()) policy.output = formats::parse_format(it->second);
  if (auto it = policy_kv.find("slope"); it != policy_kv.end()) {
    char* end = nullptr;
    p.negative_slope = std::strtod(it->second.c_str(), &end);
    if (*end != '\0' || !std::isfinite(p.negative_slope)) throw UsageError("--policy: slope=" + it->second + " is not a number");
  }
  std::mt19937_64 rng(seed);
  const auto x = normal_inputs(n, rng, 4.0);  // wide enough to reach the flat parts of tanh and sigmoid
  const auto dy = normal_inputs(n, rng, 1.0);
  OpResult r;
  r.output = policy.output;
  const bool fp16_io = policy.input.name == "fp16" && policy.output.name == "fp16";
  for (Side& side : sides) {
    side.out.assign(n, 0.0f);
    if (side.name == "ref") {
      if (backward) refs::activation_backward_ref(p, x, dy, side.out);
      else refs::activation_ref(p, x, side.out);
      side.ran = true;
    } else if (side.name == "emu") {
      if (backward) emu::activation_backward_emu(p, x, dy, side.out, policy, &r.counters);
      else emu::activation_emu(p, x, side.out, policy, &r.counters);
      side.ran = true;
    } else {
      run_gpu_side(side, fp16_io ? "" : "the GPU activations take fp16 input and output", [&] {
        if (backward) gpu::activation_backward_gpu(p, x, dy, side.out);
        else gpu::activation_gpu(p, x, side.out);
      });
    }
  }
  r.sides = std::move(sides);

  // Per element, rounding x (and dy) to the input format moves the exact
  // result by at most (|g| + u_in |x|) u_in |x| (+ u_in |dy f'| backward),
  // where g is f' (|f''| <= 1 bounds its change); rounding the result adds
  // u_out |y|, and the float reference u32 |y|. The norm of these per-element
  // bounds over the norm of y bounds the normwise error of ref against emu;
  // emu against gpu: one fp16 ulp (see the GPU test's derivation).
  const double u_in = policy.input.unit_roundoff(), u_out = policy.output.unit_roundoff();
  double e2 = 0, y2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = refs::activation_derivative_fp64(p, x[i]);
    const double y = backward ? g * dy[i] : refs::activation_fp64(p, x[i]);
    const double dx_part = (std::fabs(g) + u_in * std::fabs(x[i])) * u_in * std::fabs(x[i]) * (backward ? std::fabs(dy[i]) : 1.0);
    const double input_part = dx_part + (backward ? u_in * std::fabs(y) : 0.0);
    // the output rounding applies to the emulator's exact value, at most |y| + input_part in magnitude
    const double e = input_part + (u_out + 0x1p-24) * (std::fabs(y) + input_part);
    e2 += e * e;
    y2 += y * y;
  }
  const double ref_bound = y2 > 0 ? std::sqrt(e2 / y2) : INFINITY;
  r.tolerance = [ref_bound](const std::string& a, const std::string& b) {
    if (a == "ref" || b == "ref")
      return compare::Tolerance::normwise(ref_bound + (a == "gpu" || b == "gpu" ? 0x1p-10 : 0.0),
                                          "input rounding through f' plus output rounding, per element, in norm");
    return compare::Tolerance::ulps(1, "fp32 math within 2^-20 relative, then one fp16 rounding");
  };
  r.title = "op " + op + "  n=" + std::to_string(n) + "  policy input=" + policy.input.name + " output=" +
            policy.output.name;
  r.shape = {{"n", n}};
  r.policy = {{"input", policy.input.name}, {"output", policy.output.name}};
  return r;
}

// ---- report -------------------------------------------------------------------

int report(const std::string& op, const OpResult& r, std::uint64_t seed, bool json) {
  nlohmann::json json_sides = nlohmann::json::array(), json_pairs = nlohmann::json::array();
  std::string text = r.title + "  seed " + std::to_string(seed) + "\n";
  for (const Side& s : r.sides) {
    json_sides.push_back({{"name", s.name}, {"ran", s.ran}});
    if (!s.ran) json_sides.back()["reason"] = s.reason;
    text += s.name + (s.ran ? ": ran\n" : ": skipped, " + s.reason + "\n");
  }
  text += "\npair      max_abs_error  relative_error  bit_identical  max_ulp(output)  tolerance            used\n";
  bool all_passed = true;
  char line[512];
  for (std::size_t i = 0; i < r.sides.size(); ++i)
    for (std::size_t j = i + 1; j < r.sides.size(); ++j) {
      const Side &a = r.sides[i], &b = r.sides[j];
      if (!a.ran || !b.ran) continue;
      const compare::Tolerance tol = r.tolerance(a.name, b.name);
      const auto cmp = compare::compare(a.out, b.out, r.output, tol);
      all_passed &= cmp.passed;
      const bool bounded = std::isfinite(tol.bound) || tol.tier == compare::Tier::bit_exact;
      json_pairs.push_back({{"a", a.name},
                            {"b", b.name},
                            {"max_abs_error", json_number(cmp.max_abs_error)},
                            {"relative_error", json_number(cmp.relative_error)},
                            {"bit_identical_fraction", cmp.bit_identical_fraction},
                            {"max_ulp", json_number(cmp.max_ulp)},
                            {"ulp_histogram", cmp.ulp_histogram},
                            {"tolerance", {{"tier", std::string(compare::to_string(tol.tier))},
                                           {"bound", json_number(tol.bound)},
                                           {"derivation", tol.derivation},
                                           {"used", bounded ? json_number(cmp.tolerance_used) : nlohmann::json(nullptr)}}},
                            {"passed", cmp.passed}});
      if (!cmp.failure.empty()) json_pairs.back()["failure"] = cmp.failure;
      const std::string tolerance = std::string(compare::to_string(tol.tier)) + " " +
                                    (tol.tier == compare::Tier::bit_exact ? "" : json_number(tol.bound).dump());
      const std::string used = bounded ? std::to_string(cmp.tolerance_used).substr(0, 5) : "n/a (no a priori bound)";
      std::snprintf(line, sizeof line, "%-9s %13.4g  %14.4g  %13.4f  %15.4g  %-20.20s %s%s\n",
                    (a.name + "-" + b.name).c_str(), cmp.max_abs_error, cmp.relative_error, cmp.bit_identical_fraction,
                    cmp.max_ulp, tolerance.c_str(), used.c_str(), cmp.passed ? "" : ("  FAILED: " + cmp.failure).c_str());
      text += line;
    }
  nlohmann::json json_counters = nlohmann::json::object();
  if (!r.counters.sites().empty())
    text += "\ncounters (emu)            elements  inexact  underflow_to_zero  subnormal  overflow  swamped\n";
  for (const auto& [name, c] : r.counters.sites()) {
    json_counters[name] = {{"elements", c.elements},         {"zeros_in", c.zeros_in},
                           {"nonfinite_in", c.nonfinite_in}, {"inexact", c.inexact},
                           {"underflow", c.underflow},       {"underflow_to_zero", c.underflow_to_zero},
                           {"subnormal", c.subnormal},       {"overflow", c.overflow},
                           {"nan_created", c.nan_created},   {"addends_nonzero", c.addends_nonzero},
                           {"swamped", c.swamped}};
    std::snprintf(line, sizeof line, "%-25s %9llu %8llu %18llu %10llu %9llu %8llu\n", name.c_str(),
                  static_cast<unsigned long long>(c.elements), static_cast<unsigned long long>(c.inexact),
                  static_cast<unsigned long long>(c.underflow_to_zero), static_cast<unsigned long long>(c.subnormal),
                  static_cast<unsigned long long>(c.overflow), static_cast<unsigned long long>(c.swamped));
    text += line;
  }
  if (json) {
    std::cout << nlohmann::json{{"op", op},         {"shape", r.shape}, {"policy", r.policy}, {"seed", seed},
                                {"sides", json_sides}, {"pairs", json_pairs}, {"counters", json_counters}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << text;
  }
  return all_passed ? 0 : 1;
}

const char* kOps = "gemm, relu, leaky-relu, tanh, sigmoid, and each activation's -backward (e.g. tanh-backward)";

}  // namespace

void add_ops_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string op, shape, policy, backends = "ref,emu,gpu";
    std::uint64_t seed = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "ops",
      "Run one op on the reference (Eigen/FP64), the emulator and the GPU with the same inputs, and compare.\n"
      "gemm: --shape m=,n=,k=[,ta=0|1,tb=0|1]; --policy input=FORMAT (fp16), accumulate=fp32|fp16|tensor-core,\n"
      "  output=FORMAT (fp32), block=N and extra=N (tensor-core model), tc-rounding=rtz|rne.\n"
      "relu, leaky-relu, tanh, sigmoid (and NAME-backward): --shape n=N; --policy input=, output= (fp16),\n"
      "  slope= (leaky-relu). Inputs are seeded normal values.\n"
      "Example: mpverify ops --op gemm --shape m=64,n=48,k=32 --policy input=fp16,accumulate=fp16");
  app->add_option("--op", o->op, kOps)->required();
  app->add_option("--shape", o->shape, "KEY=N,... e.g. m=64,n=48,k=32 or n=4096")->required();
  app->add_option("--policy", o->policy, "KEY=VALUE,... (see above)");
  app->add_option("--backends", o->backends, "Sides to run: ref, emu, gpu")->capture_default_str();
  app->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  app->add_flag("--json", o->json, "Print JSON");

  commands.push_back({app, [o] {
    const KeyValues shape = parse_key_values(o->shape, "--shape");
    const KeyValues policy = o->policy.empty() ? KeyValues{} : parse_key_values(o->policy, "--policy");
    std::vector<Side> sides = parse_backends(o->backends);
    const std::string base = o->op.ends_with("-backward") ? o->op.substr(0, o->op.size() - 9) : o->op;
    OpResult r;
    if (o->op == "gemm") r = run_gemm(shape, policy, std::move(sides), o->seed);
    else if (refs::parse_activation(base)) r = run_activation(o->op, shape, policy, std::move(sides), o->seed);
    else throw UsageError("--op '" + o->op + "': available ops: " + kOps + " (more arrive with issue 3)");
    return report(o->op, r, o->seed, o->json);
  }});
}

}  // namespace mpverify::cli
