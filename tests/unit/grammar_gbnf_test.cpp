// GBNF parsing (valid grammars, errors with line/column) and the byte
// matcher on several grammars: arithmetic, JSON, UTF-8 classes, repetitions.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace rf::grammar {
namespace {

Matcher make(const std::string& text) { return Matcher(parse_gbnf(text)); }

std::string parse_error(const std::string& text) {
  try {
    parse_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GrammarGbnf, ArithmeticAcceptsAndRejects) {
  Matcher m = make(R"G(
# arithmetic over integers
root  ::= expr
expr  ::= term (("+" | "-") term)*
term  ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
)G");
  for (const char* ok : {"1", "12+3", "(1+2)*3", "((7))", "1*2/3-4+5"}) EXPECT_TRUE(m.matches(ok)) << ok;
  for (const char* bad : {"", "+1", "1+", "(1", "1)", "a", "1 + 2"}) EXPECT_FALSE(m.matches(bad)) << bad;
}

const char* kJsonGbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(GrammarGbnf, JsonGrammar) {
  Matcher m = make(kJsonGbnf);
  for (const char* ok : {"{}", R"({"a": 1})", R"({"a": [1, 2.5e3, "x\n\u00e9"], "b": {"c": null}})",
                         "{\"k\":\n  true}", R"({"é": "ü✓"})"})
    EXPECT_TRUE(m.matches(ok)) << ok;
  for (const char* bad : {"[]", R"({"a" 1})", R"({"a": 01x})", R"({"a": "unterminated)", R"({'a': 1})",
                          "{\"a\": \"tab\tinside\"}", R"({"a": tru})"})
    EXPECT_FALSE(m.matches(bad)) << bad;
}

TEST(GrammarGbnf, Utf8ClassesAndEscapes) {
  Matcher m = make("root ::= [α-ω]+ \"\\u00e9\" [^a-z\\x00-\\x1f]? \"\\x41\\t\\\"\"\n");
  EXPECT_TRUE(m.matches("αβω\xC3\xA9" "A\t\""));
  EXPECT_TRUE(m.matches("λé✓A\t\""));
  EXPECT_TRUE(m.matches("λé\xF0\x9F\x98\x80" "A\t\""));  // a 4-byte code point in the negated class
  EXPECT_FALSE(m.matches("λéqA\t\""));
  EXPECT_FALSE(m.matches("aé" "A\t\""));
  // Byte by byte: a prefix of a 2-byte α is kept only while it can match.
  State s = m.initial();
  EXPECT_TRUE(m.accept_bytes(s, "\xCE").has_value());   // lead byte of Greek letters
  EXPECT_FALSE(m.accept_bytes(s, "\xC3").has_value());  // Latin-1 lead: no class admits it first
  EXPECT_FALSE(m.accept_bytes(s, "\x80").has_value());  // stray continuation byte
  EXPECT_FALSE(m.accept_bytes(s, "\xC0\xB1").has_value());  // overlong
  auto half = m.accept_bytes(s, "\xCE");
  EXPECT_FALSE(m.is_accepting(*half));
}

TEST(GrammarGbnf, Repetitions) {
  Matcher m = make("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} \"d\"? (\"x\" | \"y\")*\n");
  EXPECT_TRUE(m.matches("aabcc"));
  EXPECT_TRUE(m.matches("aabbbcccccdxyx"));
  EXPECT_FALSE(m.matches("abcc"));
  EXPECT_FALSE(m.matches("aabbbbcc"));
  EXPECT_FALSE(m.matches("aabc"));
  EXPECT_FALSE(m.matches("aabccdd"));
}

TEST(GrammarGbnf, AnyCharAndEmptyAlternative) {
  Matcher m = make("root ::= \"<\" . \">\" opt\nopt ::= \"!\" |\n");
  EXPECT_TRUE(m.matches("<x>"));
  EXPECT_TRUE(m.matches("<✓>!"));
  EXPECT_FALSE(m.matches("<>"));
  EXPECT_FALSE(m.matches("<xy>"));
}

TEST(GrammarGbnf, AlternativesOnFollowingLines) {
  Matcher m = make("root ::= \"a\" x  # first\n       | \"b\" x\n  # a comment line\n  | \"c\"\nx ::= \"!\"\n");
  EXPECT_TRUE(m.matches("a!"));
  EXPECT_TRUE(m.matches("b!"));
  EXPECT_TRUE(m.matches("c"));
  EXPECT_FALSE(m.matches("c!"));
}

TEST(GrammarGbnf, AcceptingOnlyAtRootEnd) {
  Matcher m = make("root ::= \"ab\" \"c\"?\n");
  State s = m.initial();
  EXPECT_FALSE(m.is_accepting(s));
  s = *m.accept_bytes(s, "a");
  EXPECT_FALSE(m.is_accepting(s));
  s = *m.accept_bytes(s, "b");
  EXPECT_TRUE(m.is_accepting(s));
  s = *m.accept_bytes(s, "c");
  EXPECT_TRUE(m.is_accepting(s));
  EXPECT_FALSE(m.accept_bytes(s, "c").has_value());
}

TEST(GrammarGbnf, Errors) {
  EXPECT_EQ(parse_error("root ::= foo\n"), "gbnf line 1 column 10: undefined rule 'foo'");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\"\n"), "gbnf line 2 column 9: rule 'root' is defined twice");
  EXPECT_EQ(parse_error("root ::= \"abc\n"), "gbnf line 1 column 14: expected '\"' closing the string literal, got end of line");
  EXPECT_EQ(parse_error("root ::= [a-z\n"), "gbnf line 1 column 14: expected ']' closing the character class, got end of line");
  EXPECT_EQ(parse_error("root ::= (\"a\" | \"b\"\n"), "gbnf line 2 column 1: expected ')' closing the group, got end of input");
  EXPECT_EQ(parse_error("root = \"a\"\n"), "gbnf line 1 column 6: expected '::=' after rule name 'root', got '='");
  EXPECT_EQ(parse_error("\n\nroot ::= \"a\" \"\\q\"\n"),
            "gbnf line 3 column 16: expected an escape (\\n \\r \\t \\\" \\\\ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH), got 'q'");
  EXPECT_EQ(parse_error("root ::= \"\\x4\"\n"), "gbnf line 1 column 14: expected 2 hex digits, got '\"'");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,1}\n"), "gbnf line 1 column 17: repetition {m,n} with n < m");
  EXPECT_EQ(parse_error("root ::= \"a\"{2\n"), "gbnf line 1 column 15: expected '}' closing the repetition, got end of line");
  EXPECT_EQ(parse_error("root ::= )\n"), "gbnf line 1 column 10: expected end of rule 'root' (a newline), got ')'");
  EXPECT_EQ(parse_error("other ::= \"a\"\n"), "gbnf: no rule named 'root'");
  EXPECT_EQ(parse_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n"),
            "grammar: rule 'expr' is left-recursive (it can reach itself without consuming a character)");
  EXPECT_EQ(parse_error("root ::= [z-a]\n"), "gbnf line 1 column 14: character range is reversed");
}

}  // namespace
}  // namespace rf::grammar
