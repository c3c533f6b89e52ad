// `rocmforge template`: renders a chat template for a messages file and
// prints the prompt exactly (no newline added). The template comes from a
// model's GGUF metadata (`tokenizer.chat_template`, else ChatML) or a file;
// BOS/EOS default to the model's token texts.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/chat_template_choice.h"
#include "cli/commands.h"
#include "core/error.h"
#include "gguf/reader.h"
#include "template/chat_template.h"

namespace rf::cli {
namespace {

struct TemplateArgs {
  std::string model, template_file, messages_file, context_file, date;
  std::optional<std::string> bos, eos;
  bool no_generation_prompt = false;
};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", what, " '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
  try {
    return nlohmann::ordered_json::parse(read_file(path, what));
  } catch (const nlohmann::ordered_json::exception& e) {
    fail("bad JSON in ", what, " '", path, "': ", e.what());
  }
}

// The text of token `key` (a token id) in the model's vocabulary, if present.
std::optional<std::string> token_text(const gguf::File& f, const std::string& key) {
  const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens");
  const gguf::Value* id = f.find(key);
  if (!tokens || !id || tokens->elem_type != gguf::ValueType::STRING || !id->is_integer()) return std::nullopt;
  const int64_t i = id->as_int(key);
  if (i < 0 || static_cast<uint64_t>(i) >= tokens->strings.size()) return std::nullopt;
  return tokens->strings[static_cast<size_t>(i)];
}

void run_template(const TemplateArgs& args) {
  std::string source;
  ChatTemplateOptions opts;
  std::unique_ptr<gguf::File> f;
  if (!args.model.empty()) {
    f = gguf::File::open(args.model);
    opts.bos_token = token_text(*f, "tokenizer.ggml.bos_token_id").value_or("");
    opts.eos_token = token_text(*f, "tokenizer.ggml.eos_token_id").value_or("");
  }
  // A model's own template wins over a file here (-m names the model to mimic).
  source = choose_chat_template(f.get(), f ? "" : args.template_file).source;
  if (args.bos) opts.bos_token = *args.bos;
  if (args.eos) opts.eos_token = *args.eos;
  if (!args.date.empty()) opts.date = args.date;
  opts.add_generation_prompt = !args.no_generation_prompt;

  nlohmann::ordered_json messages = read_json(args.messages_file, "messages file");
  if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
  if (!messages.is_array()) fail("the messages file must hold a JSON array of messages (or {\"messages\": [...]})");
  if (!args.context_file.empty()) {
    opts.extra_context = read_json(args.context_file, "context file");
    if (!opts.extra_context.is_object()) fail("the context file must hold a JSON object");
  }

  const ChatTemplate tmpl(std::move(source));
  const std::string prompt = tmpl.render(messages, opts);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

void add_template_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("template", "Render a chat template for a list of messages");
  auto args = std::make_shared<TemplateArgs>();
  auto* model = cmd->add_option("-m,--model", args->model, "GGUF model whose tokenizer.chat_template to use");
  auto* file = cmd->add_option("--chat-template-file", args->template_file, "Jinja chat template file");
  model->excludes(file);
  cmd->add_option("--messages", args->messages_file, "JSON file: an array of messages, or {\"messages\": [...]}")
      ->required();
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt, "Do not add the assistant generation prompt");
  cmd->add_option_function<std::string>("--bos-token", [args](const std::string& s) { args->bos = s; },
                                        "BOS token text (default: the model's)");
  cmd->add_option_function<std::string>("--eos-token", [args](const std::string& s) { args->eos = s; },
                                        "EOS token text (default: the model's)");
  cmd->add_option("--date", args->date, "Date seen by strftime_now(), YYYY-MM-DD (default: today)");
  cmd->add_option("--context", args->context_file, "JSON object of extra template variables (tools, ...)");
  cmd->callback([args] { run_template(*args); });
}

RF_REGISTER_COMMAND(60, add_template_command);

}  // namespace
}  // namespace rf::cli
