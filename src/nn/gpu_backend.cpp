// The gpu backend: each op maps its emulator policy to a CUDA compute
// (gpu/*_gpu.h) and runs it, or throws std::invalid_argument saying what the
// GPU path cannot do; it never falls back to the emulator. Plain C++: the
// gpu:: functions take host spans, and in a build without CUDA they are
// stubs that throw gpu::gpu_unavailable_reason(), so this file compiles the
// same in both builds.
//
// Two kinds of op run on the host, on purpose:
//  - The losses and their gradients are refs::*_ref (FP64, each result
//    rounded once to fp32) on the logits rounded to policy.input, which is
//    what autocast's fp32 loss computes from fp16 logits. The CUDA loss
//    kernels (gpu/loss_gpu.h) round the gradient to fp16 with an upstream
//    gradient of 1, before the trainer multiplies it by the loss scale: that
//    rounding would flush to zero exactly the small gradients a loss scale
//    exists to keep. The forward loss comes from the same host path, so the
//    value and its gradient agree.
//  - The bias add that nn's layers ask for (input, output and accumulation
//    fp32: nn/policies.h, a GEMM epilogue) has no fp32 CUDA kernel here (the
//    bias-add kernels are fp16 only). Forward, the host's fp32 x + b is one
//    correctly rounded IEEE addition, the same bits a fused fp32 epilogue
//    (cuBLASLt's bias epilogue on the fp32 accumulator) gives, and the
//    backend's GEMMs return that accumulator unrounded. Backward, the host
//    sums in FP64 and rounds once (refs::bias_add_backward_ref): at least as
//    accurate as any fp32 summation order a device would use, but not a
//    device's order. Running the fp16 kernel instead would round x and db to
//    fp16 behind an fp32 policy (in the fp32 recipe too), so it runs only for
//    a policy whose input is fp16.
//  - Layer norm and softmax (the transformer's) have no CUDA kernel yet: the
//    gpu backend keeps nn::Backend's refusal for them; gelu has no kernel in
//    gpu/activation_gpu.h either and is refused except under the all-fp32
//    policy, which runs every activation on the host (next item).
//  - The element-wise ops (activations, max-pool, batch norm) under an
//    all-fp32 policy, the fp32 recipe's: their CUDA kernels read and write
//    fp16 only, so the fp32 recipe runs them as the ref backend does
//    (refs::*_ref, FP32). Its GEMMs and convolutions still run on the device
//    (cuBLAS, cuDNN in fp32), so a GPU fp32 run is the device's fp32 compute
//    with the host's element-wise ops; each op copies its tensors to and from
//    the device anyway, so the host ops cost about what the copies would.
//
// Counters (emu::CounterSet*) are ignored: the device-side counts are
// gpu/tensor_counters_gpu.h, which the recorders run on the stored tensors.
#include "nn/gpu_backend.h"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "emu/quantize.h"
#include "gpu/activation_gpu.h"
#include "gpu/batch_norm_gpu.h"
#include "gpu/bias_add_gpu.h"
#include "gpu/conv2d_gpu.h"
#include "gpu/device.h"
#include "gpu/gemm_gpu.h"
#include "gpu/max_pool_gpu.h"
#include "gpu/optimizer_gpu.h"
#include "refs/activation_ref.h"
#include "refs/batch_norm_ref.h"
#include "refs/bias_add_ref.h"
#include "refs/loss_ref.h"
#include "refs/max_pool_ref.h"

