// Which tensors of a dump to analyse: `--only` and `--exclude` globs matched
// against a tensor's displayed name ("step-000010/grads.safetensors:fc1.weight"
// for a directory, the tensor's name for a single file), with shell-style
// `*`, `?` and `[...]` where `*` matches '/' too (a displayed name mixes a
// path and a tensor name, and one glob should be able to span both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpverify::analysis {

// fnmatch(3) without FNM_PATHNAME or FNM_PERIOD: `*` and `?` match any character, '/' and a leading '.' too;
// `[...]` and `[!...]` are character classes; a backslash quotes the next character.
bool glob_matches(const std::string& pattern, const std::string& text);

struct TensorSelection {
  std::vector<std::string> only;     // a tensor is kept when any of these matches (every tensor when empty)
  std::vector<std::string> exclude;  // ... and none of these does

  bool keeps(const std::string& name) const;
};

// What a selection did over a whole input, for saying why nothing was kept:
// how many tensors each --only glob matched, and the first names seen.
struct SelectionTally {
  std::vector<std::uint64_t> only_matches;  // one per TensorSelection::only glob
  std::uint64_t seen = 0;
  std::uint64_t kept = 0;
  std::vector<std::string> first_names;  // the first few names seen, in order

  static constexpr std::size_t kNamesKept = 8;

  // Counts `name` and says whether the selection keeps it.
  bool note(const TensorSelection& s, const std::string& name);
};

}  // namespace mpverify::analysis
