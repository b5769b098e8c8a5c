// mpverify eval --op OP --format F [--rounding R] [--tininess after|before]
//               [--seed S] [--check] [--exact-nan] [--json]
// The emulator as a calculator that speaks TestFloat's line format (see
// io/testfloat_cases.h): cases on stdin, one per line.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/eval_dot.h"
#include "cli/rounding_options.h"
#include <nlohmann/json.hpp>

#include "formats/philox.h"
#include "io/testfloat_cases.h"

namespace mpverify::cli {

namespace {

void add_dot_options(CLI::App* app, DotOptions& d) {
  app->add_option("--arch", d.arch,
                  "--op dot: volta, turing, ampere, ada, hopper, blackwell (the architecture's GEMM instruction\n"
                  "for these formats), a preset such as sm90.wgmma.k32.f32.e4m3.e5m2 (--list), or custom");
  app->add_option("--a-format", d.a_format, "--op dot: A's format (fp16, bf16, tf32, fp8-e4m3, fp8-e5m2)");
  app->add_option("--b-format", d.b_format, "--op dot: B's format");
  app->add_option("--c-format", d.c_format, "--op dot: the accumulator's and d's format, fp32 (default) or fp16");
  app->add_option("--promotion-interval", d.promotion_interval,
                  "--op dot: add the partial result into an fp32 accumulator every N elements of K (0: never)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--k", d.custom_k, "--arch custom: products per instruction");
  app->add_option("--fraction-bits", d.custom_fraction_bits, "--arch custom: F, fraction bits kept after alignment (8..40)");
  app->add_flag("--split-halves", d.custom_split, "--arch custom: two fused operations of k/2 (as Ampere)");
  app->add_option("--output-rounding", d.custom_output, "--arch custom: fp32-rz, e8m13-rz or fp16-rne");
  app->add_option("--device", d.device, "--op dot: cpu (the model, default) or gpu (the instruction, on this GPU)");
  app->add_flag("--list", d.list, "--op dot: list the presets and exit");
}

}  // namespace

void add_eval_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string op, format;
    RoundingOptions rounding;
    bool check = false, exact_nan = false, json = false;
    DotOptions dot;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "eval",
      "Evaluate operations case by case in TestFloat's line format, reading standard input.\n"
      "Each line: the operands in hex (format bits; float32/float64 bits for from-f32/from-f64),\n"
      "optionally followed by an expected result and flags. Output: the operands, our result and\n"
      "our flags (inexact 1, underflow 2, overflow 4, infinite 8, invalid 16), one line per case.\n"
      "With --check, report the cases that differ from the expected fields, then 'N passed, M failed'\n"
      "(exit 1 if any failed). Example:\n"
      "  testfloat_gen -rnear_even f16_mulAdd | mpverify eval --op fma --format fp16 --check\n"
      "--op dot evaluates one tensor-core instruction (or a chain of them) per line instead: K hex A\n"
      "operands, K hex B operands, c, optionally the expected d; K a multiple of the instruction's k.\n"
      "  mpverify eval --op dot --arch hopper --a-format fp8-e4m3 --b-format fp8-e5m2 --check < cases");
  app->add_option("--op", o->op,
                  "add, sub, mul, div, sqrt, fma, from-f32, from-f64, to-f32, to-f64, from-FORMAT (e.g. from-bf16),\n"
                  "or dot (a tensor-core instruction: see the --op dot options)")
      ->required();
  app->add_option("--format", o->format,
                  "fp16, bf16, tf32, fp8-e4m3, fp8-e5m2, fp4-e2m1, e8m0, ... or eXmY (IEEE-like: e2m1 is not "
                  "fp4-e2m1) (not for --op dot)");
  add_dot_options(app, o->dot);
  o->rounding.add_to(app, "Stochastic rounding: case k (from 0) uses draw (seed, 0, k)");
  app->add_flag("--check", o->check, "Compare with the expected result and flags on each line");
  app->add_flag("--exact-nan", o->exact_nan, "With --check: NaN results must match bit for bit");
  app->add_flag("--json", o->json, "Print a JSON object instead of lines");

  commands.push_back({app, [o] {
    if (o->op == "dot") {
      DotOptions dot = o->dot;
      dot.check = o->check;
      dot.json = o->json;
      return run_eval_dot(dot);
    }
    if (o->format.empty()) throw UsageError("--format is required with --op " + o->op);
    const formats::Format format = formats::parse_format(o->format);
    formats::RoundingContext rc = o->rounding.context();
    io::Operation op;
    try {
      op = io::parse_operation(o->op, format);
    } catch (const io::CaseError& e) {
      throw UsageError(e.what());
    }

    // Parse every line first, so that a malformed line stops the run before
    // any output is written.
    std::vector<std::pair<int, io::Case>> cases;
    std::string line;
    for (int n = 1; std::getline(std::cin, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        cases.emplace_back(n, io::parse_case(line, op, o->check));
      } catch (const io::CaseError& e) {
        throw UsageError("line " + std::to_string(n) + ": " + e.what());
      }
    }

    std::size_t passed = 0, failed = 0;
    nlohmann::json json_cases = nlohmann::json::array();
    std::string text;
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const auto& [line_number, c] = cases[k];
      rc.random = formats::stochastic_draw(o->rounding.seed, 0, k);
      const io::Outcome ours = io::evaluate(op, c, rc);
      std::string operands;
      for (auto v : c.operands) operands += io::hex_field(v, op.operand_bits()) + " ";
      const std::string result = io::hex_field(ours.result, op.result_bits());
      const std::string flags = io::hex_field(ours.flags.bits, 8);
      bool ok = true;
      if (o->check) {
        ok = io::matches(op, ours, *c.expected_result, *c.expected_flags, o->exact_nan);
        (ok ? passed : failed) += 1;
      }
      if (o->json) {
        nlohmann::json j = {{"line", line_number},
                            {"operands", nlohmann::json::array()},
                            {"result", result},
                            {"flags", ours.flags.bits},
                            {"flag_names", formats::flag_names(ours.flags)}};
        for (auto v : c.operands) j["operands"].push_back(io::hex_field(v, op.operand_bits()));
        if (o->check) {
          j["expected_result"] = io::hex_field(*c.expected_result, op.result_bits());
          j["expected_flags"] = *c.expected_flags;
          j["pass"] = ok;
        }
        json_cases.push_back(std::move(j));
      } else if (!o->check) {
        text += operands + result + " " + flags + "\n";
      } else if (!ok) {
        text += "line " + std::to_string(line_number) + ": " + operands + "-> ours " + result + " " + flags +
                ", expected " + io::hex_field(*c.expected_result, op.result_bits()) + " " +
                io::hex_field(*c.expected_flags, 8) + "\n";
      }
    }
    if (o->json) {
      nlohmann::json out = {{"op", o->op},
                            {"format", format.name},
                            {"rounding", std::string(formats::to_string(rc.mode))},
                            {"tininess", o->rounding.tininess},
                            {"cases", std::move(json_cases)}};
      if (o->check) {
        out["passed"] = passed;
        out["failed"] = failed;
      }
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << text;
      if (o->check) std::cout << passed << " passed, " << failed << " failed\n";
    }
    return failed == 0 ? 0 : 1;
  }});
}

}  // namespace mpverify::cli
