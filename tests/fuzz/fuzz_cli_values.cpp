// The command line's value parsers: formats, rounding modes, scales, recipes, loss-scaler options,
// block schemes and scale rules, op parameters (KEY=VALUE lists, GEMM policies), tensor-core presets,
// seed lists, backends, trace formats, gate modes and metrics, TestFloat operations. Each refuses bad
// text with the error its header documents (the command's exit 2).
// Input: the first byte picks the parser, the rest is the text.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "cli/ops/gemm_policy_option.h"
#include "cli/ops/op_common.h"
#include "cli/tensor_report_output.h"
#include "emu/block_quantize.h"
#include "emu/mma_presets.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "fuzz_support.h"
#include "io/testfloat_cases.h"
#include "metrics/curve_gate.h"
#include "metrics/parity_gate.h"
#include "nn/backend.h"
#include "training/ensemble.h"
#include "training/loss_scaler.h"
#include "training/recipe.h"
#include "training/trace_reader.h"

namespace {

using namespace mpverify;

void key_values(const std::string& text) {
  const cli::ops::KeyValues kv = cli::ops::parse_key_values(text, "--params");
  (void)cli::ops::whole_number(kv, "m", "--params", 1);
  (void)cli::ops::real_number(kv, "eps", "--params", 1e-5);
  (void)cli::ops::format_option(kv, "input", "--params", formats::parse_format("fp16"));
}

void scaler(const std::string& text) {
  const training::ScalerOption o = training::parse_scaler_option(text);
  (void)training::make_scaler(o.strategy, {{o.key, o.value}});
}

void parse(std::uint8_t which, const std::string& text) {
  switch (which % 16) {
    case 0: (void)formats::parse_format(text); break;
    case 1: (void)formats::parse_rounding(text); break;
    case 2: (void)cli::parse_scales(text); break;
    case 3: (void)training::parse_recipe(text); break;
    case 4: scaler(text); break;
    case 5: (void)emu::find_block_scheme(text), (void)emu::parse_scale_rule(text); break;
    case 6: key_values(text); break;
    case 7: (void)cli::ops::gemm_policy_option(cli::ops::parse_key_values(text, "--policy")); break;
    case 8: (void)emu::mma_preset(text); break;
    case 9: (void)training::parse_seed_list(text); break;
    case 10: (void)nn::parse_backend(text); break;
    case 11: (void)training::parse_trace_format(text), (void)metrics::parse_gate_mode(text); break;
    case 12: (void)metrics::parse_gate_metric(text); break;
    case 13: {
      const std::size_t space = text.find(' ');
      (void)io::parse_operation(text.substr(0, space),
                                formats::parse_format(space == std::string::npos ? "fp16" : text.substr(space + 1)));
      break;
    }
    case 14: (void)emu::mma_for_architecture(text, formats::parse_format("fp16"), formats::parse_format("fp16"),
                                             formats::parse_format("fp32"));
      break;
    default: (void)formats::parse_format(text + ":saturate"); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(fuzz::text_of(data + 1, size - 1));
  try {
    parse(data[0], text);
  } catch (const cli::UsageError&) {
  } catch (const formats::FormatError&) {
  } catch (const io::CaseError&) {
  } catch (const std::invalid_argument&) {  // what recipes, scaler options, presets, seed lists and backends throw
  }
  return 0;
}
