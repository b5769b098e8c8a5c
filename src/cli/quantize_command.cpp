// mpverify quantize IN --scheme S [--scale-rule R] [--axis A] [--tile 16x16]
//                   [--rounding rne|stochastic [--seed N]] --out OUT.npz [--json]
// One tensor quantized in blocks as MX, NVFP4 or block-wise FP8 store it
// (emu/block_quantize.h does the work and defines every counter), written as
// OUT.npz: values (dequantized float32), codes (uint8 element bits), scales
// (each block's scale, the block grid) and, for nvfp4, tensor_scale.
//
// Exit codes: 0; 2 for bad usage or an input that cannot be read (the message
// names the file and the problem) or an output that cannot be written, with nothing written.
#include <array>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "cli/tensor_argument.h"
#include "emu/block_quantize.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "io/npy.h"
#include "io/npz_write.h"

namespace mpverify::cli {

namespace {

struct QuantizeOptions {
  std::string in;
  std::string scheme;
  std::string scale_rule;
  int axis = -1;
  std::string tile;
  std::string rounding = "rne";
  std::uint64_t seed = 0;
  std::string out;
  bool json = false;
};

// What the command line asked for, checked.
struct Request {
  emu::BlockScheme scheme;
  emu::BlockQuantizeOptions options;
  bool has_scale_rule = false;  // MX schemes: E8M0 scales chosen by a rule
};

constexpr std::array kScaleRules = {emu::ScaleRule::floor, emu::ScaleRule::ceil, emu::ScaleRule::even,
                                    emu::ScaleRule::rceil};

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string s;
  for (const std::string& item : items) {
    if (!s.empty()) s += separator;
    s += item;
  }
  return s;
}

std::vector<std::string> scheme_names() {
  std::vector<std::string> names;
  for (const emu::BlockScheme& s : emu::block_schemes()) names.push_back(s.name);
  return names;
}

std::vector<std::string> scale_rule_names() {
  std::vector<std::string> names;
  for (const emu::ScaleRule r : kScaleRules) names.emplace_back(emu::to_string(r));
  return names;
}

std::string scale_format_text(emu::ScaleFormat f) {
  switch (f) {
    case emu::ScaleFormat::e8m0: return "e8m0 (power of two)";
    case emu::ScaleFormat::ue4m3_fp32: return "ue4m3 x fp32 tensor scale";
    case emu::ScaleFormat::fp32: return "fp32 (amax / max)";
  }
  return "?";
}

std::string block_text(const emu::BlockScheme& s) {
  if (s.block_rows == 0 || s.block_cols == 0) return "the whole tensor";
  return std::to_string(s.block_rows) + "x" + std::to_string(s.block_cols);
}

// The --help footer's table of schemes, written from emu::block_schemes().
std::string schemes_table() {
  std::string t = "Schemes (element format, block rows x columns along the axis, scale):\n";
  for (const emu::BlockScheme& s : emu::block_schemes()) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-18s %-10s %-17s %s\n", s.name.c_str(), s.element.name.c_str(),
                  block_text(s).c_str(), scale_format_text(s.scale_format).c_str());
    t += line;
  }
  return t;
}

void check_output_name(const std::string& out) {
  if (out.size() < 5 || out.compare(out.size() - 4, 4, ".npz") != 0)
    throw UsageError("--out " + out + ": the output is an .npz archive; give a name ending in .npz");
}

emu::BlockScheme find_scheme(const std::string& name) {
  const emu::BlockScheme* s = emu::find_block_scheme(name);
  if (!s) throw UsageError("unknown scheme '" + name + "' (schemes: " + join(scheme_names(), ", ") + ")");
  return *s;
}

emu::ScaleRule scale_rule(const QuantizeOptions& o, const emu::BlockScheme& s, bool given) {
  if (!given) return emu::kDefaultScaleRule;
  if (s.scale_format != emu::ScaleFormat::e8m0)
    throw UsageError("--scale-rule applies to the MX schemes (E8M0 scales); " + s.name + "'s scales are " +
                     scale_format_text(s.scale_format) + ": leave --scale-rule out");
  const std::optional<emu::ScaleRule> rule = emu::parse_scale_rule(o.scale_rule);
  if (!rule)
    throw UsageError("--scale-rule '" + o.scale_rule + "': expected " + join(scale_rule_names(), ", "));
  return *rule;
}

