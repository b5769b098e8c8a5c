// Emulated GEMMs for mpverify.torch.emulate: the emulator's GEMM (emu/gemm_emu.h) under any of its
// accumulation models, the block-scaled GEMM (emu/block_scaled_gemm.h), and the per-tensor current scale
// (training/loss_scaler.h), each the library's own definition, so that a PyTorch model runs the same
// arithmetic as `mpverify train` and `mpverify ops`.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "emu/block_scaled_gemm.h"
#include "emu/gemm_emu.h"
#include "emu/mma_presets.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "ops/gemm_shape.h"
#include "tensor_input.h"
#include "training/loss_scaler.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

// The GEMM's shape from op(A) = A (m x k) or A^T (A stored k x m) and op(B) = B (k x n) or B^T (n x k).
ops::GemmShape gemm_shape(const FloatInput& a, const FloatInput& b, bool transpose_a, bool transpose_b) {
  if (a.shape().size() != 2 || b.shape().size() != 2)
    throw std::invalid_argument("gemm: a and b must be 2-D (a " + std::to_string(a.shape().size()) + "-D, b " +
                                std::to_string(b.shape().size()) + "-D)");
  ops::GemmShape s;
  s.transpose_a = transpose_a;
  s.transpose_b = transpose_b;
  s.m = static_cast<int>(a.shape()[transpose_a ? 1 : 0]);
  s.k = static_cast<int>(a.shape()[transpose_a ? 0 : 1]);
  s.n = static_cast<int>(b.shape()[transpose_b ? 0 : 1]);
  const auto kb = static_cast<int>(b.shape()[transpose_b ? 1 : 0]);
  if (kb != s.k)
    throw std::invalid_argument("gemm: op(a) has k = " + std::to_string(s.k) + " columns but op(b) has " +
                                std::to_string(kb) + " rows");
  return s;
}

// accumulation: fp32 (in k order, one FMA per step), fp16, tensor-core (Fasi et al.'s model with its
// defaults), an architecture (its GEMM instruction for the two formats) or a preset of emu/mma_presets.h,
// whose operand formats must be A's and B's in either order.
emu::GemmPolicy gemm_policy(const std::string& format_a, const std::string& format_b,
                            const std::string& accumulation, int promotion, const std::string& output) {
  emu::GemmPolicy p;
  p.input = formats::parse_format(format_a);
  p.input_b = formats::parse_format(format_b);
  p.output = formats::parse_format(output);
  if (accumulation == "fp32") p.accumulation = emu::Accumulation::fp32;
  else if (accumulation == "fp16") p.accumulation = emu::Accumulation::fp16;
  else if (accumulation == "tensor-core") p.accumulation = emu::Accumulation::tensor_core;
  else {
    const bool preset = accumulation.find('.') != std::string::npos;
    p.accumulation = emu::Accumulation::mma;
    p.mma = preset ? emu::mma_preset(accumulation)
                   : emu::mma_for_architecture(accumulation, p.input, p.b_format(), formats::fp32());
    p.promotion_interval = promotion;
  }
  if (promotion != 0 && p.accumulation != emu::Accumulation::mma)
    throw std::invalid_argument("gemm: promotion needs an architecture or a tensor-core preset, not " + accumulation);
  if (promotion < 0 || (promotion != 0 && promotion % p.mma->k != 0))
    throw std::invalid_argument("gemm: promotion=" + std::to_string(promotion) + " is not a positive multiple of k = " +
                                std::to_string(p.mma->k) + " of " + p.mma->name);
  return p;
}

py::tuple emulated_gemm(const py::array& a, const std::string& a_bits, const py::array& b, const std::string& b_bits,
                        bool transpose_a, bool transpose_b, const std::string& format_a, const std::string& format_b,
                        const std::string& accumulation, int promotion, const std::string& output) {
  const FloatInput in_a(a, a_bits, "gemm: a"), in_b(b, b_bits, "gemm: b");
  const ops::GemmShape shape = gemm_shape(in_a, in_b, transpose_a, transpose_b);
  const emu::GemmPolicy policy = gemm_policy(format_a, format_b, accumulation, promotion, output);
  std::vector<float> c(shape.c_size());
  emu::CounterSet counters;
  {
    py::gil_scoped_release release;
    emu::gemm_emu(shape, in_a.values(), in_b.values(), c, policy, &counters);
  }
  py::dict sites;
  for (const auto& [name, n] : counters.sites()) sites[py::str(name)] = counters_dict(n);
  const std::vector<std::size_t> c_shape{static_cast<std::size_t>(shape.m), static_cast<std::size_t>(shape.n)};
  return py::make_tuple(float_array(c, c_shape), sites);
}

emu::BlockScaledGemmPolicy block_policy(const std::string& scheme_a, const std::string& tile_a,
                                        const std::string& scheme_b, const std::string& tile_b,
                                        const std::string& model, const std::string& scale_rule,
                                        const std::string& rounding_a, std::uint64_t seed, std::uint64_t stream) {
  emu::BlockScaledGemmPolicy p;
  p.scheme_a = block_scheme(scheme_a, tile_a);
  p.scheme_b = block_scheme(scheme_b, tile_b);
  const std::optional<emu::BlockScaledAccumulation> m = emu::parse_block_scaled_accumulation(model);
  if (!m)
    throw std::invalid_argument("block_gemm: unknown model '" + model +
                                "' (sm100.mxf8f6f4, sm100.mxf4nvf4, sm90.fp8-blockwise)");
  p.accumulation = *m;
  if (!scale_rule.empty()) {
    const std::optional<emu::ScaleRule> rule = emu::parse_scale_rule(scale_rule);
    if (!rule)
      throw std::invalid_argument("block_gemm: unknown scale_rule '" + scale_rule + "' (floor, ceil, even, rceil)");
    p.quantize_a.scale_rule = p.quantize_b.scale_rule = *rule;
  }
  if (rounding_a == "stochastic") {
    p.quantize_a.rounding = formats::Rounding::stochastic;
    p.quantize_a.seed = seed;
    p.quantize_a.stream = stream;
  } else if (rounding_a != "rne") {
    throw std::invalid_argument("block_gemm: rounding_a must be rne or stochastic, not '" + rounding_a + "'");
  }
  emu::validate(p);
  return p;
}

