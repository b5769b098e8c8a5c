#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::formats {

std::uint32_t convert(const Format& from, std::uint32_t bits, const Format& to, const RoundingContext& rc,
                      Flags& flags) {
  // Every value of `from` is exactly a double; NaNs carry their payload in
  // the double's top fraction bits, and a signalling NaN raises invalid here.
  return from_double(to, to_double(from, bits, flags), rc, flags);
}

}  // namespace mpverify::formats
