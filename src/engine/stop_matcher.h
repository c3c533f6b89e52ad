// StopMatcher: finds stop strings in streamed text across token boundaries.
// Text that could still be the start of a stop string is held back until it
// cannot be; a completed stop string ends the output just before it. Text
// pushed with can_stop = false (before min_tokens) is held back the same
// way but never stops: a stop string may start in it and complete later.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rf {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends generated text; returns the text that is now safe to emit. After
  // a stop string completes, stopped() is true and nothing more is emitted.
  // With can_stop false, stop strings completed within the text so far are
  // ignored (but a later push may complete one that started here).
  std::string push(std::string_view text, bool can_stop = true);
  // Releases held-back text (when generation ends for another reason).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  size_t ignored_ = 0;  // leading bytes of held_ pushed with can_stop false: stops ending there don't count
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace rf
