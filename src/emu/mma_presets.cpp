// The preset table of mma_presets.h, built per architecture from its instruction list.
#include "emu/mma_presets.h"

#include <algorithm>
#include <stdexcept>

namespace mpverify::emu {

namespace {

struct Arch {
  const char* name;  // volta, ...
  const char* sm;    // sm70, ...
  const char* main;  // the instruction a GEMM uses: mma, wgmma, tcgen05
  int F;             // fraction bits kept (MMA-Sim arch_accum_fractional_bits)
};

constexpr Arch kVolta{"volta", "sm70", "mma", 23}, kTuring{"turing", "sm75", "mma", 24},
    kAmpere{"ampere", "sm80", "mma", 24}, kAda{"ada", "sm89", "mma", 24}, kHopper{"hopper", "sm90", "wgmma", 25},
    kBlackwell{"blackwell", "sm100", "tcgen05", 25};

std::string format_name(std::string_view ptx) {
  if (ptx == "f16") return "fp16";
  if (ptx == "e4m3") return "fp8-e4m3";
  if (ptx == "e5m2") return "fp8-e5m2";
  return std::string(ptx);  // bf16, tf32
}

class Table {
 public:
  // One instruction: out is f32 or f16 (the accumulator's format too); a and b in PTX's names.
  void add(const Arch& arch, const std::string& instruction, const std::string& shape, int k, const std::string& out,
           const std::string& a, const std::string& b, int F, bool split) {
    MmaModel m;
    m.name = std::string(arch.sm) + "." + instruction + "." + shape + "." + out + "." + a + (a == b ? "" : "." + b);
    m.a = formats::parse_format(format_name(a));
    m.b = formats::parse_format(format_name(b));
    m.c = formats::parse_format(out == "f32" ? "fp32" : "fp16");
    m.k = k;
    m.fraction_bits = F;
    m.split_halves = split;
    const bool fp8 = a.starts_with('e');
    m.output = out == "f16" ? MmaOutput::fp16_nearest_even
               : fp8 && F == 13 ? MmaOutput::e8m13_toward_zero
                                : MmaOutput::fp32_toward_zero;
    validate(m);
    models.push_back(std::move(m));
  }

  // Both outputs of an f16 instruction.
  void add_f16(const Arch& arch, const std::string& instruction, const std::string& shape, int k, int F, bool split) {
    add(arch, instruction, shape, k, "f32", "f16", "f16", F, split);
    add(arch, instruction, shape, k, "f16", "f16", "f16", F, split);
  }

  // Every A x B pairing of the FP8 formats, both outputs.
  void add_fp8(const Arch& arch, const std::string& instruction, const std::string& shape, int k, int F, bool split) {
    for (const char* out : {"f32", "f16"})
      for (const char* a : {"e4m3", "e5m2"})
        for (const char* b : {"e4m3", "e5m2"}) add(arch, instruction, shape, k, out, a, b, F, split);
  }

  // mma.sync of Turing and Ampere (MMA-Sim isa/nv_ptx/nv_mma.py), kept by Ada, Hopper and Blackwell; Ampere
  // and Ada split the k = 16 (f16, bf16) and k = 8 (tf32) shapes into halves (MMA-Sim simulator/nv_ptx.py,
  // class mma, is_split_k).
  void add_ampere_mma(const Arch& arch, bool split) {
    add_f16(arch, "mma", "m16n8k8", 8, arch.F, false);
    add_f16(arch, "mma", "m16n8k16", 16, arch.F, split);
    add(arch, "mma", "m16n8k8", 8, "f32", "bf16", "bf16", arch.F, false);
    add(arch, "mma", "m16n8k16", 16, "f32", "bf16", "bf16", arch.F, split);
    add(arch, "mma", "m16n8k4", 4, "f32", "tf32", "tf32", arch.F, false);
    add(arch, "mma", "m16n8k8", 8, "f32", "tf32", "tf32", arch.F, split);
  }

  // Hopper's wgmma and Blackwell's tcgen05.mma (kind::f16, kind::tf32, kind::f8f6f4): one fused operation per
  // instruction; FP8 keeps 13 fraction bits and an E8M13 fp32 output on Hopper only (MMA-Sim
  // simulator/nv_ptx.py, class wgmma).
  void add_warpgroup(const Arch& arch, const std::string& instruction, int fp8_F) {
    add_f16(arch, instruction, "k16", 16, arch.F, false);
    add(arch, instruction, "k16", 16, "f32", "bf16", "bf16", arch.F, false);
    add(arch, instruction, "k8", 8, "f32", "tf32", "tf32", arch.F, false);
    add_fp8(arch, instruction, "k32", 32, fp8_F, false);
  }

