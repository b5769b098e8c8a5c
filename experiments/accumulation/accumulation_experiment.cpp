// The experiment of accumulation_experiment.h: the operands, the exact products, the cells (computed on
// --jobs threads, each into its own slot, so the results do not depend on the thread count) and the files.
#include "accumulation/accumulation_experiment.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <random>
#include <stdexcept>
#include <thread>

#include "emu/gemm_emu.h"
#include "emu/mma_presets.h"
#include "emu/quantize.h"
#include "report/output_files.h"

namespace mpverify::experiments {

namespace {

constexpr int kMaxInstructionK = 32;  // the largest k of any instruction used here (FP8): K and N multiples of it

// A normal deviate by Box-Muller from two 53-bit uniforms of a fully specified engine, so that a seed gives
// the same values with any standard library (std::normal_distribution's algorithm is not specified).
double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - static_cast<double>(rng() >> 11) * 0x1p-53;  // (0, 1]: the logarithm stays finite
  const double u2 = static_cast<double>(rng() >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// What one (distribution, K) shares between its cells: the rounded operands and the exact products per pair.
struct PairOperands {
  std::vector<float> a, b;
  std::vector<double> exact;
};

std::string cell_text(const CellSpec& s) {
  return to_string(s.distribution) + ", " + operand_pairs()[s.pair].label + ", " + s.model.name + ", K = " +
         std::to_string(s.K) + (s.promotion > 0 ? ", promotion " + std::to_string(s.promotion) : "");
}

// The cells in report order: distribution, pair, architecture, promotion (none first), K; and the
// architectures without an instruction for a pair.
std::vector<CellSpec> plan_cells(const AccumulationConfig& c, std::vector<SkippedModel>& skipped) {
  std::vector<CellSpec> cells;
  const formats::Format fp32 = formats::parse_format("fp32");
  for (Distribution d : {Distribution::positive, Distribution::signed_normal})
    for (std::size_t p = 0; p < operand_pairs().size(); ++p)
      for (const std::string& arch : emu::mma_architectures()) {
        const OperandPair& pair = operand_pairs()[p];
        const emu::MmaModel* model = nullptr;
        try {
          model = &emu::mma_for_architecture(arch, pair.a, pair.b, fp32);
        } catch (const std::invalid_argument& e) {
          if (d == Distribution::positive) skipped.push_back({pair.label, arch, e.what()});
          continue;
        }
        std::vector<int> promotions{0};
        if (c.promotion > 0) promotions.push_back(c.promotion);
        for (int promotion : promotions)
          for (int K : c.lengths) cells.push_back({d, p, arch, *model, promotion, K});
      }
  return cells;
}

// Runs every cell on `jobs` threads; cell i's result goes to slot i.
std::vector<CellResult> run_cells(const std::vector<CellSpec>& cells, const AccumulationConfig& c,
                                  const std::map<std::pair<int, int>, std::vector<PairOperands>>& operands,
                                  const std::function<void(const std::string&)>& progress) {
  std::vector<CellResult> results(cells.size());
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex progress_mutex;
  auto worker = [&] {
    for (std::size_t i = next++; i < cells.size(); i = next++) {
      const CellSpec& s = cells[i];
      const PairOperands& o = operands.at({static_cast<int>(s.distribution), s.K})[s.pair];
      results[i] = run_cell(s, c.rows, c.cols, o.a, o.b, o.exact);
      const std::size_t n = ++done;
      if (progress) {
        const std::lock_guard<std::mutex> lock(progress_mutex);
        progress("cell " + std::to_string(n) + "/" + std::to_string(cells.size()) + ": " + cell_text(s));
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < std::min(c.jobs, cells.size()); ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  return results;
}

nlohmann::ordered_json cell_json(const CellResult& r) {
  const emu::Counters& n = r.accumulate;
  return {{"distribution", to_string(r.spec.distribution)},
          {"operands", operand_pairs()[r.spec.pair].label},
          {"architecture", r.spec.architecture},
          {"model", r.spec.model.name},
          {"promotion", r.spec.promotion},
          {"K", r.spec.K},
          {"max_relative_error", r.error.max},
          {"median_relative_error", r.error.median},
          {"terms", n.addends_nonzero},
          {"terms_truncated", n.truncated},
          {"terms_shifted_out", n.swamped},
          {"roundings", n.elements},
          {"roundings_inexact", n.inexact}};
}

}  // namespace

std::string to_string(Distribution d) { return d == Distribution::positive ? "half-normal" : "normal"; }
std::string formula_text(Distribution d) { return d == Distribution::positive ? "|N(0,1)|" : "N(0,1)"; }

const std::vector<OperandPair>& operand_pairs() {
  static const std::vector<OperandPair> pairs = [] {
    const formats::Format e4m3 = formats::parse_format("fp8-e4m3:saturate");
    const formats::Format e5m2 = formats::parse_format("fp8-e5m2:saturate");
    return std::vector<OperandPair>{{"fp16", formats::parse_format("fp16"), formats::parse_format("fp16")},
                                    {"bf16", formats::parse_format("bf16"), formats::parse_format("bf16")},
                                    {"e4m3", e4m3, e4m3},
                                    {"e4m3 x e5m2", e4m3, e5m2}};
  }();
  return pairs;
}

void validate_accumulation(const AccumulationConfig& c) {
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() +
                                "': the report is a Markdown file (NAME.md); its figures go next to it");
  if (c.lengths.empty()) throw std::invalid_argument("--lengths: give at least one K, e.g. --lengths 256,4096");
  for (std::size_t i = 0; i < c.lengths.size(); ++i) {
    const int K = c.lengths[i];
    if (K < kMaxInstructionK || K > 65536 || K % kMaxInstructionK != 0)
      throw std::invalid_argument("--lengths: K = " + std::to_string(K) +
                                  " is not a multiple of 32 (the FP8 instructions' k) in 32..65536");
    if (i > 0 && K <= c.lengths[i - 1])
      throw std::invalid_argument("--lengths: give K in increasing order without repeats (" +
                                  std::to_string(c.lengths[i - 1]) + " then " + std::to_string(K) + ")");
  }
  if (c.rows < 1 || c.rows > 256 || c.cols < 1 || c.cols > 256 || c.rows * c.cols < 2)
    throw std::invalid_argument("--rows and --cols must be 1..256 with at least 2 output elements (rows x cols), not " +
                                std::to_string(c.rows) + " x " + std::to_string(c.cols));
  if (c.promotion < 0 || c.promotion % kMaxInstructionK != 0)
    throw std::invalid_argument("--promotion " + std::to_string(c.promotion) +
                                ": give 0 (none) or a positive multiple of 32, so that every instruction's k divides it");
  if (c.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
}

RealOperands draw_operands(Distribution d, int rows, int K, int cols, std::uint64_t seed) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                         static_cast<std::uint32_t>(d), static_cast<std::uint32_t>(K)};
  std::mt19937_64 rng(sequence);
  RealOperands o;
  auto draw = [&](std::vector<float>& v, std::size_t n) {
    v.resize(n);
    for (float& x : v) {
      const double z = standard_normal(rng);
      x = static_cast<float>(d == Distribution::positive ? std::fabs(z) : z);
    }
  };
  draw(o.a, static_cast<std::size_t>(rows) * static_cast<std::size_t>(K));
  draw(o.b, static_cast<std::size_t>(K) * static_cast<std::size_t>(cols));
  return o;
}

std::vector<double> exact_product(int rows, int K, int cols, std::span<const float> a, std::span<const float> b) {
  const std::size_t m = static_cast<std::size_t>(rows), k = static_cast<std::size_t>(K), n = static_cast<std::size_t>(cols);
  if (a.size() != m * k || b.size() != k * n)
    throw std::invalid_argument("exact_product: A must hold rows x K and B K x cols values");
  std::vector<double> c(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0, e = 0;  // the running sum and its error (Knuth's TwoSum, accumulated)
      for (std::size_t t = 0; t < k; ++t) {
        const double p = static_cast<double>(a[i * k + t]) * static_cast<double>(b[t * n + j]);  // exact
        const double sum = s + p, bp = sum - s;
        e += (s - (sum - bp)) + (p - bp);
        s = sum;
      }
      c[i * n + j] = s + e;
    }
  return c;
}

ErrorSummary relative_errors(Distribution d, std::span<const float> computed, std::span<const double> exact) {
  if (computed.size() != exact.size() || exact.empty())
    throw std::invalid_argument("relative_errors: computed and exact must be non-empty and of one size");
  double rms = 0;
  for (double x : exact) rms += x * x;
  rms = std::sqrt(rms / static_cast<double>(exact.size()));
  std::vector<double> errors(exact.size());
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double scale = d == Distribution::positive ? std::fabs(exact[i]) : rms;
    const double error = std::fabs(static_cast<double>(computed[i]) - exact[i]);
    // A zero scale (every product zero) has no relative error unless the result is wrong.
    errors[i] = scale > 0 ? error / scale : (error == 0 ? 0.0 : INFINITY);
  }
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  return {errors.back(), n % 2 == 1 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2])};
}

