// The block-scaled GEMM's fast path (emu/block_scaled_fast.h) against its scalar path (the instruction models,
// one instruction at a time) in the same run, on the same quantized operands: the ratio of their times.
//
//   bench_block_scaled_gemm [--m M] [--n N] [--k K] [--rounds R]
//
// Operands: A (M x K) and B (K x N, default 128 x 1024 x 128) of normal values whose stretches of 7
// elements sit at binades 2^-12 .. 2^12 (as tests/block_scaled_gemm_test.cpp draws them), seed 43, quantized
// once per model (not timed): mxfp8-e4m3 x mxfp8-e4m3 on sm100.mxf8f6f4, mxfp4 x mxfp4 and nvfp4 x nvfp4 on
// sm100.mxf4nvf4, fp8-tile1x128 x fp8-block128x128 on sm90.fp8-blockwise. Each of R rounds (default 5) times,
// per model, the scalar path then the fast path, alternating, and checks that their bits and counters agree.
// Prints each round's times and, per model, the median time per instruction of each path and the speed ratio
// (scalar time / fast time within a round): median [min, max] over the rounds. Writes no file.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "emu/block_scaled_fast.h"
#include "emu/block_scaled_gemm.h"

namespace {

using namespace mpverify;

const char* const kUsage =
    "bench_block_scaled_gemm [--m M] [--n N] [--k K] [--rounds R]\n"
    "Times the block-scaled GEMM's fast path against its scalar path (default 128 x 1024 x 128, 5 rounds).";

struct Args {
  int m = 128, n = 128, k = 1024, rounds = 5;
  int exit_code = -1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      std::printf("%s\n", kUsage);
      a.exit_code = 0;
      return a;
    }
    int* target = s == "--m" ? &a.m : s == "--n" ? &a.n : s == "--k" ? &a.k : s == "--rounds" ? &a.rounds : nullptr;
    if (target == nullptr || i + 1 >= argc) {
      std::fprintf(stderr, "%s: error: %s %s\n%s\n", argv[0], target ? "missing a value for" : "unknown option",
                   s.c_str(), kUsage);
      a.exit_code = 2;
      return a;
    }
    *target = std::max(1, std::stoi(argv[++i]));
  }
  return a;
}

std::vector<float> inputs(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> binade(-12, 12);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; i += 7) {
    const float s = std::ldexp(1.0f, binade(rng));
    for (std::size_t j = i; j < std::min(n, i + 7); ++j) v[j] = normal(rng) * s;
  }
  return v;
}

struct Variant {
  const char* scheme_a;
  const char* scheme_b;
  emu::BlockScaledAccumulation model;
  emu::ScaledOperands q = {};
  std::vector<double> scalar_s = {}, fast_s = {};
  bool agree = true;
  std::size_t fast_elements = 0;
};

double seconds_of(Variant& v, bool fast, std::vector<float>& c, emu::BlockScaledGemmCounters& n) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t kept = emu::detail::block_scaled_multiply_path(v.q.a, v.q.b, v.q.alpha, v.model, c, n, fast);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (fast) v.fast_elements = kept;
  return s;
}

// One round of one variant: the scalar path, then the fast path; their bits and counters must agree.
void time_round(Variant& v) {
  std::vector<float> cs(v.q.a.rows * v.q.b.rows), cf(cs.size());
  emu::BlockScaledGemmCounters ns, nf;
  v.scalar_s.push_back(seconds_of(v, false, cs, ns));
  v.fast_s.push_back(seconds_of(v, true, cf, nf));
  for (std::size_t i = 0; i < cs.size(); ++i)
    v.agree = v.agree && std::bit_cast<std::uint32_t>(cs[i]) == std::bit_cast<std::uint32_t>(cf[i]);
  v.agree = v.agree && ns.accumulate == nf.accumulate && ns.promotions == nf.promotions &&
            ns.promotions_inexact == nf.promotions_inexact;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::size_t instruction_k(emu::BlockScaledAccumulation m) {
  return m == emu::BlockScaledAccumulation::sm100_mxf4nvf4 ? 64 : 32;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  if (args.exit_code >= 0) return args.exit_code;
  const ops::GemmShape shape{args.m, args.n, args.k, false, false};
  std::mt19937_64 rng(43);
  const std::vector<float> a = inputs(shape.a_size(), rng), b = inputs(shape.b_size(), rng);
  using M = emu::BlockScaledAccumulation;
  std::vector<Variant> vs = {{"mxfp8-e4m3", "mxfp8-e4m3", M::sm100_mxf8f6f4},
                             {"mxfp4", "mxfp4", M::sm100_mxf4nvf4},
                             {"nvfp4", "nvfp4", M::sm100_mxf4nvf4},
                             {"fp8-tile1x128", "fp8-block128x128", M::sm90_fp8_blockwise}};
  for (Variant& v : vs)
    v.q = emu::quantize_operands(shape, a, b, *emu::find_block_scheme(v.scheme_a), *emu::find_block_scheme(v.scheme_b),
                                 {}, {}, emu::block_scaled_k_granule(v.model), 128);
  std::printf("block-scaled GEMM m=%d n=%d k=%d, %d rounds (one thread)\n", args.m, args.n, args.k, args.rounds);
  for (int r = 0; r < args.rounds; ++r) {
    std::printf("round %d:", r + 1);
    for (Variant& v : vs) {
      time_round(v);
      std::printf("  %s scalar %.3f s fast %.4f s", std::string(to_string(v.model)).c_str(), v.scalar_s.back(),
                  v.fast_s.back());
    }
    std::printf("\n");
  }
  std::printf("\n%-18s %-34s %14s %14s %24s %s\n", "model", "schemes", "scalar ns/inst", "fast ns/inst",
              "ratio median [min, max]", "agree");
  bool all_agree = true;
  for (const Variant& v : vs) {
    const auto instructions = static_cast<double>(v.q.a.rows * v.q.b.rows * (v.q.a.k / instruction_k(v.model)));
    std::vector<double> ratio;
    for (std::size_t r = 0; r < v.fast_s.size(); ++r) ratio.push_back(v.scalar_s[r] / v.fast_s[r]);
    const std::string schemes = std::string(v.scheme_a) + " x " + v.scheme_b;
    std::printf("%-18s %-34s %14.1f %14.1f %10.1f [%5.1f, %5.1f] %s (fast path: %zu of %zu elements)\n",
                std::string(to_string(v.model)).c_str(), schemes.c_str(), median(v.scalar_s) / instructions * 1e9,
                median(v.fast_s) / instructions * 1e9, median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()), v.agree ? "yes" : "NO", v.fast_elements,
                v.q.a.rows * v.q.b.rows);
    all_agree = all_agree && v.agree;
  }
  return all_agree ? 0 : 1;
}
