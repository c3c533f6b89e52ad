// ChatPrompt: template rendering and tokenization for chat requests.
#include "server/chat_prompt.h"

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace rf::server {

ChatPrompt::ChatPrompt(const Tokenizer& tok, std::string source, std::string origin)
    : tok_(tok), origin_(std::move(origin)) {
  try {
    tmpl_ = std::make_unique<ChatTemplate>(std::move(source));
  } catch (const std::exception& e) {
    error_ = e.what();
    log_warn("chat template (", origin_, ") does not parse; chat requests will fail: ", error_);
  }
  if (tok.bos() >= 0) bos_text_ = tok.token_text(tok.bos());
  if (tok.eos() >= 0) eos_text_ = tok.token_text(tok.eos());
}

std::string ChatPrompt::render(const Json& messages, bool add_generation_prompt) const {
  if (!tmpl_) throw invalid_request("the chat template (" + origin_ + ") is invalid: " + error_, "messages",
                                    "chat_template_error");
  ChatTemplateOptions opts;
  opts.add_generation_prompt = add_generation_prompt;
  opts.bos_token = bos_text_;
  opts.eos_token = eos_text_;
  try {
    return tmpl_->render(messages, opts);
  } catch (const std::exception& e) {
    throw invalid_request(std::string("the chat template failed: ") + e.what(), "messages", "chat_template_error");
  }
}

std::vector<int32_t> ChatPrompt::tokenize(const Json& messages, bool add_generation_prompt) const {
  const std::string text = render(messages, add_generation_prompt);
  std::vector<int32_t> ids;
  try {
    ids = tok_.encode(text, /*add_special=*/false, /*parse_special=*/true);
  } catch (const Error& e) {
    throw invalid_request(e.what(), "messages");
  }
  if (tok_.add_bos() && tok_.bos() >= 0 && (ids.empty() || ids.front() != tok_.bos()))
    ids.insert(ids.begin(), tok_.bos());
  return ids;
}

}  // namespace rf::server
