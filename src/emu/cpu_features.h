// CPU features that __builtin_cpu_supports does not name on every compiler:
// clang before 17 rejects "f16c" at compile time, so it is read from CPUID
// (leaf 1, ECX bit 29) the same way with gcc and clang.
#pragma once

#include <cpuid.h>

namespace mpverify::emu {

inline bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

}  // namespace mpverify::emu