namespace mpverify::nn {

namespace {

const formats::Format& fp32() {
  static const formats::Format f = formats::parse_format("fp32");
  return f;
}
const formats::Format& fp16() {
  static const formats::Format f = formats::parse_format("fp16");
  return f;
}
const formats::Format& bf16() {
  static const formats::Format f = formats::parse_format("bf16");
  return f;
}

// "gpu backend: <op>: <what the GPU path cannot do>; use --backend emu ...".
[[noreturn]] void unsupported(std::string_view op, std::string_view what) {
  std::string message = "gpu backend: ";
  message += op;
  message += ": ";
  message += what;
  message += "; use --backend emu to emulate this policy";
  throw std::invalid_argument(message);
}

std::string asks_for(std::string_view field, const formats::Format& f) {
  std::string s = "the policy asks for ";
  s += field;
  s += " ";
  s += f.name;
  return s;
}

// --- matrix ops -------------------------------------------------------------

// tensor_core accumulation is the emulator's model of the hardware's fp32
// accumulation; on the GPU it is the hardware itself, so it runs as the same
// compute as fp32 accumulation (the model's block size and bits play no part).
gpu::GemmCompute gemm_compute(const emu::GemmPolicy& p, std::string_view op) {
  const bool fp32_sums = p.accumulation == emu::Accumulation::fp32 || p.accumulation == emu::Accumulation::tensor_core;
  gpu::GemmCompute compute{};
  if (p.input == fp32()) {
    if (p.accumulation != emu::Accumulation::fp32) {
      std::string what = "fp32 inputs run as CUBLAS_COMPUTE_32F_PEDANTIC (fp32 FMAs, no tensor cores) and ";
      what += emu::to_string(p.accumulation);
      what += " accumulation was asked for";
      unsupported(op, what);
    }
    compute = gpu::GemmCompute::fp32_pedantic;
  } else if (p.input == fp16()) {
    compute = fp32_sums ? gpu::GemmCompute::fp16_fp32_accumulate : gpu::GemmCompute::fp16_fp16_accumulate;
  } else if (p.input == bf16()) {
    if (!fp32_sums) unsupported(op, "cuBLAS accumulates bf16 products in fp32 only and fp16 accumulation was asked for");
    compute = gpu::GemmCompute::bf16_fp32_accumulate;
  } else {
    std::string what = "cuBLAS takes fp32, fp16 or bf16 inputs and ";
    what += asks_for("input", p.input);
    unsupported(op, what);
  }
  // The fp32-accumulating computes return the fp32 accumulator, which the
  // caller rounds when it stores it (nn/context.h); the fp16-accumulating one
  // returns fp16 values, which fp16 and fp32 hold exactly.
  const bool fp16_result = compute == gpu::GemmCompute::fp16_fp16_accumulate;
  if (!(p.output == fp32() || (fp16_result && p.output == fp16()))) {
    std::string what = "the GEMM returns its ";
    what += fp16_result ? "fp16" : "fp32";
    what += " result unrounded (the caller rounds it when it stores it) and ";
    what += asks_for("output", p.output);
    unsupported(op, what);
  }
  return compute;
}

// cuDNN's fp16 compute has fp16 output tensors: y, dx and dw come back
// already rounded to fp16 (once, from the fp32 accumulator), also under an
// fp32 output policy, where the emulator returns the fp32 accumulator. For
// activations stored in fp16 the store's rounding then has nothing left to
// do; a dw stored in fp32 keeps the fp16 rounding.
gpu::ConvCompute conv_compute(const emu::GemmPolicy& p, std::string_view op) {
  const bool fp32_sums = p.accumulation == emu::Accumulation::fp32 || p.accumulation == emu::Accumulation::tensor_core;
  if (p.input == fp32() && p.accumulation == emu::Accumulation::fp32) {
    if (p.output != fp32()) {
      std::string what = "cuDNN's fp32 convolution returns fp32 and ";
      what += asks_for("output", p.output);
      unsupported(op, what);
    }
    return gpu::ConvCompute::fp32;
  }
  if (p.input == fp16() && fp32_sums) {
    if (p.output != fp32() && p.output != fp16()) {
      std::string what = "cuDNN's fp16 convolution returns fp16 and ";
      what += asks_for("output", p.output);
      unsupported(op, what);
    }
    return gpu::ConvCompute::fp16_fp32_accumulate;
  }
  std::string what = "the cuDNN convolutions run fp32 inputs with fp32 accumulation or fp16 inputs with fp32 "
                     "accumulation, and the policy asks for ";
  what += p.input.name;
  what += " inputs with ";
  what += emu::to_string(p.accumulation);
  what += " accumulation";
  unsupported(op, what);
}

// --- element-wise ops ---------------------------------------------------------

// The element-wise kernels read fp16 inputs and write fp16 outputs (their
// fp32 arithmetic in between). Under an fp32 output policy their values are
// therefore already rounded to fp16, where the emulator returns fp32: one
// rounding less for a caller that stores them in fp16; for one that stores
// them in fp32, a difference of up to half an fp16 ulp (plus the error of the
// kernel's fp32 math, which the emulator evaluates exactly).
void require_fp16_kernel(std::string_view op, std::string_view kernel, const formats::Format& input,
                         const formats::Format& output) {
  if (input != fp16()) {
    std::string what = "the CUDA kernel (";
    what += kernel;
    what += ") computes on fp16 inputs only and ";
    what += asks_for("input", input);
    unsupported(op, what);
  }
  if (output != fp16() && output != fp32()) {
    std::string what = "the CUDA kernel (";
    what += kernel;
    what += ") writes fp16 and ";
    what += asks_for("output", output);
    what += ", which would need a second rounding";
    unsupported(op, what);
  }
}

// The kernels cover relu, leaky-relu, tanh and sigmoid; gelu has none yet
// (under the all-fp32 policy it runs on the host, as the others do).
void require_activation_kernel(std::string_view op, const ops::ActivationParams& p) {
  if (p.kind == ops::Activation::gelu)
    unsupported(op, "gpu/activation_gpu.h has no gelu kernel yet (relu, leaky-relu, tanh, sigmoid only)");
}

void require_fp32_sums(std::string_view op, std::string_view field, const formats::Format& f) {
  if (f == fp32()) return;
  std::string what = "the CUDA kernel keeps its sums in fp32 and ";
  what += asks_for(field, f);
  unsupported(op, what);
}

// The fp32 recipe's element-wise policy: run on the host (see the top).
bool all_fp32(std::initializer_list<const formats::Format*> formats) {
  for (const formats::Format* f : formats)
    if (*f != fp32()) return false;
  return true;
}

bool is_fp32_epilogue(const emu::BiasAddPolicy& p) {
  return p.input == fp32() && p.output == fp32() && p.accumulation == fp32();
}

// What is not the fp32 epilogue must be the fp16 kernel's.
void require_fp16_bias_kernel(std::string_view op, const emu::BiasAddPolicy& p) {
  if (p.input != fp16()) {
    std::string what = "bias add runs as the fp16 CUDA kernel (gpu/bias_add_gpu.h), or as the fp32 GEMM epilogue "
                       "with input, output and accumulation all fp32, and the policy asks for input ";
    what += p.input.name;
    what += ", output ";
    what += p.output.name;
    what += ", accumulation ";
    what += p.accumulation.name;
    unsupported(op, what);
  }
  require_fp16_kernel(op, "gpu/bias_add_gpu.h", p.input, p.output);
}

// --- losses -------------------------------------------------------------------

// The logits as an fp32 loss reads them: rounded to policy.input.
std::vector<float> loss_input(std::string_view op, std::span<const float> logits, const emu::LossPolicy& p) {
  if (p.accumulate != fp32()) {
    std::string what = "the gpu backend computes the loss with the fp32 reference (fp32 sums, as autocast's fp32 "
                       "loss) and ";
    what += asks_for("accumulation in", p.accumulate);
    unsupported(op, what);
  }
  return emu::quantized_copy(logits, p.input);
}

// The gradient in the format the policy asks for (nn asks for fp32: the
// trainer multiplies it by the loss scale before it is stored).
void round_gradient(std::span<float> d, const emu::LossPolicy& p) {
  if (p.output != fp32()) emu::quantize(d, d, emu::QuantizeSpec{p.output});
}

// --- optimizers -----------------------------------------------------------------

gpu::OptimizerStorageFormat storage_format(std::string_view op, std::string_view field, const formats::Format& f) {
  if (f == fp32()) return gpu::OptimizerStorageFormat::fp32;
  if (f == fp16()) return gpu::OptimizerStorageFormat::fp16;
  std::string what = "the CUDA optimizers store ";
  what += field;
  what += " in fp32 or fp16 and ";
  what += asks_for(field, f);
  unsupported(op, what);
}

// fp16 weights are written back as fl16(fl32(w + u)), PyTorch's double
// rounding, where the emulator rounds w + u once (gpu/optimizer_gpu.h).
gpu::OptimizerStorage optimizer_storage(std::string_view op, const emu::OptimizerPolicy& p) {
  if (p.state != fp32()) {
    std::string what = "the CUDA optimizers keep their state (momentum, m, v) in fp32 and ";
    what += asks_for("state", p.state);
    unsupported(op, what);
  }
  if (p.update_rounding != formats::Rounding::nearest_even) {
    std::string what = "the CUDA optimizers round the update to nearest even, and the policy asks for ";
    what += formats::to_string(p.update_rounding);
    what += " (update_rounding=stochastic is the emulator's)";
    unsupported(op, what);
  }
  gpu::OptimizerStorage storage;
  storage.weights = storage_format(op, "weights", p.weights);
  storage.grad = storage_format(op, "grad", p.grad);
  return storage;
}

}  // namespace

std::unique_ptr<Backend> make_gpu_backend() {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
  return std::make_unique<GpuBackend>();
}

void GpuBackend::gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                      std::span<float> c, const emu::GemmPolicy& policy, emu::CounterSet*) {
  gpu::gemm_gpu(shape, a, b, c, gemm_compute(policy, "gemm"));
}

