// mpverify allreduce IN.npy [IN2.npy ...] --format F [--algorithm ring|tree|reduce-scatter]
//                    [--divide none|before|after|split|premul] [--scaling none|per-rank]
//                    [--rounding MODE [--seed S]] [--mpi] [--json] --out OUT.npy [--errors ERR.npy]
// mpverify allreduce --synthetic SEED --ranks N --elements n --format F ... --out OUT.npy
// mpverify allreduce --from-model cnn --ranks N [--shard-batch B --model-seed S --step K] --format F ... --out OUT.npy
// One gradient per rank summed across the ranks in a format, in the order a
// collective library uses (collective/allreduce.h; docs/allreduce.md), with
// the counters of every rounding and each element's error against the exact
// sum. With --mpi, under `mpirun -n P` (P = the ranks), the ring runs over MPI
// messages between the processes and gives the simulation's bits.
//
// Exit codes: 0; 2 for bad usage, an unreadable input or an output that cannot
// be written (nothing written).
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/allreduce_inputs.h"
#include "cli/commands.h"
#include "cli/count_option.h"
#include "cli/json_value.h"
#include "cli/mpi_session.h"
#include "cli/rounding_options.h"
#include "collective/allreduce.h"
#include "collective/exact_sum.h"
#include "collective/mpi_allreduce.h"
#include "formats/format.h"
#include "io/npy.h"

