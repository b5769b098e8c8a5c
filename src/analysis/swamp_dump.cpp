#include "analysis/swamp_dump.h"

#include <map>
#include <system_error>

namespace mpverify::analysis {

namespace {

namespace fs = std::filesystem;

// The sibling kinds tried, in order; "" is a directory of .npy files.
constexpr const char* kKinds[] = {".safetensors", ".npz", ".npy", ""};

bool exists_as(const fs::path& p, bool directory) {
  std::error_code ec;
  return directory ? fs::is_directory(p, ec) : fs::is_regular_file(p, ec);
}

std::string shown(const std::string& stem, const std::string& ext) { return ext.empty() ? stem + "/" : stem + ext; }

// A failure's file relative to the dump when it lies below it.
std::string relative_to(const fs::path& dump, const std::string& file) {
  const fs::path base = dump.has_filename() ? dump : dump.parent_path();  // "dump/" names the folder "dump"
  const fs::path r = fs::path(file).lexically_normal().lexically_relative(base.lexically_normal());
  if (r.empty() || *r.begin() == "..") return file;
  return r.generic_string();
}

}  // namespace

StepPair pair_step_files(const fs::path& step_directory) {
  StepPair p;
  for (const std::string ext : kKinds) {
    const fs::path w = step_directory / ("weights" + ext), u = step_directory / ("updates" + ext);
    if (!exists_as(w, ext.empty())) continue;
    std::error_code ec;
    if (!exists_as(u, ext.empty())) {
      p.why_not = shown("weights", ext) + " but no " + shown("updates", ext) + " beside it";
    } else if (fs::equivalent(w, u, ec)) {
      p.why_not = shown("updates", ext) + " is the same file as " + shown("weights", ext);
    } else {
      p.weights = w;
      p.updates = u;
    }
    return p;
  }
  p.why_not = "no weights.safetensors, weights.npz, weights.npy or weights/ directory";
  return p;
}

SwampDump swamp_dump(const fs::path& dump, const std::vector<StepDirectory>& steps,
                     const std::vector<formats::Format>& formats) {
  SwampDump out;
  out.total.name = "(total)";
  for (const formats::Format& f : formats) out.total.per_format.push_back({f.name, {}});
  std::map<std::string, std::size_t> index;  // tensor name -> out.tensors
  for (const StepDirectory& d : steps) {
    const StepPair pair = pair_step_files(d.path);
    if (!pair.weights) {
      out.unpaired.push_back(d.name + ": " + pair.why_not);
      continue;
    }
    SwampStep s{d.step, d.name, relative_to(dump, pair.weights->string()), relative_to(dump, pair.updates->string()),
                swamp_paths(*pair.weights, *pair.updates, std::nullopt, formats)};
    for (ReadFailure& f : s.analysis.failures) {
      f.file = relative_to(dump, f.file);
      out.failures.push_back(std::move(f));
    }
    s.analysis.failures.clear();
    for (const SwampReport& r : s.analysis.tensors) {
      const auto [it, added] = index.emplace(r.name, out.tensors.size());
      if (added) {
        out.tensors.emplace_back();
        out.tensors.back().name = r.name;
      }
      add_report(out.tensors[it->second], r);
    }
    add_report(out.total, s.analysis.total);
    out.steps.push_back(std::move(s));
  }
  return out;
}

}  // namespace mpverify::analysis