CellResult run_cell(const CellSpec& spec, int rows, int cols, std::span<const float> qa, std::span<const float> qb,
                    std::span<const double> exact) {
  const OperandPair& pair = operand_pairs().at(spec.pair);
  emu::GemmPolicy policy;
  policy.input = pair.a;
  policy.input_b = pair.b;
  policy.accumulation = emu::Accumulation::mma;
  policy.mma = spec.model;
  policy.promotion_interval = spec.promotion;
  policy.output = formats::parse_format("fp32");  // the instruction's own output: rounding it again is exact
  ops::GemmShape shape;
  shape.m = rows;
  shape.n = cols;
  shape.k = spec.K;
  std::vector<float> c(shape.c_size());
  emu::CounterSet counters;
  emu::gemm_emu_rounded_inputs(shape, qa, qb, c, policy, &counters);
  CellResult r;
  r.spec = spec;
  r.error = relative_errors(spec.distribution, c, exact);
  if (const emu::Counters* n = counters.find("gemm.accumulate")) r.accumulate = *n;
  return r;
}

AccumulationResult run_accumulation(const AccumulationConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_accumulation(c);
  AccumulationResult result;
  const std::vector<CellSpec> cells = plan_cells(c, result.skipped);
  // The operands of every (distribution, K), rounded once per pair (round to nearest even; FP8 saturates).
  std::map<std::pair<int, int>, std::vector<PairOperands>> operands;
  for (Distribution d : {Distribution::positive, Distribution::signed_normal})
    for (int K : c.lengths) {
      const RealOperands real = draw_operands(d, c.rows, K, c.cols, c.seed);
      auto& per_pair = operands[{static_cast<int>(d), K}];
      for (const OperandPair& pair : operand_pairs()) {
        PairOperands o{emu::quantized_copy(real.a, pair.a), emu::quantized_copy(real.b, pair.b), {}};
        o.exact = exact_product(c.rows, K, c.cols, o.a, o.b);
        per_pair.push_back(std::move(o));
      }
    }
  result.cells = run_cells(cells, c, operands, progress);
  result.json = {{"seed", c.seed}, {"rows", c.rows}, {"cols", c.cols}, {"promotion", c.promotion},
                 {"cells", nlohmann::ordered_json::array()}, {"skipped", nlohmann::ordered_json::array()}};
  for (const CellResult& r : result.cells) result.json["cells"].push_back(cell_json(r));
  for (const SkippedModel& s : result.skipped)
    result.json["skipped"].push_back({{"operands", s.pair}, {"architecture", s.architecture}, {"reason", s.reason}});
  // Everything is computed: now the files (each written atomically).
  const std::string text = accumulation_report_text(c, result);
  for (const auto& [what, svg] : accumulation_figures(c, result))
    report::write_output(report::figure_path(c.report, what), svg, result.files);
  report::write_output(c.report, text, result.files);
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& f : result.files) files.push_back(f.string());
  result.json["files"] = files;
  return result;
}

}  // namespace mpverify::experiments