namespace mpverify::cli {

namespace {

struct AllreduceOptions {
  std::vector<std::string> in;
  std::string format, algorithm = "ring", divide = "none", scaling = "none";
  RoundingOptions rounding;
  std::uint64_t synthetic = 0;
  std::size_t ranks = 0, elements = 0;
  training::ShardGradientOptions from_model;  // --from-model (model empty: not given)
  bool mpi = false, json = false;
  std::string out, errors_out;
};

// The reduced vector and what is reported about it, from either side.
struct Outcome {
  std::vector<float> values;
  collective::AllreduceCounters counters;
  collective::Divisors divisors;
  double scale = 1;
  int processes = 1;
};

void check_npy_name(const std::string& option, const std::string& file) {
  if (file.size() < 5 || file.compare(file.size() - 4, 4, ".npy") != 0)
    throw UsageError(option + " " + file + ": the output is a .npy file; give a name ending in .npy");
}

collective::AllreduceSpec make_spec(const AllreduceOptions& o) {
  collective::AllreduceSpec spec;
  const formats::RoundingContext rc = o.rounding.context();
  spec.rounding = emu::QuantizeSpec{formats::parse_format(o.format), rc.mode, rc.tininess, o.rounding.random_bits,
                                    o.rounding.seed};
  const auto algorithm = collective::parse_algorithm(o.algorithm);
  if (!algorithm) throw UsageError("--algorithm '" + o.algorithm + "': expected ring, tree or reduce-scatter");
  const auto divide = collective::parse_divide(o.divide);
  if (!divide) throw UsageError("--divide '" + o.divide + "': expected none, before, after, split or premul");
  const auto scaling = collective::parse_scaling(o.scaling);
  if (!scaling) throw UsageError("--scaling '" + o.scaling + "': expected none or per-rank");
  spec.algorithm = *algorithm;
  spec.divide = *divide;
  spec.scaling = *scaling;
  return spec;
}

// --from-model and its options; the per-rank gradients of a training step's shards.
AllreduceInputs model_inputs(const AllreduceOptions& o, const CLI::App& app) {
  if (!o.in.empty()) throw UsageError("--from-model makes the inputs: leave out the input files (" + o.in.front() + ")");
  if (app.count("--synthetic")) throw UsageError("give --from-model or --synthetic, not both");
  if (app.count("--elements")) throw UsageError("--elements goes with --synthetic; --from-model's rows are the model's parameters");
  if (!app.count("--ranks")) throw UsageError("--from-model needs --ranks N (the data-parallel ranks, one shard each)");
  training::ShardGradientOptions options = o.from_model;
  options.ranks = o.ranks;
  if (!app.count("--data") && options.model == "transformer") options.data = "kjv";
  return model_allreduce_inputs(options);
}

AllreduceInputs load_inputs(const AllreduceOptions& o, const CLI::App& app) {
  if (app.count("--from-model")) return model_inputs(o, app);
  for (const char* option : {"--shard-batch", "--data", "--data-dir", "--model-seed", "--step"})
    if (app.count(option)) throw UsageError(std::string(option) + " goes with --from-model MODEL");
  const bool synthetic = app.count("--synthetic") > 0;
  if (synthetic) {
    if (!o.in.empty()) throw UsageError("--synthetic makes the inputs: leave out the input files (" + o.in.front() + ")");
    if (!app.count("--ranks") || !app.count("--elements"))
      throw UsageError("--synthetic needs --ranks N and --elements n (the gradient of each rank)");
    return synthetic_allreduce_inputs(o.synthetic, o.ranks, o.elements);
  }
  if (app.count("--ranks") || app.count("--elements"))
    throw UsageError("--ranks and --elements go with --synthetic; with input files the ranks are the files' rows");
  if (o.in.empty()) throw UsageError("no input: give IN.npy (ranks x n), one file per rank, or --synthetic SEED");
  return read_allreduce_inputs(o.in);
}

Outcome simulate(const AllreduceInputs& in, const collective::AllreduceSpec& spec) {
  collective::AllreduceResult r;
  with_usage_errors([&] { r = collective::allreduce({in.values, in.ranks, in.n}, spec); });
  return {std::move(r.values), r.counters, r.divisors, r.scale, 1};
}

// Rank r of an mpirun job: row r; rank 0 gets the result.
Outcome run_over_mpi(const AllreduceInputs& in, const collective::AllreduceSpec& spec, const MpiSession& session) {
  if (static_cast<std::size_t>(session.size()) != in.ranks)
    throw UsageError("--mpi: " + std::to_string(session.size()) + " processes for " + std::to_string(in.ranks) +
                     " ranks (rows); run mpirun -n " + std::to_string(in.ranks));
  const std::span<const float> row =
      std::span<const float>(in.values).subspan(static_cast<std::size_t>(session.rank()) * in.n, in.n);
  collective::MpiAllreduceResult r;
  with_usage_errors([&] { r = collective::mpi_allreduce(row, spec); });
  return {std::move(r.values), r.counters, r.divisors, r.scale, session.size()};
}

nlohmann::json allreduce_counters_json(const emu::Counters& c) {
  return {{"elements", c.elements},   {"zeros_in", c.zeros_in},       {"nonfinite_in", c.nonfinite_in},
          {"inexact", c.inexact},     {"underflow", c.underflow},     {"underflow_to_zero", c.underflow_to_zero},
          {"subnormal", c.subnormal}, {"overflow", c.overflow},       {"nan_created", c.nan_created},
          {"addends_nonzero", c.addends_nonzero}, {"swamped", c.swamped}};
}

nlohmann::json error_json(const collective::ErrorSummary& s) {
  return {{"compared", s.compared},
          {"nonfinite_inputs", s.nonfinite_inputs},
          {"nonfinite_results", s.nonfinite_results},
          {"inexact", s.inexact},
          {"max_abs_error", json_number(s.max_abs_error)},
          {"max_abs_index", s.max_abs_index},
          {"mean_abs_error", json_number(s.mean_abs_error)},
          {"max_rel_error", json_number(s.max_rel_error)},
          {"max_ulp_error", json_number(s.max_ulp_error)}};
}

nlohmann::json summary_json(const AllreduceOptions& o, const collective::AllreduceSpec& spec,
                            const AllreduceInputs& in, const Outcome& r, const collective::ErrorSummary& e) {
  return {{"input", in.source},
          {"from_model", in.from_model},
          {"ranks", in.ranks},
          {"elements", in.n},
          {"format", spec.rounding.format.name},
          {"algorithm", collective::to_string(spec.algorithm)},
          {"divide", collective::to_string(spec.divide)},
          {"divide_before", json_number(r.divisors.before)},
          {"divide_after", json_number(r.divisors.after)},
          {"premul", json_number(r.divisors.premul)},
          {"scaling", collective::to_string(spec.scaling)},
          {"scale", json_number(r.scale)},
          {"rounding", o.rounding.rounding},
          {"seed", o.rounding.seed},
          {"mpi", o.mpi},
          {"processes", r.processes},
          {"counters",
           {{"inputs", allreduce_counters_json(r.counters.inputs)},
            {"division", allreduce_counters_json(r.counters.division)},
            {"additions", allreduce_counters_json(r.counters.additions)}}},
          {"error", error_json(e)},
          {"out", o.out},
          {"errors_out", o.errors_out.empty() ? nlohmann::json() : nlohmann::json(o.errors_out)}};
}

std::string counters_text(const char* what, const emu::Counters& c, bool additions = false) {
  const std::string swamped =
      additions ? ", swamped " + std::to_string(c.swamped) + " of " + std::to_string(c.addends_nonzero) + " updates" : "";
  return std::string(what) + std::to_string(c.elements) + " roundings: inexact " + std::to_string(c.inexact) +
         swamped + ", overflow " + std::to_string(c.overflow) + ", underflow " + std::to_string(c.underflow) +
         " (to zero " + std::to_string(c.underflow_to_zero) + ")\n";
}

std::string summary_text(const AllreduceOptions& o, const collective::AllreduceSpec& spec, const AllreduceInputs& in,
                         const Outcome& r, const collective::ErrorSummary& e) {
  char line[256];
  std::string s = "allreduce of " + std::to_string(in.ranks) + " ranks x " + std::to_string(in.n) + " elements (" +
                  in.source + ") in " + spec.rounding.format.name + ", " + std::string(collective::to_string(spec.algorithm)) +
                  ", rounding " + o.rounding.rounding + ", divide " + o.divide + ", scaling " + o.scaling +
                  (o.mpi ? ", over MPI (" + std::to_string(r.processes) + " processes)" : std::string()) + "\n";
  if (spec.scaling == collective::Scaling::per_rank) {
    std::snprintf(line, sizeof line, "shared scale %.17g\n", r.scale);
    s += line;
  }
  s += counters_text("inputs:    ", r.counters.inputs);
  if (spec.divide != collective::Divide::none) s += counters_text("division:  ", r.counters.division);
  s += counters_text("additions: ", r.counters.additions, true);
  std::snprintf(line, sizeof line,
                "error against the exact sum: max %.6g (element %zu), mean %.6g, max relative %.6g, max %.3g ulps; "
                "%zu of %zu elements inexact\n",
                e.max_abs_error, e.max_abs_index, e.mean_abs_error, e.max_rel_error, e.max_ulp_error, e.inexact,
                e.compared);
  s += line;
  if (e.nonfinite_inputs || e.nonfinite_results)
    s += "not compared: " + std::to_string(e.nonfinite_inputs) + " elements with a non-finite input, " +
         std::to_string(e.nonfinite_results) + " with a non-finite result\n";
  return s + "wrote " + o.out + (o.errors_out.empty() ? "" : " and " + o.errors_out) + "\n";
}

void report(const AllreduceOptions& o, const collective::AllreduceSpec& spec, const AllreduceInputs& in,
            const Outcome& r) {
  const collective::ErrorReport e = collective::compare_to_exact({in.values, in.ranks, in.n}, r.values,
                                                                 r.divisors.total(), spec.rounding.format);
  io::write_npy(o.out, std::span<const float>(r.values), {in.n});  // the files first (atomic), stdout last
  if (!o.errors_out.empty()) io::write_npy(o.errors_out, std::span<const double>(e.error), {in.n});
  if (o.json) std::cout << summary_json(o, spec, in, r, e.summary).dump(1) << "\n";
  else std::cout << summary_text(o, spec, in, r, e.summary);
}

int run_allreduce(const AllreduceOptions& o, const CLI::App& app) {
  check_npy_name("--out", o.out);
  if (!o.errors_out.empty()) check_npy_name("--errors", o.errors_out);
  const collective::AllreduceSpec spec = make_spec(o);
  if (o.mpi) {
    if (const std::string why = mpi_unavailable_reason(); !why.empty()) throw UsageError("--mpi: " + why);
    if (!launched_by_mpi())
      throw UsageError("--mpi runs as the ranks of an MPI job: start it with mpirun -n P mpverify allreduce ... "
                       "(P = the number of ranks), or leave --mpi out to simulate");
  }
  std::optional<MpiSession> session;  // MPI only for --mpi, and only under a launcher (checked above)
  if (o.mpi) session.emplace();
  const AllreduceInputs in = load_inputs(o, app);
  const Outcome r = session ? run_over_mpi(in, spec, *session) : simulate(in, spec);
  if (!session || session->rank() == 0) report(o, spec, in, r);
  return 0;
}

std::string allreduce_footer() {
  return "Orders (docs/allreduce.md defines each exactly):\n"
         "  ring            chunk c (numpy.array_split) = x[c], then + x[c+1], ..., + x[c+N-1] (mod N), one rounding each\n"
         "  tree            pairwise in rank order, level by level: (0+1), (2+3), ...; an odd one out passes up\n"
         "  reduce-scatter  the ring whose chunk c ends on rank c (NCCL's, hence FSDP's): x[c+1] first, x[c] last\n"
         "Division by N: before (each input), after (the sum), split (FSDP's predivide/postdivide factors),\n"
         "premul (NCCL's ReduceOp.AVG: each input times fl(1/N)). Scaling per-rank: each rank's power-of-two\n"
         "scale from its amax with headroom for N terms; the sum is carried at the smallest, then unscaled.\n"
         "Counters: inputs, division and additions count every rounding (inexact, overflow, underflow...);\n"
         "swamped = an addend u != 0 whose sum with the partial sum w rounded back to w (a lost update).\n"
         "The error is result - exact, the exact sum (divided by N when dividing) of the float32 inputs.\n"
         "Exit: 0; 2 bad usage, an unreadable input or an output that cannot be written (nothing written).";
}

}  // namespace

void add_allreduce_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<AllreduceOptions>();
  auto* app = root.add_subcommand("allreduce",
                                  "Sum one gradient per rank across ranks in a format, in NCCL's ring or tree order or "
                                  "FSDP's reduce-scatter, counting every rounding (--mpi: on real MPI processes)");
  app->add_option("IN", o->in,
                  "Inputs: one 2-D tensor (ranks x n, row r = rank r: FILE.npy, FILE.npz:NAME, "
                  "FILE.safetensors:NAME), or one file per rank (each flattened, all the same size)");
  app->add_option("--format", o->format, "The format of the inputs and of every addition (fp32, bf16, fp16, fp8-e4m3, "
                                         "fp8-e5m2, eXmY, ...)")
      ->required();
  app->add_option("--algorithm", o->algorithm, "ring, tree or reduce-scatter")->capture_default_str();
  app->add_option("--divide", o->divide, "Divide by N (an average): none, before, after, split or premul")
      ->capture_default_str();
  app->add_option("--scaling", o->scaling, "none or per-rank (power-of-two scales from each rank's amax)")
      ->capture_default_str();
  o->rounding.add_to(app, "Stochastic rounding's seed (the streams: docs/allreduce.md)");
  app->add_option("--synthetic", o->synthetic, "Synthetic inputs with this seed (normal draws times 2^-10) instead of files");
  app->add_option("--ranks", o->ranks, "With --synthetic or --from-model: the number of ranks")
      ->check(count_from_to(1, collective::kMaxRanks, "the most ranks an all-reduce models"));
  app->add_option("--elements", o->elements, "With --synthetic: the elements of each rank's gradient")
      ->check(count_from_to(1, kMaxSyntheticValues, "memory: every rank's gradient is held"));
  app->add_option("--from-model", o->from_model.model,
                  "Per-rank gradients of a training step's data-parallel shards: cnn, mlp or transformer "
                  "(FP32 reference backend; docs/allreduce.md)");
  app->add_option("--shard-batch", o->from_model.shard_batch, "With --from-model: examples per rank (B)")
      ->capture_default_str();
  app->add_option("--data", o->from_model.data,
                  "With --from-model: synthetic or mnist (cnn, mlp), kjv (transformer; its default)")
      ->capture_default_str();
  app->add_option("--data-dir", o->from_model.data_dir, "With --from-model: the data set's files (default: the loader's)");
  app->add_option("--model-seed", o->from_model.seed, "With --from-model: the training run's seed (weights, data, batches)")
      ->capture_default_str();
  app->add_option("--step", o->from_model.step,
                  "With --from-model: fp32 training steps before the gradient step (0: the initial weights)")
      ->capture_default_str();
  app->add_flag("--mpi", o->mpi, "Run as the ranks of an mpirun job (mpirun -n ROWS): the ring over MPI messages");
  app->add_option("--out", o->out, "Output .npy: the reduced vector (float32, n)")->required();
  app->add_option("--errors", o->errors_out, "Also write each element's error against the exact sum (float64, n) here");
  app->add_flag("--json", o->json, "Print the counters and the error summary as JSON instead of a summary");
  app->footer(allreduce_footer());
  commands.push_back({app, [o, app] { return run_allreduce(*o, *app); }});
}

}  // namespace mpverify::cli
