// Chat templates: renders a model's `tokenizer.chat_template` (Jinja2, as
// Hugging Face transformers renders it: trim_blocks + lstrip_blocks,
// loop controls, raise_exception, strftime_now, tojson without ASCII
// escaping) for a list of messages. ChatML is the fallback for models
// without a template. Parsing happens once; render() is const and
// thread-safe. Every failure (syntax, runtime, raise_exception, limits) is
// an rf::Error (a jinja::TemplateError) with a clear message.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

#include "template/jinja_value.h"

namespace rf {

namespace jinja {
class Template;
}

using ChatTemplateLimits = jinja::Limits;

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  std::optional<std::string> date;  // YYYY-MM-DD for strftime_now; else the current date
  // More variables (tools, documents, ...). Ordered, so that tojson keeps the
  // caller's key order (a plain nlohmann::json converts implicitly).
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
  ChatTemplateLimits limits;        // steps, output bytes, nesting
};

class ChatTemplate {
 public:
  explicit ChatTemplate(std::string source);  // parses once; throws rf::Error on syntax errors
  // `messages`: a JSON array of {role, content, ...}, passed to the template
  // as given. nlohmann::json sorts object keys; pass an ordered_json to keep
  // the original key order (it shows in tojson output).
  std::string render(const nlohmann::json& messages, const ChatTemplateOptions& opts) const;
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& opts) const;
  const std::string& source() const { return source_; }

  static std::string chatml_source();  // the fallback template

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace rf
