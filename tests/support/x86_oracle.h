// The x86 hardware as the "true" side for fp16: the F16C conversion
// instructions and SSE float arithmetic, with the IEEE flags read from MXCSR.
//
// Every step is inline assembly so that the compiler can neither reorder it
// around the MXCSR accesses nor swap the operands (x86 returns the FIRST NaN
// operand, so operand order is part of the result).
//
// Why float arithmetic gives correctly rounded fp16 results: an fp16 product
// has at most 22 significant bits, so it is exact in float and the conversion
// rounds once; an fp16 sum may need up to 40 bits, so it is rounded twice, and
// that is innocuous: for round-to-nearest because 24 >= 2*11 + 2 (Figueroa),
// and for the directed modes because both roundings go the same way onto
// nested grids. Flags: a float rounding error implies the fp16 result is
// inexact too, and such sums are far from the fp16 underflow range.
#pragma once

#include <cstdint>

#include "formats/flags.h"

namespace mpverify::test {

// MXCSR rounding-control values.
enum class X86Rounding : std::uint32_t { nearest = 0, down = 1, up = 2, toward_zero = 3 };

struct X86Result {
  std::uint16_t bits;
  formats::Flags flags;
};

inline formats::Flags flags_from_mxcsr(std::uint32_t csr) {
  formats::Flags f;
  if (csr & 0x20) f.raise(formats::Flags::inexact);    // PE
  if (csr & 0x10) f.raise(formats::Flags::underflow);  // UE
  if (csr & 0x08) f.raise(formats::Flags::overflow);   // OE
  if (csr & 0x04) f.raise(formats::Flags::infinite);   // ZE
  if (csr & 0x01) f.raise(formats::Flags::invalid);    // IE (DE, 0x02, is not an IEEE flag)
  return f;
}

// All exceptions masked, flags clear, the given rounding control.
inline std::uint32_t mxcsr_for(X86Rounding r) { return 0x1f80u | (static_cast<std::uint32_t>(r) << 13); }

// Each asm block loads MXCSR (flags clear, the rounding wanted), does its
// work, stores MXCSR to read the flags, and, in a directed mode, reloads the
// default MXCSR so the rest of the program runs in round-to-nearest. In
// round-to-nearest the reload is left out: only sticky flags stay set, which
// neither the emulator nor the next block (it loads its own MXCSR) reads, and
// LDMXCSR is slow (about 20 ns here: a quarter of an exhaustive test's time).
constexpr std::uint32_t kDefaultMxcsr = 0x1f80u;

__attribute__((target("f16c"))) inline X86Result x86_float_to_fp16(float x, X86Rounding r) {
  const std::uint32_t csr_in = mxcsr_for(r), csr_default = kDefaultMxcsr;
  std::uint32_t csr_out, out;
  float tmp;
#define MPVERIFY_X86_FLOAT_TO_FP16(TAIL)                                                   \
  asm volatile(                                                                            \
      "vldmxcsr %[csr_in]\n\t"                                                             \
      "vcvtps2ph $4, %[x], %[t]\n\t" /* imm 4: round as MXCSR says */                      \
      "vmovd %[t], %[out]\n\t"                                                             \
      "vstmxcsr %[csr_out]\n\t" TAIL                                                       \
      : [out] "=r"(out), [t] "=&x"(tmp), [csr_out] "=m"(csr_out)                           \
      : [x] "x"(x), [csr_in] "m"(csr_in), [csr_default] "m"(csr_default))
  if (r == X86Rounding::nearest) MPVERIFY_X86_FLOAT_TO_FP16("");
  else MPVERIFY_X86_FLOAT_TO_FP16("vldmxcsr %[csr_default]");
#undef MPVERIFY_X86_FLOAT_TO_FP16
  return {static_cast<std::uint16_t>(out & 0xffff), flags_from_mxcsr(csr_out)};
}

__attribute__((target("f16c"))) inline float x86_fp16_to_float(std::uint16_t h, formats::Flags& flags) {
  const std::uint32_t csr_in = kDefaultMxcsr;
  std::uint32_t csr_out;
  const std::uint32_t in = h;
  float out;
  asm volatile(
      "vldmxcsr %[csr_in]\n\t"
      "vmovd %[in], %[out]\n\t"
      "vcvtph2ps %[out], %[out]\n\t"
      "vstmxcsr %[csr_out]\n\t"
      "vldmxcsr %[csr_in]"
      : [out] "=&x"(out), [csr_out] "=m"(csr_out)
      : [in] "r"(in), [csr_in] "m"(csr_in));
  flags = flags_from_mxcsr(csr_out);
  return out;
}

enum class X86Op { add, mul };

// fp16 a op b: widen both (exact), one float operation, one conversion.
__attribute__((target("f16c"))) inline X86Result x86_fp16_op(X86Op op, std::uint16_t a, std::uint16_t b,
                                                             X86Rounding r) {
  const std::uint32_t csr_in = mxcsr_for(r), csr_default = kDefaultMxcsr;
  std::uint32_t csr_out, out;
  const std::uint32_t ia = a, ib = b;
  float fa, fb;
#define MPVERIFY_X86_FP16_OP(INSN, TAIL)                                                     \
  asm volatile(                                                                              \
      "vldmxcsr %[csr_in]\n\t"                                                               \
      "vmovd %[ia], %[fa]\n\t"                                                               \
      "vcvtph2ps %[fa], %[fa]\n\t"                                                           \
      "vmovd %[ib], %[fb]\n\t"                                                               \
      "vcvtph2ps %[fb], %[fb]\n\t"                                                           \
      INSN " %[fb], %[fa], %[fa]\n\t" /* AT&T: fa = fa op fb; fa is the first operand */       \
      "vcvtps2ph $4, %[fa], %[fa]\n\t"                                                       \
      "vmovd %[fa], %[out]\n\t"                                                              \
      "vstmxcsr %[csr_out]\n\t" TAIL                                                         \
      : [out] "=r"(out), [fa] "=&x"(fa), [fb] "=&x"(fb), [csr_out] "=m"(csr_out)             \
      : [ia] "r"(ia), [ib] "r"(ib), [csr_in] "m"(csr_in), [csr_default] "m"(csr_default))
  const bool nearest = r == X86Rounding::nearest;
  if (op == X86Op::add && nearest) MPVERIFY_X86_FP16_OP("vaddss", "");
  else if (op == X86Op::add) MPVERIFY_X86_FP16_OP("vaddss", "vldmxcsr %[csr_default]");
  else if (nearest) MPVERIFY_X86_FP16_OP("vmulss", "");
  else MPVERIFY_X86_FP16_OP("vmulss", "vldmxcsr %[csr_default]");
#undef MPVERIFY_X86_FP16_OP
  return {static_cast<std::uint16_t>(out & 0xffff), flags_from_mxcsr(csr_out)};
}

}  // namespace mpverify::test
