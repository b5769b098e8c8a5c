// `mpverify swamp DIR` as a library call: lost updates over a dump's steps
// (dump_steps.h). In each step directory the weights are paired with the
// updates beside them by name, weights.safetensors with updates.safetensors
// (or .npz, .npy), or a weights/ directory of .npy files with updates/, and
// their tensors by name, as swamp_paths pairs two files; each pair is counted
// by swamp_paths, so a step's numbers are those of `swamp --weights
// DIR/step-N/weights.safetensors --updates DIR/step-N/updates.safetensors`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "analysis/dump_steps.h"
#include "analysis/swamp_analysis.h"
#include "formats/format.h"

namespace mpverify::analysis {

struct SwampStep {
  std::int64_t step = 0;
  std::string directory;  // "step-000010"
  std::string weights;    // relative to the dump: "step-000010/weights.safetensors"
  std::string updates;
  SwampAnalysis analysis;  // its failures are moved to SwampDump::failures
};

struct SwampDump {
  std::vector<SwampStep> steps;
  std::vector<SwampReport> tensors;  // per tensor name, summed over the steps, in order of first appearance
  SwampReport total;                 // over every step and tensor
  std::vector<std::string> unpaired;  // step directories without a weights/updates pair, and why
  std::vector<ReadFailure> failures;  // every step's, files named relative to the dump
};

// The weights and updates files (or directories) of one step directory, the first pair found of
// weights.safetensors, weights.npz, weights.npy, weights/; or why there is none.
struct StepPair {
  std::optional<std::filesystem::path> weights, updates;
  std::string why_not;  // when unpaired: "no weights.safetensors, ..." or "weights.npz but no updates.npz"
};
StepPair pair_step_files(const std::filesystem::path& step_directory);

// Every step directory of `dump` (already found and checked by find_step_directories), its pair counted in
// `formats`; a file that cannot be read is listed in `failures`, the rest still counted.
SwampDump swamp_dump(const std::filesystem::path& dump, const std::vector<StepDirectory>& steps,
                     const std::vector<formats::Format>& formats);

}  // namespace mpverify::analysis
