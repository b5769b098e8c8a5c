// GELU (ops::Activation::gelu, PyTorch's exact erf form): the FP64 math
// against hand-worked values and its derivative against finite differences,
// the emulated side against the FP64 value (half an ulp of fp16 and bf16),
// the counts of the input and output roundings, the reference, and the GPU
// side's refusal (no kernel yet).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/activation_emu.h"
#include "emu/quantize.h"
#include "gpu/activation_gpu.h"
#include "nn/gpu_backend.h"
#include "ops/fp64_math.h"
#include "ops/gelu_fp64.h"
#include "refs/activation_ref.h"

namespace {

using namespace mpverify;
using ops::Activation;

const ops::ActivationParams kGelu{Activation::gelu, 0.0};

// x, 0.5 x erfc(-x / sqrt 2) and its derivative, to 25 digits (mpmath at 30 digits).
struct Worked {
  double x, f, df;
};
constexpr Worked kWorked[] = {
    {1.0, 0.8413447460685429485852325, 1.083315470587686298383063},
    {-1.0, -0.1586552539314570514147675, -0.08331547058768629838306274},
    {2.0, 1.954499736103641585599435, 1.085231801078196896700846},
    {-3.0, -0.004049694094890283579955444, -0.01194564720418392700015524},
    // 1 + erf(x / sqrt 2) cancels to 0 here; erfc keeps the relative accuracy.
    {-10.0, -7.619853024160526065973343e-23, -7.6184000964648140856793e-22},
};

// glibc's erfc and exp are within a few ulps of double, and so are the three
// or four roundings around them: 16 u64. The argument z = x / sqrt 2 carries
// two roundings (the constant, the product), 2 u64 relative, which erfc
// (|erfc'(z) / erfc(z)| <= 2z + 2 for z >= 0) and exp(-x^2/2) (relative
// change x^2 |dx/x|) turn into (x^2 + 4|x| + 4) 2 u64 at most: 232 u64 = 2.6e-14
// at x = -10. The tanh approximation misses these by 1e-4 and more, and the
// 1 + erf form misses x = -10 entirely (it gives 0).
TEST(GeluFp64, MatchesHandWorkedValues) {
  for (const Worked& w : kWorked) {
    const double tolerance = (16 + 2 * (w.x * w.x + 4 * std::fabs(w.x) + 4)) * 0x1p-53;
    EXPECT_NEAR(ops::gelu_fp64(w.x) / w.f, 1.0, tolerance) << "x=" << w.x;
    EXPECT_NEAR(ops::gelu_derivative_fp64(w.x) / w.df, 1.0, tolerance) << "x=" << w.x;
    EXPECT_EQ(ops::activation_fp64(kGelu, w.x), ops::gelu_fp64(w.x));
    EXPECT_EQ(ops::activation_derivative_fp64(kGelu, w.x), ops::gelu_derivative_fp64(w.x));
  }
  EXPECT_EQ(ops::gelu_fp64(0.0), 0.0);
  EXPECT_EQ(ops::gelu_derivative_fp64(0.0), 0.5);
  EXPECT_EQ(ops::gelu_fp64(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(ops::gelu_fp64(NAN)));
}

// Central differences with h = 2^-20 over [-8, 8]: truncation h^2/6 max|f'''|
// <= 2^-40 * 0.7788 / 6 < 1.2e-13 (ops::kGeluMaxThirdDerivative); the two FP64
// values of f, within 2^-48 |f| <= 2^-45 each (|f| <= 8), cancel to at most
// 2 * 2^-45 / (2h) = 2^-25 = 3e-8 of error; the derivative's own error is
// 2^-48 * 1.13. A wrong derivative (Phi alone, or the tanh form's) misses by
// more than 1e-4 somewhere on the grid.
TEST(GeluFp64, DerivativeMatchesFiniteDifferences) {
  const double h = 0x1p-20, tolerance = 1.2e-13 + 0x1p-25 + 0x1p-47;
  int checked = 0;
  for (int i = -1600; i <= 1600; ++i) {
    const double x = i * 0.005 + 0.0013;
    const double fd = (ops::gelu_fp64(x + h) - ops::gelu_fp64(x - h)) / (2 * h);
    EXPECT_NEAR(fd, ops::gelu_derivative_fp64(x), tolerance) << "x=" << x;
    ++checked;
  }
  EXPECT_EQ(checked, 3201);
}

// The emulator rounds the FP64 value of f (f' dy) once to the output format,
// from inputs rounded to the input format: within half an ulp of the FP64
// value at the rounded inputs, plus its 2^-48 relative error (2^-37 of an
// fp16 ulp, 2^-40 of a bf16 one).
TEST(GeluEmu, WithinHalfAnUlpOfFp64InFp16AndBf16) {
  const compare::Tolerance half = compare::Tolerance::ulps(0.5 + 0x1p-30, "one rounding of the FP64 value");
  std::vector<float> x, dy;
  for (int i = -3000; i <= 3000; ++i) {
    x.push_back(static_cast<float>(i) * 0.005f);
    dy.push_back(std::sin(static_cast<float>(i)) * 3.0f);
  }
  for (int e = -30; e <= -1; ++e) {
    x.push_back(std::ldexp(1.3f, e));
    x.push_back(-std::ldexp(1.3f, e));
    dy.push_back(1.5f);
    dy.push_back(-0.75f);
  }
  for (const char* name : {"fp16", "bf16"}) {
    const formats::Format f = formats::parse_format(name);
    const emu::ElementwisePolicy policy{f, f};
    std::vector<float> xr = x, dyr = dy;
    emu::quantize(xr, xr, emu::QuantizeSpec{f});
    emu::quantize(dyr, dyr, emu::QuantizeSpec{f});
    std::vector<double> y64(x.size()), dx64(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      y64[i] = ops::gelu_fp64(xr[i]);
      dx64[i] = ops::gelu_derivative_fp64(xr[i]) * dyr[i];
    }
    std::vector<float> y(x.size()), dx(x.size());
    emu::activation_emu(kGelu, x, y, policy);
    emu::activation_backward_emu(kGelu, x, dy, dx, policy);
    const auto fwd = compare::compare(std::span<const double>(y64), y, f, half);
    const auto bwd = compare::compare(std::span<const double>(dx64), dx, f, half);
    EXPECT_TRUE(fwd.passed) << name << " forward: " << fwd.failure;
    EXPECT_TRUE(bwd.passed) << name << " backward: " << bwd.failure;
  }
}

// gelu(-20) = -20 Phi(-20) = -5.5e-88 underflows fp16 to -0; gelu(-5) =
// -1.43e-6 is an fp16 subnormal (below 2^-14); 70000 overflows fp16 at the
// input (and gelu(inf) = inf).
TEST(GeluEmu, CountsUnderflowSubnormalAndOverflow) {
  const std::vector<float> x = {-20.0f, -5.0f, 1.0f, 70000.0f};
  std::vector<float> y(x.size());
  emu::CounterSet counters;
  emu::activation_emu(kGelu, x, y, {}, &counters);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_TRUE(std::signbit(y[0]));
  EXPECT_LT(y[1], 0.0f);
  EXPECT_EQ(counters.find("activation.y")->underflow_to_zero, 1u);
  EXPECT_EQ(counters.find("activation.y")->subnormal, 1u);
  EXPECT_EQ(counters.find("activation.x")->overflow, 1u);
  EXPECT_EQ(y[3], INFINITY);
  EXPECT_EQ(counters.find("activation.x")->elements, 4u);
}

TEST(GeluRef, IsTheFp64ValueRoundedOnceToFloat) {
  std::vector<float> x;
  for (int i = -500; i <= 500; ++i) x.push_back(static_cast<float>(i) * 0.0173f);
  std::vector<float> y(x.size()), dx(x.size());
  refs::activation_ref(kGelu, x, y);
  refs::activation_backward_ref(kGelu, x, x, dx);  // dy = x
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], static_cast<float>(ops::gelu_fp64(x[i]))) << x[i];
    EXPECT_EQ(dx[i], static_cast<float>(ops::gelu_derivative_fp64(x[i]) * x[i])) << x[i];
  }
  EXPECT_EQ(ops::to_string(Activation::gelu), "gelu");
  EXPECT_EQ(ops::parse_activation("gelu"), Activation::gelu);
}

