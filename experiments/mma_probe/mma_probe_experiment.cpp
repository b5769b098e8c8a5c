// The experiment of mma_probe_experiment.h: per probed instruction and length, the cases, each model's
// results, the hardware's, and the report.
#include "mma_probe/mma_probe_experiment.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <stdexcept>

#include "emu/mma_presets.h"
#include "gpu/device.h"
#include "gpu/mma_probe.h"
#include "io/testfloat_cases.h"
#include "mma_probe/mma_vectors.h"
#include "report/output_files.h"
#include "report/text_format.h"

namespace mpverify::experiments {

namespace {

struct ModelRow {
  const emu::MmaModel* model;
  double identical = 0;  // to the hardware, or to the first model without one
  std::array<std::size_t, kMmaCaseKinds> mismatches{};
  std::string first_mismatch;  // the case's fields, the model's d and the reference's
};

struct InstructionRow {
  std::string instruction;
  int K = 0;
  std::size_t cases = 0;
  std::vector<ModelRow> models;
};

// MMA-Sim lists no FP8 mma.sync for Hopper or Blackwell; the sm90 preset models what ptxas compiles it into.
// These published rules stand beside it as candidates, so a later GPU shows which (if any) it follows:
// Hopper's wgmma rule (F = 13, one operation, E8M13), the Hopper mma.sync rule of the other formats (F = 25,
// one operation, fp32) and Ampere's (F = 24, halves).
const std::vector<emu::MmaModel>& fp8_candidates(const emu::MmaModel& ada) {
  static std::map<std::string, std::vector<emu::MmaModel>> candidates;
  auto& list = candidates[ada.name];
  if (list.empty()) {
    auto add = [&](const char* name, int F, bool halves, emu::MmaOutput out) {
      emu::MmaModel m = emu::mma_custom(ada.a, ada.b, ada.c, ada.k, F, halves, out);
      m.name = name;
      list.push_back(m);
    };
    add("candidate: F = 13, one operation, E8M13", 13, false, emu::MmaOutput::e8m13_toward_zero);
    add("candidate: F = 25, one operation, fp32", 25, false, emu::MmaOutput::fp32_toward_zero);
    add("candidate: F = 24, halves, fp32", 24, true, emu::MmaOutput::fp32_toward_zero);
  }
  return list;
}

std::vector<const emu::MmaModel*> models_of(const std::string& instruction) {
  std::vector<const emu::MmaModel*> models;
  for (const emu::MmaModel& m : emu::mma_presets())
    if (m.name.substr(m.name.find('.') + 1) == instruction) models.push_back(&m);
  if (instruction.starts_with("mma.m16n8k32"))
    for (const emu::MmaModel& m : fp8_candidates(*models.front())) models.push_back(&m);
  return models;
}

std::string case_text(const emu::MmaModel& m, const MmaCase& c) {
  std::string s;
  for (auto v : c.a) s += io::hex_field(v, m.a.width()) + " ";
  for (auto v : c.b) s += io::hex_field(v, m.b.width()) + " ";
  return s + io::hex_field(c.c, m.c.width());
}

void dump_cases(const std::filesystem::path& path, const emu::MmaModel& m, const std::vector<MmaCase>& cases,
                const std::vector<std::uint32_t>& d, std::size_t count) {
  std::string text;
  for (std::size_t i = 0; i < std::min(count, cases.size()); ++i) text += case_text(m, cases[i]) + " " + io::hex_field(d[i], m.c.width()) + "\n";
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

InstructionRow run_instruction(std::size_t index, int chain, const MmaProbeConfig& config, bool use_gpu) {
  const std::string instruction = gpu::mma_probe_instructions()[index];
  InstructionRow row;
  row.instruction = instruction;
  const std::vector<const emu::MmaModel*> models = models_of(instruction);
  const emu::MmaModel& first = *models.front();
  row.K = first.k * chain;
  const std::vector<MmaCase> cases =
      mma_cases(first, row.K, config.cases, config.seed * 1000 + index * 10 + static_cast<std::uint64_t>(chain));
  row.cases = cases.size();
  std::vector<std::uint32_t> reference;
  if (use_gpu) {
    std::vector<std::uint32_t> a, b, c;
    for (const MmaCase& x : cases) {
      a.insert(a.end(), x.a.begin(), x.a.end());
      b.insert(b.end(), x.b.begin(), x.b.end());
      c.push_back(x.c);
    }
    reference = gpu::mma_probe(first, a, b, c, row.K);
    if (!config.dump.empty()) dump_cases(config.dump / (instruction + ".k" + std::to_string(row.K) + ".txt"), first, cases, reference,
                 config.dump_cases);
  }
  for (const emu::MmaModel* m : models) {
    ModelRow mr;
    mr.model = m;
    std::size_t same = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::uint32_t d = emu::mma_dot(*m, cases[i].a, cases[i].b, cases[i].c);
      if (!use_gpu && m == models.front()) reference.push_back(d);
      if (d == reference[i]) {
        ++same;
        continue;
      }
      ++mr.mismatches[i % kMmaCaseKinds];
      if (mr.first_mismatch.empty())
        mr.first_mismatch = case_text(*m, cases[i]) + " → model " + io::hex_field(d, m->c.width()) + ", " +
                            (use_gpu ? "GPU " : "first model ") + io::hex_field(reference[i], m->c.width());
    }
    mr.identical = static_cast<double>(same) / static_cast<double>(cases.size());
    row.models.push_back(std::move(mr));
  }
  return row;
}

std::string mismatch_text(const ModelRow& m) {
  std::string s;
  for (int k = 0; k < kMmaCaseKinds; ++k)
    if (m.mismatches[static_cast<std::size_t>(k)] > 0)
      s += (s.empty() ? "" : ", ") + std::string(mma_case_kind(k)) + " " + std::to_string(m.mismatches[static_cast<std::size_t>(k)]);
  return s.empty() ? "–" : s;
}

std::string report_text(const MmaProbeConfig& c, const MmaProbeResult& result, const std::vector<InstructionRow>& rows,
                        bool use_gpu) {
  std::string md = "# Tensor-core models against the instruction, bit for bit\n\n";
  md += "Written by `build/experiments/mma_probe` (seed " + std::to_string(c.seed) + ", " + std::to_string(c.cases) +
        " cases per instruction and length). ";
  md += use_gpu ? "The instructions ran on **" + result.device + "**.\n\n"
                : "**No GPU was available** to this run: the column compares each model with the first one listed "
                  "for its instruction, which shows how many cases can tell the models apart, not which one the "
                  "hardware follows. `experiments/gpu_session` runs it on a GPU.\n\n";
  md += "Each case is one dot product d = c + Σ a_i·b_i of one instruction's k products (K = k) or of a chain of "
        "four (K = 4k, each result the next one's c), issued by a kernel that executes exactly that `mma.sync` "
        "with the case in row 0 of A, column 0 of B and C[0][0] (`src/gpu/mma_probe.cu`). The same PTX is "
        "modelled per architecture (`mpverify eval --op dot --list`): F fraction bits kept after alignment on "
        "e_a + e_b (Volta 23, Turing to Ada 24, Hopper and Blackwell 25) and, on Ampere and Ada, the k = 16 "
        "(f16, bf16) and k = 8 (tf32) shapes computed as two halves (MMA-Sim, arXiv 2511.10909). A model of "
        "the GPU's own architecture should be 100% identical. FP8 `mma.sync` (m16n8k32, sm_89 and later) has "
        "MMA-Sim's model for Ada and, for Hopper, the rule read from the SASS ptxas emits for sm_90 (operands "
        "unpacked to fp16, two fp16 `HMMA` from zero over the products with k mod 4 < 2 and then the rest, "
        "then an fp32 add of c: `sm90.mma.m16n8k32.*`); three published rules stand beside them as "
        "candidates. On a Hopper the probe also issues `wgmma.mma_async` m64n8k16 (f16, bf16) and m64n8k32 (FP8), "
        "one warpgroup per case, A from registers and B from shared memory (`src/gpu/wgmma_probe.cu`, after a "
        "layout check on one-hot cases), against MMA-Sim's Hopper wgmma model (F = 25; FP8: F = 13 and results "
        "rounded toward zero to 13 fraction bits). Cases come in eight kinds, in turn: "
        "wide (any finite encoding), typical, cancelling, c dominating, large significands, tiny, near "
        "overflow, NaN and infinity.\n\n";
  md += "| instruction | K | cases | model | F | halves | identical to the " + std::string(use_gpu ? "GPU" : "first model") +
        " | mismatches by kind |\n|---|---:|---:|---|---:|---|---:|---|\n";
  for (const InstructionRow& r : rows)
    for (const ModelRow& m : r.models)
      md += "| " + r.instruction + " | " + std::to_string(r.K) + " | " + std::to_string(r.cases) + " | " +
            m.model->name + " | " + std::to_string(m.model->fraction_bits) + " | " +
            (m.model->split_halves ? "yes" : "no") + " | " + report::fixed(100.0 * m.identical, 2) + "% | " +
            mismatch_text(m) + " |\n";
  for (const std::string& note : result.not_probed) md += "\nNot probed: " + note + "\n";
  md += "\n<details><summary>The first mismatching case of each model (A's operands, B's, c → d)</summary>\n\n";
  for (const InstructionRow& r : rows)
    for (const ModelRow& m : r.models)
      if (!m.first_mismatch.empty())
        md += "- " + m.model->name + ", K = " + std::to_string(r.K) + ": `" + m.first_mismatch + "`\n";
  md += "\n</details>\n";
  return md;
}

// The architecture prefix of the present GPU's models (sm90 for a compute capability of 9.0, ...).
std::string own_prefix(int compute_capability) {
  if (compute_capability >= 100) return "sm100.";
  if (compute_capability >= 90) return "sm90.";
  if (compute_capability == 89) return "sm89.";
  if (compute_capability >= 80) return "sm80.";
  return compute_capability >= 75 ? "sm75." : "sm70.";
}

}  // namespace

void validate_mma_probe(const MmaProbeConfig& c) {
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.cases < 8 || c.cases > 10'000'000) throw std::invalid_argument("--cases must be 8..10^7");
}

