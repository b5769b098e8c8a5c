// Experiment 9, what accumulation loses: seeded GEMMs of fp16, bf16 and FP8 operands at K = 256 ... 16384
// through each architecture's tensor-core instruction for those operands (emu/mma_presets.h:
// mma_for_architecture, fp32 accumulator), chained along K with and without an fp32 promotion every N
// elements (emu/mma_model.h: mma_dot), against the exact product of the same quantized operands, so that
// only the accumulation's error is measured. Per cell: the maximum and median relative error over the
// output elements and the instructions' counters (terms truncated by the alignment, terms shifted out
// entirely, inexact roundings). The report holds the tables, one figure per operand pair and distribution
// (maximum relative error against K per model) and a verdict on DeepSeek-V3's claim (arXiv 2412.19437
// section 3.3.2: Hopper FP8 GEMMs keep about 14 bits, so K = 4096 gives a maximum relative error near 2%;
// promotion every 128 elements fixes it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emu/counters.h"
#include "emu/mma_model.h"
#include "formats/format.h"

namespace mpverify::experiments {

// How the operands' values are drawn (before they are rounded to their formats).
enum class Distribution {
  // |N(0,1)|: every product is positive, so no element cancels and the relative error of every element
  // is well defined (relative to |exact|); the accumulator grows linearly in K, the worst case for
  // alignment to the largest term.
  positive,
  // N(0,1), "two random matrices" taken literally: the elements cancel (|exact| ~ sqrt(K)), and an element
  // near zero has an unbounded relative error, so each element's error is taken relative to the RMS of the
  // cell's exact outputs instead (a normwise relative error, element by element).
  signed_normal,
};
std::string to_string(Distribution d);       // "half-normal", "normal" (table cells, JSON)
std::string formula_text(Distribution d);    // "|N(0,1)|", "N(0,1)" (prose: a pipe would split a table cell)

// An operand pair: A's and B's formats (FP8 rounded with saturation, as CUDA's __nv_fp8_e4m3(float)).
struct OperandPair {
  std::string label;  // fp16, bf16, e4m3, e4m3 x e5m2
  formats::Format a, b;
};
const std::vector<OperandPair>& operand_pairs();

struct AccumulationConfig {
  std::filesystem::path report = "reports/accumulation.md";
  std::uint64_t seed = 1;
  std::vector<int> lengths{256, 1024, 4096, 16384};  // K, increasing, multiples of 32
  int rows = 16, cols = 16;                          // the output elements of a cell: rows x cols
  int promotion = 128;                               // the promotion interval compared with none (0: none only)
  std::size_t jobs = 2;                              // cells computed at a time; the results do not depend on it
};

// One GEMM: operands, instruction, promotion interval, K.
struct CellSpec {
  Distribution distribution = Distribution::positive;
  std::size_t pair = 0;  // index into operand_pairs()
  std::string architecture;
  emu::MmaModel model;
  int promotion = 0;
  int K = 0;
};

struct ErrorSummary {
  double max = 0, median = 0;  // over the cell's output elements (median: the mean of the middle two)
};

struct CellResult {
  CellSpec spec;
  ErrorSummary error;
  emu::Counters accumulate;  // the GEMM's "gemm.accumulate" site (emu::mma_counters_into)
};

// An architecture without an instruction for an operand pair (mma_for_architecture's message).
struct SkippedModel {
  std::string pair, architecture, reason;
};

struct AccumulationResult {
  std::vector<CellResult> cells;
  std::vector<SkippedModel> skipped;
  std::vector<std::filesystem::path> files;
  nlohmann::ordered_json json;
};

// Throws std::invalid_argument naming the option, its value and what is accepted.
void validate_accumulation(const AccumulationConfig& config);

// The real values of one distribution and K, the same for every format and model (paired comparisons):
// A is rows x K and B is K x cols, row-major, drawn from the seed, the distribution and K only.
struct RealOperands {
  std::vector<float> a, b;
};
RealOperands draw_operands(Distribution d, int rows, int K, int cols, std::uint64_t seed);

// The exact product of row-major A (rows x K) and B (K x cols) holding values of formats of at most 11
// significand bits (every product is exact in double), summed in double-double (Ogita, Rump and Oishi's
// Sum2): the error is at most 2^-53 |exact| + gamma_{K-1}^2 sum |a||b|, gamma_n = n 2^-53 / (1 - n 2^-53),
// i.e. below 2^-77 sum |a||b| for K <= 2^15, far below any error measured here (2^-26 and up).
std::vector<double> exact_product(int rows, int K, int cols, std::span<const float> a, std::span<const float> b);

// The errors of `computed` against `exact` under the distribution's definition (see Distribution).
ErrorSummary relative_errors(Distribution d, std::span<const float> computed, std::span<const double> exact);

// One cell on operands already rounded to the pair's formats (qa, qb) with their exact product.
CellResult run_cell(const CellSpec& spec, int rows, int cols, std::span<const float> qa, std::span<const float> qb,
                    std::span<const double> exact);

// Every cell, the report and its figures (written only after every cell is computed).
AccumulationResult run_accumulation(const AccumulationConfig& config,
                                    const std::function<void(const std::string&)>& progress = {});

// The report's Markdown and the figures (file name suffix, SVG text), from the results alone.
std::string accumulation_report_text(const AccumulationConfig& config, const AccumulationResult& result);
std::vector<std::pair<std::string, std::string>> accumulation_figures(const AccumulationConfig& config,
                                                                      const AccumulationResult& result);

}  // namespace mpverify::experiments
