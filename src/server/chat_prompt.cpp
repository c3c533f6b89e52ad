// ChatPrompt: template rendering, and tokenization that keeps special-token
// text from the messages literal.
#include "server/chat_prompt.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace rf::server {
namespace {

// U+E000 and U+E001 (private use) open and close a marker: "\uE000<n>\uE001".
constexpr std::string_view kOpen = "\xEE\x80\x80";
constexpr std::string_view kClose = "\xEE\x80\x81";

}  // namespace

ChatPrompt::ChatPrompt(const Tokenizer& tok, std::string source, std::string origin, bool special_in_content)
    : tok_(tok), tool_format_(tool_call_format(source)), reasoning_format_(reasoning_format_of(source)),
      origin_(std::move(origin)), special_in_content_(special_in_content) {
  try {
    tmpl_ = std::make_unique<ChatTemplate>(std::move(source));
  } catch (const std::exception& e) {
    error_ = e.what();
    log_warn("chat template (", origin_, ") does not parse; chat requests will fail: ", error_);
  }
  if (tok.bos() >= 0) bos_text_ = tok.token_text(tok.bos());
  if (tok.eos() >= 0) eos_text_ = tok.token_text(tok.eos());
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string& text = tok.token_text(id);
    if (tok.is_control(id) && !text.empty()) specials_by_byte_[static_cast<unsigned char>(text[0])].push_back(text);
  }
  specials_by_byte_[static_cast<unsigned char>(kOpen[0])].emplace_back(kOpen);  // a forged marker is text too
  for (auto& list : specials_by_byte_)
    std::stable_sort(list.begin(), list.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string ChatPrompt::render(const Json& messages, bool add_generation_prompt, const Json& tools,
                               const Json& kwargs) const {
  if (!tmpl_) throw invalid_request("the chat template (" + origin_ + ") is invalid: " + error_, "messages",
                                    "chat_template_error");
  ChatTemplateOptions opts;
  opts.add_generation_prompt = add_generation_prompt;
  opts.bos_token = bos_text_;
  opts.eos_token = eos_text_;
  if (kwargs.is_object())
    for (const auto& [key, value] : kwargs.items()) opts.extra_context[key] = value;
  if (!tools.is_null()) opts.extra_context["tools"] = tools;
  try {
    return tmpl_->render(messages, opts);
  } catch (const std::exception& e) {
    throw invalid_request(std::string("the chat template failed: ") + e.what(), "messages", "chat_template_error");
  }
}

void ChatPrompt::mark_string(std::string& s, std::vector<std::string>& literals) const {
  std::string out;
  size_t copied = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (const std::string& t : specials_by_byte_[static_cast<unsigned char>(s[i])]) {
      if (s.compare(i, t.size(), t) != 0) continue;
      out.append(s, copied, i - copied);
      out += kOpen;
      out += std::to_string(literals.size());
      out += kClose;
      literals.push_back(t);
      i += t.size() - 1;
      copied = i + 1;
      break;
    }
  }
  if (copied == 0) return;  // nothing special in it
  out.append(s, copied, std::string::npos);
  s = std::move(out);
}

void ChatPrompt::mark_specials(Json& v, std::vector<std::string>& literals) const {
  if (v.is_string()) mark_string(v.get_ref<std::string&>(), literals);
  else if (v.is_array() || v.is_object())
    for (auto& item : v) mark_specials(item, literals);
}

std::vector<int32_t> ChatPrompt::encode_marked(const std::string& text, const std::vector<std::string>& literals) const {
  // The rendered text with each intact marker replaced by its literal, whose
  // bytes the tokenizer then keeps as text.
  std::string plain;
  std::vector<TextRange> ranges;
  plain.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kOpen, pos);
    const size_t close = open == std::string::npos ? open : text.find(kClose, open);
    size_t n = literals.size();
    if (close != std::string::npos) {
      const std::string digits = text.substr(open + kOpen.size(), close - open - kOpen.size());
      const bool numeric = !digits.empty() && digits.size() < 10 &&
                           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (numeric) n = size_t(std::stoul(digits));
    }
    if (open == std::string::npos || n >= literals.size()) {  // no (intact) marker left
      plain.append(text, pos, std::string::npos);
      break;
    }
    plain.append(text, pos, open - pos);
    ranges.push_back({plain.size(), literals[n].size()});
    plain += literals[n];
    pos = close + kClose.size();
  }
  return tok_.encode(plain, /*add_special=*/false, /*parse_special=*/true, ranges);
}

std::vector<int32_t> ChatPrompt::tokenize(const Json& messages, bool add_generation_prompt, const Json& tools,
                                          const Json& kwargs, std::string* rendered) const {
  std::vector<int32_t> ids;
  try {
    if (special_in_content_) {
      const std::string text = render(messages, add_generation_prompt, tools, kwargs);
      ids = tok_.encode(text, /*add_special=*/false, /*parse_special=*/true);
      if (rendered) *rendered = text;
    } else {
      Json marked = messages, marked_tools = tools, marked_kwargs = kwargs;
      std::vector<std::string> literals;
      mark_specials(marked, literals);
      mark_specials(marked_tools, literals);
      mark_specials(marked_kwargs, literals);
      const std::string text = render(marked, add_generation_prompt, marked_tools, marked_kwargs);
      ids = literals.empty() ? tok_.encode(text, false, true) : encode_marked(text, literals);
      if (rendered) *rendered = text;
    }
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw invalid_request(e.what(), "messages");
  }
  if (tok_.add_bos() && tok_.bos() >= 0 && (ids.empty() || ids.front() != tok_.bos()))
    ids.insert(ids.begin(), tok_.bos());
  return ids;
}

}  // namespace rf::server