MmaProbeResult run_mma_probe(const MmaProbeConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_mma_probe(c);
  MmaProbeResult result;
  result.gpu_reason = c.gpu ? gpu::gpu_unavailable_reason() : std::string("the GPU side was turned off (--no-gpu)");
  const bool use_gpu = result.gpu_reason.empty();
  std::string prefix;
  bool hopper = false;
  if (use_gpu) {
    const gpu::DeviceInfo info = gpu::describe_device();
    result.device = info.name + " (sm_" + std::to_string(info.compute_capability) + ")";
    prefix = own_prefix(info.compute_capability);
    hopper = info.compute_capability == 90;
  }
  std::vector<InstructionRow> rows;
  result.json = {{"device", result.device}, {"gpu_reason", result.gpu_reason}, {"rows", nlohmann::ordered_json::array()}};
  for (std::size_t i = 0; i < gpu::mma_probe_instructions().size(); ++i)
    for (int chain : {1, 4}) {
      const std::string& instruction = gpu::mma_probe_instructions()[i];
      // wgmma is Hopper's own (sm_90a): probed on a Hopper, left out elsewhere (its model alone says nothing).
      const bool wgmma = instruction.starts_with("wgmma.");
      if (wgmma && !hopper) continue;
      if (progress) progress(std::string(instruction) + ", chain of " + std::to_string(chain));
      try {
        rows.push_back(run_instruction(i, chain, c, use_gpu));
      } catch (const std::runtime_error& e) {  // the wgmma kernel's layout check, or a build without sm_90a
        if (!wgmma) throw;
        result.not_probed.push_back(instruction + " (K = " + std::to_string(chain) + "k): " + e.what());
        continue;
      }
      for (const ModelRow& m : rows.back().models) {
        result.json["rows"].push_back({{"instruction", instruction}, {"K", rows.back().K}, {"cases", rows.back().cases},
                                       {"model", m.model->name}, {"identical", m.identical}});
        if (use_gpu && m.model->name.starts_with(prefix) && m.identical < 1.0) ++result.failed_models;
      }
    }
  report::write_output(c.report, report_text(c, result, rows, use_gpu), result.files);
  return result;
}

}  // namespace mpverify::experiments
