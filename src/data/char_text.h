// A character-level language-modelling data set: a text as a sequence of
// tokens over a fixed 64-character alphabet, split by position into a train
// part and a held-out test part, with seeded random batches of windows over
// the train part and fixed windows over the test part.
//
// The text is the King James Bible (data/kjv_text.h: Debian's bible-kjv-text,
// public domain) reduced to its verses, one per line, references removed;
// tests can tokenise any string instead (char_text_from_string).
//
// Normalisation: none beyond that; every byte must be one of the alphabet's
// 64 characters, and token t is the character at position t of
// kCharAlphabet: '\n', ' ', ! ' ( ) , - . : ; ?, A..Z, a..z. The KJV's
// verses use 63 of them (no capital X).
//
// Split: of n tokens, the first n - floor(n / 10) are the train part, the
// last floor(n / 10) the test part (for the KJV: 3,724,065 and 413,785 of
// 4,137,850: the test part begins with the last words of Acts 21:40,
// " Hebrew tongue, saying,", and runs to the end of Revelation).
//
// A window of `length` is `length` + 1 consecutive tokens of a part: the
// inputs are its first `length` tokens and the targets its last `length`,
// so target t is the token that follows input t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::data {

inline constexpr std::string_view kCharAlphabet =
    "\n !'(),-.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
inline constexpr int kCharVocab = 64;
static_assert(kCharAlphabet.size() == kCharVocab);

// The token of byte `c`, or -1 when `c` is not in the alphabet.
std::int32_t char_token(char c);
// The character of token `t`; throws std::out_of_range outside [0, kCharVocab).
char token_char(std::int32_t t);
// The characters of `tokens` (token_char of each).
std::string detokenize(std::span<const std::int32_t> tokens);

struct CharText {
  std::vector<std::int32_t> tokens;  // the whole text, each in [0, kCharVocab)
  std::size_t train_size = 0;        // tokens [0, train_size) train, [train_size, size) test
  std::span<const std::int32_t> train() const { return std::span(tokens).first(train_size); }
  std::span<const std::int32_t> test() const { return std::span(tokens).subspan(train_size); }
};

// `text` tokenised and split as above. Throws DataFileError naming `source`
// and the byte offset for a byte outside the alphabet.
CharText char_text_from_string(std::string_view text, std::string_view source = "text");

// The King James verses (load_kjv_verses(path), data/kjv_text.h) as a
// CharText: 4,137,850 tokens. Throws DataFileError as read_kjv_data does.
CharText load_kjv_char_text(const std::filesystem::path& path = {});

// `rows` windows of `length`: row r's inputs are inputs[r * length, (r + 1) * length),
// its targets the same range of `targets`.
struct CharBatch {
  std::size_t rows = 0, length = 0;
  std::vector<std::int32_t> inputs, targets;  // rows x length, row-major
  std::vector<std::size_t> starts;            // where each row's first input is in the part
  std::size_t index = 0;                      // which batch of its iterator
  std::span<const std::int32_t> input(std::size_t row) const;
  std::span<const std::int32_t> target(std::size_t row) const;
};

// The Philox streams of the random batches: batch i draws from stream
// kCharBatchStreams + i under the seed. The top byte 0xC7 is used by no other
// Philox user of the project (the data, initialisation, batches and latent
// codes use 0x00, 0x05, 0x06, 0x5B and 0xBA, stochastic rounding 0x5D).
inline constexpr std::uint64_t kCharBatchStreams = std::uint64_t{0xC7A7} << 48;

// Random training batches: batch i holds `batch` windows whose starts are
// Draws(seed, kCharBatchStreams + i).below(part.size() - length), drawn in
// row order (data/random.h: exactly uniform over the part.size() - length
// possible starts). Batch i is a pure function of (part, batch, length, seed,
// i), so a run can resume at any batch. The part must outlive the iterator.
class CharBatches {
 public:
  // Throws std::invalid_argument for batch or length 0, a part of at most
  // `length` tokens, or part.size() - length > 2^32.
  CharBatches(std::span<const std::int32_t> part, std::size_t batch, std::size_t length, std::uint64_t seed);

  CharBatch next();                     // batch index(), then the index advances
  CharBatch at(std::size_t index) const;  // batch `index`, without moving
  void seek(std::size_t index) { index_ = index; }
  std::size_t index() const { return index_; }

 private:
  std::span<const std::int32_t> part_;
  std::size_t batch_, length_;
  std::uint64_t seed_;
  std::size_t index_ = 0;
};

// The evaluation windows: the part cut into floor((part.size() - 1) / length)
// non-overlapping windows, window w starting at w * length (so its targets
// are tokens [w * length + 1, (w + 1) * length], each token of the part after
// the first a target at most once; the at most `length` - 1 last tokens that
// make no whole window are not evaluated), taken `batch` windows at a time in
// order, the last batch holding what is left.
class CharEvalWindows {
 public:
  // Throws std::invalid_argument for batch or length 0 or a part of at most `length` tokens.
  CharEvalWindows(std::span<const std::int32_t> part, std::size_t batch, std::size_t length);

  std::size_t windows() const { return windows_; }
  std::size_t batches() const { return (windows_ + batch_ - 1) / batch_; }
  bool has_next() const { return index_ < batches(); }
  CharBatch next();                      // batch index(), then the index advances
  CharBatch at(std::size_t index) const;  // throws std::out_of_range for index >= batches()
  void reset() { index_ = 0; }

 private:
  std::span<const std::int32_t> part_;
  std::size_t batch_, length_, windows_;
  std::size_t index_ = 0;
};

}  // namespace mpverify::data
