// `mpverify swamp` as a library call: per tensor, how many of an optimizer
// step's updates u vanish when added to the weights w (record/lost_updates.h
// defines it: w + u rounded once, lost when the result equals w), in each
// format asked for (fp16 and bf16 by default), with weights stored in that
// format (no master copy) and with an fp32 master copy, plus the 2^p rule of
// thumb |w| / |u| > 2^p.
//
// The update is given (--updates, e.g. the fp32 difference of the weights
// after and before a step) or computed from gradients for plain SGD as
// u = fl32(-lr * g), the update PyTorch's SGD forms in fp32 (an optimizer that
// fuses w - lr * g into one rounding can differ in the last bit of w + u).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/dump_analysis.h"
#include "emu/exponent_histogram.h"
#include "formats/format.h"
#include "record/lost_updates.h"

namespace mpverify::analysis {

struct FormatLostUpdates {
  std::string format;             // the format's name
  record::LostUpdateStats stats;  // without_master: weights stored in the format; with_master: fp32 master
};

struct SwampReport {
  std::string name;
  std::uint64_t elements = 0;
  std::vector<FormatLostUpdates> per_format;  // in the order the formats were given
  // Exponent histogram of |w| / |u| (in double) over the pairs counted as
  // updates: 2^p there is where the rule of thumb says updates start to vanish.
  emu::ExponentHistogram ratio_histogram;
};

// fp16 and bf16: what swamp reports unless told otherwise.
std::vector<formats::Format> default_swamp_formats();

SwampReport swamp_tensor(const std::string& name, std::span<const float> w, std::span<const float> u,
                         const std::vector<formats::Format>& formats);

// Adds the counts of `r` to `total` (rates recomputed; `total` takes the formats of `r` when it has none).
void add_report(SwampReport& total, const SwampReport& r);

// u = fl32(-lr * g) for each g.
std::vector<float> sgd_updates(std::span<const float> grads, float lr);

struct SwampAnalysis {
  std::vector<SwampReport> tensors;
  SwampReport total;  // counts summed over the tensors, rates recomputed
  std::vector<ReadFailure> failures;  // files named by the path given (and the path below it for a directory)
  std::vector<std::string> unmatched;  // tensors on one side only, or whose shapes differ
};

// Pairs the tensors of two files (by tensor name) or two directories (by
// relative file path and tensor name). `lr`: the second path holds gradients.
// Throws io::FileError only when a path does not exist.
SwampAnalysis swamp_paths(const std::filesystem::path& weights, const std::filesystem::path& updates,
                          std::optional<float> lr, const std::vector<formats::Format>& formats);

}  // namespace mpverify::analysis
