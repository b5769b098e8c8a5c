// The transformer's task (--model transformer --data kjv): next-character prediction on the King James verses
// (data/char_text.h). A training batch is `batch` windows of `context` tokens drawn from the text's train part
// (data::CharBatches, from the run's seed); the model reads them as a (batch * context) x 1 tensor of token
// ids and predicts every next token, so the loss is the mean cross-entropy over batch * context rows of
// logits. The held-out evaluation reads the test part's non-overlapping windows in order, at most
// `test_windows` of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/char_text.h"
#include "nn/tensor.h"

namespace mpverify::training {

// A batch as the model takes it: x holds the token ids as floats, one per row; labels the next tokens.
struct TokenBatch {
  nn::Tensor x;
  std::vector<std::int32_t> labels;
  std::size_t size() const { return labels.size(); }
};

TokenBatch token_batch(const data::CharBatch& b);

class TextTask {
 public:
  // Throws std::invalid_argument when the text's parts are too short for one window.
  TextTask(data::CharText text, std::size_t batch, std::size_t context, std::size_t test_windows, std::uint64_t seed);

  TokenBatch next() { return token_batch(batches_->next()); }
  std::size_t context() const { return context_; }
  std::size_t train_tokens() const { return text_.train().size(); }
  // The held-out windows, `per_batch` at a time.
  data::CharEvalWindows test_windows(std::size_t per_batch) const;
  std::size_t test_window_count() const;

 private:
  data::CharText text_;
  std::size_t context_, test_windows_;
  std::unique_ptr<data::CharBatches> batches_;
};

}  // namespace mpverify::training
