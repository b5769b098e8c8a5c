#include "analysis/tensor_selection.h"

#include <fnmatch.h>

#include <algorithm>

namespace mpverify::analysis {

bool glob_matches(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool TensorSelection::keeps(const std::string& name) const {
  const auto matches = [&](const std::string& g) { return glob_matches(g, name); };
  if (!only.empty() && std::none_of(only.begin(), only.end(), matches)) return false;
  return std::none_of(exclude.begin(), exclude.end(), matches);
}

bool SelectionTally::note(const TensorSelection& s, const std::string& name) {
  only_matches.resize(s.only.size());
  for (std::size_t k = 0; k < s.only.size(); ++k) only_matches[k] += glob_matches(s.only[k], name);
  ++seen;
  if (first_names.size() < kNamesKept) first_names.push_back(name);
  const bool keep = s.keeps(name);
  kept += keep;
  return keep;
}

}  // namespace mpverify::analysis
