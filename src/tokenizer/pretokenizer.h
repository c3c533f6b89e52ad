// Pre-tokenizers for byte-level BPE vocabularies: the regex sequence that
// splits text into words before merging, chosen by tokenizer.ggml.pre.
// Regexes run in sequence, each one splitting every segment the previous one
// produced (matches and the gaps between them both become segments), which is
// how llama.cpp applies them. Patterns are compiled once with PCRE2 (UTF, UCP,
// JIT when available); split() allocates its own match data, so one
// PreTokenizer can be used from many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rf {

enum class PreType {
  Default, Llama3, Qwen2, DeepseekLlm, DeepseekCoder, Deepseek3, Falcon, Starcoder, Gpt2,
  Bloom, Viking, Tekken, Gpt4o, Bailing, SeedCoder,
};

struct PreInfo {
  PreType type = PreType::Default;
  bool known = true;           // false: unrecognised name, Default used
  bool ignore_merges = false;  // whole word in the vocab wins over merges
  bool add_bos = false;        // default of add_bos_token for this family
  bool no_bos = false;         // the family has no BOS token by default
};

// Maps a tokenizer.ggml.pre name (with the aliases llama.cpp accepts).
PreInfo pre_info(std::string_view name);
const char* pre_type_name(PreType t);

class PreTokenizer {
 public:
  explicit PreTokenizer(PreType type);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits valid UTF-8 `text` into words (views into `text`, in order,
  // covering it exactly). Throws rf::Error if the regex engine fails.
  std::vector<std::string_view> split(std::string_view text) const;
  PreType type() const { return type_; }

 private:
  struct Compiled;
  PreType type_;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace rf
