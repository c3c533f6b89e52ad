// ChatTemplate: conformance with the shared test data (real Llama 3.1, Qwen
// 2.5, Mistral Nemo and Gemma 2 templates rendered by transformers), the
// ChatML fallback, and the API's options (context, date, key order,
// limits, concurrent renders).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "template/chat_template.h"
#include "testdata.h"

namespace {

using rf::ChatTemplate;
using rf::ChatTemplateOptions;
using rf::jinja::TemplateError;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChatTemplateConformance, RenderedJsonlRecords) {
  RF_REQUIRE_TESTDATA("templates/rendered.jsonl");
  std::ifstream in(rf::test::testdata_path("templates/rendered.jsonl"));
  std::string line;
  int records = 0, errors = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto rec = nlohmann::ordered_json::parse(line);
    const std::string name = rec.at("template");
    SCOPED_TRACE(name + " / " + rec.at("conversation").get<std::string>() +
                 (rec.at("add_generation_prompt").get<bool>() ? " / gen" : " / no gen"));
    const ChatTemplate tmpl(read_text(rf::test::testdata_path("templates/" + name)));
    ChatTemplateOptions opts;
    opts.add_generation_prompt = rec.at("add_generation_prompt");
    opts.bos_token = rec.at("bos_token");
    opts.eos_token = rec.at("eos_token");
    opts.date = "2026-01-15";
    ++records;
    if (rec.contains("rendered")) {
      EXPECT_EQ(tmpl.render(rec.at("messages"), opts), rec.at("rendered").get<std::string>());
      continue;
    }
    ++errors;
    const std::string expected = rec.at("error");  // "TemplateError: <message>"
    const std::string prefix = "TemplateError: ";
    ASSERT_EQ(expected.rfind(prefix, 0), 0u) << expected;
    try {
      tmpl.render(rec.at("messages"), opts);
      ADD_FAILURE() << "expected the template to raise: " << expected;
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
      EXPECT_EQ(e.message(), expected.substr(prefix.size()));
    }
  }
  EXPECT_EQ(records, 32);
  EXPECT_GT(errors, 0);
}

nlohmann::json conversation() {
  return nlohmann::json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Bye"}])");
}

TEST(ChatTemplate, ChatMLFallback) {
  const ChatTemplate chatml(ChatTemplate::chatml_source());
  ChatTemplateOptions opts;
  EXPECT_EQ(chatml.render(conversation(), opts),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  opts.add_generation_prompt = false;
  EXPECT_EQ(chatml.render(nlohmann::json::array({{{"role", "user"}, {"content", "x"}}}), opts),
            "<|im_start|>user\nx<|im_end|>\n");
  EXPECT_EQ(chatml.render(nlohmann::json::array(), opts), "");
  // Content given as parts: the text parts, in order; a null content is empty.
  const auto parts = nlohmann::json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null}])");
  EXPECT_EQ(chatml.render(parts, opts), "<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n");
}

TEST(ChatTemplate, ContextVariables) {
  const ChatTemplate t(
      "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ messages|length }}|{{ custom }}");
  ChatTemplateOptions opts;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  EXPECT_EQ(t.render(conversation(), opts), "<s>|</s>|True|True|True|4|");
  opts.add_generation_prompt = false;
  opts.extra_context["custom"] = "yes";
  opts.extra_context["tools"] = nlohmann::json::array({{{"name", "f"}}});
  EXPECT_EQ(t.render(conversation(), opts), "<s>|</s>|False|False|True|4|yes");
  opts.extra_context = nlohmann::json::array();
  EXPECT_THROW(t.render(conversation(), opts), rf::Error);
}

TEST(ChatTemplate, StrftimeNowUsesTheGivenDate) {
  const ChatTemplate t("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %-d %B, day %j') }}");
  ChatTemplateOptions opts;
  opts.date = "2026-01-15";
  EXPECT_EQ(t.render(nlohmann::json::array(), opts), "15 Jan 2026|Thursday 15 January, day 015");
  opts.date = "2024-02-29";
  EXPECT_EQ(t.render(nlohmann::json::array(), opts), "29 Feb 2024|Thursday 29 February, day 060");
  for (const char* bad : {"2023-02-29", "2026-13-01", "15/01/2026", "2026-1-15", ""}) {
    opts.date = bad;
    EXPECT_THROW(t.render(nlohmann::json::array(), opts), rf::Error) << bad;
  }
  opts.date.reset();  // today: at least well-formed
  const std::string today = t.render(nlohmann::json::array(), opts);
  EXPECT_EQ(today.size() >= 11, true) << today;
}

TEST(ChatTemplate, ToJsonKeepsKeyOrderOfOrderedInput) {
  const ChatTemplate t("{{ messages[0]|tojson }}");
  const auto ordered = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x", "a": {"z": 1, "b": [1.5, null]}}])");
  EXPECT_EQ(t.render(ordered, ChatTemplateOptions()),
            R"({"role": "user", "content": "x", "a": {"z": 1, "b": [1.5, null]}})");
  // nlohmann::json itself keeps keys sorted.
  EXPECT_EQ(t.render(nlohmann::json(ordered), ChatTemplateOptions()),
            R"({"a": {"b": [1.5, null], "z": 1}, "content": "x", "role": "user"})");
}

TEST(ChatTemplate, MessagesPassThroughAsGiven) {
  const ChatTemplate t(
      "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
      "{% for p in m.content %}<{{ p.type }}:{{ p.text|default('') }}>{% endfor %}{% endif %}"
      "{{ m.name is defined }};{% endfor %}");
  const auto messages = nlohmann::json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}]},
    {"role": "assistant", "content": "b", "name": "bot"}])");
  EXPECT_EQ(t.render(messages, ChatTemplateOptions()), "<text:a><image_url:>False;bTrue;");
}

TEST(ChatTemplate, SyntaxErrorsAreRfErrorsNamingTheLine) {
  try {
    ChatTemplate t("line one\n{% if true %}\nline three\n{{ 1 + }}\n{% endif %}");
    FAIL() << "no error";
  } catch (const rf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, LimitsAreConfigurable) {
  const ChatTemplate loop("{% for i in range(1000) %}{{ i }}{% endfor %}");
  ChatTemplateOptions opts;
  EXPECT_NO_THROW(loop.render(nlohmann::json::array(), opts));
  opts.limits.max_steps = 500;
  try {
    loop.render(nlohmann::json::array(), opts);
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
  }
  opts.limits = rf::ChatTemplateLimits();
  opts.limits.max_output_bytes = 100;
  try {
    loop.render(nlohmann::json::array(), opts);
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
    EXPECT_NE(std::string(e.what()).find("output"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, ConcurrentRendersAgree) {
  const ChatTemplate t(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m.content|length %}"
      "[{{ loop.index }}:{{ m.role|upper }}:{{ m.content }}]{% endfor %}{{ ns.n }}");
  nlohmann::json messages = nlohmann::json::array();
  for (int i = 0; i < 50; ++i) messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(i, 'x')}});
  const std::string expected = t.render(messages, ChatTemplateOptions());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&] {
      for (int r = 0; r < 50; ++r)
        if (t.render(messages, ChatTemplateOptions()) != expected) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
