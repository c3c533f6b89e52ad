// Loading and validating a Vocab from GGUF metadata, plus the special-token
// bookkeeping llama.cpp derives from token texts (EOT/EOM/FIM detection, the
// end-of-generation set, phi-3's stripping flags).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/log.h"
#include "gguf/reader.h"
#include "tokenizer/pretokenizer.h"

namespace rf {
namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";

// Reads a token id key: absent -> `fallback` (dropped when out of range, as
// llama.cpp does for its defaults); 0xFFFFFFFF or -1 -> none; any other value
// outside the vocabulary is an error naming the key.
int32_t read_token_id(const gguf::File& f, const std::string& key, int32_t fallback, int32_t n_tokens) {
  const gguf::Value* v = f.find(key);
  if (!v) return fallback >= 0 && fallback < n_tokens ? fallback : Vocab::kNone;
  RF_CHECK(v->is_integer(), key, ": expected an integer token id, found ", gguf::value_type_name(v->type));
  if (const auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u == 0xFFFFFFFFull || *u == ~0ull) return Vocab::kNone;
    RF_CHECK(*u < uint64_t(n_tokens), key, ": token id ", *u, " is outside the vocabulary of ", n_tokens);
    return int32_t(*u);
  }
  const int64_t i = std::get<int64_t>(v->v);
  if (i == -1) return Vocab::kNone;
  RF_CHECK(i >= 0 && i < n_tokens, key, ": token id ", i, " is outside the vocabulary of ", n_tokens);
  return int32_t(i);
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// Token texts llama.cpp treats as end-of-turn / end-of-generation markers.
const std::initializer_list<const char*> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",  // DeepSeek's
    "<end_of_utterance>"};
const std::initializer_list<const char*> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>"};

void load_tokens(const gguf::File& f, Vocab& v) {
  const gguf::Array* toks = f.get_array(kTokens);
  RF_CHECK(toks, "model metadata is missing '", kTokens, "'");
  v.texts = toks->to_strings(kTokens);
  RF_CHECK(!v.texts.empty(), kTokens, ": the vocabulary is empty");
  RF_CHECK(v.texts.size() < size_t(INT32_MAX), kTokens, ": too many tokens (", v.texts.size(), ")");
  const size_t n = v.texts.size();

  v.scores.assign(n, 0.0f);
  if (const gguf::Array* a = f.get_array(kScores)) {
    v.scores = a->to_f32(kScores);
    RF_CHECK(v.scores.size() == n, kScores, ": has ", v.scores.size(), " entries for ", n, " tokens");
  }
  v.types.assign(n, TokenType::Normal);
  if (const gguf::Array* a = f.get_array(kTypes)) {
    const std::vector<int64_t> t = a->to_i64(kTypes);
    RF_CHECK(t.size() == n, kTypes, ": has ", t.size(), " entries for ", n, " tokens");
    for (size_t i = 0; i < n; ++i) {
      RF_CHECK(t[i] >= 0 && t[i] <= 6, kTypes, "[", i, "]: unknown token type ", t[i]);
      v.types[i] = TokenType(t[i]);
    }
  }
  v.lstrip.assign(n, 0);
  v.rstrip.assign(n, 0);

  v.text_to_id.reserve(n);
  size_t duplicates = 0, empty = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v.texts[i].empty()) {  // matches nothing; decodes to nothing
      ++empty;
      continue;
    }
    auto [it, inserted] = v.text_to_id.try_emplace(v.texts[i], int32_t(i));
    if (!inserted) {  // the later id wins, as in llama.cpp
      it->second = int32_t(i);
      ++duplicates;
    }
  }
  if (duplicates) log_warn("tokenizer: ", duplicates, " duplicate token texts; the highest id is used");
  if (empty) log_warn("tokenizer: ", empty, " empty token texts");
}

void load_merges(const gguf::File& f, Vocab& v) {
  const gguf::Array* a = f.get_array(kMerges);
  RF_CHECK(a, "model metadata is missing '", kMerges, "' (required by the gpt2 tokenizer)");
  const auto& merges = a->to_strings(kMerges);
  RF_CHECK(merges.size() < size_t(INT32_MAX), kMerges, ": too many merges");
  v.merge_ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.find(' ', 1);
    RF_CHECK(sp != std::string::npos && sp + 1 < m.size(), kMerges, "[", i, "]: '", m,
             "' is not two symbols separated by a space");
    v.merge_ranks.try_emplace(m, int32_t(i));  // the first (lowest) rank wins
  }
}

void mark_control(Vocab& v, int32_t id) {
  if (v.types[size_t(id)] != TokenType::Control) {
    log_debug("tokenizer: token ", id, " '", v.texts[size_t(id)], "' treated as a control token");
    v.types[size_t(id)] = TokenType::Control;
  }
}