bool mentions_gelu(const std::exception& e) { return std::string(e.what()).find("gelu") != std::string::npos; }

// The CUDA kernels have no gelu: gpu::activation_gpu refuses it first, with or
// without a device, and the gpu backend refuses it under a kernel policy; the
// all-fp32 policy runs every activation on the host (nn/gpu_backend.cpp), gelu too.
TEST(GeluGpu, IsRefusedWithTheReason) {
  std::vector<float> x = {0.5f, -1.0f}, y(2), dx(2);
  try {
    gpu::activation_gpu(kGelu, x, y);
    ADD_FAILURE() << "activation_gpu ran gelu";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(mentions_gelu(e)) << e.what();
  }
  EXPECT_THROW(gpu::activation_backward_gpu(kGelu, x, x, dx), std::invalid_argument);
  nn::GpuBackend backend;
  const formats::Format f16 = formats::parse_format("fp16"), f32 = formats::parse_format("fp32");
  try {
    backend.activation(kGelu, x, y, emu::ElementwisePolicy{f16, f16}, nullptr);
    ADD_FAILURE() << "the gpu backend ran gelu";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(mentions_gelu(e)) << e.what();
  }
  EXPECT_THROW(backend.activation_backward(kGelu, x, x, dx, emu::ElementwisePolicy{f16, f16}, nullptr),
               std::invalid_argument);
  backend.activation(kGelu, x, y, emu::ElementwisePolicy{f32, f32}, nullptr);
  EXPECT_EQ(y[0], static_cast<float>(ops::gelu_fp64(0.5)));
}

}  // namespace
