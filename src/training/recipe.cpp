#include "training/recipe.h"

#include <charconv>
#include <stdexcept>

#include "emu/mma_presets.h"
#include "nn/policies.h"

namespace mpverify::training {

namespace {

using formats::Format;
using formats::parse_format;

const std::vector<std::string>& names() {
  static const std::vector<std::string> n = {"fp32",      "o1",   "o2",    "fp16-pure",    "bf16-o1", "bf16-o2",
                                             "bf16-pure", "fp8", "mxfp8", "nvfp4", "fp8-blockwise"};
  return n;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items) {
    if (!s.empty()) s += ", ";
    s += item;
  }
  return s;
}

[[noreturn]] void fail(std::string_view recipe, std::string_view what) {
  std::string message = "recipe '";
  message += recipe;
  message += "': ";
  message += what;
  throw std::invalid_argument(message);
}

// The low-precision roles of the mixed recipes, set to `low`.
void set_mixed(Recipe& r, const Format& low, bool low_weights, bool pure) {
  nn::Precision& p = r.precision;
  p.matmul_forward = p.matmul_backward = low;
  p.activations = p.activation_grads = p.elementwise = low;
  p.weight_grads = low;
  if (low_weights) p.weights = low;
  if (low_weights) p.loss_input = low;
  if (pure) {
    p.master = low;
    p.norm_parameters = low;
    r.optimizer_state = low;
  }
}

const emu::BlockScheme& scheme(std::string_view name) { return *emu::find_block_scheme(name); }

// The block-scaled recipes (recipe.h): bf16 around the matrix ops, as in the fp8 recipe, but fp32 weight
// gradients (Transformer Engine's and Megatron's fp32 main_grad, DeepSeek-V3's fp32 gradients); the matrix
// ops of the high-precision layers run in bf16.
void set_block_scaled(Recipe& r, std::string_view name) {
  set_mixed(r, parse_format("bf16"), false, false);
  r.precision.weight_grads = nn::Precision::fp32();
  nn::BlockScaling b;
  if (name == "mxfp8") {
    // Transformer Engine's MXFP8BlockScaling: E4M3 for every operand, 1 x 32 blocks, its rceil scales.
    b.accumulation = emu::BlockScaledAccumulation::sm100_mxf8f6f4;
    b.input = b.weight = b.gradient = scheme("mxfp8-e4m3");
  } else if (name == "nvfp4") {
    // NVIDIA's NVFP4 recipe (arXiv 2509.25149): 16 x 16 weight tiles, 1 x 16 activations and gradients,
    // stochastic rounding of the gradients, the random Hadamard transform on wgrad's operands.
    b.accumulation = emu::BlockScaledAccumulation::sm100_mxf4nvf4;
    b.input = b.gradient = b.weight = scheme("nvfp4");
    b.weight.name = "nvfp4-16x16";
    b.weight.block_rows = 16;
    b.gradient_rounding = formats::Rounding::stochastic;
    b.wgrad_hadamard = true;
  } else {
    // DeepSeek-V3: 1 x 128 activation and gradient tiles, 128 x 128 weight blocks, promotion every 128.
    b.accumulation = emu::BlockScaledAccumulation::sm90_fp8_blockwise;
    b.input = b.gradient = scheme("fp8-tile1x128");
    b.weight = scheme("fp8-block128x128");
  }
  r.precision.block_scaling = std::move(b);
}

// The recipe's table row before any key.
Recipe base_recipe(std::string_view name, std::string_view text) {
  Recipe r;
  const Format fp16 = parse_format("fp16"), bf16 = parse_format("bf16");
  if (name == "fp32") return r;
  if (name == "o1") set_mixed(r, fp16, false, false);
  else if (name == "o2") set_mixed(r, fp16, true, false);
  else if (name == "fp16-pure") set_mixed(r, fp16, true, true);
  else if (name == "bf16-o1") set_mixed(r, bf16, false, false);
  else if (name == "bf16-o2") set_mixed(r, bf16, true, false);
  else if (name == "bf16-pure") set_mixed(r, bf16, true, true);
  else if (name == "fp8") {
    set_mixed(r, bf16, false, false);
    // OCP FP8 (Transformer Engine's HYBRID: E4M3 forward, E5M2 gradients); the casts saturate as CUDA's
    // __nv_fp8_e4m3(float) and __nv_fp8_e5m2(float) constructors do (__NV_SATFINITE, cuda_fp8.hpp:1587 of
    // CUDA 13.0), which Transformer Engine's cast kernels use.
    r.precision.matmul_forward = parse_format("fp8-e4m3:saturate");
    r.precision.matmul_backward = parse_format("fp8-e5m2:saturate");
    r.operand_scaling = OperandScaling::current;
  } else if (name == "mxfp8" || name == "nvfp4" || name == "fp8-blockwise") {
    set_block_scaled(r, name);
  } else {
    std::string what = "unknown recipe '";
    what += name;
    what += "'; the recipes are ";
    what += joined(names());
    fail(text, what);
  }
  return r;
}

// Every role that holds the recipe's low format is set to `low`.
void replace_low(Recipe& r, const Format& old_low, const Format& low) {
  nn::Precision& p = r.precision;
  for (Format* f : {&p.matmul_forward, &p.matmul_backward, &p.activations, &p.activation_grads, &p.elementwise,
                    &p.weights, &p.weight_grads, &p.master, &p.norm_statistics, &p.norm_parameters, &p.loss_input,
                    &p.loss_accumulate, &r.optimizer_state})
    if (*f == old_low) *f = low;
}

bool is_mma_architecture(std::string_view value) {
  for (const std::string& a : emu::mma_architectures())
    if (value == a) return true;
  for (const emu::MmaModel& m : emu::mma_presets())
    if (value == m.name) return true;
  return false;
}

// accumulation=ARCHITECTURE and promotion=N, checked on every matrix op's operand formats now rather than
// at a run's first GEMM: the architecture needs an instruction for each pairing, and N must be a multiple
// of each instruction's k.
void check_tensor_core_keys(const Recipe& r, std::string_view text) {
  const nn::Precision& p = r.precision;
  if (p.promotion_interval == 0) {
    if (p.mma_architecture.empty()) return;
  } else if (p.mma_architecture.empty()) {
    fail(text, "promotion=N needs accumulation=ARCHITECTURE or a tensor-core preset");
  }
  using nn::GradientOperand;
  using nn::Pass;
  for (const auto& [pass, gradient] : {std::pair{Pass::forward, GradientOperand::first},
                                       std::pair{Pass::backward, GradientOperand::first},
                                       std::pair{Pass::backward, GradientOperand::second}}) {
    emu::GemmPolicy policy;
    try {
      policy = nn::matmul_policy(p, pass, gradient);
    } catch (const std::invalid_argument& e) {
      fail(text, e.what());
    }
    if (p.promotion_interval % policy.mma->k != 0)
      fail(text, "promotion=" + std::to_string(p.promotion_interval) + " is not a multiple of k = " +
                     std::to_string(policy.mma->k) + " of " + policy.mma->name);
  }
}

// grad_rounding=stochastic and update_rounding=stochastic, checked once every key is applied: each needs a
// low format to round into, or it would ask for randomness that changes nothing (fp32 gradients are stored
// exactly) or that the recipe never uses (the trainer keeps an fp32 master write nearest-even).
void check_rounding_keys(const Recipe& r, std::string_view text) {
  const nn::Precision& p = r.precision;
  const auto low = [](const Format& f) { return !formats::same_encoding(f, nn::Precision::fp32()); };
  if (p.grad_rounding == formats::Rounding::stochastic && !low(p.activation_grads) && !low(p.weight_grads) &&
      !low(p.norm_parameters))
    fail(text, "grad_rounding=stochastic: this recipe stores its gradients in fp32, so there is nothing to round "
               "(activation_grads, weight_grads and norm_parameters are fp32)");
  if (p.update_rounding == formats::Rounding::stochastic && !low(p.master) && !low(p.norm_parameters))
    fail(text, "update_rounding=stochastic rounds the optimizer's write into weights without an fp32 master copy; "
               "this recipe's master and norm_parameters are fp32 (use fp16-pure, bf16-pure, or master=F)");
}

int parse_count(std::string_view key, std::string_view value, std::string_view text) {
  int n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0)
    fail(text, std::string(key) + " must be a count (0 or more)");
  return n;
}

