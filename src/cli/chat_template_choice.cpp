// The chat template choice: file, model, ChatML.
#include "cli/chat_template_choice.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "gguf/reader.h"
#include "template/chat_template.h"

namespace rf::cli {

ChatTemplateChoice choose_chat_template(const gguf::File* model, const std::string& file) {
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail("cannot read the chat template file ", file);
    std::ostringstream ss;
    ss << in.rdbuf();
    return {ss.str(), "file " + file};
  }
  if (model) {
    std::string source = model->get_string("tokenizer.chat_template");
    if (!source.empty()) return {std::move(source), "the model's tokenizer.chat_template"};
  }
  return {ChatTemplate::chatml_source(), model ? "ChatML (the model has no chat template)" : "ChatML"};
}

}  // namespace rf::cli
