// Value files: the parity gate's input from any framework, one value per run
// (`mpverify gate --baseline a.csv --candidate b.csv --metric bleu ...`).
//
// CSV: a header naming the columns, then one run per line:
//     seed,value
//     1,95.2
//     2,nan
// Required columns `seed` (an integer, distinct within the file) and `value`
// (a number); optional `stderr` (the value's own standard error, >= 0) with
// `replicates` (how many bootstrap replicates or subsets it came from, >= 2),
// the two together or neither. A curve file (the per-step gates) has a
// `step` column too (an integer >= 0): one value per (seed, step), the pair
// distinct within the file. Columns in any order; fields may be quoted;
// blank lines and lines starting with '#' are skipped; CRLF line ends are
// accepted. Any other column is refused (a typo in `stderr` must not pass
// silently).
//
// JSON: an array of objects with the same keys:
//     [{"seed": 1, "value": 95.2}, {"seed": 2, "value": NaN}]
// Python's json.dump writes a non-finite float as the bare token NaN,
// Infinity or -Infinity, which JSON itself lacks; here they are read, and
// null means the same.
//
// A non-finite value (nan, inf, -inf in any case, or null and the tokens
// above in JSON) is a run that diverged: the gate's verdict is then "not
// equivalent", never bad input. Everything else wrong is an InputError naming
// the file, the line and what to write instead: no header, an unknown or
// missing column, a wrong field count, an empty value (write nan for a
// diverged run), a seed that is not an integer or repeats, a stderr without
// replicates, JSON that does not parse or is not an array of such objects,
// and a file without runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mpverify::metrics {

struct ValueRecord {
  std::int64_t seed = 0;
  std::optional<std::int64_t> step;   // curve files only
  std::optional<double> value;        // nullopt: non-finite (the run diverged)
  std::string non_finite;             // the token as written ("nan", "NaN", "null", ...) when value is nullopt
  std::optional<double> stderr_value; // the `stderr` column / key
  std::optional<std::int64_t> replicates;
  std::size_t line = 0;               // 1-based line of the record in the file
  std::string source;                 // what the gate calls the run when not file:line (e.g. a statistics file)
};

struct ValueFile {
  std::string name;  // the path as given
  bool has_steps = false;  // a curve file: every record has a step
  std::vector<ValueRecord> records;  // file order
};

// Whether `path` names a value file rather than a run or ensemble directory:
// a path ending in .csv or .json (case-insensitive) that is not a directory.
bool is_value_file(const std::filesystem::path& path);

// Reads a CSV (.csv) or JSON (.json) value file. Throws InputError.
ValueFile read_value_file(const std::filesystem::path& path);

}  // namespace mpverify::metrics
