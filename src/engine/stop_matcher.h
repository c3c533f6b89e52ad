// StopMatcher: finds stop strings in streamed text across token boundaries.
// Text that could still be the start of a stop string is held back until it
// cannot be; a completed stop string ends the output just before it.
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
  std::string push(std::string_view text);
  // Releases held-back text (when generation ends for another reason).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace rf
