// ChatTemplate: the chat-template API over the Jinja interpreter (see
// chat_template.h). Builds the render context the way transformers'
// apply_chat_template does: messages, add_generation_prompt, bos/eos
// tokens, tools and documents (none unless given), plus extra context.
#include "template/chat_template.h"

#include <new>

#include "template/jinja_interp.h"

namespace rf {

ChatTemplate::ChatTemplate(std::string source) : source_(std::move(source)) {
  try {
    template_ = std::make_shared<const jinja::Template>(source_);
  } catch (const rf::Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw jinja::TemplateError(jinja::TemplateError::Kind::Limit, "out of memory while parsing");
  } catch (const std::exception& e) {
    throw jinja::TemplateError(jinja::TemplateError::Kind::Syntax, e.what());
  }
}

namespace {

template <typename Json>
std::string render_with(const jinja::Template& tmpl, const Json& messages, const ChatTemplateOptions& opts) {
  if (!opts.extra_context.is_null() && !opts.extra_context.is_object())
    throw rf::Error("chat template extra context must be a JSON object");
  // The variables transformers' apply_chat_template passes; extra context may replace any.
  const nlohmann::ordered_json fixed = {{"add_generation_prompt", opts.add_generation_prompt},
                                        {"bos_token", opts.bos_token},
                                        {"eos_token", opts.eos_token},
                                        {"tools", nullptr},
                                        {"documents", nullptr}};
  std::vector<jinja::Variable> vars;
  vars.push_back({"messages", &messages});
  for (const auto& [key, value] : fixed.items()) vars.push_back({key, &value});
  if (opts.extra_context.is_object())
    for (const auto& [key, value] : opts.extra_context.items()) vars.push_back({key, &value});
  jinja::RenderOptions ro;
  ro.limits = opts.limits;
  ro.date = opts.date;
  try {
    return tmpl.render(vars, ro);
  } catch (const rf::Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw jinja::TemplateError(jinja::TemplateError::Kind::Limit, "out of memory while rendering");
  } catch (const std::exception& e) {
    throw jinja::TemplateError(jinja::TemplateError::Kind::Runtime, e.what());
  }
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::json& messages, const ChatTemplateOptions& opts) const {
  return render_with(*template_, messages, opts);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& opts) const {
  return render_with(*template_, messages, opts);
}

std::string ChatTemplate::chatml_source() {
  // ChatML; content may be a string or a list of parts (their text is joined).
  return "{% for message in messages %}"
         "{{ '<|im_start|>' + message['role'] + '\\n' }}"
         "{% if message['content'] is string %}{{ message['content'] }}"
         "{% elif message['content'] is iterable %}"
         "{% for part in message['content'] if part is mapping and part['type'] == 'text' %}{{ part['text'] }}{% endfor %}"
         "{% endif %}"
         "{{ '<|im_end|>\\n' }}"
         "{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}

}  // namespace rf
