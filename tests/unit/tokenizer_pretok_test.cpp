// Pre-tokenizer splits checked against an independent reference: the
// expected words below were produced by a Python emulation of llama.cpp's
// unicode_regex_split (its hand-written gpt2/llama3 splitters and its
// category-collapsed std::regex passes, run with the `regex` module), not by
// this code. Also: pre-tokenizer names and aliases.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace rf {
namespace {

// clang-format off
const std::vector<std::string> kInputs = {
    "Hello, y'all! How are you \xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C" "1314151\xE5\xA4\xA9\xEF\xBD\x9E",
    "  \t\n\n  lead\xC2\xA0" "and\xE3\x80\x80trail  \n",
    "I've 'told he's, 'RE 'M I'll 'D We'Ve a'lL",
    "3333333 3.3 3..3 ~x ~~ $+<=>^`| \xC2\xBD\xC2\xB2 \xD9\xA1\xD9\xA2",
    "\xE4\xB8\xAD\xE6\x96\x87\xE3\x80\x82\xEF\xBC\x8C\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88 caf\xC3\xA9 \xCE\x99\xCE\xB1 e\xCC\x81\xCC\x81x",
};
const std::vector<std::pair<const char*, std::vector<std::vector<std::string>>>> kExpected = {
    {"default", {
        {"Hello", ",", " y", "'", "all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ", "?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "131", "415", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n ", " lead", "\xC2\xA0", "and", "\xE3\x80\x80", "trail", "  \n"},
        {"I", "'", "ve", " ", "'", "told", " he", "'", "s", ",", " ", "'", "RE", " ", "'", "M", " I", "'", "ll", " ", "'", "D", " We", "'", "Ve", " a", "'", "lL"},
        {"333", "333", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ", "~", "x", " ", "~~", " ", "$+<=>^", "`", "|", " ", "\xC2\xBD\xC2\xB2", " ", "\xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"llama3", {
        {"Hello", ",", " y", "'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "131", "415", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  \n"},
        {"I", "'ve", " '", "told", " he", "'s", ",", " '", "RE", " '", "M", " I", "'ll", " '", "D", " We", "'Ve", " a", "'lL"},
        {"333", "333", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " ", "\xC2\xBD\xC2\xB2", " ", "\xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"qwen2", {
        {"Hello", ",", " y", "'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "1", "3", "1", "4", "1", "5", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  \n"},
        {"I", "'ve", " '", "told", " he", "'s", ",", " '", "RE", " '", "M", " I", "'ll", " '", "D", " We", "'Ve", " a", "'lL"},
        {"3", "3", "3", "3", "3", "3", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " ", "\xC2\xBD", "\xC2\xB2", " ", "\xD9\xA1", "\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"deepseek-llm", {
        {"Hello", ",", " y", "'", "all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8", "apple", "\xE5\xB7\xA5\xE4\xBD\x9C", "1314151", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t", "\n", "\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  ", "\n"},
        {"I", "'", "ve", " '", "told", " he", "'", "s", ",", " '", "RE", " '", "M", " I", "'", "ll", " '", "D", " We", "'", "Ve", " a", "'", "lL"},
        {"3333333", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " ", "\xC2\xBD\xC2\xB2", " ", "\xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82", "\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf", "\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"deepseek-coder", {
        {"Hello", ",", " y", "'", "all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8", "apple", "\xE5\xB7\xA5\xE4\xBD\x9C", "1", "3", "1", "4", "1", "5", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t", "\n", "\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  ", "\n"},
        {"I", "'", "ve", " '", "told", " he", "'", "s", ",", " '", "RE", " '", "M", " I", "'", "ll", " '", "D", " We", "'", "Ve", " a", "'", "lL"},
        {"3", "3", "3", "3", "3", "3", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~ $+<=>^`| ", "\xC2\xBD", "\xC2\xB2", " ", "\xD9\xA1", "\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82", "\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"deepseek-v3", {
        {"Hello", ",", " y", "'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8", "apple", "\xE5\xB7\xA5\xE4\xBD\x9C", "131", "415", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  \n"},
        {"I", "'ve", " '", "told", " he", "'s", ",", " '", "RE", " '", "M", " I", "'ll", " '", "D", " We", "'Ve", " a", "'lL"},
        {"333", "333", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ", "~x", " ", "~~", " $+<=>^`|", " ", "\xC2\xBD\xC2\xB2", " ", "\xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e\xCC\x81\xCC\x81x"},
    }},
    {"falcon", {
        {"Hello", ",", " y", "'", "all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ", "?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "131", "415", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n ", " lead", "\xC2\xA0", "and", "\xE3\x80\x80", "trail", "  \n"},
        {"I", "'", "ve", " ", "'", "told", " he", "'", "s", ",", " ", "'", "RE", " ", "'", "M", " I", "'", "ll", " ", "'", "D", " We", "'", "Ve", " a", "'", "lL"},
        {"333", "333", "3", " 3", ".", "3", " 3", "..", "3", " ", "~", "x", " ", "~~", " ", "$+<=>^`|", " \xC2\xBD\xC2\xB2", " \xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"starcoder", {
        {"Hello", ",", " y", "'", "all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "1", "3", "1", "4", "1", "5", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n ", " lead", "\xC2\xA0", "and", "\xE3\x80\x80", "trail", "  \n"},
        {"I", "'ve", " '", "told", " he", "'s", ",", " '", "RE", " '", "M", " I", "'ll", " '", "D", " We", "'", "Ve", " a", "'", "lL"},
        {"3", "3", "3", "3", "3", "3", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " ", "\xC2\xBD", "\xC2\xB2", " ", "\xD9\xA1", "\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"gpt-2", {
        {"Hello", ",", " y", "'", "all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "1314151", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n ", " lead", "\xC2\xA0", "and", "\xE3\x80\x80", "trail", "  \n"},
        {"I", "'ve", " '", "told", " he", "'s", ",", " '", "RE", " '", "M", " I", "'ll", " '", "D", " We", "'", "Ve", " a", "'", "lL"},
        {"3333333", " 3", ".", "3", " 3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " \xC2\xBD\xC2\xB2", " \xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"tekken", {
        {"Hello", ",", " y", "'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "1", "3", "1", "4", "1", "5", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  \n"},
        {"I", "'ve", " '", "told", " he", "'s", ",", " '", "RE", " '", "M", " I", "'ll", " '", "D", " We", "'Ve", " a", "'l", "L"},
        {"3", "3", "3", "3", "3", "3", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " ", "\xC2\xBD", "\xC2\xB2", " ", "\xD9\xA1", "\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"gpt-4o", {
        {"Hello", ",", " y", "'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "131", "415", "1", "\xE5\xA4\xA9", "\xEF\xBD\x9E"},
        {"  \t\n\n", " ", " lead", "\xC2\xA0" "and", "\xE3\x80\x80trail", "  \n"},
        {"I've", " '", "told", " he's", ",", " '", "RE", " '", "M", " I'll", " '", "D", " We'Ve", " a'lL"},
        {"333", "333", "3", " ", "3", ".", "3", " ", "3", "..", "3", " ~", "x", " ~~", " $+<=>^`|", " ", "\xC2\xBD\xC2\xB2", " ", "\xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e", "\xCC\x81\xCC\x81", "x"},
    }},
    {"bloom", {
        {"Hello", ",", " y'all", "!", " How", " are", " you", " \xF0\x9F\x98\x81", " ?", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C" "1314151\xE5\xA4\xA9\xEF\xBD\x9E"},
        {"  \t\n\n ", " lead", "\xC2\xA0", "and", "\xE3\x80\x80", "trail", "  \n"},
        {"I've", " 'told", " he's", ",", " 'RE", " 'M", " I'll", " 'D", " We'Ve", " a'lL"},
        {"3333333", " 3", ".", "3", " 3", "..", "3", " ~x", " ~~", " $+<=>^`", "|", " \xC2\xBD\xC2\xB2", " \xD9\xA1\xD9\xA2"},
        {"\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x80\x82\xEF\xBC\x8C", "\xE3\x83\x86\xE3\x82\xB9\xE3\x83\x88", " caf\xC3\xA9", " \xCE\x99\xCE\xB1", " e\xCC\x81\xCC\x81x"},
    }},
};
// clang-format on

TEST(PreTokenizer, MatchesReferenceSplits) {
  for (const auto& [name, per_input] : kExpected) {
    const PreInfo info = pre_info(name);
    ASSERT_TRUE(info.known) << name;
    PreTokenizer pt(info.type);
    ASSERT_EQ(per_input.size(), kInputs.size());
    for (size_t i = 0; i < kInputs.size(); ++i) {
      const auto words = pt.split(kInputs[i]);
      std::vector<std::string> got(words.begin(), words.end());
      EXPECT_EQ(got, per_input[i]) << "pre-tokenizer " << name << ", input " << i;
    }
  }
}

TEST(PreTokenizer, WordsCoverTheText) {
  const std::string text = "a  b\n\n\tc 12345 \xE2\x80\x82x!!";
  for (PreType t : {PreType::Default, PreType::Llama3, PreType::DeepseekLlm, PreType::Bloom, PreType::Gpt4o}) {
    PreTokenizer pt(t);
    std::string joined;
    for (auto w : pt.split(text)) {
      EXPECT_FALSE(w.empty()) << pre_type_name(t);
      joined.append(w);
    }
    EXPECT_EQ(joined, text) << pre_type_name(t);
    EXPECT_TRUE(pt.split("").empty());
  }
}

TEST(PreTokenizer, NamesAndAliases) {
  EXPECT_EQ(pre_info("llama-bpe").type, PreType::Llama3);
  EXPECT_TRUE(pre_info("llama-bpe").ignore_merges);
  EXPECT_TRUE(pre_info("llama3").add_bos);
  EXPECT_EQ(pre_info("deepseek-r1-qwen").type, PreType::Qwen2);
  EXPECT_EQ(pre_info("refact").type, PreType::Starcoder);
  EXPECT_EQ(pre_info("command-r").type, PreType::Starcoder);
  EXPECT_EQ(pre_info("mpt").type, PreType::Gpt2);
  EXPECT_EQ(pre_info("gpt-neox").type, PreType::Gpt2);
  EXPECT_EQ(pre_info("olmo").type, PreType::Gpt2);
  EXPECT_EQ(pre_info("falcon").type, PreType::Falcon);
  EXPECT_EQ(pre_info("").type, PreType::Default);
  EXPECT_TRUE(pre_info("").known);
  EXPECT_FALSE(pre_info("no-such-pre").known);
  EXPECT_EQ(pre_info("no-such-pre").type, PreType::Default);
}

TEST(PreTokenizer, LongInputsStayLinear) {
  // Long whitespace runs and long words must not backtrack quadratically.
  const std::string spaces(200000, ' ');
  const std::string word(200000, 'x');
  for (PreType t : {PreType::Llama3, PreType::Qwen2, PreType::Default, PreType::Tekken, PreType::Deepseek3}) {
    PreTokenizer pt(t);
    EXPECT_EQ(pt.split(spaces + "y").size(), 2u) << pre_type_name(t);
    EXPECT_FALSE(pt.split(word).empty()) << pre_type_name(t);
  }
}

}  // namespace
}  // namespace rf
