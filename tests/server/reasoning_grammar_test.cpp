// Structured output after the thinking (server/reasoning_grammar.h): the
// grammar accepts a thinking section — any text up to the first close tag,
// whatever pieces of the tag come before it — then optional whitespace and
// a sentence of the body, and nothing else: no body before the tag when the
// prompt opened the thinking, no second tag, no unclosed section; without
// the prompt's open tag, the reply may open one or answer at once.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "server/reasoning.h"
#include "server/reasoning_grammar.h"

namespace rf::server {
namespace {

grammar::Matcher thinking_then(const char* body_gbnf, bool starts_inside) {
  return grammar::Matcher(after_thinking(grammar::parse_gbnf(body_gbnf), starts_inside, kThinkOpen, kThinkClose));
}

TEST(ReasoningGrammar, AnswerOnlyAfterTheFirstCloseTag) {
  const grammar::Matcher m = thinking_then(R"(root ::= "{" [0-9] "}")", true);
  for (const char* ok : {"abc</think>{5}", "</think>\n\n{1}", "a </thin </ </think{2}</think>  {3}",
                         "<</think>{4}", "</</think>{6}", "x\n<think>y</think>{7}"})
    EXPECT_TRUE(m.matches(ok)) << ok;
  for (const char* bad : {"{5}", "abc</think>", "abc</think>{5}</think>", "a</think>b</think>{1}", "abc{5}",
                          "abc</think>{55}", "abc</thin>{5}"})
    EXPECT_FALSE(m.matches(bad)) << bad;
}

TEST(ReasoningGrammar, TheReplyMayOpenASectionOrAnswerAtOnce) {
  const grammar::Matcher m = thinking_then(R"(root ::= "ok")", false);
  for (const char* ok : {"ok", "<think>hmm</think>\nok", "<think></think>ok"}) EXPECT_TRUE(m.matches(ok)) << ok;
  for (const char* bad : {"hmm</think>ok", "<think>hmm", " ok", "<think>ok"}) EXPECT_FALSE(m.matches(bad)) << bad;
}

}  // namespace
}  // namespace rf::server
