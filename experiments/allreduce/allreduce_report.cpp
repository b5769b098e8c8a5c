// The Markdown report of the all-reduce experiment and its two figures.
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "allreduce/allreduce_experiment.h"
#include "record/run_log.h"
#include "report/svg_line_chart.h"

namespace mpverify::experiments {

namespace {

constexpr double kBf16U = 0x1p-8;       // bf16's unit roundoff (8 significand bits)
constexpr double kSwampedLimit = 0.01;  // 1% of the additions

std::string num(double v, const char* f = "%.3g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double per(std::uint64_t a, std::uint64_t b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

const AllreduceCell* find(const AllreduceExperimentResult& r, std::size_t n, const std::string& format,
                          const std::string& algorithm) {
  for (const AllreduceCell& c : r.cells)
    if (c.ranks == n && c.format == format && c.algorithm == algorithm) return &c;
  return nullptr;
}

// Least-squares slope of log2 y against log2 N over the cells with y > 0.
std::optional<double> slope(const AllreduceExperimentResult& r, const std::string& format, const std::string& algorithm) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0;
  for (const AllreduceCell& c : r.cells) {
    if (c.format != format || c.algorithm != algorithm || !(c.normwise > 0)) continue;
    const double x = std::log2(static_cast<double>(c.ranks)), y = std::log2(c.normwise);
    sx += x, sy += y, sxx += x * x, sxy += x * y, k += 1;
  }
  if (k < 2 || k * sxx - sx * sx == 0) return std::nullopt;
  return (k * sxy - sx * sy) / (k * sxx - sx * sx);
}

// The first N of the list at which the cell crosses the criterion, as text.
std::string first_crossing(const AllreduceExperimentConfig& config, const AllreduceExperimentResult& r,
                           const std::string& algorithm, bool by_swamping) {
  for (std::size_t n : config.ranks) {
    const AllreduceCell* c = find(r, n, "bf16", algorithm);
    if (!c) continue;
    const bool crossed = by_swamping ? per(c->swamped, c->additions) > kSwampedLimit : c->normwise > kBf16U;
    if (crossed) return "N = " + std::to_string(n);
  }
  return "not crossed up to N = " + std::to_string(config.ranks.back());
}

std::string command_line(const AllreduceExperimentConfig& c) {
  std::string ranks;
  for (std::size_t n : c.ranks) {
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(n);
  }
  return "build/experiments/allreduce --report " + c.report.string() + " --model " + c.model + " --data " + c.data +
         " --ranks " + ranks + " --shard-batch " + std::to_string(c.shard_batch) + " --seed " + std::to_string(c.seed) +
         " --step " + std::to_string(c.step);
}

std::string intro(const AllreduceExperimentConfig& c, const AllreduceExperimentResult& r) {
  double total = 0;
  for (const AllreduceRanksInfo& i : r.per_ranks) total += i.gradient_seconds + i.reduce_seconds;
  std::string s = "# What does reduced-precision all-reduce lose?\n\n";
  s += "Data-parallel training sums one gradient per rank. This report sums real per-rank gradients across N ranks "
       "in fp32, bf16, fp16 and fp8 in the ring and tree orders of `mpverify allreduce` (docs/allreduce.md) and "
       "measures the result against the exact sum.\n\n";
  s += "Written by:\n\n```\n" + command_line(c) + "\n```\n\n";
  s += "It ran on a CPU: no GPU was involved; every rounding is the emulator's (`src/collective/`), the gradients are "
       "the FP32 reference backend's. It took " + num(total, "%.0f") + " s (table at the end).\n\n";
  s += "## Setup\n\n";
  s += "- Gradients (`mpverify allreduce --from-model`, `src/training/shard_gradients.h`): the " + c.model +
       " on " + c.data + " data, seed " + std::to_string(c.seed) + ", at the weights after " + std::to_string(c.step) +
       " fp32 training steps. For each N, the run with batch size N·B (B = " + std::to_string(c.shard_batch) +
       ") gives its step's batch; rank r takes examples r·B … r·B + B − 1 and computes the gradient of the mean loss "
       "over its shard (batch norm with the shard's own statistics, as data-parallel training without "
       "synchronised batch norm). Each row has " +
       std::to_string(r.per_ranks.empty() ? 0 : r.per_ranks.front().elements) +
       " elements (every parameter). A new batch for each N: the rows of different N are different gradients.\n";
  s += "- The sum (no division by N): each input rounded to the format, every addition rounded once (nearest-even). "
       "fp32, bf16 and fp16 without scaling; fp8-e4m3 and fp8-e5m2 with per-rank power-of-two scaling "
       "(`--scaling per-rank`: the smallest of the ranks' scales, with headroom for N terms).\n";
  s += "- ring: element i's chunk is summed rank after rank, N − 1 additions into one running partial sum; "
       "tree: pairwise in rank order, ⌈log2 N⌉ levels.\n";
  s += "- Measures, over the elements whose result is finite: **normwise** = ‖ŝ − s‖₂ / ‖s‖₂ (s the exact sum of "
       "the float32 rows, ŝ the reduced vector); **median** and **max** relative error |ŝᵢ − sᵢ| / |sᵢ| over sᵢ ≠ 0; "
       "**swamped**, **underflow**, **overflow**: the additions whose counter fired, per addition (swamped: a "
       "non-zero addend whose sum rounded back to the partial sum); **in-uf**: inputs that underflowed, per input; "
       "**κ** = ‖Σᵣ|xᵣ|‖₂ / ‖s‖₂, the sum's condition (the worst-case bounds γₖ·κ scale with it).\n\n";
  return s;
}

// Where the measured bf16 ring/tree ratio lies against the two predictions, N by N.
std::string ratio_check(const AllreduceExperimentResult& r) {
  std::string below, between, above;
  for (const AllreduceRanksInfo& i : r.per_ranks) {
    const AllreduceCell *ring = find(r, i.ranks, "bf16", "ring"), *tree = find(r, i.ranks, "bf16", "tree");
    if (!ring || !tree || !(tree->normwise > 0) || i.ranks < 4) continue;
    const double levels = std::ceil(std::log2(static_cast<double>(i.ranks))), n1 = static_cast<double>(i.ranks) - 1;
    const double ratio = ring->normwise / tree->normwise;
    std::string& bucket = ratio < std::sqrt(n1 / levels) ? below : ratio <= n1 / levels ? between : above;
    bucket += (bucket.empty() ? "" : ", ") + std::to_string(i.ranks);
  }
  auto list = [](const std::string& l) { return l.empty() ? std::string("none") : "N = " + l; };
  return "Measured (bf16, N ≥ 4): the ring/tree ratio is below the random-error prediction √((N−1)/⌈log2 N⌉) at " +
         list(below) + "; between it and the correlated-error one (N−1)/⌈log2 N⌉ at " + list(between) +
         "; above both at " + list(above) + ".\n\n";
}

std::string verdict(const AllreduceExperimentConfig& c, const AllreduceExperimentResult& r) {
  std::string s = "## Where bf16 stops being safe\n\n";
  s += "Criterion A: the normwise relative error of the bf16 sum exceeds 2^-8 = " + num(kBf16U) +
       ", bf16's unit roundoff (the error of rounding the exact sum once to bf16 is at most that, so above it the "
       "reduction loses more than the format's own resolution). Criterion B: more than 1% of the bf16 additions are "
       "swamped (the update is lost entirely).\n\n";
  s += "| order | A: normwise > 2^-8 | B: swamped > 1% |\n|---|---|---|\n";
  for (const char* a : {"ring", "tree"})
    s += std::string("| ") + a + " | " + first_crossing(c, r, a, false) + " | " + first_crossing(c, r, a, true) + " |\n";
  s += "\n(The first N of the list, " + std::to_string(c.ranks.front()) + " … " + std::to_string(c.ranks.back()) +
       ", at which it holds.)";
  if (const AllreduceCell* first = find(r, c.ranks.front(), "bf16", "ring"))
    s += " Part of the error is there before any long sum: at N = " + std::to_string(c.ranks.front()) +
         ", with " + (c.ranks.front() == 2 ? std::string("one addition") : "few additions") +
         ", the bf16 normwise error is already " + num(first->normwise) +
         ", mostly the rounding of the float32 inputs to bf16 (each at most u = 2^-8 relative).";
  s += "\n\n";
  s += "| N | κ | bf16 ring normwise | bf16 tree normwise | ring / tree | sqrt((N−1)/⌈log2 N⌉) | "
       "(N−1)/⌈log2 N⌉ | bf16 ring swamped | bf16 tree swamped |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const AllreduceRanksInfo& i : r.per_ranks) {
    const AllreduceCell *ring = find(r, i.ranks, "bf16", "ring"), *tree = find(r, i.ranks, "bf16", "tree");
    if (!ring || !tree) continue;
    const double levels = std::ceil(std::log2(static_cast<double>(i.ranks)));
    s += "| " + std::to_string(i.ranks) + " | " + num(i.kappa) + " | " + num(ring->normwise) + " | " +
         num(tree->normwise) + " | " + (tree->normwise > 0 ? num(ring->normwise / tree->normwise) : "–") + " | " +
         num(std::sqrt((static_cast<double>(i.ranks) - 1) / levels)) + " | " +
         num((static_cast<double>(i.ranks) - 1) / levels) + " | " + num(per(ring->swamped, ring->additions)) +
         " | " + num(per(tree->swamped, tree->additions)) + " |\n";
  }
  s += "\n### Why the tree degrades more slowly, and the growth law\n\n";
  s += "In the ring every element's sum is one running partial sum that receives N − 1 addends: every rounding "
       "error is made at the size of the partial sum, and once the partial sum has grown past 2^8 times an addend "
       "(bf16 keeps 8 significant bits) the addend is swamped. The tree adds only partial sums of equal numbers of "
       "ranks; each element passes through ⌈log2 N⌉ additions, and at every level the operands are of similar size, "
       "so an addend is rarely small against the partial sum it meets. The worst-case bounds are "
       "γ_{N−1}·κ (ring) and γ_{⌈log2 N⌉}·κ (tree), γₖ = k·u/(1 − k·u); with independent rounding errors the "
       "expected errors are about √(N−1)·u·κ and √⌈log2 N⌉·u·κ, so the ring/tree ratio is predicted to grow like "
       "√((N−1)/⌈log2 N⌉) (the table's column) for random errors and like (N−1)/⌈log2 N⌉ where the errors are "
       "correlated (rounding the same way addition after addition, as swamped addends of one sign do).\n\n";
  s += ratio_check(r) + "Fitted growth: the least-squares slope of log2(normwise) against log2 N over the list (normwise ∝ N^slope):\n\n";
  s += "| format | ring slope | tree slope |\n|---|---|---|\n";
  for (const AllreduceFormatCase& f : allreduce_format_cases()) {
    const auto a = slope(r, f.format, "ring"), b = slope(r, f.format, "tree");
    s += "| " + f.format + " | " + (a ? num(*a, "%.2f") : "–") + " | " + (b ? num(*b, "%.2f") : "–") + " |\n";
  }
  s += "\nκ changes with N too (each N has its own batch), so the slopes mix the orders' growth with that of the "
       "condition; the ring/tree ratio at the same N (same rows) does not.\n\n";
  return s;
}

// fp8 with per-rank scaling: the scale leaves room for N terms, so the inputs move one binade down per
// doubling of N, toward the format's smallest subnormal. The inputs' underflow at the first and last N says
// how much of the gradient that costs.
std::string scaling_headroom(const AllreduceExperimentConfig& c, const AllreduceExperimentResult& r) {
  const std::size_t lo = c.ranks.front(), hi = c.ranks.back();
  std::string s = "## fp8: what the scaling's headroom costs\n\nPer-rank scaling takes 2^k with amax·2^k ≤ "
                  "max_finite / N, room for the sum of N ranks without overflow; each doubling of N moves every "
                  "input one binade further down, toward the format's smallest subnormal. Inputs that underflowed "
                  "(in-uf, per input, ring):\n\n| format | N = " +
                  std::to_string(lo) + " | N = " + std::to_string(hi) + " |\n|---|---|---|\n";
  for (const AllreduceFormatCase& f : allreduce_format_cases()) {
    if (f.scaling == "none") continue;
    const AllreduceCell *a = find(r, lo, f.format, "ring"), *b = find(r, hi, f.format, "ring");
    if (!a || !b) continue;
    s += "| " + f.format + " | " + num(per(a->input_underflow, a->inputs)) + " | " +
         num(per(b->input_underflow, b->inputs)) + " |\n";
  }
  std::size_t overflowing = 0, fp8_cells = 0;
  for (const AllreduceCell& cell : r.cells) {
    if (cell.scaling == "none") continue;
    ++fp8_cells;
    overflowing += cell.overflow > 0;
  }
  s += "\nfp8 sums with an overflowing addition: " + std::to_string(overflowing) + " of " +
       std::to_string(fp8_cells) + " (the overflow column of the table below). ";
  return s + "Headroom for the worst case N·amax is paid for at every N; a scale that tracked the sum's own amax "
             "would keep more of the small inputs.\n\n";
}

std::string full_table(const AllreduceExperimentResult& r) {
  std::string s = "## Every cell\n\n";
  s += "| N | format | order | normwise | median rel | max rel | swamped | underflow | overflow | in-uf | "
       "not compared |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const AllreduceCell& c : r.cells)
    s += "| " + std::to_string(c.ranks) + " | " + c.format + (c.scaling == "none" ? "" : " (" + c.scaling + ")") +
         " | " + c.algorithm + " | " + num(c.normwise) + " | " + num(c.median_rel) + " | " + num(c.max_rel) + " | " +
         num(per(c.swamped, c.additions)) + " | " + num(per(c.underflow, c.additions)) + " | " +
         num(per(c.overflow, c.additions)) + " | " + num(per(c.input_underflow, c.inputs)) + " | " +
         std::to_string(c.not_compared) + " |\n";
  return s + "\n";
}

std::string timing_and_limits(const AllreduceExperimentResult& r) {
  std::string s = "## Time\n\n| N | gradients (s) | 10 reductions (s) |\n|---|---|---|\n";
  for (const AllreduceRanksInfo& i : r.per_ranks)
    s += "| " + std::to_string(i.ranks) + " | " + num(i.gradient_seconds, "%.2f") + " | " +
         num(i.reduce_seconds, "%.2f") + " |\n";
  s += "\nWall-clock seconds on this CPU (these vary from run to run; every other number of the report is "
       "reproduced bit for bit by the command).\n\n";
  s += "## Not done here\n\n";
  s += "- The effect on training: the CNN trained with its gradients reduced across simulated ranks in bf16 "
       "against fp32, under the parity gate, is not part of this report yet. The errors above are those of one "
       "step's sum; whether they change the trained model is not measured.\n";
  s += "- One model (its initial weights by default), one seed, the sum without division by N, nearest-even "
       "rounding, and the rank-order tree and textbook ring (NCCL's own ring and tree orders differ: "
       "docs/allreduce.md).\n";
  return s;
}

report::LineChart chart(const AllreduceExperimentResult& r, bool swamping) {
  report::LineChart ch;
  ch.title = swamping ? "Swamped additions per addition" : "Normwise relative error of the sum";
  ch.x_label = "log2 N (ranks)";
  ch.y_label = swamping ? "swamped / additions" : "||s^ - s|| / ||s||";
  ch.log10_y = true;
  for (const AllreduceFormatCase& f : allreduce_format_cases())
    for (const char* a : {"ring", "tree"}) {
      report::LineSeries line{f.format + " " + a, {}, std::string(a) == "tree"};
      for (const AllreduceCell& c : r.cells)
        if (c.format == f.format && c.algorithm == a)
          line.points.emplace_back(std::log2(static_cast<double>(c.ranks)),
                                   swamping ? per(c.swamped, c.additions) : c.normwise);
      ch.series.push_back(std::move(line));
    }
  return ch;
}

}  // namespace

std::vector<std::filesystem::path> write_allreduce_report(const AllreduceExperimentConfig& config,
                                                          const AllreduceExperimentResult& result) {
  const std::filesystem::path dir = config.report.parent_path();
  const std::string stem = config.report.stem().string();
  const std::filesystem::path error_svg = dir / (stem + "-error.svg"), swamped_svg = dir / (stem + "-swamped.svg");
  std::string md = intro(config, result) + verdict(config, result);
  md += "![normwise error](" + error_svg.filename().string() + ")\n\n![swamped additions](" +
        swamped_svg.filename().string() + ")\n\n";
  md += scaling_headroom(config, result) + full_table(result) + timing_and_limits(result);
  if (!dir.empty()) std::filesystem::create_directories(dir);
  record::write_file_atomically(error_svg, report::svg_line_chart(chart(result, false)));
  record::write_file_atomically(swamped_svg, report::svg_line_chart(chart(result, true)));
  record::write_file_atomically(config.report, md);
  return {config.report, error_svg, swamped_svg};
}

}  // namespace mpverify::experiments
