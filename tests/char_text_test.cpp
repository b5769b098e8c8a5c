// The character-level text data set (data/char_text.h), the King James reader
// (data/kjv_text.h) and its LZW decoder (data/lzw.h).
//
// Known answers that do not come from this code:
//   - the two embedded .Z streams were written by ncompress 4.2.4.6 (Debian's
//     `compress -c`) from the strings next to them;
//   - the random code streams are decoded by gzip (`gzip -dc`, whose unlzw.c
//     reads .Z) as well as by lzw_decode, and the two must agree;
//   - the figures of the real file were computed with Debian's gzip and
//     python3 from /usr/lib/bible.data of bible-kjv-text 4.38: the window
//     table read with struct.unpack('>I'), each window prefixed with the
//     file's 3-byte compress header 1F 9D 90 and decoded by `gzip -dc`, the
//     windows joined (4,404,475 bytes, 31,103 '\n'); the verses by dropping
//     the first line and each line's text up to its first space
//     (line.split(b' ', 1)[1]); the FNV-1a 64 hashes by a python loop;
//   - the token numbers are read off the alphabet by hand.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data/char_text.h"
#include "data/data_file_error.h"
#include "data/kjv_text.h"
#include "data/lzw.h"
#include "data/random.h"
#include "emu/rounding_key.h"
#include "training/trainer.h"

namespace mpverify::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325u;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3u;
  }
  return h;
}

