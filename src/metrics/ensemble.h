// Reading the runs the parity gate compares (contract 2 of the parallel work):
// a DIR is either
//  - a run directory, what `mpverify train --out DIR` writes: summary.json
//    (with "config", "aborted", "final_loss" and, after evaluation, an
//    "evaluation" object) and steps.jsonl (one JSON object per step), or
//  - an ensemble directory, what `mpverify train --seeds 1,2,3 --out DIR`
//    writes: DIR/ensemble.json ({"seeds": [...], "config": {...}}) and one run
//    directory DIR/seed-<s>/ per listed seed.
// ensemble.json decides: a directory holding it is an ensemble (seed-*
// directories it does not list are ignored); otherwise DIR must be a run
// directory.
//
// Everything wrong with the files is an InputError whose message names the
// file and the problem (and the line, in a JSON Lines file) and says what to
// do: a missing directory or file, JSON that does not parse (with the byte
// offset; "truncated?" when the file ends mid-value), a literal NaN/Infinity
// token (JSON has none; the run log writes null for a non-finite value), a
// line that is not an object, an ensemble.json without a non-empty list of
// distinct integer seeds, a seed directory missing, or a run whose
// summary.config.seed differs from the seed its directory is named after.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::metrics {

// Unusable input: the gate's exit code 2, never a verdict.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunDirectory {
  std::string name;  // the directory as messages name it (as given; seed dirs as DIR/seed-<s>)
  nlohmann::json summary;  // summary.json, an object
  std::optional<std::int64_t> seed;  // summary.config.seed when it is an integer
  std::optional<std::vector<nlohmann::json>> steps;  // steps.jsonl, when asked for
};

struct Ensemble {
  std::string name;  // the directory as given, less trailing slashes
  bool is_ensemble = false;  // false: a single run directory
  std::vector<std::int64_t> listed_seeds;  // ensemble.json's seeds (empty for a run directory)
  std::vector<RunDirectory> runs;  // ensemble.json's seed order
};

// `with_steps` also reads every run's steps.jsonl (a missing one is then an error).
Ensemble read_ensemble(const std::filesystem::path& dir, bool with_steps);
RunDirectory read_run_directory(const std::filesystem::path& dir, bool with_steps);
// The ensemble parent/name, named relative to `parent` ("name", and its runs
// "name/seed-<s>"), so that verdicts and reports built from it do not depend
// on where the runs were written.
Ensemble read_named_ensemble(const std::filesystem::path& parent, const std::string& name, bool with_steps);

// Per step, the run's `key` (nullopt: non-finite, null in the log), in step
// order 0..steps-1 (the run must have been read with its steps); InputError
// unless every step appears exactly once with an integer "step" and the key.
// A run that declared itself diverged (`stopped_early`) stopped before the
// last step, so its missing steps are left nullopt instead.
std::vector<std::optional<double>> read_loss_curve(const RunDirectory& run, const std::string& key, std::int64_t steps,
                                                   bool stopped_early);

// One JSON document (summary.json, ensemble.json) / a JSON Lines file, with
// the diagnostics above (summary.json and ensemble.json must be objects; every
// line of a JSON Lines file an object, blank lines skipped).
nlohmann::json read_json_document(const std::filesystem::path& file);
// A whole file's bytes; InputError when it is missing, a directory or unreadable.
std::string read_text_file(const std::filesystem::path& file);
std::vector<nlohmann::json> read_json_lines_checked(const std::filesystem::path& file);

}  // namespace mpverify::metrics
