// Chat templates in the style of Gemma 3 (system folded into the first user
// turn, model turns, image parts) and GLM-4 ([gMASK]<sop>, role markers
// without an end-of-turn marker, tools, observations), written for these tests
// (tests/templates/<name>.jinja), rendered for a set of conversations with and
// without the generation prompt. The expected strings are what Python Jinja2
// 3.1.6 renders when configured as Hugging Face transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, tojson without ASCII escaping,
// raise_exception, strftime_now fixed at 2026-01-15), bos "<s>", eos "</s>".
#include <string>

#include "unit/template_cases.h"

namespace {

const char* const kTemplates[] = {"gemma3", "glm4"};  // tests/templates/<name>.jinja

using Case = rf::test::ChatCase;  // template, conversation, add_generation_prompt, rendered, error

const Case kCases[] = {
    {"gemma3", "single", true, R"J(<s><start_of_turn>user
Hello!<end_of_turn>
<start_of_turn>model
)J", nullptr},
    {"gemma3", "single", false, R"J(<s><start_of_turn>user
Hello!<end_of_turn>
)J", nullptr},
    {"gemma3", "system", true, R"J(<s><start_of_turn>user
You are terse.

What is 2+2?<end_of_turn>
<start_of_turn>model
)J", nullptr},
    {"gemma3", "system", false, R"J(<s><start_of_turn>user
You are terse.

What is 2+2?<end_of_turn>
)J", nullptr},
    {"gemma3", "multi", true, R"J(<s><start_of_turn>user
Be brief.

Hi there<end_of_turn>
<start_of_turn>model
Hello! How can I help?<end_of_turn>
<start_of_turn>user
Say "quotes" & <tags> — ünïcödé 🦙
	tab<end_of_turn>
<start_of_turn>model
)J", nullptr},
    {"gemma3", "multi", false, R"J(<s><start_of_turn>user
Be brief.

Hi there<end_of_turn>
<start_of_turn>model
Hello! How can I help?<end_of_turn>
<start_of_turn>user
Say "quotes" & <tags> — ünïcödé 🦙
	tab<end_of_turn>
)J", nullptr},
    {"gemma3", "no_alternation", true, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"gemma3", "no_alternation", false, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"gemma3", "parts", true, R"J(<s><start_of_turn>user
Describe<start_of_image>this image.<end_of_turn>
<start_of_turn>model
)J", nullptr},
    {"gemma3", "parts", false, R"J(<s><start_of_turn>user
Describe<start_of_image>this image.<end_of_turn>
)J", nullptr},
    {"gemma3", "tools", true, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"gemma3", "tools", false, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"gemma3", "think", true, R"J(<s><start_of_turn>user
2+2?<end_of_turn>
<start_of_turn>model
<think>
add them
</think>

4<end_of_turn>
<start_of_turn>user
3+3?<end_of_turn>
<start_of_turn>model
)J", nullptr},
    {"gemma3", "think", false, R"J(<s><start_of_turn>user
2+2?<end_of_turn>
<start_of_turn>model
<think>
add them
</think>

4<end_of_turn>
<start_of_turn>user
3+3?<end_of_turn>
)J", nullptr},
    {"glm4", "single", true, R"J([gMASK]<sop><|user|>
Hello!<|assistant|>)J", nullptr},
    {"glm4", "single", false, R"J([gMASK]<sop><|user|>
Hello!)J", nullptr},
    {"glm4", "system", true, R"J([gMASK]<sop><|system|>
You are terse.<|user|>
What is 2+2?<|assistant|>)J", nullptr},
    {"glm4", "system", false, R"J([gMASK]<sop><|system|>
You are terse.<|user|>
What is 2+2?)J", nullptr},
    {"glm4", "multi", true, R"J([gMASK]<sop><|system|>
Be brief.<|user|>
Hi there <|assistant|>
 Hello! How can I help?<|user|>
Say "quotes" & <tags> — ünïcödé 🦙
	tab<|assistant|>)J", nullptr},
    {"glm4", "multi", false, R"J([gMASK]<sop><|system|>
Be brief.<|user|>
Hi there <|assistant|>
 Hello! How can I help?<|user|>
Say "quotes" & <tags> — ünïcödé 🦙
	tab)J", nullptr},
    {"glm4", "no_alternation", true, R"J([gMASK]<sop><|user|>
one<|user|>
two<|assistant|>)J", nullptr},
    {"glm4", "no_alternation", false, R"J([gMASK]<sop><|user|>
one<|user|>
two)J", nullptr},
    {"glm4", "parts", true, R"J([gMASK]<sop><|user|>
Describe this image.<|assistant|>)J", nullptr},
    {"glm4", "parts", false, R"J([gMASK]<sop><|user|>
Describe this image.)J", nullptr},
    {"glm4", "tools", true, R"J([gMASK]<sop><|system|>
# Tools

## get_weather

{
    "name": "get_weather",
    "description": "Get the weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {
                "type": "string",
                "description": "City name, e.g. \"Paris\""
            },
            "unit": {
                "type": "string",
                "enum": [
                    "celsius",
                    "fahrenheit"
                ]
            }
        },
        "required": [
            "city"
        ]
    },
    "return": {
        "type": "string"
    }
}<|user|>
Weather in Paris?<|assistant|>get_weather
{"city": "Paris", "unit": "celsius"}<|observation|>
{"temp": 21}<|assistant|>
It is 21 °C.<|assistant|>)J", nullptr},
    {"glm4", "tools", false, R"J([gMASK]<sop><|system|>
# Tools

## get_weather

{
    "name": "get_weather",
    "description": "Get the weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {
                "type": "string",
                "description": "City name, e.g. \"Paris\""
            },
            "unit": {
                "type": "string",
                "enum": [
                    "celsius",
                    "fahrenheit"
                ]
            }
        },
        "required": [
            "city"
        ]
    },
    "return": {
        "type": "string"
    }
}<|user|>
Weather in Paris?<|assistant|>get_weather
{"city": "Paris", "unit": "celsius"}<|observation|>
{"temp": 21}<|assistant|>
It is 21 °C.)J", nullptr},
    {"glm4", "think", true, R"J([gMASK]<sop><|user|>
2+2?<|assistant|>
<think>
add them
</think>

4<|user|>
3+3?<|assistant|>)J", nullptr},
    {"glm4", "think", false, R"J([gMASK]<sop><|user|>
2+2?<|assistant|>
<think>
add them
</think>

4<|user|>
3+3?)J", nullptr},
};

TEST(ChatFamilyD, RendersLikeJinja2) {
  rf::test::expect_chat_cases(kTemplates, kCases);
}

}  // namespace
