// `ops --op sgd|adam`: refs::*_step_ref, emu::*_step_emu and gpu::*_step_gpu
// applied for T steps to the same seeded weights and gradients; the outputs
// are the final weights and state. Tolerances come from the running error
// bounds of refs/optimizer_bound.h, or are bit-exact where two sides perform
// the same float operations on the same storage.
#include <cstdio>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/optimizer_emu.h"
#include "emu/quantize.h"
#include "gpu/optimizer_gpu.h"
#include "refs/optimizer_bound.h"
#include "refs/optimizer_ref.h"

namespace mpverify::cli::ops {

namespace {

bool is_fp32(const formats::Format& f) { return f == formats::parse_format("fp32"); }
bool is_fp16(const formats::Format& f) { return f == formats::parse_format("fp16"); }

bool flag(const KeyValues& kv, const std::string& key) {
  const int v = whole_number(kv, key, "--policy", 0);
  if (v > 1) throw UsageError("--policy: " + key + "= takes 0 or 1");
  return v == 1;
}

// Why the GPU kernels cannot run this policy (they keep the state in fp32, the
// weights and the gradient in fp32 or fp16); empty when they can.
std::string gpu_unsupported(const emu::OptimizerPolicy& p) {
  if (!is_fp32(p.state)) return "the GPU optimizers keep their state in fp32";
  if (!is_fp32(p.weights) && !is_fp16(p.weights)) return "the GPU optimizers store weights in fp32 or fp16";
  if (!is_fp32(p.grad) && !is_fp16(p.grad)) return "the GPU optimizers take fp32 or fp16 gradients";
  return "";
}

gpu::OptimizerStorage gpu_storage(const emu::OptimizerPolicy& p) {
  using F = gpu::OptimizerStorageFormat;
  return {is_fp16(p.weights) ? F::fp16 : F::fp32, is_fp16(p.grad) ? F::fp16 : F::fp32};
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The run's size, formats and hyperparameters, from --shape and --policy.
struct OptimizerSetup {
  bool adam = false;
  std::size_t n = 0;
  int steps = 0;
  emu::OptimizerPolicy policy;
  mpverify::ops::SgdParams sgd;
  mpverify::ops::AdamParams adm;
  nlohmann::json params;  // the hyperparameters, for the title and the JSON policy
};

// --policy's lr, moments, decay and flags into setup (a UsageError names a bad one).
void read_hyperparameters(const OpArgs& args, OptimizerSetup& o) {
  mpverify::ops::SgdParams& sgd = o.sgd;
  mpverify::ops::AdamParams& adm = o.adm;
  try {
    if (o.adam) {
      adm.lr = real_number(args.policy, "lr", "--policy", adm.lr);
      adm.beta1 = real_number(args.policy, "beta1", "--policy", adm.beta1);
      adm.beta2 = real_number(args.policy, "beta2", "--policy", adm.beta2);
      adm.eps = real_number(args.policy, "eps", "--policy", adm.eps);
      adm.weight_decay = real_number(args.policy, "weight_decay", "--policy", adm.weight_decay);
      adm.adamw = flag(args.policy, "adamw");
      adm.check();
      o.params = {{"lr", adm.lr}, {"beta1", adm.beta1}, {"beta2", adm.beta2}, {"eps", adm.eps},
                  {"weight_decay", adm.weight_decay}, {"adamw", adm.adamw}};
    } else {
      sgd.momentum = 0.9;  // so that there is a momentum buffer to compare (torch's default is 0)
      sgd.lr = real_number(args.policy, "lr", "--policy", sgd.lr);
      sgd.momentum = real_number(args.policy, "momentum", "--policy", sgd.momentum);
      sgd.dampening = real_number(args.policy, "dampening", "--policy", sgd.dampening);
      sgd.weight_decay = real_number(args.policy, "weight_decay", "--policy", sgd.weight_decay);
      sgd.nesterov = flag(args.policy, "nesterov");
      sgd.check();
      o.params = {{"lr", sgd.lr}, {"momentum", sgd.momentum}, {"dampening", sgd.dampening},
                  {"weight_decay", sgd.weight_decay}, {"nesterov", sgd.nesterov}};
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--policy: ") + e.what());
  }
}

OptimizerSetup optimizer_setup(const OpArgs& args) {
  OptimizerSetup o;
  o.adam = args.op == "adam";
  check_keys(args.shape, {"n", "steps"}, "--shape");
  o.n = static_cast<std::size_t>(whole_number(args.shape, "n", "--shape"));
  o.steps = whole_number(args.shape, "steps", "--shape", 1);
  if (o.n == 0 || o.steps == 0) throw UsageError("--shape: n and steps must be at least 1");
  if (o.n * static_cast<std::size_t>(o.steps) > (std::size_t{1} << 26))
    throw UsageError("--shape: n * steps must be at most 2^26 (one seeded gradient per step is kept)");
  if (o.adam)
    check_keys(args.policy, {"weights", "state", "grad", "lr", "beta1", "beta2", "eps", "weight_decay", "adamw"},
               "--policy");
  else
    check_keys(args.policy, {"weights", "state", "grad", "lr", "momentum", "dampening", "weight_decay", "nesterov"},
               "--policy");
  o.policy.weights = format_option(args.policy, "weights", "--policy", o.policy.weights);
  o.policy.state = format_option(args.policy, "state", "--policy", o.policy.state);
  o.policy.grad = format_option(args.policy, "grad", "--policy", o.policy.grad);
  read_hyperparameters(args, o);
  return o;
}

// Every side's steps from w0 with the same gradients: its final weights and
// state into side.out (w, then m for Adam, then the momentum or v).
void run_optimizer_sides(const OptimizerSetup& o, const std::vector<float>& w0,
                         const std::vector<std::vector<float>>& grads, bool has_v, std::vector<Side>& sides,
                         OpResult& r) {
  const bool adam = o.adam;
  const mpverify::ops::SgdParams& sgd = o.sgd;
  const mpverify::ops::AdamParams& adm = o.adm;
  const emu::OptimizerPolicy& policy = o.policy;
  const std::string unsupported = gpu_unsupported(policy);
  for (Side& side : sides) {
    std::vector<float>& w = side.out[0];
    w = w0;
    std::vector<float> unused;
    std::vector<float>& m = adam ? side.out[1] : unused;
    std::vector<float>& v = has_v ? side.out.back() : unused;
    auto run_steps = [&](auto&& step_fn) {
      for (int t = 0; t < o.steps; ++t) step_fn(static_cast<std::int64_t>(t + 1), grads[static_cast<std::size_t>(t)]);
    };
    if (side.name == "ref") {
      if (adam) run_steps([&](std::int64_t s, const std::vector<float>& g) { refs::adam_step_ref(adm, s, w, m, v, g); });
      else run_steps([&](std::int64_t s, const std::vector<float>& g) { refs::sgd_step_ref(sgd, s, w, v, g); });
      side.ran = true;
    } else if (side.name == "emu") {
      if (adam)
        run_steps([&](std::int64_t s, const std::vector<float>& g) {
          emu::adam_step_emu(adm, s, w, m, v, g, policy, &r.counters);
        });
      else
        run_steps([&](std::int64_t s, const std::vector<float>& g) {
          emu::sgd_step_emu(sgd, s, w, v, g, policy, &r.counters);
        });
      side.ran = true;
    } else {
      const gpu::OptimizerStorage storage = gpu_storage(policy);
      run_gpu_side(side, unsupported, [&] {
        if (adam)
          run_steps([&](std::int64_t s, const std::vector<float>& g) { gpu::adam_step_gpu(adm, s, w, m, v, g, storage); });
        else
          run_steps([&](std::int64_t s, const std::vector<float>& g) { gpu::sgd_step_gpu(sgd, s, w, v, g, storage); });
      });
    }
  }
}

// Bit-exact where two sides perform the same float operations on the same
// storage, else the normwise bound from both sides' running error bounds.
void set_optimizer_tolerance(const OptimizerSetup& o, const std::vector<float>& w0,
                             const std::vector<std::vector<float>>& grads, bool has_v, OpResult& r) {
  const bool adam = o.adam;
  const emu::OptimizerPolicy& policy = o.policy;
  // Each side's running error bound against the exact steps (refs/optimizer_bound.h),
  // per output tensor in the order of r.tensors.
  auto bounds_of = [&](const refs::SideRounding& rounding) {
    const refs::OptimizerBounds b = adam ? refs::adam_error_bounds(o.adm, rounding, w0, grads)
                                         : refs::sgd_error_bounds(o.sgd, rounding, w0, grads);
    std::vector<refs::TensorBound> out{b.w};
    if (adam) out.push_back(b.m);
    if (has_v) out.push_back(b.v);
    return out;
  };
  std::map<std::string, std::vector<refs::TensorBound>> bounds{
      {"ref", bounds_of(refs::SideRounding::fp32_reference())},
      {"emu", bounds_of(refs::SideRounding::stored(policy.weights, policy.state, policy.grad))},
      {"gpu", bounds_of(refs::SideRounding::stored(policy.weights, policy.state, policy.grad, true))}};
  // Pairs that perform the same float operations on the same storage agree bit
  // for bit: the reference and the emulator with every format fp32; the GPU
  // (fp32 state) with the emulator when the weights are fp32 (both round an
  // fp16 gradient with RNE), and with the reference when the gradient is too.
  const bool w32 = is_fp32(policy.weights), g32 = is_fp32(policy.grad), s32 = is_fp32(policy.state);
  auto same_ops = [=](const std::string& a, const std::string& b) {
    auto pair = [&](const char* x, const char* y) { return (a == x && b == y) || (a == y && b == x); };
    if (pair("ref", "emu")) return w32 && g32 && s32;
    if (pair("emu", "gpu")) return w32;
    if (pair("ref", "gpu")) return w32 && g32;
    return a == b;
  };
  r.tolerance = [=](std::size_t t, const std::string& a, const std::string& b) {
    if (same_ops(a, b))
      return compare::Tolerance::bit_exact(
          "the same float operations in the same order, each rounded to fp32 and never contracted, on the same "
          "storage");
    return compare::Tolerance::normwise(refs::normwise_bound(bounds.at(a)[t], bounds.at(b)[t]),
                                        "running error bounds of both sides over all steps (u|x| + eta per "
                                        "operation and storage rounding; a weight store errs by at most "
                                        "min(u_w |w+u|, |u|)), summed per element, in norm");
  };
}

std::string optimizer_title(const OpArgs& args, const OptimizerSetup& o) {
  std::string title = "op ";
  title += args.op;
  title += "  n=" + std::to_string(o.n) + " steps=" + std::to_string(o.steps) + "  policy weights=" +
           o.policy.weights.name + " state=" + o.policy.state.name + " grad=" + o.policy.grad.name;
  for (const auto& [key, value] : o.params.items()) {
    title += " " + key + "=";
    title += value.is_boolean() ? (value.get<bool>() ? "1" : "0") : number(value.get<double>());
  }
  return title;
}

OpResult run_optimizer(const OpArgs& args, std::vector<Side> sides) {
  const OptimizerSetup o = optimizer_setup(args);
  const std::size_t n = o.n;
  const emu::OptimizerPolicy& policy = o.policy;

  // Weights ~ N(0, 1), already in the weight format, so that every side starts
  // from the same model and the comparison measures the updates; gradients
  // ~ N(0, 1e-3): with lr = 1e-3, SGD's updates are ~1e-6 of weights ~1, far
  // below fp16's half-spacing 2^-12 |w|: the swamping the counters show.
  std::mt19937_64 rng(args.seed);
  std::vector<float> w0 = normal_inputs(n, rng, 1.0);
  emu::quantize(w0, w0, emu::QuantizeSpec{policy.weights});
  std::vector<std::vector<float>> grads;
  for (int t = 0; t < o.steps; ++t) grads.push_back(normal_inputs(n, rng, 1e-3));

  OpResult r;
  r.tensors = {{"w", policy.weights}};
  const bool has_v = o.adam || o.sgd.momentum != 0;
  if (o.adam) r.tensors.push_back({"m", policy.state});
  if (has_v) r.tensors.push_back({"v", policy.state});
  if (r.tensors.size() == 3) size_outputs(sides, {n, n, n});
  else if (r.tensors.size() == 2) size_outputs(sides, {n, n});
  else size_outputs(sides, {n});

  run_optimizer_sides(o, w0, grads, has_v, sides, r);
  r.sides = std::move(sides);
  set_optimizer_tolerance(o, w0, grads, has_v, r);
  r.title = optimizer_title(args, o);
  r.shape = {{"n", n}, {"steps", o.steps}};
  r.policy = {{"weights", policy.weights.name}, {"state", policy.state.name}, {"grad", policy.grad.name}};
  r.policy.update(o.params);
  return r;
}

}  // namespace

OpFamily optimizer_op_family() {
  OpFamily f;
  f.names = {"sgd", "adam"};
  f.run = run_optimizer;
  f.help =
      "sgd, adam: T optimizer steps on seeded weights N(0,1) and gradients N(0,1e-3); outputs w and the state. "
      "--shape n=N[,steps=T]; --policy weights=, state=, grad= (fp32; weights=fp16 is fp16-pure), lr= (1e-3), "
      "weight_decay=; sgd: momentum= (0.9), dampening=, nesterov=0|1; adam: beta1=, beta2=, eps=, adamw=0|1.";
  return f;
}

}  // namespace mpverify::cli::ops