// EOT/EOM/FIM detection by text where the keys are absent, and the
// end-of-generation set (eos, eot, eom, FIM pad/repo/sep and marker texts).
void derive_special(Vocab& v) {
  const int32_t n = v.n_tokens();
  for (int32_t id = 0; id < n; ++id) {
    const std::string& t = v.texts[size_t(id)];
    if (v.eot == Vocab::kNone && is_one_of(t, kEotTexts)) v.eot = id, mark_control(v, id);
    if (v.eom == Vocab::kNone && t == "<|eom_id|>") v.eom = id, mark_control(v, id);
    if (v.fim_pad == Vocab::kNone && is_one_of(t, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}))
      v.fim_pad = id, mark_control(v, id);
    if (v.fim_rep == Vocab::kNone &&
        is_one_of(t, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}))
      v.fim_rep = id, mark_control(v, id);
    if (v.fim_sep == Vocab::kNone && t == "<|file_sep|>") v.fim_sep = id, mark_control(v, id);
  }
  std::vector<int32_t> eog;
  for (int32_t id : {v.eos, v.eot, v.eom, v.fim_pad, v.fim_rep, v.fim_sep})
    if (id != Vocab::kNone) eog.push_back(id);
  int32_t end_id = Vocab::kNone;
  bool has_return = false, has_call = false;
  for (int32_t id = 0; id < n; ++id) {
    const std::string& t = v.texts[size_t(id)];
    if (!is_one_of(t, kEogTexts)) continue;
    eog.push_back(id);
    mark_control(v, id);
    if (t == "<|return|>") has_return = true;
    if (t == "<|call|>") has_call = true;
    if (t == "<|end|>") end_id = id;
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // gpt-oss (harmony): <|end|> ends a message, not the generation.
  if (has_return && has_call && end_id != Vocab::kNone && end_id != v.eos) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    v.types[size_t(end_id)] = TokenType::UserDefined;
  }
  v.eog_ids = std::move(eog);
}

// Per-model stripping of whitespace around special tokens (llama.cpp's
// attribute overrides, which the GGUF does not carry).
void apply_strip_overrides(const gguf::File& f, Vocab& v) {
  std::string name = f.get_string("general.name", "");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id = 0; id < v.n_tokens(); ++id) {
      const TokenType t = v.type(id);
      if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) v.rstrip[size_t(id)] = 1;
    }
    for (const char* t : {"</s>"})
      if (int32_t id = v.find(t); id != Vocab::kNone) v.rstrip[size_t(id)] = 1;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"})
      if (int32_t id = v.find(t); id != Vocab::kNone) v.rstrip[size_t(id)] = 0;
  }
  if (is_one_of(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}))
    if (int32_t id = v.find("<mask>"); id != Vocab::kNone) v.lstrip[size_t(id)] = 1;
}

}  // namespace

Vocab Vocab::from_gguf(const gguf::File& f) {
  Vocab v;
  const gguf::Value* model = f.find(kModel);
  RF_CHECK(model, "model metadata is missing '", kModel, "'");
  v.model = model->as_string(kModel);
  if (v.model == "llama") v.kind = VocabKind::Spm;
  else if (v.model == "gpt2") v.kind = VocabKind::Bpe;
  else fail(kModel, ": unsupported tokenizer model '", v.model, "' (supported: llama, gpt2)");
  v.pre = f.get_string("tokenizer.ggml.pre", "");

  load_tokens(f, v);
  const int32_t n = v.n_tokens();

  // Defaults by model family, then the keys.
  int32_t def_bos = 1, def_eos = 2, def_unk = 0;
  if (v.kind == VocabKind::Spm) {
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    load_merges(f, v);
    const PreInfo pi = pre_info(v.pre);
    if (!pi.known) log_warn("tokenizer: unknown pre-tokenizer '", v.pre, "', using 'default'");
    if (v.pre.empty()) log_warn("tokenizer: no tokenizer.ggml.pre; using 'default' (output may differ)");
    v.add_bos = pi.add_bos;
    def_bos = pi.no_bos ? kNone : 11;  // llama.cpp's (odd) BPE defaults
    def_eos = 11;
    def_unk = kNone;
  }
  v.bos = read_token_id(f, "tokenizer.ggml.bos_token_id", def_bos, n);
  v.eos = read_token_id(f, "tokenizer.ggml.eos_token_id", def_eos, n);
  v.eot = read_token_id(f, "tokenizer.ggml.eot_token_id", kNone, n);
  v.eom = read_token_id(f, "tokenizer.ggml.eom_token_id", kNone, n);
  v.unk = read_token_id(f, "tokenizer.ggml.unknown_token_id", def_unk, n);
  v.sep = read_token_id(f, "tokenizer.ggml.seperator_token_id", kNone, n);
  v.pad = read_token_id(f, "tokenizer.ggml.padding_token_id", kNone, n);
  v.mask = read_token_id(f, "tokenizer.ggml.mask_token_id", kNone, n);
  v.fim_pad = read_token_id(f, "tokenizer.ggml.fim_pad_token_id", kNone, n);
  v.fim_rep = read_token_id(f, "tokenizer.ggml.fim_rep_token_id", kNone, n);
  v.fim_sep = read_token_id(f, "tokenizer.ggml.fim_sep_token_id", kNone, n);

  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  const bool explicit_bos = f.has("tokenizer.ggml.add_bos_token");
  const bool explicit_eos = f.has("tokenizer.ggml.add_eos_token");
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (v.add_bos && v.bos == kNone) {
    RF_CHECK(!explicit_bos, "tokenizer.ggml.add_bos_token is true, but the model has no BOS token");
    v.add_bos = false;
  }
  if (v.add_eos && v.eos == kNone) {
    RF_CHECK(!explicit_eos, "tokenizer.ggml.add_eos_token is true, but the model has no EOS token");
    v.add_eos = false;
  }

  derive_special(v);
  apply_strip_overrides(f, v);
  return v;
}

int32_t Vocab::merge_rank(std::string_view left, std::string_view right, std::string& scratch) const {
  scratch.assign(left);
  scratch.push_back(' ');
  scratch.append(right);
  auto it = merge_ranks.find(std::string_view(scratch));
  return it == merge_ranks.end() ? -1 : it->second;
}

bool Vocab::is_eog(int32_t id) const { return std::binary_search(eog_ids.begin(), eog_ids.end(), id); }

}  // namespace rf
