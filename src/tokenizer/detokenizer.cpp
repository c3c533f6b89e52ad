// Incremental detokenizer (declared in tokenizer.h).
#include "tokenizer/tokenizer.h"

namespace rf {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool render_special, bool continuation)
    : tok_(&tok),
      render_special_(render_special),
      continuation_(continuation),
      strip_leading_space_(!continuation && tok.strips_leading_space()) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  piece_.clear();
  tok_->append_piece(id, render_special_, strip_leading_space_, piece_);
  std::string out;
  sanitizer_.feed(piece_, out);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  sanitizer_.finish(out);
  strip_leading_space_ = !continuation_ && tok_->strips_leading_space();
  return out;
}

}  // namespace rf
