// ThinkingTracker: the thinking section's state machine (thinking.h).
#include "engine/thinking.h"

namespace rf {

ThinkingTracker::ThinkingTracker(const ThinkingControl& c)
    : c_(&c), state_(!c.enabled || c.close.empty() ? State::Off : c.starts_inside ? State::Inside : State::Before) {}

int32_t ThinkingTracker::forced_next() const {
  if (state_ != State::Inside || c_->budget < 0 || c_->forced_close.empty()) return -1;
  if (!forcing_ && tokens_ < c_->budget) return -1;
  return forced_ < c_->forced_close.size() ? c_->forced_close[forced_] : -1;
}

void ThinkingTracker::scan_inside(std::string_view text) {
  tail_ += text;
  if (tail_.find(c_->close) != std::string::npos) {
    state_ = State::After;
    tail_.clear();
    return;
  }
  const size_t keep = c_->close.size() - 1;
  if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
}

void ThinkingTracker::push(std::string_view text) {
  switch (state_) {
    case State::Off:
    case State::After: return;
    case State::Inside: {
      const bool forced_now = forced_next() >= 0;
      ++tokens_;
      if (forced_now) {  // every closing token goes out, whatever the text shows meanwhile
        forcing_ = true;
        if (++forced_ == c_->forced_close.size()) state_ = State::After;
        return;
      }
      scan_inside(text);
      return;
    }
    case State::Before: {
      head_ += text;
      ++head_tokens_;
      const size_t start = head_.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) return;  // only whitespace so far
      const std::string_view reply = std::string_view(head_).substr(start);
      const std::string_view open = c_->open;
      if (reply.size() < open.size()) {
        if (open.substr(0, reply.size()) != reply) state_ = State::After;
        return;
      }
      if (reply.substr(0, open.size()) != open) {
        state_ = State::After;
        return;
      }
      state_ = State::Inside;  // the tokens that led to the tag and opened it count in it
      tokens_ += head_tokens_;
      const std::string rest(reply.substr(open.size()));
      head_.clear();
      scan_inside(rest);
      return;
    }
  }
}

}  // namespace rf
