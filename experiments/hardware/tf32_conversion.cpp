#include "hardware/tf32_conversion.h"

#include <bit>
#include <random>
#include <stdexcept>

#include "gpu/gemm_gpu.h"
#include "ops/gemm_shape.h"
#include "report/text_format.h"

namespace mpverify::experiments {

namespace {

constexpr std::uint32_t kLow = 0x1FFFu;   // the 13 bits tf32 drops
constexpr std::uint32_t kHalf = 0x1000u;  // half of the kept part's last place

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

}  // namespace

// Adding to the magnitude bits carries into the exponent as it should: the largest significand rounds up
// to the next binade, the largest binade to inf's bits.
std::uint32_t tf32_truncate(std::uint32_t b) { return b & ~kLow; }
std::uint32_t tf32_nearest_away(std::uint32_t b) { return (b + kHalf) & ~kLow; }
std::uint32_t tf32_nearest_even(std::uint32_t b) { return (b + (kHalf - 1) + ((b >> 13) & 1u)) & ~kLow; }

const std::array<const char*, kTf32Rules>& tf32_rule_names() {
  static const std::array<const char*, kTf32Rules> names{"truncation", "nearest, ties away", "nearest, ties even",
                                                         "kept (fp32, no conversion)"};
  return names;
}

const std::vector<std::string>& tf32_operand_classes() {
  static const std::vector<std::string> classes{
      "tie, even kept bit", "tie, odd kept bit", "just below the half", "just above the half",
      "carry into the exponent", "subnormal", "random low bits"};
  return classes;
}

// Each operand: a random sign, exponent (2^-20..2^20) and kept fraction, then the low bits of its class.
std::vector<Tf32Operand> tf32_operands(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tf32Operand> out;
  out.reserve(n);
  const int classes = static_cast<int>(tf32_operand_classes().size());
  for (std::size_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % static_cast<std::size_t>(classes));
    const std::uint32_t sign = static_cast<std::uint32_t>(rng() & 1u) << 31;
    const std::uint32_t exponent = static_cast<std::uint32_t>(127 - 20 + rng() % 41) << 23;
    std::uint32_t kept = static_cast<std::uint32_t>(rng()) & 0x7FE000u;  // the 10 kept fraction bits
    std::uint32_t low = static_cast<std::uint32_t>(rng()) & kLow;
    switch (c) {
      case 0: kept &= ~0x2000u, low = kHalf; break;
      case 1: kept |= 0x2000u, low = kHalf; break;
      case 2: low = kHalf - 1; break;
      case 3: low = kHalf + 1; break;
      case 4: kept = 0x7FE000u, low = kHalf + (low & 0x0FFFu); break;
      default: break;
    }
    std::uint32_t bits = sign | exponent | kept | low;
    if (c == 5) bits = sign | (static_cast<std::uint32_t>(rng()) & 0x7FFFFFu) | 1u;  // exponent 0, non-zero
    out.push_back({std::bit_cast<float>(bits), c});
  }
  return out;
}

Tf32Census tf32_census(const std::vector<Tf32Operand>& operands, const std::vector<float>& outputs) {
  if (operands.size() != outputs.size()) throw std::invalid_argument("tf32_census: one output per operand");
  Tf32Census census;
  census.values.assign(tf32_operand_classes().size(), 0);
  census.matching.assign(tf32_operand_classes().size(), {});
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const std::uint32_t in = bits_of(operands[i].value), got = bits_of(outputs[i]);
    const std::array<std::uint32_t, kTf32Rules> rule{tf32_truncate(in), tf32_nearest_away(in),
                                                     tf32_nearest_even(in), in};
    const auto c = static_cast<std::size_t>(operands[i].operand_class);
    ++census.values[c];
    ++census.all;
    for (int r = 0; r < kTf32Rules; ++r)
      if (rule[static_cast<std::size_t>(r)] == got) {
        ++census.matching[c][static_cast<std::size_t>(r)];
        ++census.total[static_cast<std::size_t>(r)];
      }
  }
  return census;
}

