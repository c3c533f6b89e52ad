// Table-driven template tests: the case shapes and the one runner each for
// the Jinja tables (jinja_{expr,stmt,filter}_test.cpp) and the chat-template
// family tables (chat_family_{a,b,c,d}_test.cpp), plus the conversations the
// family tables render. The family templates live in tests/templates/
// (<name>.jinja), where the server tests (tests/server/families.test.mjs)
// serve them too. Expected strings are what Python Jinja2 3.1.6 gives
// when configured as Hugging Face transformers configures it (trim_blocks,
// lstrip_blocks, loop controls, transformers' tojson, raise_exception,
// strftime_now fixed at 2026-01-15).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <span>
#include <sstream>
#include <string>

#include "template/chat_template.h"
#include "template/jinja_interp.h"

namespace rf::test {

// A template, its context (JSON) and its exact output.
struct JinjaCase {
  const char* source;
  const char* context;
  const char* expected;  // null: rendering (or parsing) must fail
};

inline void expect_jinja_cases(std::span<const JinjaCase> cases) {
  jinja::RenderOptions options;
  options.date = "2026-01-15";
  for (const JinjaCase& c : cases) {
    SCOPED_TRACE(c.source);
    const auto context = nlohmann::ordered_json::parse(c.context);
    if (c.expected) {
      EXPECT_EQ(jinja::Template(c.source).render(context, options), c.expected);
    } else {
      EXPECT_THROW(jinja::Template(c.source).render(context, options), jinja::TemplateError);
    }
  }
}

// Each conversation: {"messages": [...], "tools": [...] (optional)}.
inline const char* const kChatConversations = R"J({
 "single": {"messages": [{"role": "user", "content": "Hello!"}]},
 "system": {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}]},
 "multi": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there "}, {"role": "assistant", "content": " Hello! How can I help?"}, {"role": "user", "content": "Say \"quotes\" & <tags> — ünïcödé 🦙\n\ttab"}]},
 "no_alternation": {"messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]},
 "parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "image"}, {"type": "text", "text": "this image."}]}]},
 "tools": {"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}, {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"}, {"role": "assistant", "content": "It is 21 °C."}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}, "return": {"type": "string"}}}]},
 "think": {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"}, {"role": "user", "content": "3+3?"}]}
})J";

// A named template rendering a named conversation of kChatConversations,
// with bos "<s>" and eos "</s>".
struct ChatCase {
  const char* tmpl;
  const char* conversation;
  bool add_generation_prompt;
  const char* rendered;  // null when the template raises
  const char* error;     // raise_exception message, or "" for another runtime error
};

// The source of tests/templates/<name>.jinja ("" when it cannot be read).
inline std::string family_template_source(const std::string& name) {
  std::ifstream in(std::string(ROCMFORGE_TEST_TEMPLATES) + "/" + name + ".jinja", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `templates`: names of tests/templates/<name>.jinja.
inline void expect_chat_cases(std::span<const char* const> templates, std::span<const ChatCase> cases) {
  const auto conversations = nlohmann::ordered_json::parse(kChatConversations);
  std::map<std::string, ChatTemplate> parsed;
  for (const char* name : templates) {
    const std::string source = family_template_source(name);
    ASSERT_FALSE(source.empty()) << "cannot read tests/templates/" << name << ".jinja";
    parsed.emplace(name, ChatTemplate(source));
  }
  for (const ChatCase& c : cases) {
    SCOPED_TRACE(std::string(c.tmpl) + " / " + c.conversation + (c.add_generation_prompt ? " / gen" : " / no gen"));
    const auto& conv = conversations.at(c.conversation);
    ChatTemplateOptions opts;
    opts.add_generation_prompt = c.add_generation_prompt;
    opts.bos_token = "<s>";
    opts.eos_token = "</s>";
    opts.date = "2026-01-15";
    if (conv.contains("tools")) opts.extra_context["tools"] = conv["tools"];
    const ChatTemplate& t = parsed.at(c.tmpl);
    if (c.rendered) {
      EXPECT_EQ(t.render(conv["messages"], opts), c.rendered);
      continue;
    }
    try {
      const std::string out = t.render(conv["messages"], opts);
      ADD_FAILURE() << "expected an error, got: " << out;
    } catch (const jinja::TemplateError& e) {
      if (*c.error) {
        EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::Raised) << e.what();
        EXPECT_EQ(e.message(), c.error);
      } else {
        EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::Runtime) << e.what();
      }
    }
  }
}

}  // namespace rf::test
