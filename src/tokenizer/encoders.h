// The two merge algorithms, internal to the tokenizer layer. Both keep the
// symbols of one piece of text in a linked list and the candidate merges in
// a heap, so a piece of n characters costs O(n log n), and both skip heap
// entries made stale by earlier merges.
//  - SPM (llama.cpp's llm_tokenizer_spm): merge the adjacent pair whose
//    concatenation is the highest-scoring vocabulary token, leftmost first
//    on ties; symbols left that are not tokens fall back to <0xXX> bytes.
//  - BPE (byte-level): merge the adjacent pair with the lowest merge rank,
//    leftmost first on ties; the input is a word already mapped through the
//    GPT-2 byte table.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace rf::detail {

// `text` is the fragment after space escaping ("▁"). Appends ids to `out`.
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// `word` is one pre-tokenized word, byte-encoded. With `ignore_merges`, a
// word that is itself a token is emitted whole.
void bpe_encode_word(const Vocab& vocab, std::string_view word, bool ignore_merges, std::vector<int32_t>& out);

}  // namespace rf::detail
