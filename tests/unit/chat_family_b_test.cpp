// Chat templates in the style of DeepSeek V3/R1 (namespace, unicode tokens),
// Command-R (macros, loop controls) and Llama 3.1 with tools, written for these tests (tests/templates/<name>.jinja),
// rendered for a set of conversations with and without the generation prompt.
// The expected strings are what Python Jinja2 3.1.6 renders when configured
// as Hugging Face transformers configures it (trim_blocks, lstrip_blocks,
// loop controls, tojson without ASCII escaping, raise_exception,
// strftime_now fixed at 2026-01-15), bos "<s>", eos "</s>".
#include <string>

#include "unit/template_cases.h"

namespace {

const char* const kTemplates[] = {"deepseek", "command_r", "llama3_tools"};  // tests/templates/<name>.jinja

using Case = rf::test::ChatCase;  // template, conversation, add_generation_prompt, rendered, error

const Case kCases[] = {
    {"command_r", "single", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello!<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "single", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello!<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "system", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
You are terse.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>What is 2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "system", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
You are terse.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>What is 2+2?<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "multi", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
Be brief.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there <|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|> Hello! How can I help?<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Say "quotes" & <tags> — ünïcödé 🦙
	tab<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "multi", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
Be brief.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there <|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|> Hello! How can I help?<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Say "quotes" & <tags> — ünïcödé 🦙
	tab<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "no_alternation", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>one<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>two<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "no_alternation", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>one<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>two<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "parts", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>[{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}]<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "parts", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>[{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}]<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "tools", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Weather in Paris?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_ACTION|>get_weather<|END_ACTION|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[
{
    "tool_call_id": "call12345",
    "results": "{\"temp\": 21}"
}
]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>It is 21 °C.<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "tools", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Weather in Paris?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_ACTION|>get_weather<|END_ACTION|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[
{
    "tool_call_id": "call12345",
    "results": "{\"temp\": 21}"
}
]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>It is 21 °C.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "think", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|><think>
add them
</think>

4<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>3+3?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "think", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|><think>
add them
</think>

4<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>3+3?<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"deepseek", "single", true, R"J(<s><｜User｜>Hello!<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "single", false, R"J(<s><｜User｜>Hello!)J", nullptr},
    {"deepseek", "system", true, R"J(<s>You are terse.<｜User｜>What is 2+2?<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "system", false, R"J(<s>You are terse.<｜User｜>What is 2+2?)J", nullptr},
    {"deepseek", "multi", true, R"J(<s>Be brief.<｜User｜>Hi there <｜Assistant｜> Hello! How can I help?<｜end▁of▁sentence｜><｜User｜>Say "quotes" & <tags> — ünïcödé 🦙
	tab<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "multi", false, R"J(<s>Be brief.<｜User｜>Hi there <｜Assistant｜> Hello! How can I help?<｜end▁of▁sentence｜><｜User｜>Say "quotes" & <tags> — ünïcödé 🦙
	tab)J", nullptr},
    {"deepseek", "no_alternation", true, R"J(<s><｜User｜>one<｜User｜>two<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "no_alternation", false, R"J(<s><｜User｜>one<｜User｜>two)J", nullptr},
    {"deepseek", "parts", true, nullptr, R"J()J"},
    {"deepseek", "parts", false, nullptr, R"J()J"},
    {"deepseek", "tools", true, R"J(<s><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris", "unit": "celsius"}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 21 °C.<｜end▁of▁sentence｜><｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "tools", false, R"J(<s><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris", "unit": "celsius"}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 21 °C.<｜end▁of▁sentence｜>)J", nullptr},
    {"deepseek", "think", true, R"J(<s><｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>3+3?<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "think", false, R"J(<s><｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>3+3?)J", nullptr},
    {"llama3_tools", "single", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "single", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Hello!<|eot_id|>)J", nullptr},
    {"llama3_tools", "system", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "system", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

What is 2+2?<|eot_id|>)J", nullptr},
    {"llama3_tools", "multi", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>

Say "quotes" & <tags> — ünïcödé 🦙
	tab<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "multi", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>

Say "quotes" & <tags> — ünïcödé 🦙
	tab<|eot_id|>)J", nullptr},
    {"llama3_tools", "no_alternation", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

one<|eot_id|><|start_header_id|>user<|end_header_id|>

two<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "no_alternation", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

one<|eot_id|><|start_header_id|>user<|end_header_id|>

two<|eot_id|>)J", nullptr},
    {"llama3_tools", "parts", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Describe 
this image.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "parts", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Describe 
this image.<|eot_id|>)J", nullptr},
    {"llama3_tools", "tools", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Today Date: 15 Jan 2026

{
    "type": "function",
    "function": {
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
    }
}

<|eot_id|><|start_header_id|>user<|end_header_id|>

Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

{"temp": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>

It is 21 °C.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "tools", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Today Date: 15 Jan 2026

{
    "type": "function",
    "function": {
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
    }
}

<|eot_id|><|start_header_id|>user<|end_header_id|>

Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

{"temp": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>

It is 21 °C.<|eot_id|>)J", nullptr},
    {"llama3_tools", "think", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

<think>
add them
</think>

4<|eot_id|><|start_header_id|>user<|end_header_id|>

3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "think", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

<think>
add them
</think>

4<|eot_id|><|start_header_id|>user<|end_header_id|>

3+3?<|eot_id|>)J", nullptr},
};

TEST(ChatFamilyB, RendersLikeJinja2) {
  rf::test::expect_chat_cases(kTemplates, kCases);
}

}  // namespace
