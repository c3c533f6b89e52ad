// Vocabulary loaded from GGUF tokenizer metadata (tokenizer.ggml.*): token
// texts, scores and types, BPE merge ranks, special token ids and the flags
// that steer encoding. Loading validates everything it reads (lengths agree,
// ids in range, types known) and raises rf::Error naming the key; defaults for
// absent keys follow llama.cpp. A Vocab is immutable after loading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rf {
namespace gguf { class File; }

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class VocabKind { Spm, Bpe };  // tokenizer.ggml.model "llama" / "gpt2"

// Hash for heterogeneous (string_view) lookups in unordered_map<std::string, ...>.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Vocab {
  static constexpr int32_t kNone = -1;

  VocabKind kind = VocabKind::Spm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("" when absent)

  std::vector<std::string> texts;  // [n_vocab]
  std::vector<float> scores;       // [n_vocab], 0 when absent
  std::vector<TokenType> types;    // [n_vocab], Normal when absent
  std::vector<uint8_t> lstrip, rstrip;  // [n_vocab] whitespace stripping around special tokens
  StringMap<int32_t> text_to_id;

  // BPE merges: key is left + ' ' + right (no symbol contains a raw space).
  StringMap<int32_t> merge_ranks;

  int32_t bos = kNone, eos = kNone, eot = kNone, eom = kNone, unk = kNone;
  int32_t sep = kNone, pad = kNone, mask = kNone;
  int32_t fim_pad = kNone, fim_rep = kNone, fim_sep = kNone;
  std::vector<int32_t> eog_ids;  // sorted, unique

  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: prefix a space to each text fragment

  static Vocab from_gguf(const gguf::File& f);

  int32_t n_tokens() const { return int32_t(texts.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < n_tokens(); }
  int32_t find(std::string_view text) const {
    auto it = text_to_id.find(text);
    return it == text_to_id.end() ? kNone : it->second;
  }
  // Rank of merging `left` and `right`, or -1 when no such merge exists.
  int32_t merge_rank(std::string_view left, std::string_view right, std::string& scratch) const;
  TokenType type(int32_t id) const { return types[size_t(id)]; }
  bool is_eog(int32_t id) const;
};

}  // namespace rf
