// HarmonyParser: the message state machine over the reply's text.
#include "server/harmony.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace rf::server {
namespace {

constexpr std::string_view kStart = "<|start|>", kEnd = "<|end|>", kMessage = "<|message|>", kChannel = "<|channel|>",
                           kCall = "<|call|>", kReturn = "<|return|>";
constexpr std::string_view kFunctions = "functions.";

// The earliest body-ending marker in `s`: its position and length (npos if none).
std::pair<size_t, size_t> find_body_end(std::string_view s) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view m : {kEnd, kCall, kReturn, kStart}) {
    const size_t at = s.find(m);
    if (at < best.first) best = {at, m == kStart ? 0 : m.size()};  // a new message's <|start|> stays for its header
  }
  return best;
}

// How many trailing bytes of `s` may be the start of a marker ("<|...").
size_t marker_prefix(std::string_view s) {
  const size_t lt = s.rfind('<');
  if (lt == std::string_view::npos) return 0;
  const std::string_view tail = s.substr(lt);
  for (std::string_view m : {kEnd, kCall, kReturn, kStart})
    if (tail.size() < m.size() && m.substr(0, tail.size()) == tail) return tail.size();
  return 0;
}

std::string_view trim_space(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

// The word after `key` in a header ("<|channel|>analysis" -> "analysis"):
// up to whitespace or the next marker.
std::string header_word(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  std::string_view rest = header.substr(at + key.size());
  size_t end = 0;
  while (end < rest.size() && rest[end] != ' ' && rest[end] != '\n' && rest[end] != '<') ++end;
  return std::string(rest.substr(0, end));
}

}  // namespace

HarmonyParser::HarmonyParser(std::vector<std::string> tool_names, bool parse_tools)
    : tool_names_(std::move(tool_names)), parse_tools_(parse_tools) {}

void HarmonyParser::start_body(std::string_view header) {
  const std::string channel = header_word(header, kChannel);
  const std::string recipient = header_word(header, "to=");
  call_name_.clear();
  call_args_.clear();
  if (!recipient.empty() && recipient.compare(0, kFunctions.size(), kFunctions) == 0) {
    kind_ = Kind::Call;
    call_name_ = recipient.substr(kFunctions.size());
  } else {
    kind_ = channel == "analysis" ? Kind::Reasoning : Kind::Content;
  }
}

void HarmonyParser::emit(std::string_view text, std::string& reasoning, std::string& content) {
  if (kind_ == Kind::Call) call_args_ += text;
  else if (kind_ == Kind::Reasoning) reasoning += text;
  else content += text;
}

void HarmonyParser::end_body(std::string& content, std::vector<ToolCall>& calls) {
  if (kind_ != Kind::Call) return;
  const bool offered = std::find(tool_names_.begin(), tool_names_.end(), call_name_) != tool_names_.end();
  const auto args = nlohmann::ordered_json::parse(trim_space(call_args_), nullptr, /*allow_exceptions=*/false);
  if (parse_tools_ && offered && args.is_object()) calls.push_back(ToolCall{"", call_name_, args.dump()});
  else content += call_args_;
  call_args_.clear();
}

void HarmonyParser::push(std::string_view text, std::string& reasoning, std::string& content,
                         std::vector<ToolCall>& calls) {
  held_ += text;
  for (;;) {
    if (state_ == State::Header) {
      const size_t msg = held_.find(kMessage);
      if (msg == std::string::npos) return;
      start_body(std::string_view(held_).substr(0, msg));
      held_.erase(0, msg + kMessage.size());
      state_ = State::Body;
      continue;
    }
    const auto [at, len] = find_body_end(held_);
    if (at != std::string::npos) {
      emit(std::string_view(held_).substr(0, at), reasoning, content);
      held_.erase(0, at + len);
      end_body(content, calls);
      state_ = State::Header;
      continue;
    }
    const size_t hold = marker_prefix(held_);
    emit(std::string_view(held_).substr(0, held_.size() - hold), reasoning, content);
    held_.erase(0, held_.size() - hold);
    return;
  }
}

void HarmonyParser::finish(std::string& reasoning, std::string& content, std::vector<ToolCall>& calls) {
  if (state_ == State::Body) {
    emit(held_, reasoning, content);
    end_body(content, calls);
  } else if (held_.find("<|") == std::string::npos) {  // text that never became a message header
    content += held_;
  }
  held_.clear();
  state_ = State::Header;
}

}  // namespace rf::server