Request make_request(const QuantizeOptions& o, const CLI::App& app) {
  Request r{find_scheme(o.scheme), {}, false};
  r.has_scale_rule = r.scheme.scale_format == emu::ScaleFormat::e8m0;
  r.options.scale_rule = scale_rule(o, r.scheme, app.count("--scale-rule") > 0);
  if (o.rounding != "rne" && o.rounding != "stochastic")
    throw UsageError("--rounding '" + o.rounding + "': expected rne or stochastic");
  r.options.rounding = o.rounding == "rne" ? formats::Rounding::nearest_even : formats::Rounding::stochastic;
  if (app.count("--seed") && o.rounding != "stochastic")
    throw UsageError("--seed " + std::to_string(o.seed) + " does nothing without --rounding stochastic");
  r.options.seed = o.seed;
  if (app.count("--tile")) {
    if (o.tile != "16x16") throw UsageError("--tile '" + o.tile + "': the one tile is 16x16 (NVFP4's 2-D blocks)");
    if (r.scheme.scale_format != emu::ScaleFormat::ue4m3_fp32)
      throw UsageError("--tile 16x16 is for --scheme nvfp4 (its 2-D weight blocks); " + r.scheme.name +
                       "'s blocks are " + block_text(r.scheme));
    r.scheme.block_rows = r.scheme.block_cols = 16;
  }
  return r;
}

// The axis as a dimension 0..rank-1; UsageError naming the tensor's shape otherwise.
std::size_t checked_axis(int axis, const TensorArgument& t) {
  const int rank = static_cast<int>(t.shape.size());
  if (axis < -rank || axis >= rank)
    throw UsageError("--axis " + std::to_string(axis) + " is out of range for " + tensor_label(t) + ", a " +
                     std::to_string(rank) + "-D tensor of shape " + shape_text(t.shape) + " (give " +
                     std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")");
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

// Blocks of several rows (--tile 16x16, fp8-block128x128) need a 2-D tensor.
void check_tiles(const Request& r, const TensorArgument& t, bool tile_option) {
  if (r.scheme.block_rows <= 1 || t.shape.size() == 2) return;
  const std::string what =
      tile_option ? std::string("--tile 16x16 needs") : r.scheme.name + "'s " + block_text(r.scheme) + " blocks need";
  throw UsageError(what + " a 2-D tensor; " + tensor_label(t) + " has shape " + shape_text(t.shape) +
                   (tile_option ? " (reshape it to 2-D, or leave --tile out for 1x16 blocks)" : " (reshape it to 2-D)"));
}

void write_output(const std::string& out, const std::vector<std::size_t>& shape, const emu::BlockQuantized& q) {
  std::vector<io::NpzMember> members = {{"values", io::npy_image(std::span<const float>(q.values), shape)},
                                        {"codes", io::npy_image(std::span<const std::uint8_t>(q.codes), shape)},
                                        {"scales", io::npy_image(std::span<const float>(q.scales), q.scale_shape)}};
  if (q.tensor_scale) {
    const std::vector<float> ts = {*q.tensor_scale};
    members.push_back({"tensor_scale", io::npy_image(std::span<const float>(ts), {1})});
  }
  io::write_npz_members(out, members);
}

nlohmann::json summary_json(const QuantizeOptions& o, const Request& r, const TensorArgument& t, std::size_t axis,
                            const emu::BlockQuantized& q, double sqnr) {
  const emu::BlockCounters& c = q.counters;
  return {{"input", t.file},
          {"tensor", t.name},
          {"dtype", t.dtype},
          {"shape", t.shape},
          {"axis", axis},
          {"scheme", r.scheme.name},
          {"element", r.scheme.element.name},
          {"block", {r.scheme.block_rows, r.scheme.block_cols}},
          {"scale_rule", r.has_scale_rule ? nlohmann::json(emu::to_string(r.options.scale_rule)) : nlohmann::json()},
          {"rounding", o.rounding},
          {"seed", o.seed},
          {"scale_shape", q.scale_shape},
          {"tensor_scale", q.tensor_scale ? json_number(*q.tensor_scale) : nlohmann::json()},
          {"elements", c.elements},
          {"blocks", c.blocks},
          {"saturated", c.saturated},
          {"underflow_to_zero", c.underflow_to_zero},
          {"subnormal", c.subnormal},
          {"scales_clamped", c.scales_clamped},
          {"nonfinite_in", c.nonfinite_in},
          {"inexact", c.inexact},
          {"sqnr_db", json_number(sqnr)},
          {"out", o.out}};
}

std::string blocks_summary(const emu::BlockScheme& s, std::size_t axis) {
  if (s.block_rows == 0 || s.block_cols == 0) return "one block (the whole tensor)";
  return block_text(s) + " blocks along axis " + std::to_string(axis);
}

std::string scales_summary(const Request& r) {
  switch (r.scheme.scale_format) {
    case emu::ScaleFormat::e8m0: return "e8m0 scales (rule " + std::string(emu::to_string(r.options.scale_rule)) + ")";
    case emu::ScaleFormat::ue4m3_fp32: return "ue4m3 block scales times an fp32 tensor scale";
    case emu::ScaleFormat::fp32: return "fp32 scales";
  }
  return "?";
}

std::string summary_text(const QuantizeOptions& o, const Request& r, const TensorArgument& t, std::size_t axis,
                         const emu::BlockQuantized& q, double sqnr) {
  const emu::BlockCounters& c = q.counters;
  std::string s = tensor_label(t) + " (" + t.dtype + ", shape " + shape_text(t.shape) + ") as " + r.scheme.name +
                  ": " + r.scheme.element.name + " elements, " + blocks_summary(r.scheme, axis) + ", " + scales_summary(r) +
                  ", rounding " + o.rounding;
  if (o.rounding == "stochastic") s += ", seed " + std::to_string(o.seed);
  s += "\n";
  s += "blocks " + std::to_string(c.blocks) + " (grid " + shape_text(q.scale_shape) + "), scales clamped " +
       std::to_string(c.scales_clamped);
  if (q.tensor_scale) {
    char ts[48];
    std::snprintf(ts, sizeof ts, ", tensor scale %.9g", static_cast<double>(*q.tensor_scale));
    s += ts;
  }
  s += "\nelements " + std::to_string(c.elements) + ": inexact " + std::to_string(c.inexact) + ", saturated " +
       std::to_string(c.saturated) +
       ", underflow to zero " + std::to_string(c.underflow_to_zero) + ", subnormal " + std::to_string(c.subnormal) +
       ", non-finite in " + std::to_string(c.nonfinite_in) + "\n";
  char line[64];
  std::snprintf(line, sizeof line, "SQNR %.2f dB\n", sqnr);
  return s + line + "wrote " + o.out + "\n";
}

int run_quantize(const QuantizeOptions& o, const CLI::App& app) {
  check_output_name(o.out);
  const Request r = make_request(o, app);
  const TensorArgument t = read_tensor_argument(o.in, "quantize");
  const std::size_t axis = checked_axis(o.axis, t);
  check_tiles(r, t, app.count("--tile") > 0);
  emu::BlockQuantized q;
  with_usage_errors([&] { q = emu::block_quantize(t.values, t.shape, static_cast<int>(axis), r.scheme, r.options); });
  const double sqnr = emu::sqnr_db(t.values, q.values);
  write_output(o.out, t.shape, q);  // the file first (atomic), stdout last
  if (o.json) std::cout << summary_json(o, r, t, axis, q, sqnr).dump(1) << "\n";
  else std::cout << summary_text(o, r, t, axis, q, sqnr);
  return 0;
}

std::string quantize_footer() {
  return schemes_table() +
         "Scale rules (MX schemes; emax_elem is the exponent of the element format's largest normal):\n"
         "  floor   2^(floor(log2 amax) - emax_elem)      OCP MX v1.0; can clip the block's largest elements\n"
         "  ceil    2^(ceil(log2 amax) - emax_elem)       never clips, can waste a binade\n"
         "  even    amax's significand rounded to the element precision, then floor\n"
         "  rceil   2^ceil(log2(amax / max_elem))         Transformer Engine, cuBLAS; clips one amax only\n"
         "Counters: saturated = finite elements beyond max * scale, stored as +-max; underflow_to_zero = finite\n"
         "non-zero elements stored as 0; subnormal = stored as a non-zero subnormal; scales_clamped = blocks whose\n"
         "scale lay outside the scale format's range; nonfinite_in = NaN or +-inf inputs; inexact = finite elements\n"
         "that code * scale does not equal (clipped ones included). SQNR over the elements\n"
         "where input and output are finite. Details: docs/quantize.md.\n"
         "Exit: 0; 2 bad usage, an unreadable input or an output that cannot be written (nothing written).";
}

}  // namespace

