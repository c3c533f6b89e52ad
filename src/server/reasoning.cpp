// Reasoning formats, the engine's thinking control, and the Think split.
#include "server/reasoning.h"

namespace rf::server {
namespace {

constexpr std::string_view kHarmonyChannel = "<|channel|>";
constexpr std::string_view kWhitespace = " \t\r\n";

std::string_view ltrim(std::string_view s) {
  const size_t i = s.find_first_not_of(kWhitespace);
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

size_t trailing_whitespace(std::string_view text) {
  const size_t i = text.find_last_not_of(kWhitespace);
  return i == std::string_view::npos ? text.size() : text.size() - i - 1;
}

}  // namespace

const char* reasoning_mode_name(ReasoningMode m) {
  switch (m) {
    case ReasoningMode::None: return "none";
    case ReasoningMode::Deepseek: return "deepseek";
    default: return "auto";
  }
}

std::optional<ReasoningMode> reasoning_mode_from_name(std::string_view s) {
  if (s == "none") return ReasoningMode::None;
  if (s == "deepseek") return ReasoningMode::Deepseek;
  if (s == "auto") return ReasoningMode::Auto;
  return std::nullopt;
}

ReasoningFormat reasoning_format_of(std::string_view source) {
  if (source.find(kHarmonyChannel) != std::string_view::npos) return ReasoningFormat::Harmony;
  if (source.find(kThinkOpen) != std::string_view::npos || source.find(kThinkClose) != std::string_view::npos)
    return ReasoningFormat::Think;
  return ReasoningFormat::None;
}

ReasoningFormat effective_reasoning_format(ReasoningMode mode, ReasoningFormat template_format) {
  switch (mode) {
    case ReasoningMode::None: return ReasoningFormat::None;
    case ReasoningMode::Deepseek: return ReasoningFormat::Think;
    default: return template_format;
  }
}

bool starts_inside_thinking(ReasoningFormat f, std::string_view prompt) {
  if (f != ReasoningFormat::Think) return false;
  const size_t end = prompt.find_last_not_of(kWhitespace);
  if (end == std::string_view::npos) return false;
  const std::string_view body = prompt.substr(0, end + 1);
  return body.size() >= kThinkOpen.size() && body.substr(body.size() - kThinkOpen.size()) == kThinkOpen;
}

ThinkingControl thinking_control(ReasoningFormat f, bool starts_inside, int32_t budget, const Tokenizer& tok) {
  ThinkingControl c;
  if (f == ReasoningFormat::None) return c;
  c.enabled = true;
  c.starts_inside = starts_inside;
  c.budget = budget;
  std::string forced;
  if (f == ReasoningFormat::Think) {
    c.open = kThinkOpen;
    c.close = kThinkClose;
    forced = std::string(kThinkClose) + "\n\n";
  } else {
    c.open = "<|channel|>analysis<|message|>";
    c.close = "<|end|>";
    forced = "<|end|><|start|>assistant<|channel|>final<|message|>";
  }
  if (budget >= 0) {
    c.forced_close = tok.encode(forced, /*add_special=*/false, /*parse_special=*/true);
    // The text continues the reply: a SentencePiece vocabulary's space
    // prefix is not part of it, where it came as tokens of its own.
    std::vector<std::string> pieces;
    for (int32_t t : c.forced_close) pieces.push_back(tok.token_to_piece(t, /*render_special=*/true));
    size_t extra = 0, lead = 0;
    for (const std::string& p : pieces) extra += p.size();
    extra -= std::min(extra, forced.size());
    while (lead < pieces.size() && extra >= pieces[lead].size() && extra > 0) extra -= pieces[lead++].size();
    if (extra == 0 && lead < c.forced_close.size()) c.forced_close.erase(c.forced_close.begin(), c.forced_close.begin() + long(lead));
  }
  return c;
}

ThinkSplitter::ThinkSplitter(bool starts_inside) : state_(starts_inside ? State::Opened : State::Start) {}

void ThinkSplitter::push(std::string_view text, std::string& reasoning, std::string& content) {
  held_ += text;
  for (;;) {
    switch (state_) {
      case State::Start: {  // the reply may open a section: "<think>"
        const std::string_view s = ltrim(held_);
        if (s.size() < kThinkOpen.size() && kThinkOpen.substr(0, s.size()) == s) return;  // (also: only whitespace)
        if (s.substr(0, kThinkOpen.size()) == kThinkOpen) {
          held_ = std::string(s.substr(kThinkOpen.size()));
          state_ = State::Opened;
          continue;
        }
        state_ = State::Content;
        continue;
      }
      case State::Opened: {  // inside, nothing out yet: leading whitespace (and a repeated open tag) dropped
        const std::string_view s = ltrim(held_);
        if (s.empty()) return;
        if (s.size() < kThinkOpen.size() && kThinkOpen.substr(0, s.size()) == s) return;
        if (s.substr(0, kThinkOpen.size()) == kThinkOpen) {  // the reply repeats the prompt's open tag
          held_ = std::string(s.substr(kThinkOpen.size()));
          continue;
        }
        held_ = std::string(s);
        state_ = State::Inside;
        continue;
      }
      case State::Inside: {
        const size_t close = held_.find(kThinkClose);
        if (close != std::string::npos) {
          const std::string_view r = std::string_view(held_).substr(0, close);
          reasoning.append(r.substr(0, r.size() - trailing_whitespace(r)));
          held_.erase(0, close + kThinkClose.size());
          state_ = State::AfterClose;
          continue;
        }
        // A possible start of the tag, and the whitespace before it (it may end the reasoning).
        const size_t tag = partial_tag(held_, kThinkClose);
        const size_t hold = tag + trailing_whitespace(std::string_view(held_).substr(0, held_.size() - tag));
        reasoning.append(held_, 0, held_.size() - hold);
        held_.erase(0, held_.size() - hold);
        return;
      }
      case State::AfterClose: {
        const std::string_view s = ltrim(held_);
        if (s.empty()) {
          held_.clear();
          return;
        }
        held_ = std::string(s);
        state_ = State::Content;
        continue;
      }
      case State::Content:
        content += held_;
        held_.clear();
        return;
    }
  }
}

void ThinkSplitter::finish(std::string& reasoning, std::string& content) {
  switch (state_) {
    case State::Start: content += held_; break;  // (a reply that is a piece of the tag, or whitespace)
    case State::Inside: reasoning.append(held_, 0, held_.size() - trailing_whitespace(held_)); break;
    case State::Content: content += held_; break;
    default: break;
  }
  held_.clear();
}

}  // namespace rf::server
