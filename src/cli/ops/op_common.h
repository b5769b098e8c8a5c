// What every op of `mpverify ops` shares: the parsed arguments, the sides
// (ref, emu, gpu) with their outputs, and the OpResult that the report
// prints the same way for all ops. Each op family lives in its own file
// (gemm_op.cpp, activation_op.cpp, ...) and is listed in ops_registry.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/compare.h"
#include "emu/counters.h"
#include "formats/format.h"

namespace mpverify::cli::ops {

using KeyValues = std::map<std::string, std::string>;

struct OpArgs {
  std::string op;  // as typed, e.g. "tanh-backward"
  KeyValues shape, policy;
  std::uint64_t seed = 1;
};

// One side of the comparison. `out` holds one vector per OpResult::tensors
// entry, in the same order.
struct Side {
  std::string name;  // ref, emu or gpu
  bool ran = false;
  std::string reason;  // why it did not run
  std::vector<std::vector<float>> out;
};

struct OutputTensor {
  std::string name;        // e.g. "y", "dx", "dgamma"
  formats::Format format;  // ULP distances are measured in it
};

// The tolerance for tensor `t` (index into OpResult::tensors) between sides a and b.
using ToleranceFn = std::function<compare::Tolerance(std::size_t t, const std::string& a, const std::string& b)>;

struct OpResult {
  std::string title;
  nlohmann::json shape, policy;
  std::vector<OutputTensor> tensors;
  std::vector<Side> sides;
  emu::CounterSet counters;  // the emulator's
  // The tolerance for tensor `t` (index into tensors) between sides a and b.
  ToleranceFn tolerance;
  // Facts beside the comparison (an object, or null for none), printed after the counters and kept in the
  // JSON as "info": e.g. block-gemm's error against FP64 of the unquantized inputs.
  nlohmann::json info;
};

// An op family: the op names it answers to, how to run one, and a line of help.
struct OpFamily {
  std::vector<std::string> names;
  std::function<OpResult(const OpArgs&, std::vector<Side>)> run;
  std::string help;
};

// --- argument helpers: each throws UsageError naming the option and the fix ---
KeyValues parse_key_values(const std::string& text, const std::string& option);
void check_keys(const KeyValues& kv, std::initializer_list<const char*> known, const std::string& option);
// KEY=N with 0 <= N <= 2^24; `fallback` (>= 0) when the key is absent, else required.
int whole_number(const KeyValues& kv, const std::string& key, const std::string& option, int fallback = -1);
// KEY=X, a finite real number; `fallback` when absent.
double real_number(const KeyValues& kv, const std::string& key, const std::string& option, double fallback);
// KEY=FORMAT; `fallback` when absent.
formats::Format format_option(const KeyValues& kv, const std::string& key, const std::string& option,
                              const formats::Format& fallback);

// Gives every side one zero-filled output of each size.
void size_outputs(std::vector<Side>& sides, std::initializer_list<std::size_t> sizes);
// Runs the GPU side unless there is no device, or `unsupported` says why this
// configuration has no GPU version; the side records the reason.
void run_gpu_side(Side& side, const std::string& unsupported, const std::function<void()>& run);

// n seeded normal values of standard deviation `scale`.
std::vector<float> normal_inputs(std::size_t n, std::mt19937_64& rng, double scale);
// The same, drawn as values of `f` (rounded to it), so that every side starts
// from the same numbers: for ops whose result jumps when a rounding changes
// which input wins (max-pool) or whose bounds assume exact inputs.
std::vector<float> normal_inputs_in(const formats::Format& f, std::size_t n, std::mt19937_64& rng, double scale);
// v rounded to `f`.
std::vector<float> in_format(std::vector<float> v, const formats::Format& f);

}  // namespace mpverify::cli::ops
