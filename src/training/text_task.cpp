#include "training/text_task.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mpverify::training {

TokenBatch token_batch(const data::CharBatch& b) {
  TokenBatch t;
  t.x = nn::Tensor(static_cast<int>(b.rows * b.length), 1);
  std::transform(b.inputs.begin(), b.inputs.end(), t.x.values.begin(),
                 [](std::int32_t token) { return static_cast<float>(token); });
  t.labels = b.targets;
  return t;
}

TextTask::TextTask(data::CharText text, std::size_t batch, std::size_t context, std::size_t test_windows,
                   std::uint64_t seed)
    : text_(std::move(text)), context_(context), test_windows_(test_windows) {
  if (text_.train().size() <= context || text_.test().size() <= context)
    throw std::invalid_argument("the text's train part (" + std::to_string(text_.train().size()) + " tokens) and test "
                                "part (" + std::to_string(text_.test().size()) +
                                " tokens) must each be longer than the context (" + std::to_string(context) + ")");
  batches_ = std::make_unique<data::CharBatches>(text_.train(), batch, context, seed);
}

std::size_t TextTask::test_window_count() const {
  // CharEvalWindows' count over the whole test part, capped.
  return std::min(test_windows_, (text_.test().size() - 1) / context_);
}

data::CharEvalWindows TextTask::test_windows(std::size_t per_batch) const {
  // The first test_window_count() windows and the one token after them (the last window's last target).
  const std::size_t tokens = test_window_count() * context_ + 1;
  return data::CharEvalWindows(text_.test().first(tokens), per_batch, context_);
}

}  // namespace mpverify::training