fs::path scratch(const std::string& name) {
  std::string leaf = "mpverify-char-text-";
  leaf += name;
  leaf += '-';
  leaf += std::to_string(::getpid());
  const fs::path dir = fs::temp_directory_path() / leaf;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string message_of(auto&& call) {
  try {
    call();
  } catch (const DataFileError& e) {
    return e.what();
  }
  return "(no DataFileError)";
}

// --- a writer of LZW code streams, for streams compress would not write ----------------
//
// It packs a given code sequence the way the decoder reads it (width growth,
// clears, the padding of a group of 8 codes). It is this test's reading of
// the format, so what it writes is checked by gzip's own decoder below.
class CodeWriter {
 public:
  CodeWriter(int max_bits, bool block_mode) : max_bits_(max_bits), block_(block_mode), free_(block_mode ? 257 : 256) {}

  // The free entry the next code may refer to (a code may equal it: KwKwK).
  std::uint32_t next_free() const { return free_; }
  bool first() const { return first_; }

  void put(std::uint32_t code) {
    if (free_ > max_code()) {
      pad();
      ++width_;
    }
    for (int b = 0; b < width_; ++b) bits_.push_back((code >> b) & 1);
    if (block_ && code == 256 && !first_) {
      pad();
      width_ = 9;
      free_ = 256;
      return;
    }
    if (!first_ && free_ < (1u << max_bits_)) ++free_;
    first_ = false;
  }

  // The stream: compress's header, then the bits, least significant first.
  Bytes stream() const {
    Bytes out{0x1F, 0x9D, static_cast<std::uint8_t>(max_bits_ | (block_ ? 0x80 : 0))};
    for (std::size_t i = 0; i < bits_.size(); i += 8) {
      std::uint8_t byte = 0;
      for (std::size_t b = 0; b < 8 && i + b < bits_.size(); ++b) byte |= static_cast<std::uint8_t>(bits_[i + b] << b);
      out.push_back(byte);
    }
    return out;
  }

 private:
  std::uint32_t max_code() const {
    return width_ == max_bits_ && width_ > 9 ? (1u << max_bits_) : (1u << width_) - 1;
  }
  void pad() {
    const std::size_t group = 8 * static_cast<std::size_t>(width_);
    while ((bits_.size() - group_start_) % group != 0) bits_.push_back(0);
    group_start_ = bits_.size();
  }

  int max_bits_;
  bool block_;
  std::uint32_t free_;
  int width_ = 9;
  bool first_ = true;
  std::vector<std::uint8_t> bits_;
  std::size_t group_start_ = 0;
};

// A stream of `count` random valid codes (any code up to the next free entry,
// and in block mode a clear with probability 1/2000).
Bytes random_stream(int max_bits, bool block_mode, std::size_t count, std::uint64_t seed) {
  CodeWriter writer(max_bits, block_mode);
  Draws draws(seed, 0);
  for (std::size_t k = 0; k < count; ++k) {
    if (writer.first()) {
      writer.put(draws.below(256));
    } else if (block_mode && draws.below(2000) == 0) {
      writer.put(256);
    } else {
      const std::uint32_t limit = std::min(writer.next_free(), (1u << max_bits) - 1);
      std::uint32_t code = draws.below(std::uint64_t{limit} + 1);
      if (block_mode && code == 256) code = 65;  // 256 is the clear code, drawn above
      writer.put(code);
    }
  }
  return writer.stream();
}

bool have_gzip() { return std::system("gzip --version >/dev/null 2>&1") == 0; }

// gzip's decoding of a .Z stream.
std::string gzip_decode(const Bytes& stream, const std::string& name) {
  const fs::path dir = scratch(name);
  write_file(dir / "in.Z", stream);
  std::string command = "gzip -dc < '";
  command += (dir / "in.Z").string();
  command += "' > '";
  command += (dir / "out").string();
  command += "' 2>/dev/null";
  const int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << "gzip -dc failed on " << name;
  std::string out = read_file(dir / "out");
  fs::remove_all(dir);
  return out;
}

std::string unlzw_bytes(const Bytes& stream) { return unlzw(stream); }

// --- LZW ----------------------------------------------------------------------------------

TEST(Lzw, DecodesCompressOutput) {
  // compress -c of "TOBEORNOTTOBEORTOBEORNOT\n" and of 33 'a' then 'b' (which needs
  // the code-equal-to-the-next-entry case), as ncompress 4.2.4.6 writes them.
  const Bytes tobe = {0x1f, 0x9d, 0x90, 0x54, 0x9e, 0x08, 0x29, 0xf2, 0x44, 0x8a, 0x93, 0x27,
                      0x54, 0x02, 0x0e, 0x2c, 0xa8, 0x90, 0xa0, 0x41, 0x84, 0x0a, 0x00};
  EXPECT_EQ(unlzw_bytes(tobe), "TOBEORNOTTOBEORTOBEORNOT\n");
  const Bytes runs = {0x1f, 0x9d, 0x90, 0x61, 0x02, 0x0a, 0x1c, 0x48, 0xb0, 0xa0, 0x41, 0x82, 0x62, 0x00};
  EXPECT_EQ(unlzw_bytes(runs), std::string(33, 'a') + "b");
  const LzwHeader header = lzw_header(tobe);
  EXPECT_EQ(header.max_bits, 16);
  EXPECT_TRUE(header.block_mode);
  EXPECT_EQ(unlzw_bytes({0x1f, 0x9d, 0x90}), "");
}

TEST(Lzw, AgreesWithGzipOnRandomStreams) {
  if (!have_gzip()) GTEST_SKIP() << "gzip is not on PATH: no independent decoder to compare with";
  struct Case {
    int max_bits;
    bool block_mode;
    std::size_t codes;
  };
  // 16 bits: every width 9..16 and a full table; 12: many clears and full tables; 9: no growth, no clear.
  for (const Case c : {Case{16, true, 80000}, Case{12, true, 30000}, Case{9, false, 3000}, Case{16, false, 70000}}) {
    const Bytes stream = random_stream(c.max_bits, c.block_mode, c.codes, static_cast<std::uint64_t>(c.max_bits));
    std::string name = "gzip-";
    name += std::to_string(c.max_bits);
    name += c.block_mode ? "b" : "n";
    const std::string expected = gzip_decode(stream, name);
    ASSERT_GT(expected.size(), c.codes) << name;  // most codes stand for two bytes or more
    const std::string got = unlzw_bytes(stream);
    EXPECT_EQ(got.size(), expected.size()) << name;
    EXPECT_TRUE(got == expected) << name << ": first difference at byte "
                                 << (std::mismatch(got.begin(), got.end(), expected.begin(), expected.end()).first -
                                     got.begin());
  }
}

TEST(Lzw, RejectsMalformedStreams) {
  EXPECT_THROW(unlzw_bytes({0x1f, 0x9d}), std::invalid_argument);
  EXPECT_THROW(unlzw_bytes({0x1f, 0x8b, 0x90, 0x41, 0x00}), std::invalid_argument);  // gzip's magic
  EXPECT_THROW(unlzw_bytes({0x1f, 0x9d, 0x91, 0x41, 0x00}), std::invalid_argument);  // 17-bit codes
  EXPECT_THROW(unlzw_bytes({0x1f, 0x9d, 0x88, 0x41, 0x00}), std::invalid_argument);  // 8-bit codes
  CodeWriter beyond(16, true);
  beyond.put('A');
  beyond.put(258);  // the next free entry is 257
  try {
    unlzw_bytes(beyond.stream());
    ADD_FAILURE() << "a code beyond the next free entry was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("code 258 at bit 9"), std::string::npos) << e.what();
  }
  CodeWriter clear_first(16, true);
  clear_first.put(256);
  EXPECT_THROW(unlzw_bytes(clear_first.stream()), std::invalid_argument);
}

// A stream whose every code after the first is the next free entry (KwKwK): the k-th code stands for
// k + 1 bytes, so n codes decode to 1 + 2 + ... + n = n(n + 1) / 2 bytes of `byte`. Once the table is
// full, `repeats` more codes repeat its last entry, 65,536 bytes each: the worst expansion LZW allows.
Bytes expanding_stream(std::size_t codes, std::size_t repeats, std::uint8_t byte = 'a') {
  CodeWriter writer(16, true);
  writer.put(byte);
  for (std::size_t k = 1; k < codes; ++k) writer.put(writer.next_free());
  for (std::size_t k = 0; k < repeats; ++k) writer.put(65535);
  return writer.stream();
}

TEST(Lzw, BoundsTheDecodedSize) {
  // 2,000 codes: 2000 * 2001 / 2 = 2,001,000 bytes, all 'a'.
  const Bytes stream = expanding_stream(2000, 0);
  const std::size_t size = 2000 * 2001 / 2;
  EXPECT_EQ(unlzw(stream), std::string(size, 'a'));
  EXPECT_EQ(unlzw(stream, size), std::string(size, 'a'));  // the limit itself is allowed
  try {
    unlzw(stream, size - 1);
    ADD_FAILURE() << "a stream decoding past its limit was accepted";
  } catch (const std::invalid_argument& e) {
    // The last code, 257 + 1998 = 2255 (its 2,000 bytes cross the limit), is named.
    EXPECT_NE(std::string(e.what()).find("code 2255 "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("would decode past 2000999 bytes"), std::string::npos) << e.what();
  }
}

TEST(Lzw, RefusesADecompressionBomb) {
  // The table filled by KwKwK codes (65,279 of them: 65536 - 257 entries, about 2.1 GB of output), then
  // 20,000 codes of 65,536 bytes each: about 3.4 GB from 170 KiB of codes. The default limit (64 MiB)
  // stops it after about 11,500 codes, before the output grows past the limit.
  const Bytes bomb = expanding_stream(65536 - 257 + 1, 20000);
  ASSERT_LT(bomb.size(), std::size_t{200} << 10);
  try {
    unlzw(bomb);
    ADD_FAILURE() << "a decompression bomb was decoded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("would decode past 67108864 bytes"), std::string::npos) << e.what();
  }
}

// --- the KJV file --------------------------------------------------------------------------

// A file in bible.data's layout holding `text` in windows of `window` bytes,
// each window a stream of literal codes.
// With `bad_code`, window 0's second code is 258, beyond the next free entry.
Bytes kjv_file(const std::string& text, std::uint32_t window, bool bad_code = false) {
  const std::size_t count = (text.size() + window - 1) / window;
  std::vector<Bytes> windows;
  for (std::size_t k = 0; k < count; ++k) {
    CodeWriter writer(16, true);
    for (std::size_t i = k * window; i < std::min(text.size(), (k + 1) * window); ++i) {
      writer.put(bad_code && k == 0 && i == 1 ? 258 : static_cast<unsigned char>(text[i]));
    }
    const Bytes stream = writer.stream();
    windows.emplace_back(stream.begin() + 3, stream.end());
  }
  Bytes out = {'E', 'C', '0', '2'};
  const std::string description = "Compressed Data File";
  out.insert(out.end(), description.begin(), description.end());
  out.resize(84, 0);
  const auto put32 = [&](std::size_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
  };
  put32(window);
  put32(count);
  std::size_t offset = 92 + 4 * (count + 1) + 3;
  for (std::size_t k = 0; k <= count; ++k) {
    put32(offset);
    if (k < count) offset += windows[k].size();
  }
  out.insert(out.end(), {0x1f, 0x9d, 0x90});
  for (const Bytes& w : windows) out.insert(out.end(), w.begin(), w.end());
  return out;
}

const std::string kSmallKjv =
    "Holy Bible, a title line.\nGe1:1 In the beginning.\n1Sa3:10 And the LORD came, and stood.\n"
    "SSol1:1 The song of songs!\nRe22:21 Amen.\n";

TEST(KjvText, ReadsTheWindowedFile) {
  const fs::path dir = scratch("windows");
  write_file(dir / "bible.data", kjv_file(kSmallKjv, 32));
  EXPECT_EQ(read_kjv_data(dir / "bible.data"), kSmallKjv);
  EXPECT_EQ(read_kjv_data(dir), kSmallKjv);  // a directory means its bible.data
  EXPECT_EQ(load_kjv_verses(dir),
            "In the beginning.\nAnd the LORD came, and stood.\nThe song of songs!\nAmen.\n");
  fs::remove_all(dir);
}

TEST(KjvText, RejectsMalformedFiles) {
  const fs::path dir = scratch("malformed");
  const fs::path file = dir / "bible.data";
  const Bytes good = kjv_file(kSmallKjv, 32);
  const auto message = [&](Bytes bytes) {
    write_file(file, bytes);
    return message_of([&] { read_kjv_data(file); });
  };
  Bytes magic = good;
  magic[3] = '1';
  Bytes longer = good;
  longer.push_back(0);
  Bytes window = good;
  window[87] = 33;  // the window size: 33, while the windows hold 32 bytes
  for (const auto& [bytes, what] : {std::pair{magic, "\"EC02\""}, std::pair{longer, "the window table ends at byte"},
                                    std::pair{window, "window 0 decodes to 32 bytes"}}) {
    const std::string m = message(bytes);
    EXPECT_NE(m.find(file.string()), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
  // A window that decodes to more than the window size is refused while decoding, not after.
  Bytes smaller = good;
  smaller[87] = 31;  // the window size: 31, while window 0 holds 32 bytes
  const std::string past = message(smaller);
  EXPECT_NE(past.find(file.string()), std::string::npos) << past;
  EXPECT_NE(past.find("would decode past 31 bytes"), std::string::npos) << past;
  const std::string code = message(kjv_file(kSmallKjv, 32, true));
  EXPECT_NE(code.find(file.string()), std::string::npos) << code;
  EXPECT_NE(code.find("code 258 at bit 9 is beyond the next free table entry"), std::string::npos) << code;
  fs::remove_all(dir);
}

TEST(KjvText, MissingFileNamesThePathAndTheInstallCommand) {
  const fs::path missing = fs::temp_directory_path() / "mpverify-no-such-dir" / "bible.data";
  const std::string m = message_of([&] { read_kjv_data(missing); });
  EXPECT_NE(m.find(missing.string()), std::string::npos) << m;
  EXPECT_NE(m.find("apt-get install -y bible-kjv-text"), std::string::npos) << m;
  EXPECT_NE(m.find("MPVERIFY_KJV_FILE"), std::string::npos) << m;
  EXPECT_EQ(kjv_install_command(), "apt-get install -y bible-kjv-text");

  // The environment variable names the default file (this test runs in a process of its own).
  const char* before = std::getenv("MPVERIFY_KJV_FILE");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  ::setenv("MPVERIFY_KJV_FILE", missing.c_str(), 1);
  EXPECT_EQ(kjv_default_file(), missing);
  const std::string from_env = message_of([] { load_kjv_char_text(); });
  EXPECT_NE(from_env.find(missing.string()), std::string::npos) << from_env;
  ::unsetenv("MPVERIFY_KJV_FILE");
  EXPECT_EQ(kjv_default_file(), fs::path("/usr/lib/bible.data"));
  if (saved) ::setenv("MPVERIFY_KJV_FILE", saved->c_str(), 1);
}

TEST(KjvText, VersesLoseTitleAndReferences) {
  EXPECT_EQ(kjv_verses(kSmallKjv, "small"),
            "In the beginning.\nAnd the LORD came, and stood.\nThe song of songs!\nAmen.\n");
  for (const auto& [raw, line] : {std::pair{"Title\nGe1:1 x\nno reference\n", "line 3"},
                                  std::pair{"Title\nGe1 x\n", "line 2"}, std::pair{"Title\n4Ki1:1 x\n", "line 2"},
                                  std::pair{"Title\nGe1:1x\n", "line 2"}, std::pair{"Title\nGe1:1 x", "line 2"}}) {
    const std::string m = message_of([&] { kjv_verses(raw, "fake"); });
    EXPECT_NE(m.find("fake"), std::string::npos) << m;
    EXPECT_NE(m.find(line), std::string::npos) << raw << " -> " << m;
  }
}

// --- tokens and the split ------------------------------------------------------------------

TEST(CharText, AlphabetAndTokens) {
  EXPECT_EQ(kCharVocab, 64);
  EXPECT_EQ(std::set<char>(kCharAlphabet.begin(), kCharAlphabet.end()).size(), 64u);
  for (std::int32_t t = 0; t < kCharVocab; ++t) EXPECT_EQ(char_token(token_char(t)), t);
  // By hand: '\n' 0, ' ' 1, '!' 2, ',' 6, 'A' 12, 'Z' 37, 'a' 38, 'b' 39, 'c' 40, 'z' 63.
  const CharText text = char_text_from_string("Ab, c!\nZz");
  EXPECT_EQ(text.tokens, (std::vector<std::int32_t>{12, 39, 6, 1, 40, 2, 0, 37, 63}));
  EXPECT_EQ(detokenize(text.tokens), "Ab, c!\nZz");
  for (char c : {'0', '9', '"', '\t', '\r', '&', '\x80'}) EXPECT_EQ(char_token(c), -1) << int(c);
  EXPECT_THROW(token_char(64), std::out_of_range);
  EXPECT_THROW(token_char(-1), std::out_of_range);
}

TEST(CharText, RejectsBytesOutsideTheAlphabet) {
  const std::string m = message_of([] { char_text_from_string("In the 1st", "fake.txt"); });
  EXPECT_NE(m.find("fake.txt at byte 7"), std::string::npos) << m;
  EXPECT_NE(m.find("byte 49"), std::string::npos) << m;
  const std::string high = message_of([] { char_text_from_string("ab\xC3\xA9", "utf8"); });
  EXPECT_NE(high.find("utf8 at byte 2: byte 195"), std::string::npos) << high;
}

TEST(CharText, SplitsNinetyTen) {
  for (const auto& [n, train] : {std::pair{100, 90}, std::pair{25, 23}, std::pair{9, 9}, std::pair{0, 0}}) {
    const CharText text = char_text_from_string(std::string(static_cast<std::size_t>(n), 'a'));
    EXPECT_EQ(text.train().size(), static_cast<std::size_t>(train)) << n;
    EXPECT_EQ(text.test().size(), static_cast<std::size_t>(n - train)) << n;
  }
  const CharText text = char_text_from_string("abcdefghijklmnopqrstuvwxy");  // 25: 23 + 2
  EXPECT_EQ(detokenize(text.train()), "abcdefghijklmnopqrstuvw");
  EXPECT_EQ(detokenize(text.test()), "xy");
}

// --- batches --------------------------------------------------------------------------------

// A text of `n` tokens cycling through the alphabet with a stride, so no two
// nearby windows are equal.
std::vector<std::int32_t> cycle_tokens(std::size_t n) {
  std::vector<std::int32_t> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + i / 64) % 64);
  return tokens;
}

void expect_windows_of(const CharBatch& b, std::span<const std::int32_t> part) {
  ASSERT_EQ(b.inputs.size(), b.rows * b.length);
  ASSERT_EQ(b.targets.size(), b.rows * b.length);
  ASSERT_EQ(b.starts.size(), b.rows);
  for (std::size_t r = 0; r < b.rows; ++r) {
    ASSERT_LE(b.starts[r] + b.length, part.size() - 1);
    for (std::size_t t = 0; t < b.length; ++t) {
      EXPECT_EQ(b.input(r)[t], part[b.starts[r] + t]);
      EXPECT_EQ(b.target(r)[t], part[b.starts[r] + t + 1]);
      if (t + 1 < b.length) {
        EXPECT_EQ(b.target(r)[t], b.input(r)[t + 1]);
      }
      EXPECT_TRUE(b.input(r)[t] >= 0 && b.input(r)[t] < kCharVocab);
      EXPECT_TRUE(b.target(r)[t] >= 0 && b.target(r)[t] < kCharVocab);
    }
  }
}

bool same(const CharBatch& a, const CharBatch& b) {
  return a.rows == b.rows && a.length == b.length && a.inputs == b.inputs && a.targets == b.targets &&
         a.starts == b.starts && a.index == b.index;
}

TEST(CharBatches, WindowsAreInputsAndShiftedTargets) {
  const std::vector<std::int32_t> part = cycle_tokens(5000);
  CharBatches batches(part, 8, 32, 7);
  for (int i = 0; i < 20; ++i) {
    const CharBatch b = batches.next();
    EXPECT_EQ(b.rows, 8u);
    EXPECT_EQ(b.length, 32u);
    EXPECT_EQ(b.index, static_cast<std::size_t>(i));
    expect_windows_of(b, part);
  }
}

TEST(CharBatches, SameSeedSameBatchesOtherSeedOthers) {
  const std::vector<std::int32_t> part = cycle_tokens(100000);
  CharBatches a(part, 16, 64, 42), b(part, 16, 64, 42), c(part, 16, 64, 43);
  for (int i = 0; i < 5; ++i) {
    const CharBatch x = a.next(), y = b.next(), z = c.next();
    EXPECT_TRUE(same(x, y)) << "batch " << i;
    EXPECT_NE(x.starts, z.starts) << "batch " << i;
    EXPECT_TRUE(same(x, a.at(static_cast<std::size_t>(i)))) << "batch " << i;
  }
  a.seek(3);
  EXPECT_TRUE(same(a.next(), b.at(3)));
  EXPECT_EQ(a.index(), 4u);
  EXPECT_FALSE(same(b.at(3), b.at(4)));
}

TEST(CharBatches, StartsComeFromTheirOwnPhiloxStream) {
  const std::vector<std::int32_t> part = cycle_tokens(3000);
  const CharBatches batches(part, 5, 16, 9);
  for (std::size_t i : {0u, 1u, 1000u}) {
    Draws draws(9, kCharBatchStreams + i);
    const CharBatch b = batches.at(i);
    for (std::size_t r = 0; r < 5; ++r) EXPECT_EQ(b.starts[r], draws.below(3000 - 16)) << i << ' ' << r;
  }
  // The tag (top byte) is no other Philox user's, over all 2^48 batch indices.
  const std::uint64_t tag = kCharBatchStreams >> 56;
  EXPECT_EQ(tag, (kCharBatchStreams + ((std::uint64_t{1} << 48) - 1)) >> 56);
  const std::vector<std::uint64_t> others = {
      emu::kRoundingStreamTag,                        // stochastic rounding (emu/rounding_key.h)
      training::Trainer::kSampleStream >> 56,         // DCGAN latent codes
      std::uint64_t{0x6A7} << 48 >> 56,               // the DCGAN's training latents (trainer.cpp)
      std::uint64_t{0xBA7C} << 48 >> 56,              // epoch orders (data/batches.h)
      std::uint64_t{0x5B17} << 48 >> 56,              // the stratified split (data/stratified_split.h)
      0x00,                                           // synthetic digits (1 << 48, 2 << 48), init, FID/KID
  };
  for (std::uint64_t other : others) EXPECT_NE(tag, other);
  EXPECT_EQ(tag, 0xC7u);
}

TEST(CharBatches, EveryStartIsReachable) {
  // 30 tokens, windows of 4 + 1: starts 0..25, the last one ending on the last token.
  const std::vector<std::int32_t> part = cycle_tokens(30);
  CharBatches batches(part, 8, 4, 1);
  std::set<std::size_t> seen;
  for (int i = 0; i < 200; ++i) {
    const CharBatch b = batches.next();
    seen.insert(b.starts.begin(), b.starts.end());
  }
  EXPECT_EQ(seen.size(), 26u);
  EXPECT_EQ(*seen.begin(), 0u);
  EXPECT_EQ(*seen.rbegin(), 25u);
}

TEST(CharBatches, RejectsShapesWithoutAWindow) {
  const std::vector<std::int32_t> part = cycle_tokens(10);
  EXPECT_THROW(CharBatches(part, 0, 4, 0), std::invalid_argument);
  EXPECT_THROW(CharBatches(part, 2, 0, 0), std::invalid_argument);
  EXPECT_THROW(CharBatches(part, 2, 10, 0), std::invalid_argument);
  EXPECT_NO_THROW(CharBatches(part, 2, 9, 0));
  EXPECT_THROW(CharEvalWindows(part, 0, 4), std::invalid_argument);
  EXPECT_THROW(CharEvalWindows(part, 2, 10), std::invalid_argument);
}

TEST(CharEvalWindows, FixedNonOverlappingWindows) {
  // 23 tokens, windows of 5 + 1: (23 - 1) / 5 = 4 windows at 0, 5, 10, 15; batches of 3: 3 + 1.
  const std::vector<std::int32_t> part = cycle_tokens(23);
  CharEvalWindows eval(part, 3, 5);
  EXPECT_EQ(eval.windows(), 4u);
  EXPECT_EQ(eval.batches(), 2u);
  std::vector<std::size_t> starts;
  std::vector<int> targeted(part.size(), 0);
  while (eval.has_next()) {
    const CharBatch b = eval.next();
    expect_windows_of(b, part);
    for (std::size_t r = 0; r < b.rows; ++r) {
      starts.push_back(b.starts[r]);
      for (std::size_t t = 1; t <= b.length; ++t) ++targeted[b.starts[r] + t];
    }
  }
  EXPECT_EQ(starts, (std::vector<std::size_t>{0, 5, 10, 15}));
  for (std::size_t i = 0; i < part.size(); ++i) EXPECT_EQ(targeted[i], (i >= 1 && i <= 20) ? 1 : 0) << i;
  EXPECT_EQ(eval.at(0).rows, 3u);
  EXPECT_EQ(eval.at(1).rows, 1u);
  EXPECT_THROW(eval.at(2), std::out_of_range);
  eval.reset();
  EXPECT_TRUE(same(eval.next(), eval.at(0)));
  // 25 tokens: a fifth window at 20 would need token 25, so there are still 4.
  EXPECT_EQ(CharEvalWindows(cycle_tokens(25), 3, 5).windows(), 4u);
  EXPECT_EQ(CharEvalWindows(cycle_tokens(26), 3, 5).windows(), 5u);
}

// --- the real file ---------------------------------------------------------------------------

class RealKjv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kjv_default_file())) {
      GTEST_SKIP() << kjv_default_file() << " is not installed (`" << kjv_install_command()
                   << "` or .ci/install-deps installs it)";
    }
  }
};

