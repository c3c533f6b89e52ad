// `rocmforge tokenize -m MODEL [--no-bos] [--parse-special] [--ids] TEXT|-`:
// tokenizes TEXT (or standard input, for "-") with the model's vocabulary.
// With --ids prints the ids on one line, space-separated; otherwise one line
// per token, `id 'piece'`, with control characters and bytes that are not
// valid UTF-8 escaped so each token stays on its line.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/utf8.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace rf::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool parse_special = false;
  bool ids_only = false;
};

// Printable form of a piece: valid UTF-8 as is, \n \t \r \\ \' and other
// control or invalid bytes as escapes.
std::string printable(const std::string& piece) {
  std::string out;
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t start = pos;
    uint32_t cp = 0;
    if (!utf8::decode(piece, pos, cp) || cp < 0x20 || cp == 0x7F) {
      const auto b = uint8_t(piece[start]);
      pos = start + 1;
      if (b == '\n') out += "\\n";
      else if (b == '\t') out += "\\t";
      else if (b == '\r') out += "\\r";
      else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", unsigned(b));
        out += buf;
      }
      continue;
    }
    if (cp == '\\') out += "\\\\";
    else if (cp == '\'') out += "\\'";
    else out.append(piece, start, pos - start);
  }
  return out;
}

void run_tokenize(const TokenizeOptions& o) {
  std::string text = o.text;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  auto file = gguf::File::open(o.model);
  auto tok = Tokenizer::from_gguf(*file);
  const auto ids = tok->encode(text, /*add_special=*/!o.no_bos, o.parse_special);
  if (o.ids_only) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
    return;
  }
  for (int32_t id : ids)
    std::printf("%d '%s'\n", id, printable(tok->token_to_piece(id, /*render_special=*/true)).c_str());
}

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Tokenize text with a model's vocabulary");
  auto o = std::make_shared<TokenizeOptions>();
  cmd->add_option("-m,--model", o->model, "GGUF file (weights are not needed)")->required();
  cmd->add_option("text", o->text, "Text to tokenize, or - to read standard input")->required();
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS/EOS (add-special off)");
  cmd->add_flag("--parse-special", o->parse_special, "Turn special-token texts into their ids");
  cmd->add_flag("--ids", o->ids_only, "Print only the ids, space-separated on one line");
  cmd->callback([o] { run_tokenize(*o); });
}

RF_REGISTER_COMMAND(30, add_tokenize_command);

}  // namespace
}  // namespace rf::cli
