// Helpers shared by the exhaustive and sampled suites: run an operation in
// the emulator (the subject) and in the exact oracle (the truth), compare
// bits and flags, and keep the first mismatches in TestFloat's hex style.
#pragma once

#include "support/parallel.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "formats/arithmetic.h"
#include "formats/flags.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "oracle/exact_oracle.h"

namespace mpverify::oracle::testing {

enum class Op : std::uint8_t { add, sub, mul, div, sqrt, fma };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::add: return "add";
    case Op::sub: return "sub";
    case Op::mul: return "mul";
    case Op::div: return "div";
    case Op::sqrt: return "sqrt";
    case Op::fma: return "fma";
  }
  return "?";
}

inline int arity(Op op) { return op == Op::sqrt ? 1 : (op == Op::fma ? 3 : 2); }

// The subject: the emulator in src/formats/.
inline Result emulate(Op op, const formats::Format& f, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                      const formats::RoundingContext& rc) {
  Result r;
  switch (op) {
    case Op::add: r.bits = formats::add(f, a, b, rc, r.flags); break;
    case Op::sub: r.bits = formats::sub(f, a, b, rc, r.flags); break;
    case Op::mul: r.bits = formats::mul(f, a, b, rc, r.flags); break;
    case Op::div: r.bits = formats::div(f, a, b, rc, r.flags); break;
    case Op::sqrt: r.bits = formats::sqrt(f, a, rc, r.flags); break;
    case Op::fma: r.bits = formats::fma(f, a, b, c, rc, r.flags); break;
  }
  return r;
}

// The truth.
inline Result truth(Op op, const Oracle& o, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                    const formats::RoundingContext& rc) {
  switch (op) {
    case Op::add: return o.add(a, b, rc);
    case Op::sub: return o.sub(a, b, rc);
    case Op::mul: return o.mul(a, b, rc);
    case Op::div: return o.div(a, b, rc);
    case Op::sqrt: return o.sqrt(a, rc);
    case Op::fma: return o.fma(a, b, c, rc);
  }
  return {};
}

// TestFloat's flag letters: v invalid, z infinite (divide by zero),
// o overflow, u underflow, x inexact.
inline std::string flag_letters(formats::Flags f) {
  std::string s;
  s += f.has(formats::Flags::invalid) ? 'v' : '.';
  s += f.has(formats::Flags::infinite) ? 'z' : '.';
  s += f.has(formats::Flags::overflow) ? 'o' : '.';
  s += f.has(formats::Flags::underflow) ? 'u' : '.';
  s += f.has(formats::Flags::inexact) ? 'x' : '.';
  return s;
}

inline std::string hex_bits(std::uint32_t v, int width_bits) {
  static const char digits[] = "0123456789ABCDEF";
  std::string s;
  for (int shift = ((width_bits + 3) / 4 - 1) * 4; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xF];
  return s;
}

inline std::string context_name(const formats::RoundingContext& rc) {
  std::string s(formats::to_string(rc.mode));
  if (rc.mode == formats::Rounding::stochastic) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "(bits=%d,random=%08X)", rc.random_bits, rc.random);
    s += buf;
  }
  s += rc.tininess == formats::Tininess::after_rounding ? " tininess=after" : " tininess=before";
  return s;
}

// "AA BB CC": the operands of `op` in hex.
inline std::string operand_list(Op op, int width_bits, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  std::string s = hex_bits(a, width_bits);
  const std::uint32_t more[] = {b, c};
  for (int i = 1; i < arity(op); ++i) {
    s.push_back(' ');
    s.append(hex_bits(more[i - 1], width_bits));
  }
  return s;
}

// Counts comparisons and mismatches; keeps the first `keep` mismatch lines.
// Thread-safe. Workers count their comparisons in a Tally::Counter (one per
// thread, flushed when it goes out of scope) so that the threads do not
// contend for one shared counter.
class Tally {
 public:
  explicit Tally(std::size_t keep = 10) : keep_(keep) {}

  class Counter {
   public:
    explicit Counter(Tally& t) : t_(t) {}
    Counter(const Counter&) = delete;
    Counter& operator=(const Counter&) = delete;
    ~Counter() { t_.add_compared(n_); }

    // Compares one result; returns true when subject and truth agree.
    bool compare(const formats::Format& f, const char* what, const std::string& operands,
                 const formats::RoundingContext& rc, const Result& expected, const Result& got) {
      ++n_;
      if (expected == got) return true;
      t_.record(f, what, operands, rc, expected, got);
      return false;
    }

    // Runs `op` in the emulator and in the oracle and compares.
    bool compare_op(Op op, const formats::Format& f, const Oracle& o, std::uint32_t a, std::uint32_t b,
                    std::uint32_t c, const formats::RoundingContext& rc) {
      ++n_;
      const Result expected = truth(op, o, a, b, c, rc);
      const Result got = emulate(op, f, a, b, c, rc);
      if (expected == got) return true;
      t_.record(f, op_name(op), operand_list(op, f.width(), a, b, c), rc, expected, got);
      return false;
    }

   private:
    Tally& t_;
    std::uint64_t n_ = 0;
  };

  void add_compared(std::uint64_t n) { compared_.fetch_add(n, std::memory_order_relaxed); }

  void record(const formats::Format& f, const char* what, const std::string& operands,
              const formats::RoundingContext& rc, const Result& expected, const Result& got) {
    const std::uint64_t n = mismatches_.fetch_add(1, std::memory_order_relaxed);
    if (n >= keep_) return;
    std::string line = f.name;
    for (const std::string& part : {std::string(" "), std::string(what), std::string(" "), context_name(rc),
                                    std::string("  "), operands, std::string("  expected "),
                                    hex_bits(expected.bits, f.width()), std::string(" "),
                                    flag_letters(expected.flags), std::string("  got "),
                                    hex_bits(got.bits, f.width()), std::string(" "), flag_letters(got.flags)})
      line.append(part);
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
  }

  std::uint64_t compared() const { return compared_.load(); }
  std::uint64_t mismatches() const { return mismatches_.load(); }

  std::string report() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s = std::to_string(mismatches_.load()) + " mismatches in " + std::to_string(compared_.load()) +
                    " cases; first ones (operands, expected = oracle, got = emulator; flags vzoux):\n";
    for (const std::string& l : lines_) s += "  " + l + "\n";
    return s;
  }

 private:
  std::size_t keep_;
  std::atomic<std::uint64_t> compared_{0};
  std::atomic<std::uint64_t> mismatches_{0};
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Runs body(i) for i in [0, n) on all hardware threads (support/parallel.h).
template <class Body>
void parallel_for(std::uint32_t n, Body body) {
  test::parallel_chunks(n, 1, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) body(static_cast<std::uint32_t>(i));
  });
}

// A 64-bit LCG (Knuth's MMIX constants) with an output mix, seeded fixedly
// by each test so that runs are reproducible.
struct Lcg {
  std::uint64_t state;
  explicit Lcg(std::uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  std::uint64_t next64() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::uint64_t z = state;
    z ^= z >> 29;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 32;
    return z;
  }
  std::uint32_t next32() { return static_cast<std::uint32_t>(next64() >> 32); }
  // Uniform in [0, n) by multiply-shift (bias below 2^-32 n; no division).
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(((next64() >> 32) * n) >> 32); }
};

}  // namespace mpverify::oracle::testing
