#include "training/data_parallel.h"

#include <stdexcept>

#include "formats/format.h"

namespace mpverify::training {

namespace {

collective::AllreduceSpec spec_of(const DataParallel& dp) {
  collective::AllreduceSpec spec;
  spec.rounding.format = formats::parse_format(dp.format);
  spec.algorithm = *collective::parse_algorithm(dp.algorithm);
  spec.divide = collective::Divide::before;
  return spec;
}

nlohmann::json stage_json(const emu::Counters& c) {
  return {{"elements", c.elements},   {"inexact", c.inexact}, {"underflow_to_zero", c.underflow_to_zero},
          {"overflow", c.overflow},   {"swamped", c.swamped}, {"addends_nonzero", c.addends_nonzero}};
}

}  // namespace

void check_data_parallel(const DataParallel& dp, std::size_t batch_size, std::size_t min_shard) {
  if (!dp.on()) return;
  try {
    (void)formats::parse_format(dp.format);
  } catch (const std::exception& e) {
    throw std::invalid_argument("--reduce-format " + dp.format + ": " + e.what());
  }
  if (!collective::parse_algorithm(dp.algorithm))
    throw std::invalid_argument("--reduce-algorithm " + dp.algorithm + ": use ring, tree or reduce-scatter");
  if (dp.ranks > collective::kMaxRanks)
    throw std::invalid_argument("--data-parallel " + std::to_string(dp.ranks) + ": at most " +
                                std::to_string(collective::kMaxRanks) + " ranks");
  if (batch_size % dp.ranks != 0 || batch_size / dp.ranks < min_shard)
    throw std::invalid_argument("--data-parallel " + std::to_string(dp.ranks) + ": --batch-size " +
                                std::to_string(batch_size) + " must cut into " + std::to_string(dp.ranks) +
                                " equal shards of at least " + std::to_string(min_shard) + " examples");
}

std::vector<float> reduce_gradients(const collective::RankRows& rows, const DataParallel& dp,
                                    collective::AllreduceCounters& counters) {
  collective::AllreduceResult r = collective::allreduce(rows, spec_of(dp));
  counters += r.counters;
  return std::move(r.values);
}

nlohmann::json data_parallel_json(const DataParallel& dp) {
  return {{"ranks", dp.ranks}, {"format", dp.format}, {"algorithm", dp.algorithm}, {"divide", "before"}};
}

nlohmann::json all_reduce_counters_json(const collective::AllreduceCounters& counters) {
  return {{"inputs", stage_json(counters.inputs)},
          {"division", stage_json(counters.division)},
          {"additions", stage_json(counters.additions)}};
}

}  // namespace mpverify::training
