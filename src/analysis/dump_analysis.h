// `mpverify analyze` as a library call: every tensor of a file or a directory
// of dumps (io/tensor_directory.h) through one ScaleSweep each, totals over
// all tensors, and the files that could not be read (each failure names the
// file, the tensor and the byte offset; the other files are still analysed).
// A request may keep only some tensors (tensor_selection.h) and give each
// file its own plan (a dump's steps, each at the loss scale it ran at).
//
// Tensors are streamed: float32 data is counted straight from the file's
// mapping; other types are decoded 64 Ki elements at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "analysis/scale_stats.h"
#include "analysis/scale_sweep.h"
#include "analysis/tensor_selection.h"
#include "io/tensor_directory.h"
#include "io/tensor_entry.h"

namespace mpverify::analysis {

struct TensorReport {
  std::string name;  // the tensor's name; "relative/file:name" when a directory was given
  std::string file;    // the file, relative to the directory given (its name for a single file)
  std::string tensor;  // the tensor's name in that file
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<ScaleStats> per_scale;  // in the plan's scale order
};

struct ReadFailure {
  std::string file;
  std::string tensor;  // "" when the file's header is bad
  std::uint64_t offset = 0;
  std::string reason;
};

struct DumpAnalysis {
  std::vector<TensorReport> tensors;
  // Per scale, over every tensor. With per-file plans, slot k adds each file's k-th scale; its `scale` is
  // NaN when those differ.
  std::vector<ScaleStats> total;
  std::vector<ReadFailure> failures;
  std::vector<std::string> skipped;  // non-float tensors, non-.npy npz members, files left out
  std::size_t files = 0;             // tensor files found
  SelectionTally selection;          // every readable float tensor's name went through it
};

struct DumpRequest {
  // The plan of every file, unless `plan_for` is set: then each file's plan (all with the same number of
  // scales), or nullptr to leave the file out (listed in `skipped` with `left_out_because`).
  const SweepPlan* plan = nullptr;
  std::function<const SweepPlan*(const io::FoundFile&)> plan_for;
  std::string left_out_because;
  TensorSelection selection;
};

std::vector<ScaleStats> analyze_tensor(const io::TensorEntry& e, const SweepPlan& plan);

// Adds one tensor's statistics to `total`, slot by slot (a slot whose scales differ gets scale NaN). Throws
// std::invalid_argument when the numbers of slots differ.
void add_to_total(std::vector<ScaleStats>& total, const std::vector<ScaleStats>& per_scale);

// `progress(done, total)` is called after each file when given. Throws
// io::FileError only when `path` itself does not exist.
DumpAnalysis analyze_path(const std::filesystem::path& path, const SweepPlan& plan,
                          const std::function<void(std::size_t, std::size_t)>& progress = {});
DumpAnalysis analyze_path(const std::filesystem::path& path, const DumpRequest& request,
                          const std::function<void(std::size_t, std::size_t)>& progress = {});

// What to do, from the per-scale totals: the largest power-of-two scale 2^k
// (k in [-149, 127]) at which the largest |x| does not overflow (exact, by
// scale_and_round on that value), and, of the scales analysed, the largest
// without any overflow and its underflow (slots whose scale is NaN, which
// mixed several scales, are not an analysed scale).
struct Recommendation {
  bool has_values = false;       // some non-zero finite value exists
  int largest_safe_log2 = 0;     // 2^k; meaningful when has_values
  bool some_scale_safe = false;  // some analysed scale has no overflow
  ScaleStats best;               // the largest analysed scale without overflow
  std::string line;              // one line for people
};
Recommendation recommend(const std::vector<ScaleStats>& per_scale, const formats::Format& f);

}  // namespace mpverify::analysis
