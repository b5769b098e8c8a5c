// A decoder for the LZW streams of Unix compress(1) (".Z" files), the format
// in which Debian's bible-kjv-text stores the King James text (data/kjv_text.h).
// zlib does not read it, so it is decoded here, following the decoder that
// gzip uses for .Z files (its unlzw.c):
//   - a stream is a 3-byte header (0x1F 0x9D, then a flags byte: the low five
//     bits are the largest code width, 9..16; bit 0x80 is "block mode") and
//     then codes, packed least significant bit first;
//   - codes start 9 bits wide; the width grows by one when the next free
//     table entry no longer fits it, up to the largest width;
//   - in block mode, code 256 clears the table and the width returns to 9;
//   - when the width changes (growth or clear), the rest of the current group
//     of 8 codes is skipped: the next code starts at the next multiple of
//     8 x width bits counted from where the previous width began (compress
//     writes codes 8 at a time and pads the group);
//   - the stream ends when fewer bits than one code remain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace mpverify::data {

struct LzwHeader {
  int max_bits = 16;       // the largest code width, 9..16
  bool block_mode = true;  // code 256 clears the table
};

// The header of a .Z stream (its first three bytes). Throws std::invalid_argument
// for fewer than three bytes, a wrong magic number or a width outside 9..16.
LzwHeader lzw_header(std::span<const std::uint8_t> stream);

// The most bytes a stream may decode to unless the caller says otherwise. LZW
// expands quadratically at worst (each code may stand for one byte more than
// the previous one, up to 65,536 bytes a code once the table is full), so
// 256 KiB of codes can claim gigabytes; the texts read here are a few MiB.
inline constexpr std::size_t kLzwMaxOutput = std::size_t{64} << 20;

// The bytes that `codes` (the stream after its header) decode to. Throws
// std::invalid_argument for a code that cannot occur (one beyond the next
// free entry, or a first code that is not a byte), naming its bit offset,
// and for a stream that decodes to more than `max_output` bytes (before
// producing them).
std::string lzw_decode(std::span<const std::uint8_t> codes, LzwHeader header,
                       std::size_t max_output = kLzwMaxOutput);

// A whole .Z stream: lzw_decode of what follows lzw_header.
std::string unlzw(std::span<const std::uint8_t> stream, std::size_t max_output = kLzwMaxOutput);

}  // namespace mpverify::data
