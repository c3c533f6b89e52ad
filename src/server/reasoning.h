// Reasoning in replies: the formats in which models write their thinking
// apart from their answer, which one a chat template's model uses, what the
// engine is told to count and budget (engine/request.h ThinkingControl), and
// the streaming split of a `<think>` reply into reasoning and content.
//  - Think: "<think>reasoning</think>answer" (Qwen3 / 3.5 / 3.6, DeepSeek-R1
//    and its distills, GLM-4.5). Some templates open the tag in the
//    generation prompt: the reply then starts inside the thinking
//    (starts_inside), and a reply that never closes it is all reasoning.
//  - Harmony (gpt-oss): channels; server/harmony.h parses it.
// The server's --reasoning-format (llama-server's values): none (nothing is
// parsed: thinking stays in the content), deepseek (the Think format
// whatever the template says), auto (the template's format, if any).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {

enum class ReasoningFormat { None, Think, Harmony };
enum class ReasoningMode { None, Deepseek, Auto };  // --reasoning-format

const char* reasoning_mode_name(ReasoningMode m);
std::optional<ReasoningMode> reasoning_mode_from_name(std::string_view s);

// The format the template `source` writes and expects: Harmony when it has
// harmony's channel marker, Think when it names a think tag, else None.
ReasoningFormat reasoning_format_of(std::string_view template_source);
// The format a request's reply is parsed with, under the server's mode.
ReasoningFormat effective_reasoning_format(ReasoningMode mode, ReasoningFormat template_format);

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

// Whether the rendered prompt `prompt` leaves the reply inside the thinking
// (Think: it ends with an open tag, whitespace aside; Harmony: never).
bool starts_inside_thinking(ReasoningFormat f, std::string_view prompt);

// What the engine tracks for format `f`: the section's tags in the
// generated text and, for a budget (tokens, -1 none), the tokens that end it
// (Think: "</think>\n\n"; Harmony: the analysis message's end and the final
// channel's header).
ThinkingControl thinking_control(ReasoningFormat f, bool starts_inside, int32_t budget, const Tokenizer& tok);

// The Think format's split of a streamed reply. Whitespace at either end of
// the reasoning and at the start of the answer is dropped; text that may be
// the start of a tag (or trailing whitespace of the reasoning) is held back
// until it is known. A reply that does not start with the open tag (and did
// not start inside) is all content.
class ThinkSplitter {
 public:
  explicit ThinkSplitter(bool starts_inside);
  // Appends what may go out now to `reasoning` and `content`.
  void push(std::string_view text, std::string& reasoning, std::string& content);
  // The reply ended: whatever was held back.
  void finish(std::string& reasoning, std::string& content);

 private:
  enum class State { Start, Opened, Inside, AfterClose, Content };
  State state_;
  std::string held_;
};

}  // namespace rf::server