TEST_F(RealKjv, DecodesToTheKnownText) {
  const std::string raw = read_kjv_data();
  EXPECT_EQ(raw.size(), kKjvRawBytes);
  EXPECT_EQ(raw.size(), 4404475u);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), '\n'), 31103);
  EXPECT_EQ(fnv1a64(raw), 0x8d9b385cae8f145cu);
  const std::string start =
      "Holy Bible, Authorized (King James) Version.  Textfile 930105.\n"
      "Ge1:1 In the beginning God created the heaven and the earth.\n";
  EXPECT_EQ(raw.substr(0, start.size()), start);
}

TEST_F(RealKjv, TokensSplitAndVocabulary) {
  const CharText text = load_kjv_char_text();
  const std::string verses = detokenize(text.tokens);
  EXPECT_EQ(text.tokens.size(), 4137850u);
  EXPECT_EQ(std::count(verses.begin(), verses.end(), '\n'), static_cast<long>(kKjvVerses));
  EXPECT_EQ(fnv1a64(verses), 0xca234ace6589dc01u);
  EXPECT_EQ(std::count(verses.begin(), verses.end(), 'e'), 407583);
  EXPECT_EQ(text.train().size(), 3724065u);
  EXPECT_EQ(text.test().size(), 413785u);
  EXPECT_EQ(detokenize(text.test().first(23)), " Hebrew tongue, saying,");
  EXPECT_EQ(verses.substr(0, 55), "In the beginning God created the heaven and the earth.\n");
  std::set<std::int32_t> present(text.tokens.begin(), text.tokens.end());
  EXPECT_EQ(present.size(), 63u);
  EXPECT_EQ(present.count(char_token('X')), 0u);
  CharBatches batches(text.train(), 4, 128, 0);
  expect_windows_of(batches.next(), text.train());
}

}  // namespace
}  // namespace mpverify::data
