// Chat templates in the style of Mistral v1, v3 (tools) and v7 (system
// prompt, image parts, strftime_now), written for these tests (tests/templates/<name>.jinja),
// rendered for a set of conversations with and without the generation prompt.
// The expected strings are what Python Jinja2 3.1.6 renders when configured
// as Hugging Face transformers configures it (trim_blocks, lstrip_blocks,
// loop controls, tojson without ASCII escaping, raise_exception,
// strftime_now fixed at 2026-01-15), bos "<s>", eos "</s>".
#include <string>

#include "unit/template_cases.h"

namespace {

const char* const kTemplates[] = {"mistral_v1", "mistral_v3", "mistral_v7"};  // tests/templates/<name>.jinja

using Case = rf::test::ChatCase;  // template, conversation, add_generation_prompt, rendered, error

const Case kCases[] = {
    {"mistral_v1", "single", true, R"J(<s> [INST] Hello! [/INST])J", nullptr},
    {"mistral_v1", "single", false, R"J(<s> [INST] Hello! [/INST])J", nullptr},
    {"mistral_v1", "system", true, R"J(<s> [INST] You are terse.

What is 2+2? [/INST])J", nullptr},
    {"mistral_v1", "system", false, R"J(<s> [INST] You are terse.

What is 2+2? [/INST])J", nullptr},
    {"mistral_v1", "multi", true, R"J(<s> [INST] Be brief.

Hi there  [/INST]  Hello! How can I help?</s> [INST] Say "quotes" & <tags> — ünïcödé 🦙
	tab [/INST])J", nullptr},
    {"mistral_v1", "multi", false, R"J(<s> [INST] Be brief.

Hi there  [/INST]  Hello! How can I help?</s> [INST] Say "quotes" & <tags> — ünïcödé 🦙
	tab [/INST])J", nullptr},
    {"mistral_v1", "no_alternation", true, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"mistral_v1", "no_alternation", false, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"mistral_v1", "parts", true, nullptr, R"J()J"},
    {"mistral_v1", "parts", false, nullptr, R"J()J"},
    {"mistral_v1", "tools", true, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"mistral_v1", "tools", false, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"mistral_v1", "think", true, R"J(<s> [INST] 2+2? [/INST] <think>
add them
</think>

4</s> [INST] 3+3? [/INST])J", nullptr},
    {"mistral_v1", "think", false, R"J(<s> [INST] 2+2? [/INST] <think>
add them
</think>

4</s> [INST] 3+3? [/INST])J", nullptr},
    {"mistral_v3", "single", true, R"J(<s>[INST] Hello![/INST])J", nullptr},
    {"mistral_v3", "single", false, R"J(<s>[INST] Hello![/INST])J", nullptr},
    {"mistral_v3", "system", true, R"J(<s>[INST] You are terse.

What is 2+2?[/INST])J", nullptr},
    {"mistral_v3", "system", false, R"J(<s>[INST] You are terse.

What is 2+2?[/INST])J", nullptr},
    {"mistral_v3", "multi", true, R"J(<s>[INST] Hi there [/INST] Hello! How can I help?</s>[INST] Be brief.

Say "quotes" & <tags> — ünïcödé 🦙
	tab[/INST])J", nullptr},
    {"mistral_v3", "multi", false, R"J(<s>[INST] Hi there [/INST] Hello! How can I help?</s>[INST] Be brief.

Say "quotes" & <tags> — ünïcödé 🦙
	tab[/INST])J", nullptr},
    {"mistral_v3", "no_alternation", true, R"J(<s>[INST] one[/INST][INST] two[/INST])J", nullptr},
    {"mistral_v3", "no_alternation", false, R"J(<s>[INST] one[/INST][INST] two[/INST])J", nullptr},
    {"mistral_v3", "parts", true, nullptr, R"J()J"},
    {"mistral_v3", "parts", false, nullptr, R"J()J"},
    {"mistral_v3", "tools", true, R"J(<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}][/AVAILABLE_TOOLS][INST] Weather in Paris?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}, "id": "call12345"}]</s>[TOOL_RESULTS] {"content": {"temp": 21}, "call_id": "call12345"}[/TOOL_RESULTS] It is 21 °C.</s>)J", nullptr},
    {"mistral_v3", "tools", false, R"J(<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}][/AVAILABLE_TOOLS][INST] Weather in Paris?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}, "id": "call12345"}]</s>[TOOL_RESULTS] {"content": {"temp": 21}, "call_id": "call12345"}[/TOOL_RESULTS] It is 21 °C.</s>)J", nullptr},
    {"mistral_v3", "think", true, R"J(<s>[INST] 2+2?[/INST] <think>
add them
</think>

4</s>[INST] 3+3?[/INST])J", nullptr},
    {"mistral_v3", "think", false, R"J(<s>[INST] 2+2?[/INST] <think>
add them
</think>

4</s>[INST] 3+3?[/INST])J", nullptr},
    {"mistral_v7", "single", true, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]Hello![/INST])J", nullptr},
    {"mistral_v7", "single", false, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]Hello![/INST])J", nullptr},
    {"mistral_v7", "system", true, R"J(<s>[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]What is 2+2?[/INST])J", nullptr},
    {"mistral_v7", "system", false, R"J(<s>[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]What is 2+2?[/INST])J", nullptr},
    {"mistral_v7", "multi", true, R"J(<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi there [/INST] Hello! How can I help?</s>[INST]Say "quotes" & <tags> — ünïcödé 🦙
	tab[/INST])J", nullptr},
    {"mistral_v7", "multi", false, R"J(<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi there [/INST] Hello! How can I help?</s>[INST]Say "quotes" & <tags> — ünïcödé 🦙
	tab[/INST])J", nullptr},
    {"mistral_v7", "no_alternation", true, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]one[/INST][INST]two[/INST])J", nullptr},
    {"mistral_v7", "no_alternation", false, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]one[/INST][INST]two[/INST])J", nullptr},
    {"mistral_v7", "parts", true, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]Describe [IMG]this image.[/INST])J", nullptr},
    {"mistral_v7", "parts", false, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]Describe [IMG]this image.[/INST])J", nullptr},
    {"mistral_v7", "tools", true, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]Weather in Paris?[/INST][TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}</s>[TOOL_RESULTS]{"temp": 21}[/TOOL_RESULTS]It is 21 °C.</s>)J", nullptr},
    {"mistral_v7", "tools", false, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]Weather in Paris?[/INST][TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}</s>[TOOL_RESULTS]{"temp": 21}[/TOOL_RESULTS]It is 21 °C.</s>)J", nullptr},
    {"mistral_v7", "think", true, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]2+2?[/INST]<think>
add them
</think>

4</s>[INST]3+3?[/INST])J", nullptr},
    {"mistral_v7", "think", false, R"J(<s>[SYSTEM_PROMPT]You are a helpful assistant. Today is 2026-01-15.[/SYSTEM_PROMPT][INST]2+2?[/INST]<think>
add them
</think>

4</s>[INST]3+3?[/INST])J", nullptr},
};

TEST(ChatFamilyC, RendersLikeJinja2) {
  rf::test::expect_chat_cases(kTemplates, kCases);
}

}  // namespace