// The block-scaled recipes' keys; false when `key` is not one of them.
bool apply_block_key(Recipe& r, std::string_view key, std::string_view value, std::string_view text) {
  if (key != "scale_rule" && key != "high_precision_last" && key != "dy_rounding" && key != "hadamard") return false;
  if (!r.precision.block_scaling) fail(text, std::string(key) + "= applies to the block-scaled recipes (mxfp8, nvfp4, "
                                           "fp8-blockwise)");
  nn::BlockScaling& b = *r.precision.block_scaling;
  if (key == "scale_rule") {
    const auto rule = emu::parse_scale_rule(value);
    if (!rule) fail(text, "scale_rule must be floor, ceil, even or rceil");
    if (b.input.scale_format != emu::ScaleFormat::e8m0)
      fail(text, "scale_rule= chooses E8M0 scales: it applies to mxfp8, whose blocks have them");
    b.scale_rule = *rule;
  } else if (key == "high_precision_last") {
    b.high_precision_last = parse_count(key, value, text);
  } else if (key == "dy_rounding") {
    if (value == "rne") b.gradient_rounding = formats::Rounding::nearest_even;
    else if (value == "stochastic") b.gradient_rounding = formats::Rounding::stochastic;
    else fail(text, "dy_rounding must be rne or stochastic");
  } else {
    if (value != "on" && value != "off") fail(text, "hadamard must be on or off");
    if (value == "on" && b.accumulation != emu::BlockScaledAccumulation::sm100_mxf4nvf4)
      fail(text, "hadamard=on: the random Hadamard transform is NVFP4's (16-element blocks); use it with nvfp4");
    b.wgrad_hadamard = value == "on";
  }
  return true;
}

