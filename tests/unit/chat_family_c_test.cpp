// Chat templates in the style of Mistral v1, v3 (tools) and v7 (system
// prompt, image parts, strftime_now), written for these tests,
// rendered for a set of conversations with and without the generation prompt.
// The expected strings are what Python Jinja2 3.1.6 renders when configured
// as Hugging Face transformers configures it (trim_blocks, lstrip_blocks,
// loop controls, tojson without ASCII escaping, raise_exception,
// strftime_now fixed at 2026-01-15), bos "<s>", eos "</s>".
#include <map>
#include <string>

#include "unit/template_cases.h"

namespace {

const std::map<std::string, std::string> kTemplates = {
    {"mistral_v1", R"J({{- bos_token }}
{%- set offset = 1 if messages[0]['role'] == 'system' else 0 %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {%- if not loop.first %}{{ raise_exception('The system message must come first') }}{% endif %}
    {%- elif (message['role'] == 'user') != ((loop.index0 - offset) % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- elif message['role'] == 'user' %}
        {%- if loop.index0 == 1 and messages[0]['role'] == 'system' %}
            {{- ' [INST] ' + messages[0]['content'] + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user, assistant and system roles are supported') }}
    {%- endif %}
{%- endfor %}
)J"},
    {"mistral_v3", R"J({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}{% set tools = none %}{% endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}{{ ", " }}{% endif %}
                {%- endfor %}
                {{- "}}" }}
                {{- ", " if not loop.last else "]" }}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if tool_call.id is not defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {{- ", " if not loop.last else "]" + eos_token }}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token }}
    {%- elif message["role"] == "tool" %}
        {{- '[TOOL_RESULTS] {"content": ' + message.content|string + ', "call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)J"},
    {"mistral_v7", R"J({%- set today = strftime_now("%Y-%m-%d") %}
{%- set default_system = "You are a helpful assistant. Today is " ~ today ~ "." %}
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] if messages[0]['content'] is string else messages[0]['content'][0]['text'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = default_system %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if message['content'] is string %}
            {{- '[INST]' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST]' }}
            {%- for block in message['content'] %}
                {%- if block['type'] == 'text' %}
                    {{- block['text'] }}
                {%- elif block['type'] in ['image', 'image_url'] %}
                    {{- '[IMG]' }}
                {%- else %}
                    {{- raise_exception('Only text and image blocks are supported in message content!') }}
                {%- endif %}
            {%- endfor %}
            {{- '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {%- if message.tool_calls %}
            {%- for call in message.tool_calls %}
                {{- '[TOOL_CALLS]' + call.function.name + '[ARGS]' + call.function.arguments|tojson }}
            {%- endfor %}
            {{- eos_token }}
        {%- else %}
            {{- message['content'] + eos_token }}
        {%- endif %}
    {%- elif message['role'] == 'tool' %}
        {{- '[TOOL_RESULTS]' + message.content|string + '[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception('Unexpected role ' ~ message['role']) }}
    {%- endif %}
{%- endfor %}
)J"},
};

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