void GpuBackend::conv2d_forward(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                                std::span<float> y, const emu::GemmPolicy& policy, emu::CounterSet*) {
  gpu::conv2d_forward_gpu(shape, x, wgt, y, conv_compute(policy, "conv2d"));
}

void GpuBackend::conv2d_backward_data(const ops::Conv2dShape& shape, std::span<const float> dy,
                                      std::span<const float> wgt, std::span<float> dx, const emu::GemmPolicy& policy,
                                      emu::CounterSet*) {
  gpu::conv2d_backward_data_gpu(shape, dy, wgt, dx, conv_compute(policy, "conv2d_backward_data"));
}

void GpuBackend::conv2d_backward_filter(const ops::Conv2dShape& shape, std::span<const float> x,
                                        std::span<const float> dy, std::span<float> dw,
                                        const emu::GemmPolicy& policy, emu::CounterSet*) {
  gpu::conv2d_backward_filter_gpu(shape, x, dy, dw, conv_compute(policy, "conv2d_backward_filter"));
}

void GpuBackend::bias_add(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b,
                          std::span<float> y, const emu::BiasAddPolicy& policy, emu::CounterSet*) {
  if (is_fp32_epilogue(policy)) {
    refs::bias_add_ref(s, x, b, y);  // the fp32 epilogue on the host: see the top of this file
    return;
  }
  require_fp16_bias_kernel("bias_add", policy);
  gpu::bias_add_gpu(s, x, b, y);
}

