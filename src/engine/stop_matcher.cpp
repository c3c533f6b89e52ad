// StopMatcher implementation.
#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace rf {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text, bool can_stop) {
  if (stopped_) return {};
  held_.append(text);
  if (stops_.empty()) return std::exchange(held_, std::string());
  if (!can_stop) ignored_ = held_.size();
  // Earliest stop string that ends in text allowed to stop.
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t from = ignored_ >= s.size() ? ignored_ - s.size() + 1 : 0;
    const size_t at = held_.find(s, from);
    if (at != std::string::npos && at < best) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  }
  const size_t n_out = held_.size() - keep;
  std::string out = held_.substr(0, n_out);
  held_.erase(0, n_out);
  ignored_ = ignored_ > n_out ? ignored_ - n_out : 0;
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  ignored_ = 0;
  return std::exchange(held_, std::string());
}

}  // namespace rf
