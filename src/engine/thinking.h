// ThinkingTracker: where a streamed reply stands in its thinking section
// (Request::thinking) — before it (the reply may still open one), inside,
// or past it — from the generated text token by token; how many tokens the
// section took; and, once a budget is spent, which token the next step must
// produce to close it. The section opens only at the start of the reply
// (after whitespace) or in the prompt (starts_inside); it closes at the
// first `close` in its text, or once the forced tokens are all produced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/request.h"

namespace rf {

class ThinkingTracker {
 public:
  explicit ThinkingTracker(const ThinkingControl& c);

  // One generated token's text (before stop strings are cut out).
  void push(std::string_view text);
  bool inside() const { return state_ == State::Inside; }
  // Tokens generated inside the section: those of its tags included, and
  // any whitespace before the opening tag.
  int32_t tokens() const { return tokens_; }
  // The token the next step must produce, or -1 for a free choice.
  int32_t forced_next() const;

 private:
  enum class State { Off, Before, Inside, After };
  void scan_inside(std::string_view text);

  const ThinkingControl* c_;
  State state_;
  std::string head_;    // Before: the reply so far
  int32_t head_tokens_ = 0;
  std::string tail_;    // Inside: the end of the section's text, where `close` may be starting
  int32_t tokens_ = 0;
  size_t forced_ = 0;   // forced tokens produced so far
  bool forcing_ = false;
};

}  // namespace rf