void add_quantize_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* app = root.add_subcommand("quantize",
                                  "Quantize a tensor in blocks (MX, NVFP4, block-wise FP8) and write the dequantized "
                                  "values, codes and scales to an .npz");
  app->add_option("IN", o->in,
                  "The tensor: FILE.npy, FILE.safetensors:NAME or FILE.npz:NAME (float32, float16, bfloat16, fp8; "
                  "float64 is first rounded to float32)")
      ->required();
  app->add_option("--scheme", o->scheme, "Block scheme: " + join(scheme_names(), ", "))->required();
  app->add_option("--scale-rule", o->scale_rule,
                  "MX schemes only: how a block's E8M0 scale is chosen: " + join(scale_rule_names(), ", ") +
                      " (default " + std::string(emu::to_string(emu::kDefaultScaleRule)) + ")");
  app->add_option("--axis", o->axis, "The dimension the blocks run along (negative counts from the end)")
      ->capture_default_str();
  app->add_option("--tile", o->tile, "16x16: NVFP4's 2-D blocks (weights), for a 2-D tensor; nvfp4 only");
  app->add_option("--rounding", o->rounding, "Element rounding: rne or stochastic")->capture_default_str();
  app->add_option("--seed", o->seed, "Stochastic rounding's seed: element i (row-major) draws (seed, 0, i)")
      ->capture_default_str();
  app->add_option("--out", o->out,
                  "Output .npz: values (float32), codes (uint8), scales (float32, the block grid), tensor_scale "
                  "(nvfp4)")
      ->required();
  app->add_flag("--json", o->json, "Print the counters and SQNR as JSON instead of a summary");
  app->footer(quantize_footer());
  commands.push_back({app, [o, app] { return run_quantize(*o, *app); }});
}

}  // namespace mpverify::cli
