// Structured output after the thinking: with a reply in the Think format,
// response_format and forced tool calls constrain the answer, not the
// thinking before it. The grammar given here is a sentence of `body`
// preceded by a thinking section — any text without the close tag, then
// the tag and optional whitespace — opened by the reply ("<think>", or no
// section at all) or already by the prompt (starts_inside). The "no close
// tag inside" rule is the close tag's string-matching automaton written as
// rules, one per prefix of the tag matched so far, so the section ends at
// exactly the first occurrence of the tag.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace rf::server {

grammar::Grammar after_thinking(const grammar::Grammar& body, bool starts_inside, std::string_view open,
                                std::string_view close);

}  // namespace rf::server