// The kernel's db is one fp16 rounding of its fp32 block sum.
void GpuBackend::bias_add_backward(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                                   const emu::BiasAddPolicy& policy, emu::CounterSet*) {
  if (is_fp32_epilogue(policy)) {
    refs::bias_add_backward_ref(s, dy, db);  // on the host: see the top of this file
    return;
  }
  require_fp16_bias_kernel("bias_add_backward", policy);
  require_fp32_sums("bias_add_backward", "accumulation in", policy.accumulation);
  gpu::bias_add_backward_gpu(s, dy, db);
}

void GpuBackend::activation(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                            const emu::ElementwisePolicy& policy, emu::CounterSet*) {
  if (all_fp32({&policy.input, &policy.output})) return refs::activation_ref(p, x, y);
  require_activation_kernel("activation", p);
  require_fp16_kernel("activation", "gpu/activation_gpu.h", policy.input, policy.output);
  gpu::activation_gpu(p, x, y);
}

void GpuBackend::activation_backward(const ops::ActivationParams& p, std::span<const float> x,
                                     std::span<const float> dy, std::span<float> dx,
                                     const emu::ElementwisePolicy& policy, emu::CounterSet*) {
  if (all_fp32({&policy.input, &policy.output})) return refs::activation_backward_ref(p, x, dy, dx);
  require_activation_kernel("activation_backward", p);
  require_fp16_kernel("activation_backward", "gpu/activation_gpu.h", policy.input, policy.output);
  gpu::activation_backward_gpu(p, x, dy, dx);
}

void GpuBackend::max_pool(const ops::PoolShape& p, std::span<const float> x, std::span<float> y,
                          const emu::MaxPoolPolicy& policy, emu::CounterSet*) {
  if (all_fp32({&policy.input, &policy.output})) return refs::max_pool_ref(p, x, y);
  require_fp16_kernel("max_pool", "gpu/max_pool_gpu.h", policy.input, policy.output);
  gpu::max_pool_gpu(p, x, y);
}

