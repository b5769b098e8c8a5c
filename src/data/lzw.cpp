#include "data/lzw.h"

#include <stdexcept>
#include <vector>

namespace mpverify::data {

namespace {

constexpr std::uint32_t kClear = 256;
constexpr int kInitialBits = 9;

// The decoder's state: the string table as (prefix code, last byte) pairs,
// the bit position and the current code width.
class LzwDecoder {
 public:
  LzwDecoder(std::span<const std::uint8_t> codes, LzwHeader header, std::size_t max_output)
      : codes_(codes),
        header_(header),
        max_output_(max_output),
        table_size_(std::uint32_t{1} << header.max_bits),
        prefix_(table_size_),
        suffix_(table_size_),
        free_(header.block_mode ? kClear + 1 : kClear) {
    set_width(kInitialBits);
  }

  std::string run() {
    const std::uint64_t total_bits = std::uint64_t{codes_.size()} * 8;
    for (;;) {
      if (free_ > max_code_) {
        skip_group();
        set_width(width_ + 1);
      }
      if (position_ + static_cast<std::uint64_t>(width_) > total_bits) break;
      const std::uint64_t at = position_;
      const std::uint32_t code = read_code();
      if (header_.block_mode && code == kClear && old_ >= 0) {
        // As gzip's decoder: the entry the next code makes lands on 256,
        // which no code reads, so the first real entry is 257 again.
        free_ = kClear;
        skip_group();
        set_width(kInitialBits);
        continue;
      }
      emit(code, at);
    }
    return std::move(out_);
  }

 private:
  void set_width(int bits) {
    width_ = bits;
    // At the largest width the table may fill completely; it never grows past it. As in gzip and
    // compress, this does not hold for the first width: a 9-bit stream goes to 10 bits when full.
    max_code_ = bits == header_.max_bits && bits > kInitialBits ? table_size_ : (std::uint32_t{1} << bits) - 1;
    group_start_ = position_;
  }

  // Moves to the end of the current group of 8 codes (compress pads it).
  void skip_group() {
    const std::uint64_t group = 8 * static_cast<std::uint64_t>(width_);
    const std::uint64_t used = position_ - group_start_;
    position_ = group_start_ + (used + group - 1) / group * group;
  }

  std::uint32_t read_code() {
    std::uint32_t bits = 0;
    const std::uint64_t first = position_ / 8;
    // A code of at most 16 bits starting at bit offset <= 7 spans at most 3 bytes.
    for (std::uint64_t k = 0; k < 3 && first + k < codes_.size(); ++k) {
      bits |= std::uint32_t{codes_[first + k]} << (8 * k);
    }
    const std::uint32_t code = (bits >> (position_ % 8)) & ((std::uint32_t{1} << width_) - 1);
    position_ += static_cast<std::uint64_t>(width_);
    return code;
  }

  std::string limit_text() const {
    return "would decode past " + std::to_string(max_output_) + " bytes (a damaged or hostile stream)";
  }

  [[noreturn]] void fail(std::uint32_t code, std::uint64_t at, const char* what) const {
    std::string message = "LZW stream: code ";
    message += std::to_string(code);
    message += " at bit ";
    message += std::to_string(at);
    message += ' ';
    message += what;
    throw std::invalid_argument(message);
  }

  void emit(std::uint32_t code, std::uint64_t at) {
    if (old_ < 0) {
      if (code >= kClear) fail(code, at, "is the first code but not a byte");
      if (out_.size() == max_output_) fail(code, at, limit_text().c_str());
      last_ = static_cast<std::uint8_t>(code);
      out_.push_back(static_cast<char>(last_));
      old_ = static_cast<std::int32_t>(code);
      return;
    }
    const std::uint32_t in_code = code;
    stack_.clear();
    if (code >= free_) {
      if (code > free_) fail(code, at, "is beyond the next free table entry");
      // The entry being defined by this very code: the previous string plus its own first byte.
      stack_.push_back(static_cast<char>(last_));
      code = static_cast<std::uint32_t>(old_);
    }
    while (code >= kClear) {  // entries point to lower codes only, so this ends
      stack_.push_back(static_cast<char>(suffix_[code]));
      code = prefix_[code];
    }
    last_ = static_cast<std::uint8_t>(code);
    stack_.push_back(static_cast<char>(last_));
    if (stack_.size() > max_output_ - out_.size()) fail(in_code, at, limit_text().c_str());
    out_.append(stack_.rbegin(), stack_.rend());
    if (free_ < table_size_) {
      prefix_[free_] = static_cast<std::uint16_t>(old_);
      suffix_[free_] = last_;
      ++free_;
    }
    old_ = static_cast<std::int32_t>(in_code);
  }

  std::span<const std::uint8_t> codes_;
  LzwHeader header_;
  std::size_t max_output_;
  std::uint32_t table_size_;
  std::vector<std::uint16_t> prefix_;
  std::vector<std::uint8_t> suffix_;
  std::uint32_t free_;
  std::uint32_t max_code_ = 0;
  int width_ = kInitialBits;
  std::uint64_t position_ = 0, group_start_ = 0;
  std::int32_t old_ = -1;  // the previous code; -1 before the first
  std::uint8_t last_ = 0;  // the first byte of the previous code's string
  std::string out_, stack_;
};

}  // namespace

LzwHeader lzw_header(std::span<const std::uint8_t> stream) {
  if (stream.size() < 3) throw std::invalid_argument("LZW stream: shorter than its 3-byte header");
  if (stream[0] != 0x1F || stream[1] != 0x9D) {
    throw std::invalid_argument("LZW stream: the magic number is not 1F 9D (not compress(1) output)");
  }
  LzwHeader header;
  header.max_bits = stream[2] & 0x1F;
  header.block_mode = (stream[2] & 0x80) != 0;
  if (header.max_bits < kInitialBits || header.max_bits > 16) {
    throw std::invalid_argument("LZW stream: largest code width " + std::to_string(header.max_bits) +
                                " is outside 9..16");
  }
  return header;
}

std::string lzw_decode(std::span<const std::uint8_t> codes, LzwHeader header, std::size_t max_output) {
  if (header.max_bits < kInitialBits || header.max_bits > 16) {
    throw std::invalid_argument("lzw_decode: largest code width " + std::to_string(header.max_bits) +
                                " is outside 9..16");
  }
  return LzwDecoder(codes, header, max_output).run();
}

std::string unlzw(std::span<const std::uint8_t> stream, std::size_t max_output) {
  const LzwHeader header = lzw_header(stream);
  return lzw_decode(stream.subspan(3), header, max_output);
}

}  // namespace mpverify::data
