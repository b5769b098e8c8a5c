// Whether this build runs under AddressSanitizer: tests that cap the address space (ulimit -v) skip there,
// since ASan reserves more address space than any such cap.
#pragma once

namespace mpverify::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace mpverify::test
