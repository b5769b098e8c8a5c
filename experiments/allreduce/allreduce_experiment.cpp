#include "allreduce/allreduce_experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "collective/allreduce.h"
#include "collective/exact_sum.h"
#include "formats/format.h"
#include "training/shard_gradients.h"

namespace mpverify::experiments {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The exact sum of every column, rounded once to double, and kappa.
std::vector<double> exact_sums(const collective::RankRows& rows, double& kappa) {
  std::vector<double> s(rows.n);
  double ss = 0, aa = 0;
  for (std::size_t i = 0; i < rows.n; ++i) {
    collective::ExactSum e, a;
    for (std::size_t r = 0; r < rows.ranks; ++r) {
      const float x = rows.data[r * rows.n + i];
      e.add(x);
      a.add(std::abs(x));
    }
    s[i] = e.value();
    ss += s[i] * s[i];
    aa += a.value() * a.value();
  }
  kappa = ss > 0 ? std::sqrt(aa / ss) : 0;
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2) return hi;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + hi) / 2;
}

AllreduceCell reduce_cell(const collective::RankRows& rows, const std::vector<double>& exact,
                          const AllreduceFormatCase& f, collective::Algorithm algorithm) {
  collective::AllreduceSpec spec;
  spec.rounding.format = formats::parse_format(f.format);
  spec.algorithm = algorithm;
  spec.scaling = *collective::parse_scaling(f.scaling);
  const collective::AllreduceResult r = collective::allreduce(rows, spec);
  AllreduceCell c;
  c.ranks = rows.ranks;
  c.format = f.format;
  c.algorithm = std::string(collective::to_string(algorithm));
  c.scaling = f.scaling;
  double ee = 0, ss = 0;
  std::vector<double> rel;
  rel.reserve(rows.n);
  for (std::size_t i = 0; i < rows.n; ++i) {
    if (!std::isfinite(r.values[i])) {
      ++c.not_compared;
      continue;
    }
    ++c.compared;
    const double e = static_cast<double>(r.values[i]) - exact[i];
    ee += e * e;
    ss += exact[i] * exact[i];
    if (exact[i] != 0) rel.push_back(std::abs(e) / std::abs(exact[i]));
  }
  c.normwise = ss > 0 ? std::sqrt(ee / ss) : 0;
  c.max_rel = rel.empty() ? 0 : *std::max_element(rel.begin(), rel.end());
  c.median_rel = median(std::move(rel));
  const emu::Counters& a = r.counters.additions;
  c.additions = a.elements;
  c.swamped = a.swamped;
  c.underflow = a.underflow;
  c.overflow = a.overflow;
  c.inputs = r.counters.inputs.elements;
  c.input_underflow = r.counters.inputs.underflow;
  return c;
}

nlohmann::json cell_json(const AllreduceCell& c) {
  return {{"ranks", c.ranks},         {"format", c.format},         {"algorithm", c.algorithm},
          {"scaling", c.scaling},     {"normwise", c.normwise},     {"median_rel", c.median_rel},
          {"max_rel", c.max_rel},     {"additions", c.additions},   {"swamped", c.swamped},
          {"underflow", c.underflow}, {"overflow", c.overflow},     {"inputs", c.inputs},
          {"input_underflow", c.input_underflow}, {"compared", c.compared}, {"not_compared", c.not_compared}};
}

}  // namespace

std::vector<AllreduceFormatCase> allreduce_format_cases() {
  return {{"fp32", "none"}, {"bf16", "none"}, {"fp16", "none"}, {"fp8-e4m3", "per-rank"}, {"fp8-e5m2", "per-rank"}};
}

void validate(const AllreduceExperimentConfig& config) {
  if (config.ranks.empty()) throw std::invalid_argument("--ranks: give at least one number of ranks");
  for (std::size_t n : config.ranks)
    if (n < 2 || n > collective::kMaxRanks)
      throw std::invalid_argument("--ranks: " + std::to_string(n) + " ranks; give 2 to " +
                                  std::to_string(collective::kMaxRanks) + " (an all-reduce needs two)");
  if (config.shard_batch < 1) throw std::invalid_argument("--shard-batch 0: give at least 1 example per rank");
  if (config.model != "cnn" && config.model != "mlp")
    throw std::invalid_argument("--model '" + config.model + "': expected cnn or mlp");
}

AllreduceExperimentResult run_allreduce_experiment(const AllreduceExperimentConfig& config,
                                                   const std::function<void(const std::string&)>& progress) {
  validate(config);
  AllreduceExperimentResult result;
  for (std::size_t n : config.ranks) {
    const auto t0 = std::chrono::steady_clock::now();
    training::ShardGradientOptions o;
    o.model = config.model;
    o.data = config.data;
    o.ranks = n;
    o.shard_batch = config.shard_batch;
    o.step = config.step;
    o.seed = config.seed;
    const training::ShardGradients g = training::shard_gradients(o);
    AllreduceRanksInfo info{n, g.n, 0, seconds_since(t0), 0};
    const auto t1 = std::chrono::steady_clock::now();
    const collective::RankRows rows{g.rows, g.ranks, g.n};
    const std::vector<double> exact = exact_sums(rows, info.kappa);
    for (const AllreduceFormatCase& f : allreduce_format_cases())
      for (collective::Algorithm a : {collective::Algorithm::ring, collective::Algorithm::tree})
        result.cells.push_back(reduce_cell(rows, exact, f, a));
    info.reduce_seconds = seconds_since(t1);
    result.per_ranks.push_back(info);
    if (progress)
      progress("N = " + std::to_string(n) + ": gradients " + std::to_string(info.gradient_seconds) + " s, reductions " +
               std::to_string(info.reduce_seconds) + " s");
  }
  result.files = write_allreduce_report(config, result);
  nlohmann::json cells = nlohmann::json::array();
  for (const AllreduceCell& c : result.cells) cells.push_back(cell_json(c));
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : result.files) files.push_back(f.string());
  result.json = {{"model", config.model}, {"data", config.data}, {"seed", config.seed}, {"step", config.step},
                 {"shard_batch", config.shard_batch}, {"cells", cells}, {"files", files}};
  return result;
}

}  // namespace mpverify::experiments