  // Hopper's FP8 mma.sync m16n8k32 (fp32 output), which ptxas compiles to two f16 HMMAs and an FADD
  // (mma_model.h): not in MMA-Sim; read off the SASS for sm_90 and held against an H200.
  void add_hopper_fp8_mma() {
    for (const char* a : {"e4m3", "e5m2"})
      for (const char* b : {"e4m3", "e5m2"}) {
        add(kHopper, "mma", "m16n8k32", 32, "f32", a, b, kHopper.F, false);
        models.back().fp8_through_fp16 = true;
      }
  }

  std::vector<MmaModel> models;
};

std::vector<MmaModel> build_presets() {
  Table t;
  t.add_f16(kVolta, "mma", "m8n8k4", 4, kVolta.F, false);
  t.add_f16(kTuring, "mma", "m16n8k8", 8, kTuring.F, false);
  t.add_ampere_mma(kAmpere, true);
  t.add_ampere_mma(kAda, true);
  // Ada's FP8 mma.sync: 13 fraction bits, E8M13 fp32 output; k = 32 split into halves, k = 16 not.
  t.add_fp8(kAda, "mma", "m16n8k32", 32, 13, true);
  t.add_fp8(kAda, "mma", "m16n8k16", 16, 13, false);
  t.add_ampere_mma(kHopper, false);
  t.add_hopper_fp8_mma();
  t.add_warpgroup(kHopper, "wgmma", 13);
  t.add_ampere_mma(kBlackwell, false);
  t.add_warpgroup(kBlackwell, "tcgen05", kBlackwell.F);
  return t.models;
}

const Arch* find_arch(std::string_view name) {
  for (const Arch* a : {&kVolta, &kTuring, &kAmpere, &kAda, &kHopper, &kBlackwell})
    if (name == a->name) return a;
  return nullptr;
}

}  // namespace

const std::vector<MmaModel>& mma_presets() {
  static const std::vector<MmaModel> presets = build_presets();
  return presets;
}

const MmaModel& mma_preset(std::string_view name) {
  for (const MmaModel& m : mma_presets())
    if (m.name == name) return m;
  throw std::invalid_argument("unknown tensor-core model '" + std::string(name) +
                              "': give an architecture (volta, turing, ampere, ada, hopper, blackwell) or a preset "
                              "such as sm80.mma.m16n8k16.f32.bf16 ('mpverify eval --op dot --list' lists them)");
}

const std::vector<std::string>& mma_architectures() {
  static const std::vector<std::string> names{"volta", "turing", "ampere", "ada", "hopper", "blackwell"};
  return names;
}

const MmaModel& mma_for_architecture(std::string_view arch_name, const formats::Format& a, const formats::Format& b,
                                     const formats::Format& c) {
  const Arch* arch = find_arch(arch_name);
  if (!arch) return mma_preset(arch_name);  // a preset's name; its error names the architectures
  const std::string prefix = std::string(arch->sm) + "." + arch->main + ".";
  const MmaModel* best = nullptr;
  for (const MmaModel& m : mma_presets()) {
    if (!m.name.starts_with(prefix) || !formats::same_values(m.a, a) || !formats::same_values(m.b, b) ||
        !formats::same_values(m.c, c))
      continue;
    if (!best || m.k > best->k) best = &m;
  }
  if (!best)
    throw std::invalid_argument(std::string(arch->name) + " has no " + arch->main + " instruction for " + a.name +
                                " x " + b.name + " with " + c.name + " accumulation");
  return *best;
}

MmaModel mma_custom(const formats::Format& a, const formats::Format& b, const formats::Format& c, int k,
                    int fraction_bits, bool split_halves, MmaOutput output) {
  MmaModel m{"custom", a, b, c, k, fraction_bits, split_halves, false, output};
  validate(m);
  return m;
}

std::string_view to_string(MmaOutput o) {
  switch (o) {
    case MmaOutput::fp32_toward_zero: return "fp32, toward zero";
    case MmaOutput::e8m13_toward_zero: return "fp32 with 13 fraction bits (E8M13), toward zero";
    case MmaOutput::fp16_nearest_even: return "fp16, to nearest-even";
  }
  return "?";
}

}  // namespace mpverify::emu
