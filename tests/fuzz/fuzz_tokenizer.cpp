// libFuzzer target: tokenizing arbitrary bytes never crashes and keeps the
// tokenizer's invariants. Vocabularies: the llama-spm, gpt-2 and
// deepseek-coder vocabularies of the test data ($ROCMFORGE_TESTDATA, else
// ../shared/testdata, which is right when run from the repository root as
// scripts/fuzz.sh does). They are loaded once.
//
// Input: byte 0 picks the vocabulary and whether to add BOS/EOS; the rest is
// the text. Checked, with parse_special off and on:
//  - every id is inside the vocabulary; BOS comes first when added;
//  - the incremental detokenizer, fed the ids one by one, produces exactly
//    utf8::sanitize(decode(ids)) (specials hidden and rendered), valid UTF-8;
//  - for valid UTF-8 without parse_special: decode(encode(text)) == text
//    (SPM: when the text has no U+2581 and no user-defined token was split
//    out, since those get a space prefix after them).
// The same bytes, read as token ids, also go through the detokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: invariant violated: %s\n", what);
  std::abort();
}

std::vector<std::string> vocab_paths() {
  const std::string& td = rf::env().testdata;
  const std::string dir = (td.empty() ? std::string("../shared/testdata") : td) + "/vocab/";
  return {dir + "ggml-vocab-llama-spm.gguf", dir + "ggml-vocab-gpt-2.gguf", dir + "ggml-vocab-deepseek-coder.gguf"};
}

const std::vector<std::unique_ptr<rf::Tokenizer>>& tokenizers() {
  static const std::vector<std::unique_ptr<rf::Tokenizer>> toks = [] {
    std::vector<std::unique_ptr<rf::Tokenizer>> v;
    for (const auto& p : vocab_paths()) {
      try {
        v.push_back(rf::Tokenizer::from_file(p));
      } catch (const rf::Error& e) {
        std::fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", p.c_str(), e.what());
      }
    }
    if (v.empty()) {
      std::fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded (set ROCMFORGE_TESTDATA)\n");
      std::abort();
    }
    return v;
  }();
  return toks;
}

void check_stream(const rf::Tokenizer& tok, const std::vector<int32_t>& ids, bool render_special) {
  rf::IncrementalDetokenizer d(tok, render_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string part = d.push(id);
    if (!rf::utf8::is_valid(part)) violated("detokenizer output is not valid UTF-8");
    streamed += part;
  }
  streamed += d.flush();
  if (streamed != rf::utf8::sanitize(tok.decode(ids, render_special)))
    violated("incremental detokenizer differs from the sanitized decode");
}

bool has_user_defined(const rf::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (tok.vocab().type(id) == rf::TokenType::UserDefined) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& toks = tokenizers();
  if (size == 0) return 0;
  const rf::Tokenizer& tok = *toks[data[0] % toks.size()];
  const bool add_special = (data[0] / toks.size()) & 1;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool valid = rf::utf8::is_valid(text);

  for (bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.n_vocab()) violated("token id outside the vocabulary");
    if (add_special && tok.add_bos() && (ids.empty() || ids[0] != tok.bos())) violated("BOS missing");
    check_stream(tok, ids, false);
    check_stream(tok, ids, true);
    if (valid && !parse_special) {
      const bool spm_exempt =
          tok.is_spm() && (text.find("\xE2\x96\x81") != std::string::npos || has_user_defined(tok, ids));
      if (!spm_exempt && tok.decode(ids) != text) violated("decode(encode(text)) != text");
    }
  }

  // The raw bytes as a token-id stream (little-endian 16-bit ids).
  std::vector<int32_t> ids;
  for (size_t i = 1; i + 1 < size; i += 2) ids.push_back(int32_t((data[i] | (data[i + 1] << 8)) % tok.n_vocab()));
  check_stream(tok, ids, false);
  check_stream(tok, ids, true);
  return 0;
}
