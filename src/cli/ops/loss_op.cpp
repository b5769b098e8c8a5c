// `ops --op softmax-cross-entropy|mse|bce-with-logits[-backward]`:
// refs::*_ref, emu::*_emu and gpu::*_gpu of the losses, with the tolerances
// of emu/loss_bounds.h.
#include <functional>
#include <random>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/loss_bounds.h"
#include "emu/loss_emu.h"
#include "gpu/loss_gpu.h"
#include "refs/loss_ref.h"

namespace mpverify::cli::ops {

namespace {

enum class Loss { softmax_cross_entropy, mse, bce_with_logits };

// The seeded inputs of one run.
struct LossInputs {
  mpverify::ops::SoftmaxCrossEntropyShape shape;  // softmax only
  std::vector<float> a;                  // logits, y or x
  std::vector<float> t;                  // targets (mse, bce)
  std::vector<std::int32_t> labels;      // softmax only
};

LossInputs make_inputs(Loss loss, const OpArgs& args) {
  LossInputs in;
  std::mt19937_64 rng(args.seed);
  if (loss == Loss::softmax_cross_entropy) {
    check_keys(args.shape, {"b", "m"}, "--shape");
    in.shape = {whole_number(args.shape, "b", "--shape"), whole_number(args.shape, "m", "--shape")};
    if (in.shape.batch == 0 || in.shape.classes == 0) throw UsageError("--shape: b and m must be at least 1");
    if (in.shape.logits_size() > (std::size_t{1} << 24)) throw UsageError("--shape: b*m must be at most 16777216");
    // Logits of standard deviation 4 spread a row over e^+-20 or so: some
    // probabilities / b fall below fp16's smallest subnormal and the
    // gradient underflows there, as it does in training.
    in.a = normal_inputs(in.shape.logits_size(), rng, 4.0);
    std::uniform_int_distribution<std::int32_t> label(0, in.shape.classes - 1);
    for (int i = 0; i < in.shape.batch; ++i) in.labels.push_back(label(rng));
    return in;
  }
  check_keys(args.shape, {"n"}, "--shape");
  const auto n = static_cast<std::size_t>(whole_number(args.shape, "n", "--shape"));
  if (n == 0) throw UsageError("--shape: n must be at least 1");
  if (loss == Loss::mse) {
    in.a = normal_inputs(n, rng, 1.0);
    in.t = normal_inputs(n, rng, 1.0);
  } else {
    in.a = normal_inputs(n, rng, 4.0);  // reaches the flat parts of the sigmoid
    std::uniform_real_distribution<float> probability(0.0f, 1.0f);
    for (std::size_t i = 0; i < n; ++i) in.t.push_back(probability(rng));
  }
  return in;
}

// Fills `out` (the loss, or the gradient) on one side.
void run_side(Loss loss, bool backward, const std::string& side, const LossInputs& in,
              const emu::LossPolicy& policy, emu::CounterSet* counters, std::vector<float>& out) {
  const auto& s = in.shape;
  switch (loss) {
    case Loss::softmax_cross_entropy:
      if (backward) {
        if (side == "ref") refs::softmax_cross_entropy_backward_ref(s, in.a, in.labels, out);
        else if (side == "emu") emu::softmax_cross_entropy_backward_emu(s, in.a, in.labels, out, policy, counters);
        else gpu::softmax_cross_entropy_backward_gpu(s, in.a, in.labels, out);
      } else {
        out[0] = side == "ref"   ? refs::softmax_cross_entropy_ref(s, in.a, in.labels)
                 : side == "emu" ? emu::softmax_cross_entropy_emu(s, in.a, in.labels, policy, counters)
                                 : gpu::softmax_cross_entropy_gpu(s, in.a, in.labels);
      }
      return;
    case Loss::mse:
      if (backward) {
        if (side == "ref") refs::mse_backward_ref(in.a, in.t, out);
        else if (side == "emu") emu::mse_backward_emu(in.a, in.t, out, policy, counters);
        else gpu::mse_backward_gpu(in.a, in.t, out);
      } else {
        out[0] = side == "ref"   ? refs::mse_ref(in.a, in.t)
                 : side == "emu" ? emu::mse_emu(in.a, in.t, policy, counters)
                                 : gpu::mse_gpu(in.a, in.t);
      }
      return;
    case Loss::bce_with_logits:
      if (backward) {
        if (side == "ref") refs::bce_with_logits_backward_ref(in.a, in.t, out);
        else if (side == "emu") emu::bce_with_logits_backward_emu(in.a, in.t, out, policy, counters);
        else gpu::bce_with_logits_backward_gpu(in.a, in.t, out);
      } else {
        out[0] = side == "ref"   ? refs::bce_with_logits_ref(in.a, in.t)
                 : side == "emu" ? emu::bce_with_logits_emu(in.a, in.t, policy, counters)
                                 : gpu::bce_with_logits_gpu(in.a, in.t);
      }
      return;
  }
}

emu::LossErrorBounds bounds_of(Loss loss, bool backward, const LossInputs& in, const emu::LossPolicy& policy) {
  switch (loss) {
    case Loss::softmax_cross_entropy: return emu::softmax_cross_entropy_bounds(in.shape, in.a, in.labels, policy, backward);
    case Loss::mse: return emu::mse_bounds(in.a, in.t, policy, backward);
    case Loss::bce_with_logits: return emu::bce_with_logits_bounds(in.a, in.t, policy, backward);
  }
  throw std::logic_error("unknown loss");
}

OpResult run_loss(const OpArgs& args, std::vector<Side> sides) {
  const bool backward = args.op.ends_with("-backward");
  const std::string base = backward ? args.op.substr(0, args.op.size() - 9) : args.op;
  const Loss loss = base == "softmax-cross-entropy" ? Loss::softmax_cross_entropy
                    : base == "mse"                 ? Loss::mse
                                                    : Loss::bce_with_logits;
  const LossInputs in = make_inputs(loss, args);
  check_keys(args.policy, {"input", "accumulate", "output"}, "--policy");
  emu::LossPolicy policy;
  policy.input = format_option(args.policy, "input", "--policy", policy.input);
  policy.accumulate = format_option(args.policy, "accumulate", "--policy", policy.accumulate);
  policy.output = format_option(args.policy, "output", "--policy", policy.output);

  OpResult r;
  const char* gradient = loss == Loss::softmax_cross_entropy ? "dlogits" : loss == Loss::mse ? "dy" : "dx";
  r.tensors = {backward ? OutputTensor{gradient, policy.output} : OutputTensor{"loss", formats::parse_format("fp32")}};
  size_outputs(sides, {backward ? in.a.size() : 1});
  const bool gpu_policy = policy.input.name == "fp16" && policy.accumulate.name == "fp32" &&
                          policy.output.name == "fp16";
  for (Side& side : sides) {
    if (side.name == "gpu") {
      run_gpu_side(side, gpu_policy ? "" : "the GPU losses take fp16 input, fp32 accumulation and fp16 gradients",
                   [&] { run_side(loss, backward, "gpu", in, policy, nullptr, side.out[0]); });
    } else {
      run_side(loss, backward, side.name, in, policy, &r.counters, side.out[0]);
      side.ran = true;
    }
  }
  r.sides = std::move(sides);

  // Each side within its a priori bound of the FP64 value on its view of the
  // inputs (emu/loss_bounds.h), plus the input rounding between views.
  const auto bounds = std::make_shared<const emu::LossErrorBounds>(bounds_of(loss, backward, in, policy));
  r.tolerance = [bounds](std::size_t, const std::string& a, const std::string& b) { return bounds->tolerance(a, b); };
  r.title = "op " + args.op + "  ";
  if (loss == Loss::softmax_cross_entropy) {
    r.title += "b=" + std::to_string(in.shape.batch) + " m=" + std::to_string(in.shape.classes);
    r.shape = {{"b", in.shape.batch}, {"m", in.shape.classes}};
  } else {
    r.title += "n=" + std::to_string(in.a.size());
    r.shape = {{"n", in.a.size()}};
  }
  r.title += "  policy input=" + policy.input.name + " accumulate=" + policy.accumulate.name +
             " output=" + policy.output.name;
  r.policy = {{"input", policy.input.name}, {"accumulate", policy.accumulate.name}, {"output", policy.output.name}};
  return r;
}

}  // namespace

OpFamily loss_op_family() {
  OpFamily f;
  for (const char* name : {"softmax-cross-entropy", "mse", "bce-with-logits"}) {
    f.names.push_back(name);
    f.names.push_back(std::string(name) + "-backward");
  }
  f.run = run_loss;
  f.help =
      "softmax-cross-entropy, mse, bce-with-logits (and NAME-backward): --shape b=,m= (softmax, batch x classes) "
      "or n=; --policy input= (fp16), accumulate= (fp32), output= (fp16, the gradient; the loss is fp32).";
  return f;
}

}  // namespace mpverify::cli::ops
