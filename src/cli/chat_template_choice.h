// Which chat template a loaded model uses — decided here, where the model is
// loaded, and handed to the server as text: a template file named on the
// command line, else the model's `tokenizer.chat_template`, else ChatML.
#pragma once

#include <string>

namespace rf {
namespace gguf { class File; }
}

namespace rf::cli {

struct ChatTemplateChoice {
  std::string source;  // the Jinja text
  std::string origin;  // where it came from, for messages ("file x", "the model's ...", "ChatML ...")
};

// `model` may be null (no model given); `file` may be empty. Throws rf::Error
// when the file cannot be read.
ChatTemplateChoice choose_chat_template(const gguf::File* model, const std::string& file);

}  // namespace rf::cli