void GpuBackend::max_pool_backward(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                                   std::span<float> dx, const emu::MaxPoolPolicy& policy, emu::CounterSet*) {
  if (all_fp32({&policy.input, &policy.output, &policy.accumulation}))
    return refs::max_pool_backward_ref(p, x, dy, dx);
  require_fp16_kernel("max_pool_backward", "gpu/max_pool_gpu.h", policy.input, policy.output);
  require_fp32_sums("max_pool_backward", "accumulation in", policy.accumulation);
  gpu::max_pool_backward_gpu(p, x, dy, dx);
}

// The kernels' reductions use a block of emu::kGpuReductionLanes threads;
// policy.lanes is the emulator's model of that block and plays no part here.
void GpuBackend::batch_norm(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                            std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                            std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                            std::span<float> running_var, const emu::BatchNormPolicy& policy, emu::CounterSet*) {
  if (all_fp32({&policy.input, &policy.output, &policy.statistics, &policy.parameters}))
    return refs::batch_norm_ref(s, p, x, gamma, beta, y, mean, invstd, running_mean, running_var);
  require_fp16_kernel("batch_norm", "gpu/batch_norm_gpu.h", policy.input, policy.output);
  require_fp32_sums("batch_norm", "statistics in", policy.statistics);
  require_fp32_sums("batch_norm", "parameters in", policy.parameters);
  gpu::batch_norm_gpu(s, p, x, gamma, beta, y, mean, invstd, running_mean, running_var);
}

void GpuBackend::batch_norm_backward(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                                     std::span<const float> gamma, std::span<const float> mean,
                                     std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                                     std::span<float> dbeta, const emu::BatchNormPolicy& policy, emu::CounterSet*) {
  if (all_fp32({&policy.input, &policy.output, &policy.statistics, &policy.parameters}))
    return refs::batch_norm_backward_ref(s, x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
  require_fp16_kernel("batch_norm_backward", "gpu/batch_norm_gpu.h", policy.input, policy.output);
  require_fp32_sums("batch_norm_backward", "statistics in", policy.statistics);
  require_fp32_sums("batch_norm_backward", "parameters in", policy.parameters);
  gpu::batch_norm_backward_gpu(s, x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
}

float GpuBackend::softmax_cross_entropy(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, const emu::LossPolicy& policy,
                                        emu::CounterSet*) {
  const std::vector<float> z = loss_input("softmax_cross_entropy", logits, policy);
  return refs::softmax_cross_entropy_ref(s, z, labels);
}

void GpuBackend::softmax_cross_entropy_backward(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                                std::span<const std::int32_t> labels, std::span<float> dlogits,
                                                const emu::LossPolicy& policy, emu::CounterSet*) {
  const std::vector<float> z = loss_input("softmax_cross_entropy_backward", logits, policy);
  refs::softmax_cross_entropy_backward_ref(s, z, labels, dlogits);
  round_gradient(dlogits, policy);
}

float GpuBackend::bce_with_logits(std::span<const float> x, std::span<const float> t, const emu::LossPolicy& policy,
                                  emu::CounterSet*) {
  const std::vector<float> z = loss_input("bce_with_logits", x, policy);
  return refs::bce_with_logits_ref(z, t);
}

void GpuBackend::bce_with_logits_backward(std::span<const float> x, std::span<const float> t, std::span<float> dx,
                                          const emu::LossPolicy& policy, emu::CounterSet*) {
  const std::vector<float> z = loss_input("bce_with_logits_backward", x, policy);
  refs::bce_with_logits_backward_ref(z, t, dx);
  round_gradient(dx, policy);
}

void GpuBackend::sgd_step(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                          std::span<const float> g, const emu::OptimizerPolicy& policy, emu::CounterSet*,
                          std::span<float> update) {
  gpu::sgd_step_gpu(p, step, w, v, g, optimizer_storage("sgd_step", policy), update);
}

void GpuBackend::adam_step(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                           std::span<float> v, std::span<const float> g, const emu::OptimizerPolicy& policy,
                           emu::CounterSet*, std::span<float> update) {
  gpu::adam_step_gpu(p, step, w, m, v, g, optimizer_storage("adam_step", policy), update);
}

}  // namespace mpverify::nn
