#include "data/char_text.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "data/data_file_error.h"
#include "data/kjv_text.h"
#include "data/random.h"

namespace mpverify::data {

namespace {

constexpr std::array<std::int8_t, 256> make_token_table() {
  std::array<std::int8_t, 256> table{};
  table.fill(-1);
  for (std::size_t t = 0; t < kCharAlphabet.size(); ++t) {
    table[static_cast<unsigned char>(kCharAlphabet[t])] = static_cast<std::int8_t>(t);
  }
  return table;
}
constexpr std::array<std::int8_t, 256> kTokenOf = make_token_table();

void check_shape(const char* who, std::span<const std::int32_t> part, std::size_t batch, std::size_t length) {
  std::string problem;
  if (batch == 0) problem = "batch must be positive";
  if (length == 0) problem = "length must be positive";
  if (problem.empty() && part.size() <= length) {
    problem = "a part of ";
    problem += std::to_string(part.size());
    problem += " tokens holds no window of length ";
    problem += std::to_string(length);
    problem += " + 1";
  }
  if (!problem.empty()) throw std::invalid_argument(std::string(who) + ": " + problem);
}

// Copies the window of `length` that starts at `start` into row `row` of `out`.
void fill_row(CharBatch& out, std::span<const std::int32_t> part, std::size_t row, std::size_t start) {
  const std::size_t length = out.length;
  for (std::size_t t = 0; t < length; ++t) {
    out.inputs[row * length + t] = part[start + t];
    out.targets[row * length + t] = part[start + t + 1];
  }
  out.starts[row] = start;
}

CharBatch empty_batch(std::size_t rows, std::size_t length, std::size_t index) {
  CharBatch out;
  out.rows = rows;
  out.length = length;
  out.inputs.resize(rows * length);
  out.targets.resize(rows * length);
  out.starts.resize(rows);
  out.index = index;
  return out;
}

}  // namespace

std::int32_t char_token(char c) { return kTokenOf[static_cast<unsigned char>(c)]; }

char token_char(std::int32_t t) {
  if (t < 0 || t >= kCharVocab) {
    throw std::out_of_range("token_char: token " + std::to_string(t) + " is not in [0, 64)");
  }
  return kCharAlphabet[static_cast<std::size_t>(t)];
}

std::string detokenize(std::span<const std::int32_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (std::int32_t t : tokens) text += token_char(t);
  return text;
}

CharText char_text_from_string(std::string_view text, std::string_view source) {
  CharText out;
  out.tokens.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::int32_t t = char_token(text[i]);
    if (t < 0) {
      std::string message = "character text ";
      message += source;
      message += " at byte ";
      message += std::to_string(i);
      message += ": byte ";
      message += std::to_string(static_cast<unsigned char>(text[i]));
      message += " is not in the 64-character alphabet (newline, space, !'(),-.:;?, A-Z, a-z)";
      throw DataFileError(message);
    }
    out.tokens.push_back(t);
  }
  out.train_size = text.size() - text.size() / 10;
  return out;
}

CharText load_kjv_char_text(const std::filesystem::path& path) {
  return char_text_from_string(load_kjv_verses(path), "King James verses");
}

std::span<const std::int32_t> CharBatch::input(std::size_t row) const {
  return std::span(inputs).subspan(row * length, length);
}

std::span<const std::int32_t> CharBatch::target(std::size_t row) const {
  return std::span(targets).subspan(row * length, length);
}

CharBatches::CharBatches(std::span<const std::int32_t> part, std::size_t batch, std::size_t length,
                         std::uint64_t seed)
    : part_(part), batch_(batch), length_(length), seed_(seed) {
  check_shape("CharBatches", part, batch, length);
  if (static_cast<std::uint64_t>(part.size() - length) > (std::uint64_t{1} << 32)) {
    throw std::invalid_argument("CharBatches: more than 2^32 window starts");
  }
}

CharBatch CharBatches::next() { return at(index_++); }

CharBatch CharBatches::at(std::size_t index) const {
  if (static_cast<std::uint64_t>(index) >= (std::uint64_t{1} << 48)) {
    throw std::out_of_range("CharBatches: batch index " + std::to_string(index) + " is not below 2^48");
  }
  CharBatch out = empty_batch(batch_, length_, index);
  Draws draws(seed_, kCharBatchStreams + index);
  for (std::size_t row = 0; row < batch_; ++row) fill_row(out, part_, row, draws.below(part_.size() - length_));
  return out;
}

CharEvalWindows::CharEvalWindows(std::span<const std::int32_t> part, std::size_t batch, std::size_t length)
    : part_(part), batch_(batch), length_(length), windows_(0) {
  check_shape("CharEvalWindows", part, batch, length);
  windows_ = (part.size() - 1) / length;
}

CharBatch CharEvalWindows::next() { return at(index_++); }

CharBatch CharEvalWindows::at(std::size_t index) const {
  if (index >= batches()) {
    throw std::out_of_range("CharEvalWindows: batch " + std::to_string(index) + " >= " + std::to_string(batches()) +
                            " batches");
  }
  const std::size_t first = index * batch_;
  const std::size_t rows = std::min(batch_, windows_ - first);
  CharBatch out = empty_batch(rows, length_, index);
  for (std::size_t row = 0; row < rows; ++row) fill_row(out, part_, row, (first + row) * length_);
  return out;
}

}  // namespace mpverify::data