std::string tf32_verdict(const Tf32Census& census) {
  std::string verdict;
  for (int r = 0; r < kTf32Rules; ++r)
    if (census.all > 0 && census.total[static_cast<std::size_t>(r)] == census.all)
      verdict += (verdict.empty() ? "" : " and ") + std::string(tf32_rule_names()[static_cast<std::size_t>(r)]);
  return verdict;
}

namespace {

// cuBLAS's C = A * I (operand role "A": A is the values, rows x 64) or I * B (role "B": B is the values,
// 64 x rows), row-major: either way C has the values' layout, each output its operand as the GPU converted it.
std::vector<float> through_cublas(const std::vector<Tf32Operand>& operands, bool role_a) {
  constexpr int kWidth = 64;
  if (operands.size() % kWidth != 0) throw std::invalid_argument("tf32 probe: a multiple of 64 operands");
  const int rows = static_cast<int>(operands.size() / kWidth);
  std::vector<float> values(operands.size()), identity(kWidth * kWidth, 0.0f), c(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) values[i] = operands[i].value;
  for (int i = 0; i < kWidth; ++i) identity[static_cast<std::size_t>(i) * kWidth + i] = 1.0f;
  if (role_a)
    gpu::gemm_gpu(ops::GemmShape{rows, kWidth, kWidth}, values, identity, c, gpu::GemmCompute::tf32);
  else
    gpu::gemm_gpu(ops::GemmShape{kWidth, rows, kWidth}, identity, values, c, gpu::GemmCompute::tf32);
  return c;
}

std::string census_table(const Tf32Census& census) {
  std::string md = "| operand class | values |";
  for (const char* name : tf32_rule_names()) md += std::string(" ") + name + " |";
  md += "\n|---|---:|---:|---:|---:|---:|\n";
  auto share = [](std::size_t k, std::size_t n) {
    return report::fixed(n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0, 2) + "%";
  };
  for (std::size_t c = 0; c < census.values.size(); ++c) {
    md += "| " + tf32_operand_classes()[c] + " | " + std::to_string(census.values[c]) + " |";
    for (std::size_t r = 0; r < kTf32Rules; ++r) md += " " + share(census.matching[c][r], census.values[c]) + " |";
    md += "\n";
  }
  md += "| all | " + std::to_string(census.all) + " |";
  for (std::size_t r = 0; r < kTf32Rules; ++r) md += " " + share(census.total[r], census.all) + " |";
  return md + "\n";
}

}  // namespace

std::string tf32_section(bool use_gpu, std::uint64_t seed, nlohmann::ordered_json& json) {
  std::string md =
      "\n## tf32: how cuBLAS converts fp32 operands\n\n"
      "`cublasGemmEx` with `CUBLAS_COMPUTE_32F_FAST_TF32` on fp32 operands whose 13 low bits are not zero, "
      "as C = A · I and C = I · B: each output is one operand times 1 plus exact zeros, whatever the order of "
      "the sum, so it is the operand as the GPU converted it. Each output is compared with four rules "
      "applied to its operand's bits: truncation (the `mma` instruction's reading of raw fp32 registers), "
      "round to nearest with ties away (CUTLASS's `cvt.rna`), round to nearest-even (the emulator's "
      "conversion), and no conversion (a kernel without tensor cores).\n\n";
  if (!use_gpu) {
    json = nullptr;
    return md + "Not measured: no GPU was available to this run; the question stays open.\n";
  }
  const std::vector<Tf32Operand> operands = tf32_operands(64 * 448, seed);
  nlohmann::ordered_json roles = nlohmann::ordered_json::object();
  for (const bool role_a : {true, false}) {
    const Tf32Census census = tf32_census(operands, through_cublas(operands, role_a));
    const std::string verdict = tf32_verdict(census);
    md += std::string("### Operand ") + (role_a ? "A" : "B") + "\n\n" + census_table(census) + "\n" +
          (verdict.empty() ? "No rule describes every output." : "Every output follows **" + verdict + "**.") +
          "\n\n";
    roles[role_a ? "A" : "B"] = {{"verdict", verdict}, {"values", census.all}, {"matching", census.total}};
  }
  json = roles;
  return md;
}

}  // namespace mpverify::experiments