py::dict operand_counters(const emu::BlockCounters& c, const emu::BlockStats& stats) {
  py::dict d = block_counters_dict(c);
  d["sqnr_db"] = stats.sqnr_db();
  return d;
}

py::tuple block_gemm(const py::array& a, const std::string& a_bits, const py::array& b, const std::string& b_bits,
                     bool transpose_a, bool transpose_b, const std::string& scheme_a, const std::string& tile_a,
                     const std::string& scheme_b, const std::string& tile_b, const std::string& model,
                     const std::string& scale_rule, const std::string& rounding_a, std::uint64_t seed,
                     std::uint64_t stream) {
  const FloatInput in_a(a, a_bits, "block_gemm: a"), in_b(b, b_bits, "block_gemm: b");
  const ops::GemmShape shape = gemm_shape(in_a, in_b, transpose_a, transpose_b);
  const emu::BlockScaledGemmPolicy policy =
      block_policy(scheme_a, tile_a, scheme_b, tile_b, model, scale_rule, rounding_a, seed, stream);
  std::vector<float> c(shape.c_size());
  emu::BlockScaledGemmCounters n;
  {
    py::gil_scoped_release release;
    emu::block_scaled_gemm(shape, in_a.values(), in_b.values(), c, policy, &n);
  }
  emu::Counters accumulate;
  emu::mma_counters_into(n.accumulate, accumulate);
  py::dict counters;
  counters["a"] = operand_counters(n.a, n.stats_a);
  counters["b"] = operand_counters(n.b, n.stats_b);
  counters["accumulate"] = counters_dict(accumulate);
  counters["promotions"] = n.promotions;
  counters["promotions_inexact"] = n.promotions_inexact;
  const std::vector<std::size_t> c_shape{static_cast<std::size_t>(shape.m), static_cast<std::size_t>(shape.n)};
  return py::make_tuple(float_array(c, c_shape), counters);
}

py::list mma_preset_names() {
  py::list out;
  for (const emu::MmaModel& m : emu::mma_presets()) out.append(m.name);
  return out;
}

}  // namespace

void bind_gemm(py::module_& m) {
  m.def("gemm", &emulated_gemm, exact_fp(), py::arg("a"), py::arg("a_bits"), py::arg("b"), py::arg("b_bits"),
        py::arg("transpose_a"), py::arg("transpose_b"), py::arg("format_a"), py::arg("format_b"),
        py::arg("accumulation"), py::arg("promotion"), py::arg("output"),
        "C = op(A) op(B) as the emulator computes it (emu/gemm_emu.h): A (m x k, or k x m with transpose_a) and "
        "B (k x n, or n x k with transpose_b) rounded to format_a and format_b, accumulated under `accumulation` "
        "(fp32: in k order, one fp32 FMA per step; fp16; tensor-core; an architecture volta .. blackwell; or a "
        "preset of mma_presets()), promoted into fp32 every `promotion` elements (0: never), rounded to `output`. "
        "Returns (float32 m x n array, {site: counters}) for the sites gemm.a, gemm.b, gemm.accumulate, gemm.c.");
  m.def("block_gemm", &block_gemm, exact_fp(), py::arg("a"), py::arg("a_bits"), py::arg("b"), py::arg("b_bits"),
        py::arg("transpose_a"), py::arg("transpose_b"), py::arg("scheme_a"), py::arg("tile_a"), py::arg("scheme_b"),
        py::arg("tile_b"), py::arg("model"), py::arg("scale_rule"), py::arg("rounding_a"), py::arg("seed"),
        py::arg("stream"),
        "C = op(A) op(B) with A and B block-quantized along K (emu/block_scaled_gemm.h) and accumulated by the "
        "model sm100.mxf8f6f4, sm100.mxf4nvf4 or sm90.fp8-blockwise. tile '16x16': nvfp4's 2-D tiles; "
        "rounding_a 'stochastic' draws A's elements from (seed, stream). Returns (float32 m x n array, "
        "{a, b: quantization counters with sqnr_db; accumulate; promotions; promotions_inexact}).");
  m.def("current_scale", [](float amax, float max_finite) {
          return training::current_scale(amax, training::CurrentConfig{max_finite});
        }, exact_fp(),
        py::arg("amax"), py::arg("max_finite"),
        "Per-tensor current scaling (Transformer Engine's compute_scale_from_amax): fl32(max_finite / amax), 1 "
        "for an amax that is 0, infinite or NaN.");
  m.def("mma_architectures", [] { return emu::mma_architectures(); }, "volta, turing, ampere, ada, hopper, blackwell.");
  m.def("mma_presets", &mma_preset_names, "The tensor-core instruction presets (mpverify eval --op dot --list).");
}

}  // namespace mpverify::python
