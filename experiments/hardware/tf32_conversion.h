// How the GPU converts fp32 operands to tf32 (1 sign, 8 exponent, 10 fraction bits) when a GEMM runs on
// tensor cores with CUBLAS_COMPUTE_32F_FAST_TF32. The candidates: truncation (what the mma instruction does
// with raw fp32 registers: it ignores their 13 low bits), round to nearest with ties away from zero
// (CUTLASS's cvt.rna), round to nearest-even (the emulator's conversion until now), or no conversion at all
// (a SIMT fp32 kernel). The measurement is independent of the accumulation order: C = A * I (and I * B)
// makes each output one operand times 1 plus exact zeros, so C holds the converted operand itself.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::experiments {

// The four rules, each on fp32 bits (finite inputs; a carry past the largest binade gives inf).
std::uint32_t tf32_truncate(std::uint32_t fp32_bits);
std::uint32_t tf32_nearest_away(std::uint32_t fp32_bits);
std::uint32_t tf32_nearest_even(std::uint32_t fp32_bits);
inline constexpr int kTf32Rules = 4;  // the three above and "kept" (fp32 unchanged)
const std::array<const char*, kTf32Rules>& tf32_rule_names();

// Operands whose 13 low bits the rules treat differently, in classes: ties with an even and an odd kept
// bit, just below and just above the half, carries into the exponent, subnormals, random low bits.
struct Tf32Operand {
  float value;
  int operand_class;  // index into tf32_operand_classes()
};
const std::vector<std::string>& tf32_operand_classes();
std::vector<Tf32Operand> tf32_operands(std::size_t n, std::uint64_t seed);

// Per class: how many operands, and how many outputs equal each rule's conversion of their operand.
struct Tf32Census {
  std::vector<std::size_t> values;                              // per class
  std::vector<std::array<std::size_t, kTf32Rules>> matching;    // per class, per rule
  std::array<std::size_t, kTf32Rules> total{};                  // per rule, over every class
  std::size_t all = 0;
};
Tf32Census tf32_census(const std::vector<Tf32Operand>& operands, const std::vector<float>& outputs);

// The rule every output follows ("" when none does).
std::string tf32_verdict(const Tf32Census& census);

// The report's section and JSON: both operand roles through cuBLAS when `use_gpu`, else the section says the
// question is open. Throws std::runtime_error from the GPU side.
std::string tf32_section(bool use_gpu, std::uint64_t seed, nlohmann::ordered_json& json);

}  // namespace mpverify::experiments