void apply_key(Recipe& r, std::string_view name, std::string_view key, std::string_view value, std::string_view text) {
  nn::Precision& p = r.precision;
  if (apply_block_key(r, key, value, text)) return;
  if (key == "accumulation") {
    if (value == "fp32") p.accumulation = emu::Accumulation::fp32;
    else if (value == "fp16") p.accumulation = emu::Accumulation::fp16;
    else if (value == "tensor_core" || value == "tensor-core") p.accumulation = emu::Accumulation::tensor_core;
    else if (is_mma_architecture(value)) p.mma_architecture = std::string(value);
    else fail(text, "accumulation must be fp32, fp16, tensor_core, an architecture (volta, turing, ampere, ada, "
                    "hopper, blackwell) or a tensor-core preset (mpverify eval --op dot --list)");
    return;
  }
  if (key == "promotion") {
    int n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < 0)
      fail(text, "promotion must be a number of elements (0: none)");
    p.promotion_interval = n;
    return;
  }
  if (key == "grad_rounding" || key == "update_rounding") {
    formats::Rounding& rounding = key == "grad_rounding" ? p.grad_rounding : p.update_rounding;
    if (value == "rne") rounding = formats::Rounding::nearest_even;
    else if (value == "stochastic") rounding = formats::Rounding::stochastic;
    else fail(text, std::string(key) + " must be rne or stochastic");
    return;
  }
  if (key == "fp8_scaling") {
    if (p.block_scaling) fail(text, "fp8_scaling= is the fp8 recipe's per-tensor scaling; the block-scaled recipes "
                                    "scale every block themselves");
    if (value == "current") r.operand_scaling = OperandScaling::current;
    else if (value == "delayed") r.operand_scaling = OperandScaling::delayed;
    else if (value == "none") r.operand_scaling = OperandScaling::none;
    else fail(text, "fp8_scaling must be current, delayed or none");
    return;
  }
  struct Field {
    const char* key;
    Format* format;
  };
  const Field fields[] = {{"low", nullptr},
                          {"matmul_forward", &p.matmul_forward},   {"matmul_backward", &p.matmul_backward},
                          {"activations", &p.activations},         {"activation_grads", &p.activation_grads},
                          {"elementwise", &p.elementwise},         {"weights", &p.weights},
                          {"weight_grads", &p.weight_grads},       {"master", &p.master},
                          {"norm_statistics", &p.norm_statistics}, {"norm_parameters", &p.norm_parameters},
                          {"loss_input", &p.loss_input},           {"loss_accumulate", &p.loss_accumulate},
                          {"optimizer_state", &r.optimizer_state}};
  const Field* field = nullptr;
  for (const Field& f : fields)
    if (key == f.key) field = &f;
  if (!field) {
    std::string what = "unknown key '";
    what += key;
    what += "'; the keys are accumulation, promotion, fp8_scaling, grad_rounding, update_rounding, scale_rule, "
            "high_precision_last, dy_rounding, hadamard";
    for (const Field& f : fields) {
      what += ", ";
      what += f.key;
    }
    fail(text, what);
  }
  Format format;
  try {
    format = parse_format(value);
  } catch (const std::exception& e) {
    std::string what = "key ";
    what += key;
    what += ": ";
    what += e.what();
    fail(text, what);
  }
  if (field->format) {
    *field->format = format;
    return;
  }
  if (name == "fp32" || name == "fp8" || p.block_scaling)
    fail(text, "low= applies to the mixed recipes (o1, o2, fp16-pure, bf16-*)");
  replace_low(r, parse_format(name.starts_with("bf16") ? "bf16" : "fp16"), format);
}

}  // namespace

std::vector<std::string> recipe_names() { return names(); }

Recipe parse_recipe(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  Recipe r = base_recipe(name, text);
  r.name = std::string(text);
  if (colon == std::string_view::npos) return r;
  std::string_view rest = text.substr(colon + 1);
  if (rest.empty()) fail(text, "nothing after ':'; write KEY=VALUE pairs separated by commas");
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view pair = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == pair.size()) {
      std::string what = "'";
      what += pair;
      what += "' is not KEY=VALUE";
      fail(text, what);
    }
    apply_key(r, name, pair.substr(0, eq), pair.substr(eq + 1), text);
  }
  check_tensor_core_keys(r, text);
  check_rounding_keys(r, text);
  return r;
}

}  // namespace mpverify::training
